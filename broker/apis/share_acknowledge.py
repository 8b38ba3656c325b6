"""ShareAcknowledge: v1–v1 (KIP-932 share groups; the share-partition leader's side).

Acknowledges records a member acquired with ShareFetch (``AcknowledgeTypes``: 0 Gap, 1 Accept,
2 Release, 3 Reject; one per batch or one per offset), within its share session: the
ShareSessionEpoch must be the session's next (INVALID_SHARE_SESSION_EPOCH; 0 is always
refused, a ShareAcknowledge cannot open a session), -1 closes the session after the
acknowledgements are applied and releases the member's other acquired records;
SHARE_SESSION_NOT_FOUND without a session. Whole-request errors also: INVALID_REQUEST (no group
id or member id), GROUP_AUTHORIZATION_FAILED (with an authorizer, READ on the group).

Each partition's acknowledgements are applied all or none and persisted through the share
coordinator (``SharePersister.write_state``) before the answer; its error code:
INVALID_RECORD_STATE (a record not acquired by this member, or no longer: its lock expired),
INVALID_REQUEST (batches out of order, overlapping, with a wrong count of types or an unknown
type), UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (with
``CurrentLeader`` and the leaders' ``NodeEndpoints``), TOPIC_AUTHORIZATION_FAILED (READ on
the topic), the persister's errors (FENCED_LEADER_EPOCH, COORDINATOR_NOT_AVAILABLE, ...).

Not implemented: v2 (IsRenewAck and the RENEW acknowledgement type 4).
"""

from __future__ import annotations

from uuid import UUID

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.apis.share_fetch import (
    LEADER_HINT_ERRORS,
    acknowledge_partition,
    check_group_and_member,
    manager_of,
)
from broker.auth.acl import AclOperation, ResourceType
from broker.leader_hints import LeaderHints
from protocol.errors import KafkaError, TopicAuthorizationFailedError
from protocol.messages.share_acknowledge_request import ShareAcknowledgeRequest
from protocol.messages.share_acknowledge_response import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)


def handle(context: RequestContext, request: ShareAcknowledgeRequest) -> HandlerResult:
    manager = manager_of(context)
    try:
        check_group_and_member(context, request.group_id, request.member_id)
        closing = manager.sessions.acknowledge(str(request.group_id), str(request.member_id),
                                               request.share_session_epoch)
    except KafkaError as error:
        return error_response(request, error)
    return _serve(context, request, closing)


async def _serve(context: RequestContext, request: ShareAcknowledgeRequest, closing: bool) -> ShareAcknowledgeResponse:
    manager = manager_of(context)
    group_id, member_id = str(request.group_id), str(request.member_id)
    response = ShareAcknowledgeResponse(
        error_code=0, acquisition_lock_timeout_ms=manager.settings(group_id).record_lock_duration_ms)
    hints = LeaderHints(context.broker, context.listener_name)
    for topic in request.topics:
        name = _topic_name(context, topic.topic_id)
        denied = name is not None and not _may_read(context, name)
        answer = ShareAcknowledgeTopicResponse(topic_id=topic.topic_id)
        response.responses.append(answer)
        for partition in topic.partitions:
            error = TopicAuthorizationFailedError() if denied else await acknowledge_partition(
                manager, group_id, member_id, (topic.topic_id, partition.partition_index),
                [(b.first_offset, b.last_offset, b.acknowledge_types) for b in partition.acknowledgement_batches])
            data = PartitionData(partition_index=partition.partition_index)
            if error is not None:
                data.error_code, data.error_message = error.code, str(error) or None
                if error.code in LEADER_HINT_ERRORS and name is not None:
                    leader = hints.current_leader(name, partition.partition_index)
                    data.current_leader = LeaderIdAndEpoch(leader_id=leader.leader_id,
                                                           leader_epoch=leader.leader_epoch)
            answer.partitions.append(data)
    response.node_endpoints = [NodeEndpoint(node_id=node_id, host=host, port=port, rack=rack)
                               for node_id, host, port, rack in hints.hinted_endpoints()]
    if closing:
        manager.sessions.close(group_id, member_id)
        await manager.release_member(group_id, member_id)
    return response


def _topic_name(context: RequestContext, topic_id: UUID) -> str | None:
    image = context.broker.replica_manager.topic_by_id(topic_id)
    return None if image is None else image.name


def _may_read(context: RequestContext, name: str) -> bool:
    authorizer = context.broker.authorizer
    return authorizer is None or authorizer.authorize(
        context.principal, context.client_host, AclOperation.READ, ResourceType.TOPIC, name)


def error_response(request: ShareAcknowledgeRequest, error: KafkaError) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(error_code=error.code, error_message=str(error) or None)


SPEC = register(
    ApiSpec(
        api_key=ShareAcknowledgeRequest.API_KEY,
        min_version=1,
        max_version=1,
        handle=handle,
        error_response=error_response,
        name="ShareAcknowledge",
    )
)
