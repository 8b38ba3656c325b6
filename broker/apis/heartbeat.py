"""Heartbeat: v0–v4.

Translates to ``GroupCoordinator.heartbeat``: it pushes the member's session deadline back and
answers REBALANCE_IN_PROGRESS while the group prepares a rebalance (the member then rejoins),
ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID (v3+ static members) otherwise.

Authorization (with an authorizer): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from protocol.errors import GroupAuthorizationFailedError, KafkaError
from protocol.messages.heartbeat_request import HeartbeatRequest
from protocol.messages.heartbeat_response import HeartbeatResponse


def handle(context: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, GroupAuthorizationFailedError())
    error = context.broker.group_coordinator.heartbeat(
        request.group_id, request.member_id, request.generation_id,
        group_instance_id=request.group_instance_id,
    )
    return HeartbeatResponse(error_code=error)


def error_response(request: HeartbeatRequest, error: KafkaError) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=HeartbeatRequest.API_KEY,
        min_version=0,
        max_version=HeartbeatRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="Heartbeat",
    )
)
