"""OffsetFetch: v1–v9 (Kafka 4's floor, KIP-896, to the schema's max).

v1–v7 ask for one group (``group_id``, ``topics``); v8+ batch ``groups`` (KIP-709). ``topics``
null (v2+) means every partition the group has an offset for. As Kafka's
OffsetMetadataManager.fetchOffsets: a partition without an offset answers offset -1, leader
epoch -1, metadata "" and no error; a group that does not exist (or is Dead) is not an error
either: its partitions answer -1, and "all topics" answers none. ``require_stable`` is accepted:
there are no transactional offsets, so every committed offset is stable.

Not implemented: member id/epoch validation of v9 (new consumer-group protocol only; classic
groups, like Kafka's, do not check them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.apis import ApiSpec, RequestContext, register
from broker.group.offsets import group_is_dead
from protocol.errors import KafkaError
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

# (partition, committed offset, leader epoch, metadata) per topic
PartitionOffsets = list[tuple[int, int, int, str]]


def handle(context: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    broker = context.broker
    if context.api_version >= BATCHED_VERSION:
        return OffsetFetchResponse(groups=[
            _group_response(group.group_id, _fetch(broker, group.group_id, _wanted(group.topics)))
            for group in request.groups
        ])
    fetched = _fetch(broker, request.group_id, _wanted(request.topics))
    return OffsetFetchResponse(topics=[
        OffsetFetchResponseTopic(name=name, partitions=[
            OffsetFetchResponsePartition(partition_index=index, committed_offset=offset,
                                         committed_leader_epoch=epoch, metadata=metadata)
            for index, offset, epoch, metadata in partitions
        ])
        for name, partitions in fetched
    ])


def _wanted(topics: Sequence[object] | None) -> list[tuple[str, list[int]]] | None:
    if topics is None:
        return None
    return [(topic.name, list(topic.partition_indexes)) for topic in topics]  # type: ignore[attr-defined]


def _fetch(
    broker: Broker, group_id: str, wanted: list[tuple[str, list[int]]] | None
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
            if found is None:
                partitions.append((index, INVALID_OFFSET, -1, ""))
            else:
                partitions.append((index, found.committed_offset, found.leader_epoch, found.metadata))
        result.append((topic, partitions))
    return result


def _group_response(group_id: str, fetched: list[tuple[str, PartitionOffsets]]) -> OffsetFetchResponseGroup:
    return OffsetFetchResponseGroup(group_id=group_id, topics=[
        OffsetFetchResponseTopics(name=name, partitions=[
            OffsetFetchResponsePartitions(partition_index=index, committed_offset=offset,
                                          committed_leader_epoch=epoch, metadata=metadata)
            for index, offset, epoch, metadata in partitions
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
