"""DeleteGroups: v0–v2.

Per group: GROUP_ID_NOT_FOUND when this node has no such group, NON_EMPTY_GROUP while it has
members, else the group is deleted (Dead, and forgotten by the coordinator). When the broker
has an offset store, the group's committed offsets are deleted with it
(``offset_store.delete_group``). A group named twice is answered once per name, as in Kafka.

Authorization (with an authorizer): DELETE on each group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.delete_groups_request import DeleteGroupsRequest
from protocol.messages.delete_groups_response import DeletableGroupResult, DeleteGroupsResponse

logger = logging.getLogger("samsa.broker.apis.delete_groups")


def handle(context: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(results=[
        DeletableGroupResult(group_id=group_id, error_code=_delete(context, group_id))
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
