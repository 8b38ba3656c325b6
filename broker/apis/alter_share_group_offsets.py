"""AlterShareGroupOffsets: v0–v0.

Resets share partitions' start offsets (``kafka-share-groups.sh --reset-offsets``), as Kafka's
GroupMetadataManager.alterShareGroupOffsets: only an Empty share group (NON_EMPTY_GROUP
otherwise, for the whole request), created Empty when the id is unknown; GROUP_ID_NOT_FOUND for
a classic group's id. Per partition: UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that
does not exist; otherwise the share partition is recorded in the group's partitions record
(before the first ``await``) and its state re-initialized through
``broker.share_persister.initialize_state`` at the new start offset, with a state epoch above
the one it had, which fences the share partition's current leader: its next write is
FENCED_STATE_EPOCH and it reads the new state. A persister error is that partition's error.

Authorization (with an authorizer): READ on the group (else GROUP_AUTHORIZATION_FAILED) and on
each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from collections.abc import Awaitable
from uuid import UUID

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.group.offsets import coordinator_error_code
from broker.share.state_records import SharePartitionKey
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.alter_share_group_offsets_request import AlterShareGroupOffsetsRequest
from protocol.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)

NO_LEADER_EPOCH = -1


def handle(context: RequestContext, request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse | Awaitable[AlterShareGroupOffsetsResponse]:
    group_id = request.group_id
    if not authorize(context, AclOperation.READ, ResourceType.GROUP, group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return _error(ErrorCode.INVALID_GROUP_ID)
    coordinator = context.broker.group_coordinator.share
    error = coordinator.check_alter(group_id)
    if error is not ErrorCode.NONE:
        return _error(error, "The group is not empty." if error is ErrorCode.NON_EMPTY_GROUP else None)
    image = context.broker.replica_manager.image
    responses: list[AlterShareGroupOffsetsResponseTopic] = []
    resets: list[tuple[AlterShareGroupOffsetsResponsePartition, SharePartitionKey, int]] = []
    added: dict[UUID, tuple[str, frozenset[int]]] = {}
    for topic in request.topics:
        found = image.topics_by_name.get(topic.topic_name)
        allowed = authorize(context, AclOperation.READ, ResourceType.TOPIC, topic.topic_name)
        response = AlterShareGroupOffsetsResponseTopic(topic_name=topic.topic_name)
        responses.append(response)
        if found is not None:
            response.topic_id = found.topic_id
        for partition in topic.partitions:
            result = AlterShareGroupOffsetsResponsePartition(partition_index=partition.partition_index)
            response.partitions.append(result)
            if not allowed:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif found is None or partition.partition_index not in found.partitions:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = "This server does not host this topic-partition."
            else:
                key = SharePartitionKey(group_id, found.topic_id, partition.partition_index)
                resets.append((result, key, partition.start_offset))
                name, partitions = added.get(found.topic_id, (found.name, frozenset()))
                added[found.topic_id] = (name, partitions | {partition.partition_index})
    if added:
        error = coordinator.add_share_partitions(group_id, added)
        if error is not ErrorCode.NONE:
            return _error(error)
    if not resets:
        return AlterShareGroupOffsetsResponse(responses=responses)
    return _reset(context, responses, resets)


async def _reset(
    context: RequestContext, responses: list[AlterShareGroupOffsetsResponseTopic],
    resets: list[tuple[AlterShareGroupOffsetsResponsePartition, SharePartitionKey, int]],
) -> AlterShareGroupOffsetsResponse:
    persister = context.broker.share_persister
    for result, key, start_offset in resets:
        try:
            summary = await persister.read_summary(key, leader_epoch=NO_LEADER_EPOCH)
            state_epoch = 0 if summary is None else summary.state_epoch + 1
            await persister.initialize_state(key, state_epoch=state_epoch, start_offset=start_offset)
        except KafkaError as e:
            result.error_code = coordinator_error_code(e)
            result.error_message = str(e)
    return AlterShareGroupOffsetsResponse(responses=responses)


def _error(error: int, message: str | None = None) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(error_code=error, error_message=message)


def error_response(request: AlterShareGroupOffsetsRequest, error: KafkaError) -> AlterShareGroupOffsetsResponse:
    return _error(error.code)


SPEC = register(
    ApiSpec(
        api_key=AlterShareGroupOffsetsRequest.API_KEY,
        min_version=0,
        max_version=AlterShareGroupOffsetsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="AlterShareGroupOffsets",
    )
)
