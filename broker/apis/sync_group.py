"""SyncGroup: v0–v5.

Translates to ``GroupCoordinator.sync``. The leader's SyncGroup carries every member's
assignment; each member's request is parked until then and answered with its own assignment
(b"" for a member the leader left out). v5+ check ``protocol_type``/``protocol_name`` against
the group's (INCONSISTENT_GROUP_PROTOCOL) and get them back.

Not implemented: storing the assignment in ``__consumer_offsets`` (GroupMetadataValue) before
answering; the group does not survive a restart.

Authorization (with an authorizer): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.group.values import SyncRequest, SyncResponse
from protocol.errors import GroupAuthorizationFailedError, KafkaError
from protocol.messages.sync_group_request import SyncGroupRequest
from protocol.messages.sync_group_response import SyncGroupResponse


def handle(context: RequestContext, request: SyncGroupRequest) -> HandlerResult:
    if not authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, GroupAuthorizationFailedError())
    result = context.broker.group_coordinator.sync(request.group_id, SyncRequest(
        member_id=request.member_id,
        generation_id=request.generation_id,
        assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
    ))
    if isinstance(result, SyncResponse):
        return _response(result)
    return _respond_later(result)


async def _respond_later(future: asyncio.Future[SyncResponse]) -> SyncGroupResponse:
    return _response(await future)


def _response(response: SyncResponse) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=response.error_code,
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name,
        assignment=response.assignment,
    )


def error_response(request: SyncGroupRequest, error: KafkaError) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=SyncGroupRequest.API_KEY,
        min_version=0,
        max_version=SyncGroupRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="SyncGroup",
    )
)
