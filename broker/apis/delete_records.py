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

With followers, the answer waits (Kafka's ``DelayedDeleteRecords``,
``replication.delete_records``) until every replica's log start offset reached the offset — the
low watermark then is at least the offset asked — or answers REQUEST_TIMED_OUT for a partition
whose replicas did not within ``timeout_ms``, NOT_LEADER_OR_FOLLOWER if leadership moved.

Authorization (with an authorizer): each topic needs DELETE, else its partitions answer
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import logging

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
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
from replication.delete_records import DelayedDeleteRecords
from replication.partition import HIGH_WATERMARK

logger = logging.getLogger("samsa.broker.apis.delete_records")

INVALID_LOW_WATERMARK = -1


def handle(context: RequestContext, request: DeleteRecordsRequest) -> HandlerResult:
    response = DeleteRecordsResponse()
    waiting: dict[tuple[str, int], int] = {}
    for topic in request.topics:
        result = DeleteRecordsTopicResult(name=topic.name)
        allowed = authorize(context, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        for requested in topic.partitions:
            result.partitions.append(
                _delete(context, topic.name, requested, waiting) if allowed
                else _failed(requested.partition_index, TopicAuthorizationFailedError())
            )
        response.topics.append(result)
    if not waiting:
        return response
    return _when_replicas_follow(context, request, response, waiting)


def _delete(
    context: RequestContext, topic: str, requested: DeleteRecordsPartition,
    waiting: dict[tuple[str, int], int],
) -> DeleteRecordsPartitionResult:
    index = requested.partition_index
    try:
        partition = context.broker.replica_manager.partition(topic, index)
        if partition is None:
            raise UnknownTopicOrPartitionError()
        target = partition.high_watermark if requested.offset == HIGH_WATERMARK else requested.offset
        low_watermark = partition.delete_records(requested.offset)
    except KafkaError as error:
        return _failed(index, error)
    except Exception:
        logger.exception("deleting records of %s-%d failed", topic, index)
        return _failed(index, UnknownServerError())
    if low_watermark < target:  # a follower still holds records below it
        waiting[(topic, index)] = target
    return DeleteRecordsPartitionResult(partition_index=index, low_watermark=low_watermark)


def _when_replicas_follow(
    context: RequestContext, request: DeleteRecordsRequest, response: DeleteRecordsResponse,
    waiting: dict[tuple[str, int], int],
) -> asyncio.Future[DeleteRecordsResponse]:
    """Answer once every replica's log start reached its offset (``DelayedDeleteRecords``)."""
    answer: asyncio.Future[DeleteRecordsResponse] = asyncio.get_running_loop().create_future()

    def done(outcomes: dict[tuple[str, int], int | KafkaError]) -> None:
        for topic in response.topics:
            for index, result in enumerate(topic.partitions):
                outcome = outcomes.get((topic.name, result.partition_index))
                if isinstance(outcome, KafkaError):
                    topic.partitions[index] = _failed(result.partition_index, outcome)
                elif outcome is not None:
                    result.low_watermark = outcome
        if not answer.done():
            answer.set_result(response)

    operation = DelayedDeleteRecords(max(request.timeout_ms, 0), waiting,
                                     context.broker.replica_manager.partition, done)
    context.broker.produce_reaper.watch(operation, list(waiting))
    return answer


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
