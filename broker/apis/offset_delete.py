"""OffsetDelete: v0–v0 (KIP-496).

As Kafka's OffsetMetadataManager.deleteOffsets: an empty group id is INVALID_GROUP_ID; a group
whose ``__consumer_offsets`` partition is loading is COORDINATOR_LOAD_IN_PROGRESS; a group
that neither the coordinator nor the offset store knows (or a Dead one) is GROUP_ID_NOT_FOUND;
a group with members is NON_EMPTY_GROUP (ClassicGroup.validateOffsetDelete) unless it uses
the "consumer" protocol, whose members' subscriptions are known (``broker.group.subscriptions``):
then only the topics it is subscribed to (all of them while its subscription is unknown) are
refused, per partition, with GROUP_SUBSCRIBED_TO_TOPIC. Every other requested partition
answers NONE, and a tombstone is written for those that have an offset (one batch). A failed
append gives the whole response Kafka's mapped coordinator error.

Not implemented: quotas (throttle_time_ms is 0).

Authorization (with an authorizer): DELETE on the group (else GROUP_AUTHORIZATION_FAILED)
and READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize, filter_authorized
from broker.auth.acl import AclOperation, ResourceType
from broker.group.offsets import coordinator_error_code, group_is_dead
from broker.group.subscriptions import is_subscribed_to_topic, uses_consumer_protocol
from broker.group.values import GroupState
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.offset_delete_request import OffsetDeleteRequest
from protocol.messages.offset_delete_response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

if TYPE_CHECKING:
    from broker.broker import Broker

logger = logging.getLogger("samsa.broker.apis.offset_delete")

LIVE_STATES = (GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)


def handle(context: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    broker = context.broker
    if not authorize(context, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = _validate(broker, request.group_id)
    if error is not None:
        return OffsetDeleteResponse(error_code=error)
    group = broker.group_coordinator.get_group(request.group_id)
    response = OffsetDeleteResponse()
    deletable: list[tuple[str, int]] = []
    readable = filter_authorized(context, AclOperation.READ, ResourceType.TOPIC,
                                 [topic.name for topic in request.topics])
    for topic in request.topics:
        refused = group is not None and is_subscribed_to_topic(group, topic.name)
        code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if refused else ErrorCode.NONE
        if topic.name not in readable:
            refused, code = True, ErrorCode.TOPIC_AUTHORIZATION_FAILED
        response.topics.append(OffsetDeleteResponseTopic(name=topic.name, partitions=[
            OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in topic.partitions
        ]))
        if not refused:
            deletable += [(topic.name, p.partition_index) for p in topic.partitions]
    try:
        broker.offset_store.delete_offsets(request.group_id, deletable)
    except KafkaError as failure:
        logger.warning("deleting offsets of group %s failed: %s", request.group_id, failure)
        return OffsetDeleteResponse(error_code=coordinator_error_code(failure))
    return response


def _validate(broker: Broker, group_id: str) -> int | None:
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    unavailable = broker.group_coordinator.partition_error(group_id)
    if unavailable is not None:
        return unavailable
    group = broker.group_coordinator.get_group(group_id)
    if group_is_dead(broker, group_id) or (group is None and not broker.offset_store.has_group(group_id)):
        return ErrorCode.GROUP_ID_NOT_FOUND
    if group is not None and group.state in LIVE_STATES and not uses_consumer_protocol(group):
        return ErrorCode.NON_EMPTY_GROUP
    return None


def error_response(request: OffsetDeleteRequest, error: KafkaError) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=OffsetDeleteRequest.API_KEY,
        min_version=0,
        max_version=OffsetDeleteRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="OffsetDelete",
    )
)
