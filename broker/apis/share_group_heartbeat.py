"""ShareGroupHeartbeat: v1–v1 (KIP-932, Kafka 4.1+'s version; v0 was 4.0's early access).

Translates to ``GroupCoordinator.share.heartbeat`` (``broker.group.share_coordinator``): join
(member epoch 0, with the subscribed topic names), heartbeat, or leave (epoch -1). The
subscribed names are resolved against the metadata image (topic id and partition count; a
topic that does not exist yet is assigned once it does). The response carries the member's
assignment (topic id, partitions) when it changed or on a join, as Kafka sends it, and the
group's ``share.heartbeat.interval.ms``.

Errors on the wire: INVALID_REQUEST (empty group or member id, epoch 0 without topics, epoch <
-1), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND (a classic group's id,
or no such share group for an epoch other than 0), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
GROUP_MAX_SIZE_REACHED, and the append's error when the new epoch could not be written.

Authorization (with an authorizer): READ on the group, else GROUP_AUTHORIZATION_FAILED; DESCRIBE
on every subscribed topic, else TOPIC_AUTHORIZATION_FAILED (Kafka's KafkaApis).

Not implemented: the ``share.version`` feature gate and ``group.share.enable`` (share groups are
always on); Kafka's InitializeShareGroupState round from the coordinator (Samsa's
share-partition leader initializes a partition's state at its first ShareFetch).
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.apis.join_group import client_host
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.group.share_topics import ImageTopics
from broker.share.share_group import HeartbeatResult
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from protocol.messages.share_group_heartbeat_response import (
    Assignment,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)


def handle(context: RequestContext, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    if not authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = [name for name in request.subscribed_topic_names or ()
              if not authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name)]
    if denied:
        return ShareGroupHeartbeatResponse(
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message=f"The group has subscribed to topics that are not authorized: {sorted(denied)}")
    result = context.broker.group_coordinator.share.heartbeat(
        request.group_id, request.member_id, request.member_epoch, request.subscribed_topic_names,
        topics=ImageTopics(context.broker.replica_manager.image), rack_id=request.rack_id,
        client_id=context.client_id or "", client_host=client_host(context.connection_id),
    )
    return response_of(result)


def response_of(result: HeartbeatResult) -> ShareGroupHeartbeatResponse:
    if result.error is not ErrorCode.NONE:
        # Kafka's error response: the code and message only (no member id or epoch)
        return ShareGroupHeartbeatResponse(error_code=result.error, error_message=result.error_message)
    assignment = None if result.assignment is None else Assignment(topic_partitions=[
        TopicPartitions(topic_id=topic_id, partitions=list(partitions))
        for topic_id, partitions in result.assignment.items()
    ])
    return ShareGroupHeartbeatResponse(
        member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment,
    )


def error_response(request: ShareGroupHeartbeatRequest, error: KafkaError) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=ShareGroupHeartbeatRequest.API_KEY,
        min_version=1,
        max_version=1,
        handle=handle,
        error_response=error_response,
        name="ShareGroupHeartbeat",
    )
)
