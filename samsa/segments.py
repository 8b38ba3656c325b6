"""The segment layout of partitions: Samsa's own DescribeLogSegments API (key 10000).

Readers that plan work by segments (``pyspark_samsa`` makes one Spark input partition per
segment's offset range) ask each partition's leader for its layout: log start offset, high
watermark, last stable offset, and every segment holding offsets at or above the log start
offset, oldest first, the active one last. A segment's ``end_offset`` is exclusive (the next
segment's base offset, or the log end offset for the active one, which may be above the high
watermark: readers clip to it).

The leader is asked (every replica answers, each with its own high watermark; the leader's
is the partition's), so requests are grouped by leader and sent concurrently; a partition whose leader moved is retried after a metadata
refresh, with the cluster's backoff, until ``default.api.timeout.ms``. A partition the
metadata does not know fails at once (UnknownTopicOrPartitionError), as in Kafka's admin
client. A Kafka broker does not know the API: ``UnsupportedVersionError`` says so.

State: none of its own; the coroutines run on the ``Cluster``'s event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from protocol.errors import KafkaError, UnknownTopicOrPartitionError, error_for_code
from protocol.messages.samsa_describe_log_segments_request import (
    DescribeLogSegmentsTopic,
    SamsaDescribeLogSegmentsRequest,
)
from protocol.messages.samsa_describe_log_segments_response import (
    DescribeLogSegmentsPartitionResult,
    SamsaDescribeLogSegmentsResponse,
)
from samsa._cluster import Cluster
from samsa.types import TopicPartition

__all__ = ["PartitionLayout", "SegmentInfo", "describe_log_segments"]


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment: offsets [base_offset, end_offset), its size, its first/max timestamps."""

    base_offset: int
    end_offset: int
    size_in_bytes: int
    first_timestamp: int = -1
    max_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class PartitionLayout:
    """A partition's offsets and segments, as its leader sees them."""

    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    segments: tuple[SegmentInfo, ...]

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


async def describe_log_segments(
    cluster: Cluster, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None
) -> dict[TopicPartition, PartitionLayout]:
    """The layout of each of ``partitions``, asked of its leader (retrying leader moves).

    Raises the partition's ``KafkaError`` for a non-retriable error (an unknown partition
    after a metadata refresh, a storage error), ``KafkaTimeoutError`` when retriable ones
    last longer than the timeout.
    """
    pending = sorted(set(partitions))
    found: dict[TopicPartition, PartitionLayout] = {}
    if not pending:
        return found
    await cluster.refresh_metadata(sorted({tp.topic for tp in pending}))
    unknown = [tp for tp in pending if tp.topic not in cluster.topics
               or tp.partition not in cluster.topics[tp.topic].partitions]
    if unknown:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in unknown)
        raise UnknownTopicOrPartitionError(f"no such partition: {names}")

    async def attempt() -> dict[TopicPartition, PartitionLayout]:
        missing = [tp for tp in pending if tp not in found]
        if missing and cluster.metadata_is_stale:
            await cluster.refresh_metadata(sorted({tp.topic for tp in missing}))
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in missing:
            by_leader.setdefault(await cluster.leader_for(tp), []).append(tp)
        answers = await asyncio.gather(
            *(_ask_leader(cluster, node_id, tps) for node_id, tps in by_leader.items()))
        error: KafkaError | None = None
        for answer in answers:
            for tp, layout_or_error in answer.items():
                if isinstance(layout_or_error, PartitionLayout):
                    found[tp] = layout_or_error
                elif error is None or not layout_or_error.retriable:
                    error = layout_or_error
        if error is not None:
            raise error
        return found

    return await cluster.retrying(attempt, timeout_ms=timeout_ms,
                                  what="describing log segments")


async def replica_high_watermarks(
    cluster: Cluster, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, tuple[int, int]]:
    """(high watermark, last stable offset) of each of ``partitions``, the smallest over its
    replicas that answer (each replica answers DescribeLogSegments with its own): what every
    replica's files hold, for a reader that may open any replica's log dir. A replica that
    does not answer (down, or its log still being created) is left out."""
    wanted = sorted(set(partitions))
    await cluster.refresh_metadata(sorted({tp.topic for tp in wanted}))
    by_node: dict[int, list[TopicPartition]] = {}
    for tp in wanted:
        info = cluster.topics.get(tp.topic)
        partition = None if info is None else info.partitions.get(tp.partition)
        for node_id in () if partition is None else partition.replicas:
            by_node.setdefault(node_id, []).append(tp)

    async def ask(node_id: int, tps: list[TopicPartition]
                  ) -> dict[TopicPartition, PartitionLayout | KafkaError]:
        try:
            return await _ask_leader(cluster, node_id, tps)
        except Exception as error:
            return dict.fromkeys(tps, KafkaError(str(error)))

    answers = await asyncio.gather(*(ask(node, tps) for node, tps in by_node.items()))
    lowest: dict[TopicPartition, tuple[int, int]] = {}
    for answer in answers:
        for tp, layout in answer.items():
            if isinstance(layout, PartitionLayout):
                high, stable = lowest.get(tp, (layout.high_watermark, layout.last_stable_offset))
                lowest[tp] = (min(high, layout.high_watermark),
                              min(stable, layout.last_stable_offset))
    return lowest


async def _ask_leader(
    cluster: Cluster, node_id: int, partitions: list[TopicPartition]
) -> dict[TopicPartition, PartitionLayout | KafkaError]:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    request = SamsaDescribeLogSegmentsRequest(topics=[
        DescribeLogSegmentsTopic(name=name, partitions=indexes) for name, indexes in topics.items()
    ])
    response: SamsaDescribeLogSegmentsResponse = await cluster.send(node_id, request)
    if response.error_code:
        failure = error_for_code(response.error_code)(f"DescribeLogSegments on node {node_id}")
        return dict.fromkeys(partitions, failure)
    result: dict[TopicPartition, PartitionLayout | KafkaError] = {}
    for topic in response.topics:
        for answer in topic.partitions:
            tp = TopicPartition(topic.name, answer.partition_index)
            result[tp] = _layout_or_error(tp, answer)
    return result


def _layout_or_error(
    tp: TopicPartition, answer: DescribeLogSegmentsPartitionResult
) -> PartitionLayout | KafkaError:
    if answer.error_code:
        return error_for_code(answer.error_code)(f"describing {tp.topic}-{tp.partition}")
    segments = tuple(
        SegmentInfo(s.base_offset, s.end_offset, s.size_in_bytes, s.first_timestamp,
                    s.max_timestamp)
        for s in answer.segments
    )
    return PartitionLayout(tp.topic, tp.partition, answer.log_start_offset, answer.high_watermark,
                           answer.last_stable_offset, segments)
