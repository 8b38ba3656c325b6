"""Log compaction (storage.cleaner) against a brute-force model of which records survive, plus
the cleanable-range rules, the memory bound and a crash at every step of the swap."""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.compression import CompressionType
from protocol.errors import CorruptMessageError
from protocol.records import (
    ControlRecordType,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    encode_control_record,
    iter_batches,
)
from storage.checkpoint import OffsetCheckpointFile
from storage.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    Cleaner,
    CleaningStep,
    OffsetMap,
    StepHook,
    cleanable_logs,
    cleanable_offsets,
    group_segments_by_size,
    remove_cleaner_checkpoint,
    truncate_cleaner_checkpoint,
)
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.segment import LogSegment, segment_file_name
from tests.unit.storage.helpers import abandon_segment, crash

DELETE_RETENTION_MS = 10_000
CONFIG = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=1024,
    index_interval_bytes=128,
    segment_index_bytes=64 * 12,
    retention_ms=-1,
    delete_retention_ms=DELETE_RETENTION_MS,
    message_timestamp_after_max_ms=2**62,
    file_delete_delay_ms=0,
)
CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD, CompressionType.LZ4]

Entry = tuple[int, bytes | None, bytes | None]  # (offset, key, value)


# -- helpers ----------------------------------------------------------------------------------


def open_log(root: Path, clock: ManualClock, config: LogConfig = CONFIG, name: str = "t-0") -> Log:
    return Log.open(root / name, config, clock=clock)


def append(
    log: Log,
    clock: ManualClock,
    pairs: list[tuple[bytes | None, bytes | None]],
    *,
    codec: CompressionType = CompressionType.NONE,
    **fields: Any,
) -> list[Entry]:
    """Append one batch of (key, value) pairs at the LEO; returns them with their offsets."""
    start = log.log_end_offset
    records = [
        Record(offset=start + i, timestamp=clock.now_ms, key=key, value=value)
        for i, (key, value) in enumerate(pairs)
    ]
    batch = encode_batch(records, base_offset=start, compression=codec, **fields)
    log.append_as_follower(batch)  # keeps offsets; accepts keyless records and control batches
    clock.advance(1)
    return [(r.offset, r.key, r.value) for r in records]


def entries(log: Log) -> list[Entry]:
    """Every record, read batch by batch from the segment files (CRC checked)."""
    result: list[Entry] = []
    for segment, position, header in log.batches(log.log_start_offset):
        batch = decode_batch(segment.read_batch_bytes(position, header))
        result.extend((r.offset, r.key, r.value) for r in batch.records if not header.is_control)
    return result


def fetched_entries(log: Log) -> list[Entry]:
    """Every record, read the way a consumer does: Log.read from the log start to the LEO."""
    result: list[Entry] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, 700)
        assert fetched is not None, f"nothing readable at {offset} < LEO {log.log_end_offset}"
        batches = list(iter_batches(fetched.read(), allow_partial_tail=True))
        assert batches, f"no whole batch at {offset}"
        for batch in batches:
            if not batch.is_control:
                result.extend(
                    (r.offset, r.key, r.value) for r in batch.records if r.offset >= offset
                )
            offset = batch.next_offset
    return result


def model_clean(
    before: list[Entry], *, start: int, end: int, expired_tombstones: frozenset[int] = frozenset()
) -> list[Entry]:
    """Brute force: below ``end`` a record survives when it has a key, no later record in
    [start, end) has the same key, and it is not one of ``expired_tombstones``."""
    latest: dict[bytes, int] = {}
    for offset, key, _ in before:
        if start <= offset < end and key is not None:
            latest[key] = offset
    return [
        (offset, key, value)
        for offset, key, value in before
        if offset >= end
        or (key is not None and latest.get(key, -1) <= offset and offset not in expired_tombstones)
    ]


def segment_bytes(log: Log, from_offset: int) -> dict[int, bytes]:
    """The data of every segment from ``from_offset`` on, by base offset."""
    return {s.base_offset: whole(s) for s in log.segments if s.base_offset >= from_offset}


def whole(segment: LogSegment) -> bytes:
    return os.pread(segment.fd, segment.size, 0)


def checkpoints(root: Path) -> dict[tuple[str, int], int]:
    return OffsetCheckpointFile(root / CLEANER_OFFSET_CHECKPOINT).read()


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]


# -- the model test ---------------------------------------------------------------------------

keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"i", None])
values = st.one_of(
    st.none(), st.binary(min_size=1, max_size=40), st.binary(min_size=1, max_size=40)
)
# One batch of (key, value) pairs (key None: keyless, value None: tombstone), its codec, and
# whether the segment rolls after it.
append_op = st.tuples(
    st.lists(st.tuples(keys, values), min_size=1, max_size=12),
    st.sampled_from(CODECS),
    st.booleans(),
)
operations = st.lists(append_op, min_size=1, max_size=30)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    ops=operations,
    high_watermark_fraction=st.one_of(st.none(), st.floats(0, 1)),
    map_entries=st.one_of(st.none(), st.integers(3, 8)),
)
def test_cleaning_matches_the_model(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[list[tuple[bytes | None, bytes | None]], CompressionType, bool]],
    high_watermark_fraction: float | None,
    map_entries: int | None,
) -> None:
    """``map_entries``: an offset map that small cleans in several rounds, to the same result."""
    root = tmp_path_factory.mktemp("model")
    clock = ManualClock()
    log = open_log(root, clock)
    written: list[Entry] = []
    for batch, codec, roll in ops:
        written += append(log, clock, batch, codec=codec)
        if roll:
            log.roll()
    leo = log.log_end_offset
    high_watermark = None
    if high_watermark_fraction is not None:
        high_watermark = round(leo * high_watermark_fraction)
    _, uncleanable = cleanable_offsets(
        log, None, now_ms=clock.now_ms, high_watermark=high_watermark
    )
    untouched = segment_bytes(log, uncleanable)

    cleaner = Cleaner()
    if map_entries is not None:
        cleaner = Cleaner(offset_map=OffsetMap(24 * map_entries, load_factor=1.0, bytes_per_entry=24))
    stats = cleaner.clean(log, now_ms=clock.now_ms, high_watermark=high_watermark)
    while stats.end_offset < uncleanable:  # the map filled up: more rounds
        previous = stats.end_offset
        stats = cleaner.clean(log, now_ms=clock.now_ms, high_watermark=high_watermark)
        assert previous < stats.end_offset and stats.first_dirty_offset == previous

    assert stats.end_offset == uncleanable == stats.first_uncleanable_offset
    assert checkpoints(root) == {("t", 0): uncleanable}
    expected = model_clean(written, start=0, end=uncleanable)
    check_log(log, expected, leo)
    assert segment_bytes(log, uncleanable) == untouched
    for key in {k for _, k, _ in written} - {None}:  # the latest record of every key survives
        latest = max(e for e in written if e[1] == key)
        assert latest in entries(log)

    # Before the delete horizon a second cleaning keeps every tombstone; after it, none below
    # the cleaned range survives.
    clock.advance(DELETE_RETENTION_MS - 1)
    cleaner.clean(log, now_ms=clock.now_ms, high_watermark=high_watermark)
    check_log(log, expected, leo)
    clock.advance(1)
    stats = cleaner.clean(log, now_ms=clock.now_ms, high_watermark=high_watermark)
    tombstones = frozenset(o for o, _, value in expected if value is None and o < uncleanable)
    expected = model_clean(
        expected, start=uncleanable, end=uncleanable, expired_tombstones=tombstones
    )
    check_log(log, expected, leo)
    assert stats.tombstones_removed == len(tombstones)
    assert segment_bytes(log, uncleanable) == untouched

    log.close()
    reopened = Log.open(root / "t-0", CONFIG, clock=clock, had_clean_shutdown=True)
    check_log(reopened, expected, leo)
    reopened.close()


def check_log(log: Log, expected: list[Entry], leo: int) -> None:
    found = entries(log)
    assert found == expected
    assert [e[0] for e in found] == sorted({e[0] for e in found})  # strictly increasing
    assert fetched_entries(log) == expected
    assert log.log_end_offset == leo
    assert log.active_segment.next_offset() == leo


# -- record rules -----------------------------------------------------------------------------


def test_tombstone_gets_a_delete_horizon_and_goes_after_it(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    append(log, clock, [(b"k", b"v1"), (b"x", b"1")])
    append(log, clock, [(b"k", None), (b"y", b"2")])
    log.roll()
    first_cleaning_ms = clock.now_ms
    Cleaner().clean(log, now_ms=first_cleaning_ms)
    assert entries(log) == [(1, b"x", b"1"), (2, b"k", None), (3, b"y", b"2")]
    headers = [h for _, _, h in log.batches(0)]
    assert headers[-1].delete_horizon_ms == first_cleaning_ms + DELETE_RETENTION_MS
    assert headers[-1].base_timestamp == first_cleaning_ms + DELETE_RETENTION_MS

    clock.now_ms = first_cleaning_ms + DELETE_RETENTION_MS - 1
    Cleaner().clean(log, now_ms=clock.now_ms)
    assert (2, b"k", None) in entries(log)
    # record timestamps survive the new base timestamp
    segment, position, header = next(iter(log.batches(2)))
    assert decode_batch(segment.read_batch_bytes(position, header)).records[0].timestamp < (
        first_cleaning_ms
    )
    clock.now_ms = first_cleaning_ms + DELETE_RETENTION_MS
    stats = Cleaner().clean(log, now_ms=clock.now_ms)
    assert entries(log) == [(1, b"x", b"1"), (3, b"y", b"2")]
    assert stats.tombstones_removed == 1


def test_filtered_batch_keeps_its_header_fields(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    fields = dict(
        producer_id=42,
        producer_epoch=3,
        base_sequence=100,
        partition_leader_epoch=7,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        max_timestamp=clock.now_ms + 5,
    )
    append(
        log, clock, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], codec=CompressionType.GZIP, **fields
    )
    append(log, clock, [(b"b", b"4")])
    log.roll()
    before = next(h for _, _, h in log.batches(0))
    Cleaner().clean(log, now_ms=clock.now_ms)
    after = next(h for _, _, h in log.batches(0))
    assert entries(log) == [(0, b"a", b"1"), (2, b"c", b"3"), (3, b"b", b"4")]
    same = (
        "base_offset",
        "last_offset_delta",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "partition_leader_epoch",
        "max_timestamp",
        "attributes",
    )
    assert {f: getattr(after, f) for f in same} == {f: getattr(before, f) for f in same}
    assert after.compression is CompressionType.GZIP
    assert after.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert after.records_count == 2


def test_unchanged_batches_are_copied_byte_for_byte(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    append(log, clock, [(b"a", b"1")], codec=CompressionType.ZSTD)
    append(log, clock, [(b"b", b"1"), (b"c", b"2")], codec=CompressionType.GZIP)
    append(log, clock, [(b"a", b"2")])
    log.roll()
    segment, position, header = list(log.batches(0))[1]
    original = segment.read_batch_bytes(position, header)
    stats = Cleaner().clean(log, now_ms=clock.now_ms)
    segment, position, header = next(iter(log.batches(0)))
    assert segment.read_batch_bytes(position, header) == original
    assert (stats.batches_copied, stats.batches_removed, stats.batches_rewritten) == (2, 1, 0)


def test_a_group_keeps_its_last_batch_even_when_empty(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock, dataclasses.replace(CONFIG, segment_bytes=200))  # no merging
    append(log, clock, [(b"a", b"1")])
    append(log, clock, [(b"a", b"2"), (b"b", b"1")])
    log.roll()
    append(log, clock, [(b"a", b"3"), (b"b", b"2")])
    log.roll()
    Cleaner().clean(log, now_ms=clock.now_ms)
    headers = [h for _, _, h in log.batches(0)]
    assert [(h.base_offset, h.last_offset, h.records_count) for h in headers[:-1]] == [(1, 2, 0)]
    assert entries(log) == [(3, b"a", b"3"), (4, b"b", b"2")]


def test_keyless_records_are_dropped(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    append(log, clock, [(None, b"x"), (b"a", b"1"), (None, b"y")])
    log.roll()
    stats = Cleaner().clean(log, now_ms=clock.now_ms)
    assert entries(log) == [(1, b"a", b"1")]
    assert stats.invalid_records == 2


def test_aborted_transactions_never_shadow_committed_records(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    txn: dict[str, Any] = dict(
        producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    append(log, clock, [(b"k", b"committed")])
    append(log, clock, [(b"k", b"aborted")], **txn)
    marker = encode_control_record(
        ControlRecordType.ABORT,
        coordinator_epoch=1,
        offset=log.log_end_offset,
        timestamp=clock.now_ms,
    )
    log.append_as_follower(encode_batch([marker], is_control=True, **txn))
    log.roll()
    stats = Cleaner().clean(log, now_ms=clock.now_ms)
    assert entries(log) == [(0, b"k", b"committed")]
    assert stats.aborted_records == 1
    assert [h.is_control for _, _, h in log.batches(0)][-1]  # the marker stays


def test_a_corrupt_batch_stops_cleaning_and_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    append(log, clock, [(b"a", b"1")])
    append(log, clock, [(b"a", b"2")])
    log.roll()
    segment = log.segments[0]
    os.pwrite(segment.fd, b"\xff", segment.size - 1)  # last byte of the second batch
    before = whole(segment)
    with pytest.raises(CorruptMessageError):
        Cleaner().clean(log, now_ms=clock.now_ms)
    assert whole(log.segments[0]) == before
    assert leftovers(log.directory) == []
    assert checkpoints(tmp_path) == {}


def test_compact_delete_only_compacts_and_delete_alone_is_refused(tmp_path: Path) -> None:
    clock = ManualClock()
    config = dataclasses.replace(CONFIG, cleanup_policy=("compact", "delete"), retention_ms=1)
    log = open_log(tmp_path, clock, config)
    append(log, clock, [(b"a", b"1"), (b"a", b"2"), (b"b", b"1")])
    log.roll()
    clock.advance(1_000)  # far past retention.ms: still, the cleaner removes nothing by age
    Cleaner().clean(log, now_ms=clock.now_ms)
    assert entries(log) == [(1, b"a", b"2"), (2, b"b", b"1")]
    assert log.delete_old_segments() == 1  # retention is the log's business
    log.config = dataclasses.replace(CONFIG, cleanup_policy=("delete",))
    with pytest.raises(ValueError, match="not compacted"):
        Cleaner().clean(log, now_ms=clock.now_ms)


def test_checkpoint_keeps_other_partitions(tmp_path: Path) -> None:
    OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).write({("other", 3): 17})
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    append(log, clock, [(b"a", b"1"), (b"a", b"2")])
    log.roll()
    Cleaner().clean(log, now_ms=clock.now_ms)
    assert checkpoints(tmp_path) == {("other", 3): 17, ("t", 0): 2}
    truncate_cleaner_checkpoint(tmp_path, ("t", 0), 5)  # not beyond: unchanged
    truncate_cleaner_checkpoint(tmp_path, ("other", 3), 4)
    remove_cleaner_checkpoint(tmp_path, ("t", 0))
    assert checkpoints(tmp_path) == {("other", 3): 4}


# -- which logs, which range ------------------------------------------------------------------


def test_dirty_ratio_decides_and_orders(tmp_path: Path) -> None:
    clock = ManualClock()
    config = dataclasses.replace(CONFIG, min_cleanable_dirty_ratio=0.5)
    quiet, busy = (
        open_log(tmp_path, clock, config, "quiet-0"),
        open_log(tmp_path, clock, config, "busy-0"),
    )
    for log in (quiet, busy):
        for i in range(30):
            append(log, clock, [(b"%d" % i, b"v" * 50)])
        log.roll()
        Cleaner().clean(log, now_ms=clock.now_ms)
    append(quiet, clock, [(b"1", b"w" * 50)])  # little new data: ratio far below 0.5
    quiet.roll()
    marks = checkpoints(tmp_path)
    assert cleanable_logs([quiet, busy], now_ms=clock.now_ms, checkpoints=marks) == []
    for i in range(40):
        append(busy, clock, [(b"%d" % (i % 30), b"w" * 50)])
    busy.roll()
    found = cleanable_logs([quiet, busy], now_ms=clock.now_ms, checkpoints=marks)
    assert [c.log for c in found] == [busy]
    assert found[0].cleanable_ratio > 0.5
    low = dataclasses.replace(config, min_cleanable_dirty_ratio=0.01)
    quiet.config = busy.config = low
    found = cleanable_logs([quiet, busy], now_ms=clock.now_ms, checkpoints=marks)
    assert [c.log for c in found] == [busy, quiet]  # dirtiest first
    assert found[0].cleanable_ratio > found[1].cleanable_ratio
    delete_only = dataclasses.replace(low, cleanup_policy=("delete",))
    quiet.config = delete_only
    assert [c.log for c in cleanable_logs([quiet], now_ms=clock.now_ms, checkpoints={})] == []


def test_records_newer_than_min_compaction_lag_are_not_cleaned(tmp_path: Path) -> None:
    clock = ManualClock()
    config = dataclasses.replace(CONFIG, min_compaction_lag_ms=60_000)
    log = open_log(tmp_path, clock, config)
    old = append(log, clock, [(b"a", b"1"), (b"a", b"2"), (b"b", b"1")])
    log.roll()
    clock.advance(30_000)
    recent = append(log, clock, [(b"a", b"3"), (b"b", b"2"), (b"b", b"3")])
    log.roll()
    clock.advance(35_000)  # the first segment is 65 s old, the second 35 s
    first_dirty, uncleanable = cleanable_offsets(log, None, now_ms=clock.now_ms)
    assert (first_dirty, uncleanable) == (0, 3)
    stats = Cleaner().clean(log, now_ms=clock.now_ms)
    assert stats.end_offset == 3
    assert entries(log) == [old[1], old[2], *recent]
    clock.advance(30_000)
    Cleaner().clean(log, now_ms=clock.now_ms)
    assert entries(log) == [recent[0], recent[2]]


def test_max_compaction_lag_forces_cleaning(tmp_path: Path) -> None:
    clock = ManualClock()
    config = dataclasses.replace(CONFIG, min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=5_000)
    log = open_log(tmp_path, clock, config)
    for i in range(20):
        append(log, clock, [(b"%d" % i, b"v" * 50)])
    log.roll()
    Cleaner().clean(log, now_ms=clock.now_ms)
    append(log, clock, [(b"1", b"w")])
    log.roll()
    marks = checkpoints(tmp_path)
    assert cleanable_logs([log], now_ms=clock.now_ms + 4_000, checkpoints=marks) == []
    found = cleanable_logs([log], now_ms=clock.now_ms + 6_000, checkpoints=marks)
    assert [c.log for c in found] == [log] and found[0].needs_compaction_now
    assert found[0].cleanable_ratio < 0.9


def test_high_watermark_bounds_cleaning_to_whole_segments(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    first = append(log, clock, [(b"a", b"1"), (b"a", b"2")])
    log.roll()
    second = append(log, clock, [(b"a", b"3"), (b"a", b"4")])
    log.roll()
    append(log, clock, [(b"a", b"5")])
    stats = Cleaner().clean(log, now_ms=clock.now_ms, high_watermark=3)  # inside the 2nd segment
    assert stats.end_offset == 2
    assert entries(log)[:3] == [first[1], *second]


def test_checkpoint_beyond_the_log_end_resets_to_the_log_start(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_log(tmp_path, clock)
    append(log, clock, [(b"a", b"1"), (b"a", b"2")])
    log.roll()
    assert cleanable_offsets(log, 99, now_ms=clock.now_ms) == (0, 2)
    assert cleanable_offsets(log, 1, now_ms=clock.now_ms) == (1, 2)


# -- memory bound -----------------------------------------------------------------------------


def test_offset_map_is_bounded() -> None:
    offset_map = OffsetMap(24 * 4, load_factor=0.75, bytes_per_entry=24)
    assert (offset_map.slots, offset_map.max_entries) == (4, 3)
    assert all(offset_map.put(k, i) for i, k in enumerate([b"a", b"b", b"c"]))
    assert not offset_map.put(b"d", 3)
    assert offset_map.put(b"a", 4)  # an existing key needs no new slot
    assert (offset_map.get(b"a"), offset_map.get(b"d"), len(offset_map)) == (4, -1, 3)
    assert offset_map.latest_offset == 4
    with pytest.raises(ValueError):
        OffsetMap(23, bytes_per_entry=24)


def build_busy_log(root: Path, clock: ManualClock) -> Log:
    log = open_log(root, clock)
    for i in range(60):
        key = b"k%d" % (i * 7 % 13)
        append(log, clock, [(key, None if i % 11 == 0 else b"v%d" % i), (b"x%d" % (i % 5), b"w")])
        if i % 9 == 8:
            log.roll()
    log.roll()
    return log


def test_a_small_offset_map_cleans_in_several_rounds_to_the_same_result(tmp_path: Path) -> None:
    clock = ManualClock()
    reference = build_busy_log(tmp_path / "one", clock)
    Cleaner().clean(reference, now_ms=clock.now_ms)
    log = build_busy_log(tmp_path / "many", ManualClock())
    cleaner = Cleaner(offset_map=OffsetMap(24 * 5, load_factor=1.0, bytes_per_entry=24))
    ends: list[int] = []
    while not ends or ends[-1] < log.active_segment.base_offset:
        ends.append(cleaner.clean(log, now_ms=clock.now_ms).end_offset)
        assert len(ends) < 100
    assert len(ends) > 3 and ends == sorted(set(ends))
    assert entries(log) == entries(reference)


# -- crash safety -----------------------------------------------------------------------------


class SimulatedCrash(BaseException):
    """Raised from the step hook: like a killed process, no handler runs."""


def crash_at(step: CleaningStep, group: int, new_segments: list[LogSegment]) -> StepHook:
    seen = {s: 0 for s in CleaningStep}

    def hook(name: CleaningStep, segment: LogSegment | None) -> None:
        if segment is not None and segment not in new_segments:
            new_segments.append(segment)
        seen[name] += 1
        if name is step and seen[name] == group + 1:
            raise SimulatedCrash(f"{step.value} of group {group}")

    return hook


def records_in(found: Iterable[Entry], start: int, end: int) -> list[Entry]:
    return [e for e in found if start <= e[0] < end]


CRASH_CONFIG = dataclasses.replace(CONFIG, segment_bytes=700)  # groups of two segments


def build_crash_log(root: Path, clock: ManualClock) -> Log:
    log = Log.open(root / "t-0", CRASH_CONFIG, clock=clock)
    for i in range(24):
        append(log, clock, [(b"k%d" % (i % 4), b"v%d" % i), (b"t%d" % (i % 3), None)])
        if i % 4 == 3:
            log.roll()
    return log


def reference_run(root: Path) -> tuple[list[Entry], list[Entry], list[list[int]], int]:
    """(entries before, entries after a whole cleaning, base offsets of each group, LEO)."""
    clock = ManualClock()
    reference = build_crash_log(root, clock)
    old = entries(reference)
    groups = group_segments_by_size(reference, list(reference.segments[:-1]))
    bases = [[s.base_offset for s in group] for group in groups]
    Cleaner().clean(reference, now_ms=clock.now_ms)
    new, leo = entries(reference), reference.log_end_offset
    reference.close()
    assert len(bases) >= 2 and all(len(group) == 2 for group in bases)
    bounds = [group[0] for group in bases] + [leo]
    for start, end in itertools.pairwise(bounds):  # every group changes
        assert records_in(old, start, end) != records_in(new, start, end)
    return old, new, bases, leo


def crash_during_cleaning(root: Path, step: CleaningStep, group: int) -> Log:
    """Clean a fresh crash log, kill it after ``step`` of ``group``; returns the dead log."""
    clock = ManualClock()
    log = build_crash_log(root, clock)
    new_segments: list[LogSegment] = []
    with pytest.raises(SimulatedCrash):
        Cleaner(on_step=crash_at(step, group, new_segments)).clean(log, now_ms=clock.now_ms)
    crash(log)
    for segment in new_segments:
        abandon_segment(segment)
    return log


def check_recovered(
    directory: Path,
    old: list[Entry],
    new: list[Entry],
    bases: list[list[int]],
    leo: int,
    new_groups: int,
) -> None:
    """Each group's range holds exactly its old or its new records: the first ``new_groups``
    groups new, the others old; the log reads from its start and nothing is left over."""
    recovered = Log.open(directory, CRASH_CONFIG, clock=ManualClock())
    found = entries(recovered)
    bounds = [group[0] for group in bases] + [recovered.active_segment.base_offset]
    for index, (start, end) in enumerate(itertools.pairwise(bounds)):
        expected = new if index < new_groups else old
        assert records_in(found, start, end) == records_in(expected, start, end), index
    assert records_in(found, bounds[-1], leo) == records_in(old, bounds[-1], leo)
    assert fetched_entries(recovered) == found
    assert recovered.log_end_offset == leo
    assert leftovers(recovered.directory) == []
    recovered.close()


CRASH_POINTS = [
    (step, group)
    for step in CleaningStep
    for group in (0, 1)
    if step is not CleaningStep.CHECKPOINT_WRITTEN or group == 0  # written once per cleaning
]


@pytest.mark.parametrize("step, group", CRASH_POINTS)
def test_crash_at_any_step_recovers_old_or_new(
    tmp_path: Path, step: CleaningStep, group: int
) -> None:
    old, new, bases, leo = reference_run(tmp_path / "reference")
    log = crash_during_cleaning(tmp_path / "crashed", step, group)
    swapped = step not in (CleaningStep.CLEANED_WRITTEN, CleaningStep.CLEANED_FLUSHED)
    new_groups = len(bases) if step is CleaningStep.CHECKPOINT_WRITTEN else group + swapped
    check_recovered(log.directory, old, new, bases, leo, new_groups)


def _rename(directory: Path, name: str, new_name: str) -> None:
    os.replace(directory / name, directory / new_name)


def _half_swapped(directory: Path, bases: list[int]) -> None:
    """Inside change_file_suffix(".swap"): the offset index renamed, the rest still .cleaned."""
    name = segment_file_name(bases[0], ".index")
    _rename(directory, name + ".swap", name + ".cleaned")
    _rename(
        directory,
        segment_file_name(bases[0], ".log") + ".swap",
        segment_file_name(bases[0], ".log") + ".cleaned",
    )
    timeindex = segment_file_name(bases[0], ".timeindex")
    _rename(directory, timeindex + ".swap", timeindex + ".cleaned")
    _rename(directory, name + ".cleaned", name + ".swap")


def _old_partly_deleted(directory: Path, bases: list[int]) -> None:
    """Inside replace_segments: some of the old files already renamed .deleted."""
    for suffix in (".index", ".log"):
        name = segment_file_name(bases[0], suffix)
        _rename(directory, name, name + ".deleted")


def _new_indexes_renamed(directory: Path, bases: list[int]) -> None:
    """Inside replace_segments: old files all .deleted, the new indexes back to regular names."""
    for base in bases:
        for suffix in (".index", ".timeindex", ".log"):
            name = segment_file_name(base, suffix)
            _rename(directory, name, name + ".deleted")
    for suffix in (".index", ".timeindex"):
        name = segment_file_name(bases[0], suffix)
        _rename(directory, name + ".swap", name)


@pytest.mark.parametrize(
    "between, swapped",
    [(_half_swapped, False), (_old_partly_deleted, True), (_new_indexes_renamed, True)],
)
def test_crash_between_renames(
    tmp_path: Path, between: Callable[[Path, list[int]], None], swapped: bool
) -> None:
    old, new, bases, leo = reference_run(tmp_path / "reference")
    log = crash_during_cleaning(tmp_path / "crashed", CleaningStep.SWAP_RENAMED, 0)
    between(log.directory, bases[0])
    check_recovered(log.directory, old, new, bases, leo, int(swapped))
