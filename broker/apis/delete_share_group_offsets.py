"""DeleteShareGroupOffsets: v0–v0.

Deletes a share group's state for whole topics (``kafka-share-groups.sh --delete-offsets``),
as Kafka's GroupCoordinatorShard.initiate/completeDeleteShareGroupOffsets: GROUP_ID_NOT_FOUND
when the id is not a share group here, NON_EMPTY_GROUP while it has members (both for the whole
request). Per topic: UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist, or for one the
group has no share partitions of ("There is no offset information to delete."); otherwise the
topic leaves the group's partitions record (written before the first ``await``) and each of its
share partitions' state is deleted through ``broker.share_persister.delete_state``; a persister
error is that topic's error.

Authorization (with an authorizer): DELETE on the group (else GROUP_AUTHORIZATION_FAILED) and
READ on each topic (else TOPIC_AUTHORIZATION_FAILED for it).
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
from protocol.messages.delete_share_group_offsets_request import DeleteShareGroupOffsetsRequest
from protocol.messages.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)


def handle(context: RequestContext, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse | Awaitable[DeleteShareGroupOffsetsResponse]:
    group_id = request.group_id
    if not authorize(context, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = context.broker.group_coordinator.share
    error = coordinator.check_delete(group_id)
    if error is not ErrorCode.NONE:
        message = f"Group {group_id} not found." if error is ErrorCode.GROUP_ID_NOT_FOUND else None
        return _error(error, message)
    image = context.broker.replica_manager.image
    known = coordinator.share_partitions(group_id)
    responses: list[DeleteShareGroupOffsetsResponseTopic] = []
    deletions: list[tuple[DeleteShareGroupOffsetsResponseTopic, UUID, frozenset[int]]] = []
    for topic in request.topics:
        found = image.topics_by_name.get(topic.topic_name)
        response = DeleteShareGroupOffsetsResponseTopic(topic_name=topic.topic_name)
        responses.append(response)
        if not authorize(context, AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
            response.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif found is None:
            response.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            response.error_message = "This server does not host this topic-partition."
        elif found.topic_id not in known:
            response.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            response.error_message = "There is no offset information to delete."
        else:
            response.topic_id = found.topic_id
            deletions.append((response, found.topic_id, known[found.topic_id][1]))
    if not deletions:
        return DeleteShareGroupOffsetsResponse(responses=responses)
    error = coordinator.remove_share_partitions(group_id, [topic_id for _, topic_id, _ in deletions])
    if error is not ErrorCode.NONE:
        return _error(error)
    return _delete(context, group_id, responses, deletions)


async def _delete(
    context: RequestContext, group_id: str, responses: list[DeleteShareGroupOffsetsResponseTopic],
    deletions: list[tuple[DeleteShareGroupOffsetsResponseTopic, UUID, frozenset[int]]],
) -> DeleteShareGroupOffsetsResponse:
    persister = context.broker.share_persister
    for response, topic_id, partitions in deletions:
        try:
            for partition in sorted(partitions):
                await persister.delete_state(SharePartitionKey(group_id, topic_id, partition))
        except KafkaError as e:
            response.error_code = coordinator_error_code(e)
            response.error_message = str(e)
    return DeleteShareGroupOffsetsResponse(responses=responses)


def _error(error: int, message: str | None = None) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(error_code=error, error_message=message)


def error_response(request: DeleteShareGroupOffsetsRequest, error: KafkaError) -> DeleteShareGroupOffsetsResponse:
    return _error(error.code)


SPEC = register(
    ApiSpec(
        api_key=DeleteShareGroupOffsetsRequest.API_KEY,
        min_version=0,
        max_version=DeleteShareGroupOffsetsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DeleteShareGroupOffsets",
    )
)
