"""WriteTxnMarkers: v1–v1 (Kafka 4's floor, KIP-896: v0 is gone).

The transaction coordinator's request to partition leaders: write each marker (COMMIT when
``transaction_result`` is true, else ABORT, with the producer's id and epoch and the
coordinator epoch) into each of its partitions. On one node the coordinator writes its markers
itself (``broker.transaction.markers``), so only other tools send this; it is served with the
same code. Per partition: NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH (the marker's
epoch is older than the producer's), TRANSACTION_COORDINATOR_FENCED (an older coordinator
epoch), NOT_LEADER_OR_FOLLOWER (a ``__consumer_offsets`` partition still loading),
KAFKA_STORAGE_ERROR. A marker in a ``__consumer_offsets`` partition ends the producer's
pending transactional offset commits of that partition's groups.

Not implemented: authorization (CLUSTER_ACTION).

Authorization (with an authorizer): ALTER or CLUSTER_ACTION on the cluster, else
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from protocol.errors import ClusterAuthorizationFailedError, KafkaError
from protocol.messages.write_txn_markers_request import WritableTxnMarker, WriteTxnMarkersRequest
from protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from storage.producer_state import EndMarker


def handle(context: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not (authorize_cluster(context, AclOperation.ALTER)
            or authorize_cluster(context, AclOperation.CLUSTER_ACTION)):
        return error_response(request, ClusterAuthorizationFailedError())
    results = [_write(context, marker) for marker in request.markers]
    return WriteTxnMarkersResponse(markers=results)


def _write(context: RequestContext, marker: WritableTxnMarker) -> WritableTxnMarkerResult:
    writer = context.broker.transactions.markers
    end = EndMarker(is_abort=not marker.transaction_result,
                    coordinator_epoch=marker.coordinator_epoch)
    result = WritableTxnMarkerResult(producer_id=marker.producer_id)
    for topic in marker.topics:
        answers = WritableTxnMarkerTopicResult(name=topic.name)
        for index in topic.partition_indexes:
            error = writer.write_marker(
                (topic.name, index), marker.producer_id, marker.producer_epoch, end
            )
            answers.partitions.append(
                WritableTxnMarkerPartitionResult(partition_index=index, error_code=error))
        result.topics.append(answers)
    return result


def error_response(request: WriteTxnMarkersRequest, error: KafkaError) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(markers=[
        WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
            WritableTxnMarkerTopicResult(name=topic.name, partitions=[
                WritableTxnMarkerPartitionResult(partition_index=index, error_code=error.code)
                for index in topic.partition_indexes
            ])
            for topic in marker.topics
        ])
        for marker in request.markers
    ])


SPEC = register(
    ApiSpec(
        api_key=WriteTxnMarkersRequest.API_KEY,
        min_version=1,
        max_version=WriteTxnMarkersRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="WriteTxnMarkers",
    )
)
