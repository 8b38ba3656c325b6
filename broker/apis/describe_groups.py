"""DescribeGroups: v0–v5.

Per group: its state by Kafka's names, protocol type and members (member id, group instance
id v4+, client id, client host). As Kafka's ``ClassicGroup.summary``: only a Stable group
reports its protocol name and each member's metadata and assignment; in other states those are
empty. A group that does not exist is described as "Dead" with no error (Kafka's answer below
v6); a group whose ``__consumer_offsets`` partition is loading gets COORDINATOR_LOAD_IN_PROGRESS.
A share group's id is answered the same way ("Dead", no error), as Kafka's
``describeGroups`` answers a group that is not a classic group below v6 (ShareGroupDescribe
describes it).

Not implemented: authorized operations (always "not requested").

Authorization (with an authorizer): DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED;
v3+ ``include_authorized_operations`` fills in the group's allowed operations' bitfield.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import NOT_REQUESTED_OPERATIONS, authorize, authorized_operations
from broker.auth.acl import AclOperation, ResourceType
from broker.group.classic import ClassicGroup
from broker.group.member import ClassicGroupMember
from broker.group.values import GroupState
from protocol.errors import GroupAuthorizationFailedError, KafkaError
from protocol.messages.describe_groups_request import DescribeGroupsRequest
from protocol.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)


def handle(context: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coordinator = context.broker.group_coordinator
    described = []
    for group_id in request.groups:
        if not authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(DescribedGroup(
                error_code=GroupAuthorizationFailedError.code, group_id=group_id))
            continue
        unavailable = coordinator.partition_error(group_id)
        if unavailable is not None:
            described.append(DescribedGroup(error_code=unavailable, group_id=group_id))
            continue
        group = _describe(group_id, coordinator.get_group(group_id))
        group.authorized_operations = (
            authorized_operations(context, ResourceType.GROUP, group_id)
            if request.include_authorized_operations else NOT_REQUESTED_OPERATIONS
        )
        described.append(group)
    return DescribeGroupsResponse(groups=described)


def _describe(group_id: str, group: ClassicGroup | None) -> DescribedGroup:
    if group is None:
        return DescribedGroup(error_code=0, group_id=group_id, group_state=GroupState.DEAD.value)
    stable = group.state is GroupState.STABLE
    protocol_name = (group.protocol_name or "") if stable else ""
    return DescribedGroup(
        error_code=0,
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=protocol_name,
        members=[_member(member, protocol_name) for member in group.members.values()],
    )


def _member(member: ClassicGroupMember, protocol_name: str) -> DescribedGroupMember:
    return DescribedGroupMember(
        member_id=member.member_id,
        group_instance_id=member.group_instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        member_metadata=member.metadata(protocol_name) if protocol_name else b"",
        member_assignment=(member.assignment or b"") if protocol_name else b"",
    )


def error_response(request: DescribeGroupsRequest, error: KafkaError) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(groups=[
        DescribedGroup(error_code=error.code, group_id=group_id) for group_id in request.groups
    ])


SPEC = register(
    ApiSpec(
        api_key=DescribeGroupsRequest.API_KEY,
        min_version=0,
        max_version=DescribeGroupsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeGroups",
    )
)
