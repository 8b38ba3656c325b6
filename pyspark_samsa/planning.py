"""Planning: which offset ranges become which Spark input partitions, and how far a trigger reads.

- ``segment_ranges``: one range per segment overlapping [start, end) of a partition, clipped
  to it. A piece of [start, end) no segment covers (data deleted since the layout was taken,
  or a log truncated) still becomes a range, without a segment, so the task that reads it
  meets the loss and applies ``failOnDataLoss``: nothing is dropped silently at planning.
- ``split_for_min_partitions``: Spark's KafkaOffsetRangeCalculator: when there are fewer
  ranges than ``minPartitions``, each range is split into parts in proportion to its share
  of all offsets (at least one part each).
- ``rate_limit``: Spark's KafkaMicroBatchStream.rateLimit: ``maxOffsetsPerTrigger`` shared
  across partitions in proportion to their backlog (rounded down, but up when below one, so
  no partition starves).
- Offsets JSON, as Spark's KafkaSourceOffset: ``{"topic": {"partition": offset}}``.

Pure functions and frozen values: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from samsa.segments import SegmentInfo
from samsa.types import TopicPartition

__all__ = [
    "OffsetRange",
    "offsets_from_json",
    "offsets_to_json",
    "rate_limit",
    "segment_ranges",
    "split_for_min_partitions",
]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets [start, end) of one partition; ``segment_base`` is the base offset of the
    segment holding them (-1 when none was known at planning)."""

    topic: str
    partition: int
    start: int
    end: int
    segment_base: int = -1

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def segment_ranges(tp: TopicPartition, segments: Iterable[SegmentInfo], start: int,
                   end: int) -> list[OffsetRange]:
    """[start, end) of ``tp`` cut at segment boundaries (see the module docstring)."""
    ranges: list[OffsetRange] = []
    cursor = start
    for segment in sorted(segments, key=lambda s: s.base_offset):
        if cursor >= end:
            break
        if segment.end_offset <= cursor or segment.end_offset <= segment.base_offset:
            continue
        if segment.base_offset > cursor:  # a hole: no segment holds [cursor, base)
            hole_end = min(segment.base_offset, end)
            ranges.append(OffsetRange(tp.topic, tp.partition, cursor, hole_end))
            cursor = hole_end
            if cursor >= end:
                break
        upper = min(segment.end_offset, end)
        ranges.append(OffsetRange(tp.topic, tp.partition, cursor, upper, segment.base_offset))
        cursor = upper
    if cursor < end:
        ranges.append(OffsetRange(tp.topic, tp.partition, cursor, end))
    return ranges


def split_for_min_partitions(ranges: list[OffsetRange],
                             min_partitions: int | None) -> list[OffsetRange]:
    """Empty ranges dropped; then Spark's proportional split when below ``min_partitions``."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        parts = max(_round_half_up(r.size / total * min_partitions), 1)
        remaining, start = r.size, r.start
        for part in range(parts):
            share = remaining // (parts - part)  # the last part takes the rounding
            remaining -= share
            end = min(start + share, r.end)
            if end > start:
                result.append(OffsetRange(r.topic, r.partition, start, end, r.segment_base))
            start = end
    return result


def _round_half_up(value: float) -> int:
    """Scala's math.round (half up), not Python's round (half to even)."""
    return math.floor(value + 0.5)


def rate_limit(limit: int, start: Mapping[TopicPartition, int],
               until: Mapping[TopicPartition, int],
               earliest_of_new: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The end offsets of a trigger reading at most about ``limit`` records (see the module
    docstring). Partitions absent from ``start`` begin at ``earliest_of_new``."""
    sizes: dict[TopicPartition, int] = {}
    for tp, end in until.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = sum(sizes.values())
    if total < 1:
        return dict(until)
    result: dict[TopicPartition, int] = {}
    for tp, end in until.items():
        if tp not in sizes:
            result[tp] = end
            continue
        begin = start.get(tp, earliest_of_new.get(tp, 0))
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        result[tp] = min(end, begin + share)
    return result


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{"topic": {"partition": offset}}``, topics and partitions in order."""
    document: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        document.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return document


def offsets_from_json(document: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, int(partition)): int(offset)
            for topic, partitions in document.items() for partition, offset in partitions.items()}
