"""Retention (time, size, log start offset), delayed file deletion, and segment rolls."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from protocol.errors import InvalidRecordError, OffsetOutOfRangeError
from protocol.records import Record, encode_batch
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import client_batch, release_opened_logs

release_logs = pytest.fixture(autouse=True)(release_opened_logs)

NOW = 1_700_000_000_000
BASE = LogConfig(
    retention_ms=-1,
    file_delete_delay_ms=5_000,
    message_timestamp_after_max_ms=2**62,
)


def open_log(tmp_path: Path, clock: ManualClock, **changes: object) -> Log:
    return Log.open(tmp_path / "t-0", dataclasses.replace(BASE, **changes), clock=clock)


def append(log: Log, timestamp: int, *, size: int = 10) -> int:
    """One batch of one record; returns its offset."""
    return log.append_as_leader(client_batch([b"v" * size], timestamp=timestamp)).first_offset


def segment_per_timestamps(log: Log, *segments: list[int]) -> None:
    """One segment per list of record timestamps (rolled by hand), then the active one stays."""
    for timestamps in segments:
        for timestamp in timestamps:
            append(log, timestamp)
        log.roll()


def bases(log: Log) -> list[int]:
    return [segment.base_offset for segment in log.segments]


# -- retention.ms -------------------------------------------------------------------------------


def test_retention_ms_uses_the_largest_record_timestamp_and_stops_at_the_first_young_segment(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, retention_ms=10_000)
    segment_per_timestamps(
        log,
        [NOW - 40_000, NOW - 30_000],  # expired
        [NOW - 20_000],  # expired
        [NOW - 50_000, NOW - 2_000],  # one young record keeps the segment
        [NOW - 15_000],  # expired, but behind a young segment: Kafka stops at the first keeper
    )
    append(log, NOW - 90_000)  # the active segment: expired, never deleted
    assert bases(log) == [0, 2, 3, 5, 6]
    assert log.delete_old_segments() == 2
    assert bases(log) == [3, 5, 6] and log.log_start_offset == 3
    clock.advance(8_000)  # the young record is now 10 s old: not more than retention.ms
    assert log.delete_old_segments() == 0
    clock.advance(1)
    assert log.delete_old_segments() == 2
    assert bases(log) == [6] and log.log_start_offset == 6
    clock.advance(10**9)
    assert log.delete_old_segments() == 0 and bases(log) == [6]
    assert log.log_end_offset == 7


def test_retention_is_bounded_by_the_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, retention_ms=0)
    segment_per_timestamps(log, [NOW - 5], [NOW - 5], [NOW - 5])
    append(log, NOW - 5)
    assert log.delete_old_segments(high_watermark=1) == 1  # segment 1 holds offsets >= the HW
    assert bases(log) == [1, 2, 3]
    assert log.delete_old_segments(high_watermark=3) == 2


# -- retention.bytes ----------------------------------------------------------------------------


@pytest.mark.parametrize("retention_bytes", [0, 1, 150, 400, 777, 1_000, 5_000])
def test_retention_bytes_keeps_at_least_retention_bytes(
    tmp_path: Path, retention_bytes: int
) -> None:
    """Kafka's rule: drop the oldest segment while the rest still holds >= retention.bytes."""
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, retention_bytes=retention_bytes)
    for size in (100, 50, 200, 30, 120, 80):
        append(log, NOW, size=size)
        log.roll()
    append(log, NOW, size=300)  # the active segment
    sizes = [segment.size for segment in log.segments]
    total, expected_deleted = sum(sizes), 0
    for size in sizes[:-1]:
        if total - size < retention_bytes:
            break
        total -= size
        expected_deleted += 1
    before = bases(log)
    assert log.delete_old_segments() == expected_deleted
    assert bases(log) == before[expected_deleted:]
    assert log.log_start_offset == before[expected_deleted]
    if expected_deleted:
        assert log.size_in_bytes >= retention_bytes
    if len(log.segments) > 1:  # the next-oldest would take the log below retention.bytes
        assert log.size_in_bytes - log.segments[0].size < retention_bytes


def test_the_active_segment_is_never_deleted_even_when_it_breaches(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, retention_bytes=0, retention_ms=0)
    append(log, NOW - 10**6, size=5_000)
    clock.advance(10**6)
    assert log.delete_old_segments() == 0
    assert bases(log) == [0] and log.log_start_offset == 0
    assert log.read(0, 1) is not None


# -- delayed deletion -----------------------------------------------------------------------------


def test_removed_segments_are_renamed_stay_readable_and_go_after_the_delay(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, retention_ms=1_000, file_delete_delay_ms=5_000)
    segment_per_timestamps(log, [NOW - 9_000] * 3, [NOW - 8_000] * 2)
    append(log, NOW)
    old = log.segments[:2]
    slices = [log.read(0, 10**6), log.read(3, 10**6)]
    assert None not in slices
    contents = [segment.log_path.read_bytes() for segment in old]
    names = {p.name for s in old for p in (s.log_path, s.offset_index.path, s.time_index.path)}
    assert log.delete_old_segments() == 2
    present = {p.name for p in log.directory.iterdir()}
    assert {f"{name}.deleted" for name in names} <= present and not names & present
    assert [piece.read() for piece in slices if piece is not None] == contents  # already-handed-out slices
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    clock.advance(4_999)
    assert log.purge_deleted_segments() == 0
    assert [piece.read() for piece in slices if piece is not None] == contents
    clock.advance(1)
    assert log.purge_deleted_segments() == 2
    assert not [p for p in log.directory.iterdir() if p.name.endswith(".deleted")]
    assert log.purge_deleted_segments() == 0
    assert log.read(5, 100) is not None


def test_close_unlinks_pending_deletes_at_once(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, retention_ms=0, file_delete_delay_ms=10**9)
    segment_per_timestamps(log, [NOW - 5])
    append(log, NOW)
    assert log.delete_old_segments() == 1
    log.close()
    assert not [p for p in log.directory.iterdir() if p.name.endswith(".deleted")]


# -- log start offset (DeleteRecords) -----------------------------------------------------------


def test_delete_records_hides_offsets_at_once_and_retention_drops_whole_segments(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock)
    segment_per_timestamps(log, [NOW] * 3, [NOW] * 3, [NOW] * 3)
    append(log, NOW)
    assert bases(log) == [0, 3, 6, 9]
    assert log.increment_log_start_offset(4) is True
    assert log.increment_log_start_offset(2) is False and log.log_start_offset == 4
    for offset in (0, 2, 3):
        with pytest.raises(OffsetOutOfRangeError):
            log.read(offset, 100)
    assert log.read(4, 100) is not None
    assert log.delete_old_segments() == 1  # segment 3 holds the log start offset: kept
    assert bases(log) == [3, 6, 9] and log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.increment_log_start_offset(11)
    assert log.increment_log_start_offset(10) is True  # up to the LEO: empties the log
    assert log.delete_old_segments() == 2
    assert bases(log) == [9] and log.log_start_offset == 10
    assert log.read(10, 100) is None


def test_compact_alone_deletes_nothing_by_time_or_size_but_honours_delete_records(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, cleanup_policy=("compact",), retention_ms=0, retention_bytes=0)
    segment_per_timestamps(log, [NOW - 10**7] * 2, [NOW - 10**7] * 2)
    append(log, NOW)
    clock.advance(10**7)
    assert log.delete_old_segments() == 0 and bases(log) == [0, 2, 4]
    log.increment_log_start_offset(2)
    assert log.delete_old_segments() == 1 and bases(log) == [2, 4]
    log.config = dataclasses.replace(log.config, cleanup_policy=("compact", "delete"))
    assert log.delete_old_segments() == 1 and bases(log) == [4]


def test_an_empty_cleanup_policy_is_infinite_retention(tmp_path: Path) -> None:
    """Kafka 4.2+: ``cleanup.policy=`` (empty) deletes and compacts nothing; only segments
    below the log start offset go (found by tests/integration/kafka/test_differential.py)."""
    config = LogConfig.from_properties({"cleanup.policy": ""}, base=BASE)
    assert (config.cleanup_policy, config.delete, config.compact) == ((), False, False)
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, cleanup_policy=config.cleanup_policy, retention_ms=0,
                   retention_bytes=0)
    segment_per_timestamps(log, [NOW - 10**7] * 2, [NOW - 10**7] * 2)
    append(log, NOW)
    clock.advance(10**7)
    assert log.delete_old_segments() == 0 and bases(log) == [0, 2, 4]
    log.increment_log_start_offset(2)
    assert log.delete_old_segments() == 1 and bases(log) == [2, 4]


# -- segment rolls ----------------------------------------------------------------------------


def batches_per_segment(log: Log) -> list[int]:
    return [sum(1 for _ in segment.scan_headers()) for segment in log.segments]


@pytest.mark.parametrize(("slack", "per_segment"), [(0, 3), (-1, 2), (1, 3)])
def test_roll_by_segment_bytes(tmp_path: Path, slack: int, per_segment: int) -> None:
    """Kafka: roll when size + the append's bytes would exceed segment.bytes."""
    clock = ManualClock(NOW)
    size = len(client_batch([b"x" * 40], timestamp=NOW))
    log = open_log(tmp_path, clock, segment_bytes=3 * size + slack)
    results = [log.append_as_leader(client_batch([b"x" * 40], timestamp=NOW)) for _ in range(7)]
    assert batches_per_segment(log)[:-1] == [per_segment] * (7 // per_segment)
    assert [r.rolled for r in results] == [n > 0 and n % per_segment == 0 for n in range(7)]
    assert all(segment.size <= 3 * size + slack for segment in log.segments)


def test_a_batch_larger_than_segment_bytes_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, segment_bytes=200)
    append(log, NOW, size=10)
    append(log, NOW, size=500)
    append(log, NOW, size=10)
    assert batches_per_segment(log) == [1, 1, 1]


def test_roll_by_segment_ms_uses_the_first_batch_timestamp(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, segment_ms=1_000)
    append(log, NOW)
    append(log, NOW + 600)
    append(log, NOW - 5_000)  # an older timestamp does not move the segment's age
    clock.advance(10**6)  # the wall clock plays no part once the segment has a timestamp
    append(log, NOW + 1_000)  # waited exactly segment.ms: not more
    assert bases(log) == [0]
    append(log, NOW + 1_001)
    assert bases(log) == [0, 4]
    log.close()  # the rule survives a restart: the age comes from the first batch on disk
    log = Log.open(log.directory, log.config, clock=clock, had_clean_shutdown=True)
    append(log, NOW + 2_001)
    assert bases(log) == [0, 4]
    append(log, NOW + 2_002)
    assert bases(log) == [0, 4, 6]


@pytest.mark.parametrize(("timestamp_step", "per_segment"), [(0, 5), (1, 3)])
def test_roll_when_an_index_is_full(tmp_path: Path, timestamp_step: int, per_segment: int) -> None:
    """segment.index.bytes=36: 4 offset-index slots, 3 time-index slots of which Kafka keeps the
    last free for the entry written at roll. An entry per append after the first."""
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock, segment_index_bytes=36, index_interval_bytes=0)
    for n in range(16):
        append(log, NOW + n * timestamp_step)
    assert batches_per_segment(log)[:-1] == [per_segment] * (16 // per_segment)
    for segment in log.segments[:-1]:
        assert segment.offset_index.path.stat().st_size == 8 * (per_segment - 1)
    log.close()
    reopened = Log.open(log.directory, log.config, clock=clock, had_clean_shutdown=False)
    assert reopened.log_end_offset == 16


def follower_batch(offset: int) -> bytes:
    return encode_batch([Record(offset, NOW, b"k", b"v")])


def test_a_follower_offset_gap_beyond_int32_rolls_at_the_appended_offset(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock)
    log.append_as_follower(follower_batch(0))
    log.append_as_follower(follower_batch(2**31 + 5))
    assert bases(log) == [0, 2**31 + 5]
    assert log.log_end_offset == 2**31 + 6


def test_a_rejected_append_leaves_nothing_on_disk(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, clock)
    log.append_as_follower(follower_batch(0))
    with pytest.raises(InvalidRecordError):
        log.active_segment.append(
            [follower_batch(2**31 + 5)], largest_offset=2**31 + 5, largest_timestamp=NOW,
            offset_of_max_timestamp=2**31 + 5,
        )
    assert log.active_segment.log_path.stat().st_size == log.active_segment.size
    log.close()
    reopened = Log.open(log.directory, log.config, clock=clock, had_clean_shutdown=True)
    assert reopened.log_end_offset == 1
