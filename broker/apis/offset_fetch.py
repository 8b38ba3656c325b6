"""OffsetFetch: v1–v9 (Kafka 4's floor, KIP-896, to the schema's max).

v1–v7 ask for one group (``group_id``, ``topics``); v8+ batch ``groups`` (KIP-709). ``topics``
null (v2+) means every partition the group has an offset for. As Kafka's
OffsetMetadataManager.fetchOffsets: a partition without an offset answers offset -1, leader
epoch -1, metadata "" and no error; a group that does not exist (or is Dead) is not an error
either: its partitions answer -1, and "all topics" answers none. A group whose
``__consumer_offsets`` partition is loading gets COORDINATOR_LOAD_IN_PROGRESS (v8+: that
group's error; before: the response's, and each partition's for v1). With ``require_stable``
(v7+), a partition with a transactional offset commit still pending (its transaction not yet
ended) answers UNSTABLE_OFFSET_COMMIT and offset -1, as Kafka; without it, the last committed
offset.

Not implemented: member id/epoch validation of v9 (new consumer-group protocol only; classic
groups, like Kafka's, do not check them).

Authorization (with an authorizer): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED);
DESCRIBE on each topic: a named one without it answers TOPIC_AUTHORIZATION_FAILED, and
"all topics" leaves it out (Kafka's ``fetchOffsetsForGroup``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize, filter_authorized
from broker.auth.acl import AclOperation, ResourceType
from broker.group.offsets import group_is_dead
from protocol.errors import ErrorCode, KafkaError, error_for_code
from protocol.messages.offset_fetch_request import OffsetFetchRequest
from protocol.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

if TYPE_CHECKING:
    from broker.broker import Broker

BATCHED_VERSION = 8
INVALID_OFFSET = -1

# (partition, committed offset, leader epoch, metadata, error code) per topic
PartitionOffsets = list[tuple[int, int, int, str, int]]


def handle(context: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    broker = context.broker
    if context.api_version >= BATCHED_VERSION:
        return OffsetFetchResponse(groups=[
            _unavailable_group(group.group_id, _group_error(context, group.group_id))
            or _group_response(group.group_id, _authorized(context, group.topics, _fetch(
                broker, group.group_id, _wanted(group.topics), request.require_stable)))
            for group in request.groups
        ])
    unavailable = _group_error(context, request.group_id)
    if unavailable is not None:
        return error_response(request, error_for_code(unavailable)())
    fetched = _authorized(context, request.topics, _fetch(
        broker, request.group_id, _wanted(request.topics), request.require_stable))
    return OffsetFetchResponse(topics=[
        OffsetFetchResponseTopic(name=name, partitions=[
            OffsetFetchResponsePartition(partition_index=index, committed_offset=offset,
                                         committed_leader_epoch=epoch, metadata=metadata,
                                         error_code=error)
            for index, offset, epoch, metadata, error in partitions
        ])
        for name, partitions in fetched
    ])


def _group_error(context: RequestContext, group_id: str) -> ErrorCode | None:
    if not authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return context.broker.group_coordinator.partition_error(group_id)


def _authorized(
    context: RequestContext, requested: Sequence[object] | None,
    fetched: list[tuple[str, PartitionOffsets]],
) -> list[tuple[str, PartitionOffsets]]:
    """Offsets of topics the principal may not DESCRIBE: left out when all were asked for,
    else TOPIC_AUTHORIZATION_FAILED (Kafka's ``fetchOffsetsForGroup``)."""
    if context.broker.authorizer is None:
        return fetched
    allowed = filter_authorized(context, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                [name for name, _ in fetched])
    if requested is None:
        return [(name, partitions) for name, partitions in fetched if name in allowed]
    return [
        (name, partitions) if name in allowed else (name, [
            (index, INVALID_OFFSET, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for index, *_ in partitions
        ])
        for name, partitions in fetched
    ]


def _wanted(topics: Sequence[object] | None) -> list[tuple[str, list[int]]] | None:
    if topics is None:
        return None
    return [(topic.name, list(topic.partition_indexes)) for topic in topics]  # type: ignore[attr-defined]


def _fetch(
    broker: Broker, group_id: str, wanted: list[tuple[str, list[int]]] | None,
    require_stable: bool = False,
) -> list[tuple[str, PartitionOffsets]]:
    store = broker.offset_store
    offsets = {} if group_is_dead(broker, group_id) else store.group_offsets(group_id)
    if wanted is None:
        topics = sorted({topic for topic, _ in offsets})
        wanted = [(topic, sorted(i for t, i in offsets if t == topic)) for topic in topics]
    result = []
    for topic, indexes in wanted:
        partitions: PartitionOffsets = []
        for index in indexes:
            found = offsets.get((topic, index))
            if require_stable and store.transactional.has_pending(group_id, (topic, index)):
                partitions.append((index, INVALID_OFFSET, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
            elif found is None:
                partitions.append((index, INVALID_OFFSET, -1, "", ErrorCode.NONE))
            else:
                partitions.append((index, found.committed_offset, found.leader_epoch,
                                   found.metadata, ErrorCode.NONE))
        result.append((topic, partitions))
    return result


def _unavailable_group(group_id: str, error: ErrorCode | None) -> OffsetFetchResponseGroup | None:
    return None if error is None else OffsetFetchResponseGroup(group_id=group_id, error_code=error)


def _group_response(group_id: str, fetched: list[tuple[str, PartitionOffsets]]) -> OffsetFetchResponseGroup:
    return OffsetFetchResponseGroup(group_id=group_id, topics=[
        OffsetFetchResponseTopics(name=name, partitions=[
            OffsetFetchResponsePartitions(partition_index=index, committed_offset=offset,
                                          committed_leader_epoch=epoch, metadata=metadata,
                                          error_code=error)
            for index, offset, epoch, metadata, error in partitions
        ])
        for name, partitions in fetched
    ])


def error_response(request: OffsetFetchRequest, error: KafkaError) -> OffsetFetchResponse:
    """v2+ carry a top-level (v8+: per-group) error; v1 puts it on every partition."""
    groups = [OffsetFetchResponseGroup(group_id=group.group_id, error_code=error.code)
              for group in request.groups]
    topics = [
        OffsetFetchResponseTopic(name=topic.name, partitions=[
            OffsetFetchResponsePartition(partition_index=index, committed_offset=INVALID_OFFSET,
                                         error_code=error.code)
            for index in topic.partition_indexes
        ])
        for topic in request.topics or ()
    ]
    return OffsetFetchResponse(topics=topics, error_code=error.code, groups=groups)


SPEC = register(
    ApiSpec(
        api_key=OffsetFetchRequest.API_KEY,
        min_version=1,
        max_version=OffsetFetchRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="OffsetFetch",
    )
)
