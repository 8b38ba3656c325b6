"""DeleteRecords: v0–v2.

Per partition, as Kafka's ``Partition.deleteRecordsOnLeader``: the leader's log start offset is
raised to the requested offset (-1: the high watermark) and the low watermark returned: the
smallest log start offset over the replicas (``Partition.low_watermark``, Kafka's
``lowWatermarkIfLeader``; followers take the new log start offset from their next Fetch). An offset above the high watermark, or below 0 -> OFFSET_OUT_OF_RANGE; a topic whose
``cleanup.policy`` lacks ``delete`` -> POLICY_VIOLATION; an unknown partition ->
UNKNOWN_TOPIC_OR_PARTITION; an offline log directory -> KAFKA_STORAGE_ERROR. Reads below the new
log start offset get OFFSET_OUT_OF_RANGE at once; the segments wholly below it are removed by the
next retention run. The log start offset reaches disk with the next
``log-start-offset-checkpoint`` (and at a clean shutdown), as in Kafka.

Not implemented: Kafka's ``DelayedDeleteRecords`` (answer once every replica's log start offset
reached the offset, or at ``timeout_ms``): the answer is immediate, with the true low watermark,
which may still be below the requested offset while followers catch up.

Authorization (with an authorizer): each topic needs DELETE, else its partitions answer
TOPIC_AUTHORIZATION_FAILED.
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
from protocol.messages.delete_records_request import DeleteRecordsPartition, DeleteRecordsRequest
from protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)

logger = logging.getLogger("samsa.broker.apis.delete_records")

INVALID_LOW_WATERMARK = -1


def handle(context: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    response = DeleteRecordsResponse()
    for topic in request.topics:
        result = DeleteRecordsTopicResult(name=topic.name)
        allowed = authorize(context, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        for requested in topic.partitions:
            result.partitions.append(
                _delete(context, topic.name, requested) if allowed
                else _failed(requested.partition_index, TopicAuthorizationFailedError())
            )
        response.topics.append(result)
    return response


def _delete(
    context: RequestContext, topic: str, requested: DeleteRecordsPartition
) -> DeleteRecordsPartitionResult:
    index = requested.partition_index
    try:
        partition = context.broker.replica_manager.partition(topic, index)
        if partition is None:
            raise UnknownTopicOrPartitionError()
        low_watermark = partition.delete_records(requested.offset)
    except KafkaError as error:
        return _failed(index, error)
    except Exception:
        logger.exception("deleting records of %s-%d failed", topic, index)
        return _failed(index, UnknownServerError())
    return DeleteRecordsPartitionResult(partition_index=index, low_watermark=low_watermark)


def _failed(index: int, error: KafkaError) -> DeleteRecordsPartitionResult:
    return DeleteRecordsPartitionResult(
        partition_index=index, low_watermark=INVALID_LOW_WATERMARK, error_code=error.code
    )


def error_response(request: DeleteRecordsRequest, error: KafkaError) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(
        topics=[
            DeleteRecordsTopicResult(
                name=topic.name,
                partitions=[_failed(p.partition_index, error) for p in topic.partitions],
            )
            for topic in request.topics
        ]
    )


SPEC = register(
    ApiSpec(
        api_key=DeleteRecordsRequest.API_KEY,
        min_version=0,
        max_version=DeleteRecordsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DeleteRecords",
    )
)
