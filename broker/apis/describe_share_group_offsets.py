"""DescribeShareGroupOffsets: v0–v1.

Per group: each share partition's start offset, leader epoch and lag from the share
coordinator (``broker.share_persister.read_summary``), as Kafka's GroupCoordinatorService:

- named topics: a topic that does not exist is answered with its partitions at start offset
  -1 (no error, as OffsetFetch treats missing data); a share partition without state is start
  offset -1, leader epoch -1, lag -1;
- ``topics`` null (v1's "all"): the share partitions the group was assigned (its partitions
  record); GROUP_ID_NOT_FOUND when the id is not a share group here;
- lag = the partition's high watermark - start offset - the persister's delivery-complete
  count, or -1 while that count is unknown (-1), as Kafka's ``shouldComputeSharePartitionLag``.

A group's partition loading or led elsewhere is its error (COORDINATOR_LOAD_IN_PROGRESS /
NOT_COORDINATOR); a persister error is that partition's error.

Authorization (with an authorizer): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for
the group) and on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from uuid import UUID

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.group.offsets import coordinator_error_code
from broker.share.state_records import SharePartitionKey
from protocol.codec import ZERO_UUID
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)

UNINITIALIZED = -1
NO_LEADER_EPOCH = -1


async def handle(context: RequestContext, request: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(groups=[await _group(context, group) for group in request.groups])


async def _group(context: RequestContext, request: DescribeShareGroupOffsetsRequestGroup) -> DescribeShareGroupOffsetsResponseGroup:
    group_id = request.group_id
    if not authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _group_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = context.broker.group_coordinator.share
    unavailable = coordinator.partition_error(group_id)
    if unavailable is not None:
        return _group_error(group_id, unavailable)
    image = context.broker.replica_manager.image
    wanted: list[tuple[str, UUID | None, list[int]]] = []
    if request.topics is None:
        if coordinator.get_group(group_id) is None:
            return _group_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        for topic_id, (_, partitions) in sorted(coordinator.share_partitions(group_id).items()):
            image_topic = image.topics_by_id.get(topic_id)
            if image_topic is not None:
                wanted.append((image_topic.name, topic_id, sorted(partitions)))
    else:
        for topic in request.topics:
            found = image.topics_by_name.get(topic.topic_name)
            wanted.append((topic.topic_name, None if found is None else found.topic_id, list(topic.partitions)))
    topics = [await _topic(context, group_id, name, topic_id, partitions) for name, topic_id, partitions in wanted]
    return DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=topics)


async def _topic(
    context: RequestContext, group_id: str, name: str, topic_id: UUID | None, partitions: list[int]
) -> DescribeShareGroupOffsetsResponseTopic:
    if topic_id is None:
        return DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=ZERO_UUID, partitions=[
            DescribeShareGroupOffsetsResponsePartition(partition_index=p, start_offset=UNINITIALIZED,
                                                       leader_epoch=NO_LEADER_EPOCH, lag=UNINITIALIZED)
            for p in partitions])
    if not authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic_id, partitions=[
            DescribeShareGroupOffsetsResponsePartition(partition_index=p, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for p in partitions])
    return DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic_id, partitions=[
        await _partition(context, SharePartitionKey(group_id, topic_id, p), name) for p in partitions])


async def _partition(context: RequestContext, key: SharePartitionKey, name: str) -> DescribeShareGroupOffsetsResponsePartition:
    try:
        summary = await context.broker.share_persister.read_summary(key, leader_epoch=NO_LEADER_EPOCH)
    except KafkaError as e:
        return DescribeShareGroupOffsetsResponsePartition(partition_index=key.partition,
                                                          error_code=coordinator_error_code(e), error_message=str(e))
    if summary is None or summary.start_offset == UNINITIALIZED:
        return DescribeShareGroupOffsetsResponsePartition(partition_index=key.partition, start_offset=UNINITIALIZED,
                                                          leader_epoch=NO_LEADER_EPOCH, lag=UNINITIALIZED)
    lag = UNINITIALIZED
    partition = context.broker.replica_manager.partition(name, key.partition)
    if summary.delivery_complete_count != UNINITIALIZED and partition is not None:
        lag = partition.high_watermark - summary.start_offset - summary.delivery_complete_count
    return DescribeShareGroupOffsetsResponsePartition(partition_index=key.partition, start_offset=summary.start_offset,
                                                      leader_epoch=summary.leader_epoch, lag=lag)


def _group_error(group_id: str, error: int, message: str | None = None) -> DescribeShareGroupOffsetsResponseGroup:
    return DescribeShareGroupOffsetsResponseGroup(group_id=group_id, error_code=error, error_message=message)


def error_response(request: DescribeShareGroupOffsetsRequest, error: KafkaError) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(groups=[_group_error(g.group_id, error.code) for g in request.groups])


SPEC = register(
    ApiSpec(
        api_key=DescribeShareGroupOffsetsRequest.API_KEY,
        min_version=0,
        max_version=DescribeShareGroupOffsetsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeShareGroupOffsets",
    )
)
