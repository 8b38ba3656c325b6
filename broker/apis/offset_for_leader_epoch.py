"""OffsetForLeaderEpoch: v2–v4.

Per partition, as Kafka's ``Partition.lastOffsetForLeaderEpoch``: ``current_leader_epoch``
(-1 = not given) older than the partition's -> FENCED_LEADER_EPOCH, newer ->
UNKNOWN_LEADER_EPOCH; then the end offset of the requested epoch: the current epoch -> the log
end offset; -1 or an epoch above the current one -> leader epoch -1, end offset -1 (UNDEFINED);
an earlier epoch -> that epoch and the log start offset. An unknown partition ->
UNKNOWN_TOPIC_OR_PARTITION. Consumers (replica id -1) and followers get the same answer: this
node leads every partition.

Not implemented: a leader-epoch cache (``leader-epoch-checkpoint``): only the current epoch is
known, which on one node is every epoch there has been (0).

Authorization (with an authorizer): each topic needs DESCRIBE (Kafka: CLUSTER_ACTION for
replicas, which this single node has none of), else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from protocol.errors import (
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
)
from protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)

logger = logging.getLogger("samsa.broker.apis.offset_for_leader_epoch")


def handle(
    context: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    response = OffsetForLeaderEpochResponse()
    for topic in request.topics:
        result = OffsetForLeaderTopicResult(topic=topic.topic)
        allowed = authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
        for requested in topic.partitions:
            result.partitions.append(
                _end_offset(context, topic.topic, requested) if allowed
                else _failed(requested.partition, TopicAuthorizationFailedError())
            )
        response.topics.append(result)
    return response


def _end_offset(
    context: RequestContext, topic: str, requested: OffsetForLeaderPartition
) -> EpochEndOffset:
    try:
        partition = context.broker.replica_manager.partition(topic, requested.partition)
        if partition is None:
            raise UnknownTopicOrPartitionError()
        epoch, offset = partition.last_offset_for_leader_epoch(
            requested.current_leader_epoch, requested.leader_epoch
        )
    except KafkaError as error:
        return _failed(requested.partition, error)
    except Exception:
        logger.exception("offset for leader epoch of %s-%d failed", topic, requested.partition)
        return _failed(requested.partition, UnknownServerError())
    return EpochEndOffset(partition=requested.partition, leader_epoch=epoch, end_offset=offset)


def _failed(index: int, error: KafkaError) -> EpochEndOffset:
    return EpochEndOffset(error_code=error.code, partition=index, leader_epoch=-1, end_offset=-1)


def error_response(
    request: OffsetForLeaderEpochRequest, error: KafkaError
) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(
        topics=[
            OffsetForLeaderTopicResult(
                topic=topic.topic, partitions=[_failed(p.partition, error) for p in topic.partitions]
            )
            for topic in request.topics
        ]
    )


SPEC = register(
    ApiSpec(
        api_key=OffsetForLeaderEpochRequest.API_KEY,
        min_version=2,
        max_version=OffsetForLeaderEpochRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="OffsetForLeaderEpoch",
    )
)
