"""DescribeGroups: v0–v5.

Per group: its state by Kafka's names, protocol type and members (member id, group instance
id v4+, client id, client host). As Kafka's ``ClassicGroup.summary``: only a Stable group
reports its protocol name and each member's metadata and assignment; in other states those are
empty. A group that does not exist is described as "Dead" with no error (Kafka's answer below
v6); a group whose ``__consumer_offsets`` partition is loading gets COORDINATOR_LOAD_IN_PROGRESS.

Not implemented: authorized operations (always "not requested").
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.group.classic import ClassicGroup
from broker.group.member import ClassicGroupMember
from broker.group.values import GroupState
from protocol.errors import KafkaError
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
        unavailable = coordinator.partition_error(group_id)
        if unavailable is not None:
            described.append(DescribedGroup(error_code=unavailable, group_id=group_id))
        else:
            described.append(_describe(group_id, coordinator.get_group(group_id)))
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
