"""ShareGroupDescribe: v1–v1 (KIP-932).

Per group id: a share group this node coordinates is described as Kafka's
``ShareGroup.asDescribedGroup`` does — its state ("Empty" / "Stable"), group epoch, assignment
epoch, the assignor ("simple") and each member (member id, rack, epoch, client id and host,
subscribed topic names, its current assignment with topic names from the metadata image).
An id that is not a share group here (none, or a classic group's) is GROUP_ID_NOT_FOUND with
Kafka's message; the group's partition loading or led elsewhere is
COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR; an empty id is INVALID_GROUP_ID.

Authorization (with an authorizer): DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED;
``include_authorized_operations`` fills in the group's allowed operations' bitfield.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import NOT_REQUESTED_OPERATIONS, authorize, authorized_operations
from broker.auth.acl import AclOperation, ResourceType
from broker.share.share_group import ShareGroupDescription, ShareGroupMember
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from protocol.messages.share_group_describe_response import (
    Assignment,
    DescribedGroup,
    Member,
    ShareGroupDescribeResponse,
    TopicPartitions,
)


def handle(context: RequestContext, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    return ShareGroupDescribeResponse(groups=[_describe(context, request, group_id)
                                              for group_id in request.group_ids])


def _describe(context: RequestContext, request: ShareGroupDescribeRequest, group_id: str) -> DescribedGroup:
    if not authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return DescribedGroup(group_id=group_id, error_code=ErrorCode.INVALID_GROUP_ID)
    coordinator = context.broker.group_coordinator.share
    unavailable = coordinator.partition_error(group_id)
    if unavailable is not None:
        return DescribedGroup(group_id=group_id, error_code=unavailable)
    group = coordinator.get_group(group_id)
    if group is None:
        return DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                              error_message=f"Group {group_id} not found." if group_id not in
                              context.broker.group_coordinator.groups else f"Group {group_id} is not a share group.")
    described = described_group(group.describe(), _topic_names(context))
    described.authorized_operations = (
        authorized_operations(context, ResourceType.GROUP, group_id)
        if request.include_authorized_operations else NOT_REQUESTED_OPERATIONS)
    return described


def _topic_names(context: RequestContext) -> Mapping[UUID, str]:
    image = context.broker.replica_manager.image
    return {topic_id: topic.name for topic_id, topic in image.topics_by_id.items()}


def described_group(description: ShareGroupDescription, topic_names: Mapping[UUID, str]) -> DescribedGroup:
    names = {**description.topic_names, **topic_names}
    return DescribedGroup(
        group_id=description.group_id,
        group_state=description.state.value,
        group_epoch=description.group_epoch,
        assignment_epoch=description.assignment_epoch,
        assignor_name=description.assignor_name,
        members=[_member(member, names) for member in description.members],
    )


def _member(member: ShareGroupMember, names: Mapping[UUID, str]) -> Member:
    return Member(
        member_id=member.member_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=sorted(member.subscribed_topic_names),
        assignment=Assignment(topic_partitions=[
            TopicPartitions(topic_id=topic_id, topic_name=names.get(topic_id, ""), partitions=sorted(partitions))
            for topic_id, partitions in sorted(member.assigned_partitions.items())
        ]),
    )


def error_response(request: ShareGroupDescribeRequest, error: KafkaError) -> ShareGroupDescribeResponse:
    return ShareGroupDescribeResponse(groups=[
        DescribedGroup(group_id=group_id, error_code=error.code) for group_id in request.group_ids
    ])


SPEC = register(
    ApiSpec(
        api_key=ShareGroupDescribeRequest.API_KEY,
        min_version=1,
        max_version=1,
        handle=handle,
        error_response=error_response,
        name="ShareGroupDescribe",
    )
)
