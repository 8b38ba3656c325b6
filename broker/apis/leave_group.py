"""LeaveGroup: v0–v5.

Translates to ``GroupCoordinator.leave``. v0–v2 name one ``member_id`` and get its error as
the top-level error; v3+ name a batch of ``members`` (member id and/or group instance id,
KIP-345) and get one result per member, the top-level error being the group's (for example
UNKNOWN_MEMBER_ID for a group that does not exist, as Kafka 4's coordinator answers). A
departure rebalances the group at once.

Not implemented: the ``reason`` (v5+) is accepted and ignored.

Authorization (with an authorizer): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.group.values import LeaveOutcome, MemberIdentity
from protocol.errors import ErrorCode, GroupAuthorizationFailedError, KafkaError
from protocol.messages.leave_group_request import LeaveGroupRequest
from protocol.messages.leave_group_response import LeaveGroupResponse, MemberResponse

BATCH_VERSION = 3


def handle(context: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if not authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, GroupAuthorizationFailedError())
    coordinator = context.broker.group_coordinator
    if context.api_version < BATCH_VERSION:
        outcome = coordinator.leave(request.group_id, [MemberIdentity(request.member_id)])
        return LeaveGroupResponse(error_code=_single_error(outcome))
    members = [MemberIdentity(m.member_id, m.group_instance_id) for m in request.members]
    outcome = coordinator.leave(request.group_id, members)
    return LeaveGroupResponse(
        error_code=outcome.error_code,
        members=[
            MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id,
                           error_code=m.error_code)
            for m in outcome.members
        ],
    )


def _single_error(outcome: LeaveOutcome) -> int:
    """v0–v2: the group's error, else the one member's (Kafka's ``LeaveGroupResponse``)."""
    if outcome.error_code is not ErrorCode.NONE:
        return outcome.error_code
    return next((m.error_code for m in outcome.members if m.error_code), ErrorCode.NONE)


def error_response(request: LeaveGroupRequest, error: KafkaError) -> LeaveGroupResponse:
    return LeaveGroupResponse(error_code=error.code, members=[
        MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id,
                       error_code=error.code)
        for m in request.members
    ])


SPEC = register(
    ApiSpec(
        api_key=LeaveGroupRequest.API_KEY,
        min_version=0,
        max_version=LeaveGroupRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="LeaveGroup",
    )
)
