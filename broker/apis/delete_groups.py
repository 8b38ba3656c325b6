"""DeleteGroups: v0–v2.

Per group: GROUP_ID_NOT_FOUND when this node has no such group, NON_EMPTY_GROUP while it has
members, else the group is deleted (Dead, and forgotten by the coordinator). When the broker
has an offset store, the group's committed offsets are deleted with it
(``offset_store.delete_group``). A group named twice is answered once per name, as in Kafka.

A share group (``broker.group.share_coordinator``): NON_EMPTY_GROUP while it has members; else
the state of each share partition it was assigned is deleted through
``broker.share_persister.delete_state`` (Kafka's ``deleteShareGroups`` before the tombstones),
then its records are tombstoned. This waits for the persister, so the classic groups of the
same request are deleted first, before the first ``await``; a share group that gained a member
meanwhile is NON_EMPTY_GROUP.

Authorization (with an authorizer): DELETE on each group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.group.offsets import coordinator_error_code
from broker.share.state_records import SharePartitionKey
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.delete_groups_request import DeleteGroupsRequest
from protocol.messages.delete_groups_response import DeletableGroupResult, DeleteGroupsResponse

logger = logging.getLogger("samsa.broker.apis.delete_groups")


def handle(context: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse | Awaitable[DeleteGroupsResponse]:
    errors: dict[str, int] = {}
    share_groups: list[str] = []
    for group_id in request.groups_names:
        if group_id in errors or group_id in share_groups:
            continue
        if group_id in context.broker.group_coordinator.share.groups:
            error = _check_share(context, group_id)
            if error is ErrorCode.NONE:
                share_groups.append(group_id)
                continue
        else:
            error = ErrorCode(_delete(context, group_id))
        errors[group_id] = error
    if not share_groups:
        return _response(request, errors)
    return _delete_share_groups(context, request, errors, share_groups)


def _response(request: DeleteGroupsRequest, errors: Mapping[str, int]) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(results=[
        DeletableGroupResult(group_id=group_id, error_code=errors[group_id])
        for group_id in request.groups_names
    ])


def _delete(context: RequestContext, group_id: str) -> int:
    if not authorize(context, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    error = context.broker.group_coordinator.delete(group_id)
    if error is not ErrorCode.NONE:
        return error
    offset_store = getattr(context.broker, "offset_store", None)
    if offset_store is not None:
        offset_store.delete_group(group_id)
    logger.info("deleted group %r", group_id)
    return ErrorCode.NONE


def _check_share(context: RequestContext, group_id: str) -> ErrorCode:
    if not authorize(context, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return context.broker.group_coordinator.share.check_delete(group_id)


async def _delete_share_groups(
    context: RequestContext, request: DeleteGroupsRequest, errors: dict[str, int], group_ids: list[str]
) -> DeleteGroupsResponse:
    """Kafka's order: the share partitions' state first (through the persister), then the
    group's tombstones; a failure keeps the group (DeleteGroups may be retried)."""
    coordinator = context.broker.group_coordinator.share
    persister = context.broker.share_persister
    for group_id in group_ids:
        try:
            for topic_id, (_, partitions) in coordinator.share_partitions(group_id).items():
                for partition in sorted(partitions):
                    await persister.delete_state(SharePartitionKey(group_id, topic_id, partition))
        except KafkaError as e:
            logger.warning("share group %r: its state was not deleted: %s", group_id, e)
            errors[group_id] = coordinator_error_code(e)
            continue
        errors[group_id] = coordinator.delete(group_id)
        if errors[group_id] == ErrorCode.NONE:
            logger.info("deleted share group %r", group_id)
    return _response(request, errors)


def error_response(request: DeleteGroupsRequest, error: KafkaError) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(results=[
        DeletableGroupResult(group_id=group_id, error_code=error.code)
        for group_id in request.groups_names
    ])


SPEC = register(
    ApiSpec(
        api_key=DeleteGroupsRequest.API_KEY,
        min_version=0,
        max_version=DeleteGroupsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DeleteGroups",
    )
)
