"""Planning: segments to ranges, minPartitions splits, rate limits, admission, offsets JSON."""

from __future__ import annotations

import re

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from pyspark_samsa.options import parse_source_options
from pyspark_samsa.planning import (
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    segment_ranges,
    split_for_min_partitions,
)
from pyspark_samsa.reader import plan_ranges
from pyspark_samsa.stream import Admission
from samsa.segments import PartitionLayout, SegmentInfo
from samsa.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
SEGMENTS = (SegmentInfo(0, 100, 1), SegmentInfo(100, 250, 1), SegmentInfo(250, 300, 1),
            SegmentInfo(300, 300, 0))  # the last: an empty active segment


def spans(ranges: list[OffsetRange]) -> list[tuple[int, int, int]]:
    return [(r.start, r.end, r.segment_base) for r in ranges]


@pytest.mark.parametrize(("start", "end", "expected"), [
    (0, 300, [(0, 100, 0), (100, 250, 100), (250, 300, 250)]),
    (50, 260, [(50, 100, 0), (100, 250, 100), (250, 260, 250)]),
    (120, 130, [(120, 130, 100)]),
    (100, 250, [(100, 250, 100)]),
    (300, 300, []),
    (280, 320, [(280, 300, 250), (300, 320, -1)]),  # past the log: read, found missing
])
def test_segment_ranges_clip_segments_to_the_range(start: int, end: int,
                                                   expected: list[tuple[int, int, int]]) -> None:
    assert spans(segment_ranges(A0, SEGMENTS, start, end)) == expected


def test_a_hole_before_the_first_segment_is_still_planned() -> None:
    later = (SegmentInfo(100, 200, 1),)
    assert spans(segment_ranges(A0, later, 40, 150)) == [(40, 100, -1), (100, 150, 100)]


def test_min_partitions_splits_as_sparks_offset_range_calculator() -> None:
    one = [OffsetRange("a", 0, 1, 5)]
    assert spans(split_for_min_partitions(one, 3)) == [(1, 2, -1), (2, 3, -1), (3, 5, -1)]
    two = [OffsetRange("a", 0, 1, 5, 0), OffsetRange("a", 1, 1, 21, 0)]
    assert [(r.partition, r.start, r.end) for r in split_for_min_partitions(two, 4)] == [
        (0, 1, 5), (1, 1, 7), (1, 7, 14), (1, 14, 21)]
    # enough ranges already: unchanged, empty ones dropped
    many = [OffsetRange("a", 0, 0, 10), OffsetRange("a", 0, 10, 10), OffsetRange("a", 0, 10, 20)]
    assert spans(split_for_min_partitions(many, 2)) == [(0, 10, -1), (10, 20, -1)]
    assert spans(split_for_min_partitions(many, None)) == [(0, 10, -1), (10, 20, -1)]


def test_min_partitions_rounds_half_up_like_scala() -> None:
    # 2.5 parts rounds to 3 in Scala (Python's round would give 2)
    ranges = [OffsetRange("a", 0, 0, 5), OffsetRange("a", 1, 0, 5)]
    assert len(split_for_min_partitions(ranges, 5)) == 6


def test_rate_limit_shares_by_backlog_and_never_starves() -> None:
    assert rate_limit(100, {A0: 0, A1: 0}, {A0: 100, A1: 900}, {}) == {A0: 10, A1: 90}
    assert rate_limit(100, {A0: 0, A1: 0}, {A0: 1, A1: 10_000}, {}) == {A0: 1, A1: 99}
    # a partition with nothing to read keeps its end; a new one starts at its earliest
    assert rate_limit(10, {A0: 5}, {A0: 5, B0: 1000}, {B0: 990}) == {A0: 5, B0: 1000}
    assert rate_limit(10, {A0: 0}, {A0: 50, B0: 1000}, {B0: 950}) == {A0: 5, B0: 955}
    assert rate_limit(10, {A0: 7}, {A0: 7}, {}) == {A0: 7}


def test_offsets_json_is_sparks() -> None:
    offsets = {A1: 7, A0: 3, B0: 0}
    document = offsets_to_json(offsets)
    assert document == {"a": {"0": 3, "1": 7}, "b": {"0": 0}}
    assert list(document) == ["a", "b"]
    assert offsets_from_json(document) == offsets


def layout(tp: TopicPartition, log_start: int, high_watermark: int) -> PartitionLayout:
    return PartitionLayout(tp.topic, tp.partition, log_start, high_watermark, high_watermark,
                           SEGMENTS)


def test_plan_ranges_checks_the_range() -> None:
    options = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a"},
                                   streaming=False)
    layouts = {A0: layout(A0, 0, 300), A1: layout(A1, 0, 300)}
    ranges = plan_ranges({A0: 0, A1: 200}, {A0: 300, A1: 300}, layouts, options)
    assert [(r.partition, r.start, r.end) for r in ranges] == [
        (0, 0, 100), (0, 100, 250), (0, 250, 300), (1, 200, 250), (1, 250, 300)]
    with pytest.raises(ValueError, match="Beginning offset 280 is after the ending offset 270 "
                                         "for topic a partition 0"):
        plan_ranges({A0: 280}, {A0: 270}, layouts, options)


def test_plan_ranges_reports_data_loss_below_the_log_start() -> None:
    layouts = {A0: layout(A0, 120, 300)}
    strict = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a"},
                                  streaming=False)
    with pytest.raises(RuntimeError, match=r"Cannot fetch offset 0 .*failOnDataLoss"):
        plan_ranges({A0: 0}, {A0: 300}, layouts, strict)
    lenient = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a",
                                    "failOnDataLoss": "false"}, streaming=False)
    assert spans(plan_ranges({A0: 0}, {A0: 300}, layouts, lenient)) == [
        (120, 250, 100), (250, 300, 250)]


def admission(minimum: int | None, maximum: int | None, delay_ms: int = 1000) -> Admission:
    return Admission(minimum, maximum, delay_ms, last_trigger_ms=0.0)


def test_admission_read_all_available_ignores_the_options() -> None:
    gate = admission(1000, 10)
    assert gate.end_offsets({A0: 0}, {A0: 50}, {}, ReadAllAvailable(), now_ms=1) == {A0: 50}


def test_admission_max_rows() -> None:
    gate = admission(None, 10)
    assert gate.end_offsets({A0: 0, A1: 0}, {A0: 50, A1: 50}, {}, ReadMaxRows(10),
                            now_ms=1) == {A0: 5, A1: 5}
    assert gate.end_offsets({A0: 0, A1: 0}, {A0: 50, A1: 50}, {}, ReadMaxRows(4),
                            now_ms=1) == {A0: 2, A1: 2}


def test_admission_waits_for_min_rows_until_the_delay_has_passed() -> None:
    gate = admission(100, None, delay_ms=1000)
    assert gate.end_offsets({A0: 0}, {A0: 50}, {}, ReadMinRows(100), now_ms=10) is None
    assert gate.end_offsets({A0: 0}, {A0: 150}, {}, ReadMinRows(100), now_ms=20) == {A0: 150}
    assert gate.last_trigger_ms == 20
    assert gate.end_offsets({A0: 150}, {A0: 160}, {}, ReadMinRows(100), now_ms=500) is None
    assert gate.end_offsets({A0: 150}, {A0: 160}, {}, ReadMinRows(100), now_ms=1020) == {A0: 160}
    # Trigger.AvailableNow never waits
    assert gate.end_offsets({A0: 160}, {A0: 161}, {}, ReadMinRows(100), now_ms=1030,
                            available_now=True) == {A0: 161}


def test_admission_with_both_limits_applies_the_minimum_from_the_options() -> None:
    gate = admission(100, 1000)  # Spark is told ReadMaxRows(1000): no composite limits
    assert gate.end_offsets({A0: 0}, {A0: 50}, {}, ReadMaxRows(1000), now_ms=10) is None
    assert gate.end_offsets({A0: 0}, {A0: 5000}, {}, ReadMaxRows(1000), now_ms=20) == {A0: 1000}


def test_resolve_offsets_earliest_latest_and_json() -> None:
    from pyspark_samsa.metadata import resolve_offsets
    from pyspark_samsa.options import OffsetSpec, OptionError

    layouts = {A0: layout(A0, 10, 300), A1: layout(A1, 0, 200)}
    view = None  # offsets and earliest/latest need no lookup
    assert resolve_offsets(OffsetSpec("earliest"), [A0, A1], layouts, view,  # type: ignore[arg-type]
                           starting=True) == {A0: 10, A1: 0}
    assert resolve_offsets(OffsetSpec("latest"), [A0, A1], layouts, view,  # type: ignore[arg-type]
                           starting=True) == {A0: 300, A1: 200}
    spec = OffsetSpec("offsets", {A0: -2, A1: -1}, option="startingOffsets")
    assert resolve_offsets(spec, [A0, A1], layouts, view,  # type: ignore[arg-type]
                           starting=True) == {A0: 10, A1: 200}
    partial = OffsetSpec("offsets", {A0: 5}, option="endingOffsets")
    message = ("If endingOffsets contains specific offsets, you must specify all TopicPartitions."
               "\nUse -1 for latest, -2 for earliest.\nSpecified: {a-0} Assigned: {a-0, a-1}")
    with pytest.raises(OptionError, match=re.escape(message)):
        resolve_offsets(partial, [A0, A1], layouts, view, starting=False)  # type: ignore[arg-type]
