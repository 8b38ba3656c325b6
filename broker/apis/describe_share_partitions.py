"""SamsaDescribeSharePartitions: v0–v0.

Samsa's own admin API (key 10003, schema in ``protocol/schemas/``): a share group's share
partitions as their leader holds them (``SharePartition.describe``, deadlines due applied to
the view, nothing changed) — start and end offsets, in-flight, acquired and dead-lettering
records, the archived / dead-lettered / expired counts since the share partition was loaded,
and each in-flight range with its state, delivery count, holder and lock deadline. Kafka has
no such API (its share-group state is seen through DescribeShareGroupOffsets' start offset
and lag only); ``samsa share-groups --describe --offsets`` shows it next to them.

Per partition: NOT_LEADER_OR_FOLLOWER unless this node leads it; UNKNOWN_TOPIC_OR_PARTITION
when it has no replica here. A share partition the leader has not loaded (no member fetched
from it since it became leader) answers ``loaded`` false and nothing else: describing never
loads one (loading reads or initializes its persisted state).

Authorization (with an authorizer): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED
for everything) and on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import logging

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.share.state_records import SharePartitionKey
from protocol.errors import (
    GroupAuthorizationFailedError,
    KafkaError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.samsa_describe_share_partitions_request import (
    SamsaDescribeSharePartitionsRequest,
)
from protocol.messages.samsa_describe_share_partitions_response import (
    DescribeSharePartitionsTopicResult,
    InFlightBatch,
    SamsaDescribeSharePartitionsResponse,
    SharePartitionDescription,
)

logger = logging.getLogger("samsa.broker.apis.describe_share_partitions")


def handle(context: RequestContext, request: SamsaDescribeSharePartitionsRequest
           ) -> SamsaDescribeSharePartitionsResponse:
    if not authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id):
        return error_response(request, GroupAuthorizationFailedError())
    response = SamsaDescribeSharePartitionsResponse()
    for topic in request.topics:
        result = DescribeSharePartitionsTopicResult(name=topic.name)
        if authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
            result.partitions = [_describe(context, request.group_id, topic.name, index)
                                 for index in topic.partitions]
        else:
            result.partitions = [_failed(index, TopicAuthorizationFailedError()) for index in topic.partitions]
        response.topics.append(result)
    return response


def _describe(context: RequestContext, group_id: str, topic: str, index: int) -> SharePartitionDescription:
    try:
        return _describe_or_raise(context, group_id, topic, index)
    except KafkaError as error:
        return _failed(index, error)
    except Exception:
        logger.exception("describing share partition %s %s-%d failed", group_id, topic, index)
        return _failed(index, UnknownServerError())


def _describe_or_raise(context: RequestContext, group_id: str, topic: str, index: int
                       ) -> SharePartitionDescription:
    partition = context.broker.replica_manager.partition(topic, index)
    if partition is None:
        raise UnknownTopicOrPartitionError()
    if not partition.is_leader:
        raise NotLeaderOrFollowerError()
    answer = SharePartitionDescription(partition_index=index, high_watermark=partition.high_watermark)
    manager = context.broker.share_partitions
    share_partition = None if manager is None else manager.get(
        SharePartitionKey(group_id, partition.topic_id, index))
    if share_partition is None or manager is None:
        return answer
    described = share_partition.describe(manager.clock.milliseconds())
    answer.loaded = True
    answer.start_offset, answer.end_offset = described.start_offset, described.end_offset
    answer.in_flight_records = described.in_flight_record_count
    answer.acquired_records = described.acquired_record_count
    answer.dead_lettering_records = described.dead_lettering_record_count
    answer.archived_records = described.archived_record_count
    answer.dead_lettered_records = described.dead_lettered_record_count
    answer.expired_records = described.expired_record_count
    answer.batches = [InFlightBatch(
        first_offset=batch.first_offset, last_offset=batch.last_offset, state=batch.state.name,
        delivery_count=batch.delivery_count, member_id=batch.member_id,
        lock_deadline_ms=-1 if batch.lock_deadline_ms is None else batch.lock_deadline_ms,
        reason=None if batch.reason is None else batch.reason.value) for batch in described.batches]
    return answer


def _failed(index: int, error: KafkaError) -> SharePartitionDescription:
    return SharePartitionDescription(partition_index=index, error_code=error.code)


def error_response(request: SamsaDescribeSharePartitionsRequest, error: KafkaError
                   ) -> SamsaDescribeSharePartitionsResponse:
    return SamsaDescribeSharePartitionsResponse(error_code=error.code, topics=[
        DescribeSharePartitionsTopicResult(name=topic.name, partitions=[
            _failed(index, error) for index in topic.partitions]) for topic in request.topics])


SPEC = register(
    ApiSpec(
        api_key=SamsaDescribeSharePartitionsRequest.API_KEY,
        min_version=0,
        max_version=SamsaDescribeSharePartitionsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="SamsaDescribeSharePartitions",
    )
)
