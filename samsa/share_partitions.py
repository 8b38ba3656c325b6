"""A share group's share partitions as their leaders hold them: Samsa's own
DescribeSharePartitions API (key 10003), for ``AdminClient.describe_share_partitions`` and
``samsa share-groups --describe``.

Kafka's DescribeShareGroupOffsets says a share partition's start offset and lag; the in-flight
window — records acquired, by whom and until when, delivery counts, records waiting for their
dead-letter append, and the archived / dead-lettered / expired counts — lives on the
partition's leader only. Requests are grouped by leader and sent concurrently; a partition
whose leader moved is retried after a metadata refresh until ``default.api.timeout.ms`` (as
``samsa.segments``). A Kafka broker does not know the API: ``UnsupportedVersionError``.

State: none of its own; the coroutines run on the ``Cluster``'s event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from protocol.errors import KafkaError, UnknownTopicOrPartitionError, error_for_code
from protocol.messages.samsa_describe_share_partitions_request import (
    DescribeSharePartitionsTopic,
    SamsaDescribeSharePartitionsRequest,
)
from protocol.messages.samsa_describe_share_partitions_response import (
    SamsaDescribeSharePartitionsResponse,
    SharePartitionDescription,
)
from samsa._cluster import Cluster
from samsa.types import TopicPartition

__all__ = ["InFlightRange", "SharePartitionState", "describe_share_partitions"]


@dataclass(frozen=True, slots=True)
class InFlightRange:
    """Offsets [first_offset, last_offset] in one state (AVAILABLE, ACQUIRED, ACKNOWLEDGED,
    ARCHIVED, DEAD_LETTERING); ``member_id`` and ``lock_deadline_ms`` while ACQUIRED,
    ``reason`` (rejected, delivery-limit, expired) while DEAD_LETTERING."""

    first_offset: int
    last_offset: int
    state: str
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SharePartitionState:
    """One share partition on its leader. ``loaded`` False: the leader has not loaded it (no
    member fetched since it became leader); the counts are then 0 and the offsets -1. The
    archived / dead-lettered / expired counts are since it was loaded."""

    topic: str
    partition: int
    loaded: bool
    high_watermark: int
    start_offset: int
    end_offset: int
    in_flight_records: int
    acquired_records: int
    dead_lettering_records: int
    archived_records: int
    dead_lettered_records: int
    expired_records: int
    ranges: tuple[InFlightRange, ...]

    @property
    def max_delivery_count(self) -> int:
        return max((r.delivery_count for r in self.ranges), default=0)


async def describe_share_partitions(
    cluster: Cluster, group_id: str, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None
) -> dict[TopicPartition, SharePartitionState]:
    """The state of ``group_id``'s share partition of each of ``partitions``, asked of its
    leader (retrying leader moves); raises a partition's non-retriable ``KafkaError``."""
    pending = sorted(set(partitions))
    found: dict[TopicPartition, SharePartitionState] = {}
    if not pending:
        return found
    await cluster.refresh_metadata(sorted({tp.topic for tp in pending}))
    unknown = [tp for tp in pending if tp.topic not in cluster.topics
               or tp.partition not in cluster.topics[tp.topic].partitions]
    if unknown:
        raise UnknownTopicOrPartitionError(f"no such partition: {', '.join(map(str, unknown))}")

    async def attempt() -> dict[TopicPartition, SharePartitionState]:
        missing = [tp for tp in pending if tp not in found]
        if missing and cluster.metadata_is_stale:
            await cluster.refresh_metadata(sorted({tp.topic for tp in missing}))
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in missing:
            by_leader.setdefault(await cluster.leader_for(tp), []).append(tp)
        answers = await asyncio.gather(
            *(_ask_leader(cluster, node_id, group_id, tps) for node_id, tps in by_leader.items()))
        error: KafkaError | None = None
        for answer in answers:
            for tp, state_or_error in answer.items():
                if isinstance(state_or_error, SharePartitionState):
                    found[tp] = state_or_error
                elif error is None or not state_or_error.retriable:
                    error = state_or_error
        if error is not None:
            raise error
        return found

    return await cluster.retrying(attempt, timeout_ms=timeout_ms, what="describing share partitions")


async def _ask_leader(cluster: Cluster, node_id: int, group_id: str, partitions: list[TopicPartition]
                      ) -> dict[TopicPartition, SharePartitionState | KafkaError]:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    request = SamsaDescribeSharePartitionsRequest(group_id=group_id, topics=[
        DescribeSharePartitionsTopic(name=name, partitions=indexes) for name, indexes in topics.items()])
    response: SamsaDescribeSharePartitionsResponse = await cluster.send(node_id, request)
    if response.error_code:
        failure = error_for_code(response.error_code)(f"DescribeSharePartitions on node {node_id}")
        return dict.fromkeys(partitions, failure)
    result: dict[TopicPartition, SharePartitionState | KafkaError] = {}
    for topic in response.topics:
        for answer in topic.partitions:
            result[TopicPartition(topic.name, answer.partition_index)] = _state_or_error(topic.name, answer)
    return result


def _state_or_error(topic: str, answer: SharePartitionDescription) -> SharePartitionState | KafkaError:
    if answer.error_code:
        return error_for_code(answer.error_code)(f"describing the share partition {topic}-{answer.partition_index}")
    ranges = tuple(InFlightRange(
        b.first_offset, b.last_offset, b.state, b.delivery_count, b.member_id,
        None if b.lock_deadline_ms < 0 else b.lock_deadline_ms, b.reason) for b in answer.batches)
    return SharePartitionState(
        topic, answer.partition_index, answer.loaded, answer.high_watermark, answer.start_offset,
        answer.end_offset, answer.in_flight_records, answer.acquired_records, answer.dead_lettering_records,
        answer.archived_records, answer.dead_lettered_records, answer.expired_records, ranges)
