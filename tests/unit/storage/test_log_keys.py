"""Per-key reads of a real ``Log`` (storage.log_keys): they equal a filtered full scan, and
``last_offset_of_key`` equals a brute-force search, over random segment layouts, rolls,
compaction, retention, truncation, restarts (clean and crashed) and damaged key index files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.compression import CompressionType
from protocol.records import Record, encode_batch, iter_batches
from storage.cleaner import Cleaner
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.key_index import KeyIndex, key_hash, read_key_index, write_key_index
from storage.log import Log
from storage.log_keys import build_key_index
from tests.unit.storage.helpers import crash, release_opened_logs

release_opened_logs = pytest.fixture(autouse=True)(release_opened_logs)

CONFIG = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=700,
    index_interval_bytes=100,
    segment_index_bytes=64 * 12,
    retention_ms=-1,
    message_timestamp_after_max_ms=2**62,
    file_delete_delay_ms=0,
)
KEYS = [b"a", b"b", b"c", b"d", b"", None]
Entry = tuple[int, bytes | None, bytes | None]


def append(log: Log, clock: ManualClock, pairs: list[tuple[bytes | None, bytes]],
           codec: CompressionType = CompressionType.NONE) -> None:
    start = log.log_end_offset
    records = [Record(offset=start + i, timestamp=clock.now_ms, key=key, value=value)
               for i, (key, value) in enumerate(pairs)]
    log.append_as_follower(encode_batch(records, base_offset=start, compression=codec))
    clock.advance(1)


def full_scan(log: Log, start: int = -1) -> list[Entry]:
    """Every record from ``start`` (default: the log start), read as a consumer does."""
    result: list[Entry] = []
    offset = max(start, log.log_start_offset)
    first = offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, 500)
        assert fetched is not None
        for batch in iter_batches(fetched.read(), allow_partial_tail=True):
            if not batch.is_control:
                result.extend((r.offset, r.key, r.value) for r in batch.records if r.offset >= first)
            offset = batch.next_offset
    return result


def key_read(log: Log, key: bytes, start: int, max_bytes: int = 200) -> list[Entry]:
    """Every record of ``key`` from ``start`` through ``Log.read_key``, page by page."""
    result: list[Entry] = []
    offset = start
    while offset < log.log_end_offset:
        read = log.read_key(key, offset, max_bytes)
        assert read.next_offset > offset, "a key read made no progress"
        for batch in iter_batches(read.records):
            result.extend((r.offset, r.key, r.value) for r in batch.records
                          if r.key == key and r.offset >= start)
        offset = read.next_offset
    return result


def check(log: Log, start_fraction: float) -> None:
    scan = full_scan(log)
    start = log.log_start_offset + int((log.log_end_offset - log.log_start_offset) * start_fraction)
    for key in KEYS:
        if key is None:
            continue
        expected = [entry for entry in scan if entry[1] == key and entry[0] >= start]
        assert key_read(log, key, start) == expected, f"key {key!r} from {start}"
        newest = max((entry[0] for entry in scan if entry[1] == key), default=-1)
        assert log.last_offset_of_key(key) == newest, f"last offset of {key!r}"


def damage_a_key_index(log: Log, where: float) -> None:
    files = sorted(log.directory.glob("*.keyindex"))
    if files:
        path = files[int(where * len(files)) % len(files)]
        data = bytearray(path.read_bytes())
        cut = int(where * len(data))
        if int(where * 1000) % 2:
            path.write_bytes(bytes(data[:cut]))
        else:
            data[cut % len(data)] ^= 0x5A
            path.write_bytes(bytes(data))


batch = st.tuples(
    st.lists(st.tuples(st.sampled_from(KEYS), st.binary(min_size=1, max_size=30)),
             min_size=1, max_size=8),
    st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4]),
)
operation = st.one_of(
    st.tuples(st.just("append"), batch),
    st.tuples(st.just("append"), batch),
    st.tuples(st.just("append"), batch),
    st.tuples(st.sampled_from(["roll", "clean", "restart", "crash", "write_key_indexes", "prepare"]),
              st.none()),
    st.tuples(st.just("check"), st.floats(0, 1)),
    st.tuples(st.sampled_from(["check", "truncate", "retention", "damage"]), st.floats(0, 1)),
)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(operations=st.lists(operation, min_size=5, max_size=60))
def test_key_reads_equal_a_filtered_full_scan(
    tmp_path_factory: pytest.TempPathFactory, operations: list[tuple[str, object]]
) -> None:
    directory = tmp_path_factory.mktemp("keys") / "t-0"
    clock = ManualClock()
    log = Log.open(directory, CONFIG, clock=clock)
    for name, argument in operations:
        log = apply(log, directory, clock, name, argument)
    check(log, 0.0)
    check(log, 0.5)


def apply(log: Log, directory: Path, clock: ManualClock, name: str, argument: object) -> Log:
    if name == "append":
        pairs, codec = argument  # type: ignore[misc]
        append(log, clock, pairs, codec)
    elif name == "roll":
        log.roll()
    elif name == "clean":
        Cleaner().clean(log, now_ms=clock.now_ms)
    elif name == "write_key_indexes":
        log.write_key_indexes()
    elif name == "prepare":
        log.prepare_key_reads(log.log_start_offset)
        assert log.key_reads_prepared(log.log_start_offset)
    elif name in ("restart", "crash"):
        if name == "restart":
            log.close()
        else:
            crash(log)
        log = Log.open(directory, CONFIG, clock=clock, had_clean_shutdown=name == "restart")
    elif name == "check":
        check(log, float(argument))  # type: ignore[arg-type]
    elif name == "truncate":
        boundaries = [h.base_offset for _, _, h in log.batches(log.log_start_offset)]
        if boundaries:
            log.truncate_to(boundaries[int(float(argument) * (len(boundaries) - 1))])  # type: ignore[arg-type]
    elif name == "retention":
        target = log.log_start_offset + int(
            (log.log_end_offset - log.log_start_offset) * float(argument))  # type: ignore[arg-type]
        log.increment_log_start_offset(target)
        log.delete_old_segments()
    elif name == "damage":
        damage_a_key_index(log, float(argument))  # type: ignore[arg-type]
        log.close()
        log = Log.open(directory, CONFIG, clock=clock, had_clean_shutdown=True)
    return log


# -- targeted cases -------------------------------------------------------------------------------


def filled_log(tmp_path: Path, batches: int = 40) -> tuple[Log, ManualClock]:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", CONFIG, clock=clock)
    for number in range(batches):
        append(log, clock, [(KEYS[number % 4], b"v%d" % number), (b"other", b"x")])
    return log, clock


def test_key_index_files_are_written_at_rolls_once_the_log_is_read_by_key(tmp_path: Path) -> None:
    log, clock = filled_log(tmp_path)
    assert len(log.segments) > 2
    assert not list(log.directory.glob("*.keyindex"))  # nobody read by key: nothing written
    key_read(log, b"a", 0)
    sealed = log.segments[:-1]
    assert sorted(p.name for p in log.directory.glob("*.keyindex")) == [
        s.key_index_path.name for s in sealed]
    bases = {s.base_offset for s in log.segments}
    while len(log.segments) == len(bases):
        append(log, clock, [(b"a", b"new")])
    assert log.write_key_indexes() == 1  # the segment that just stopped being active
    newest_sealed = log.segments[-2]
    written = read_key_index(newest_sealed.key_index_path, base_offset=newest_sealed.base_offset,
                             covered_bytes=newest_sealed.size)
    assert written is not None and written.positions_of(key_hash(b"a"))


def test_retention_and_truncation_take_key_index_files_with_them(tmp_path: Path) -> None:
    log, _ = filled_log(tmp_path)
    key_read(log, b"b", 0)
    first, second = log.segments[0], log.segments[1]
    log.increment_log_start_offset(second.base_offset)
    regular = first.key_index_path
    log.delete_old_segments()
    assert not regular.exists() and first.key_index_path.name.endswith(".keyindex.deleted")
    assert first.key_index_path.exists()
    log.purge_deleted_segments()
    assert not first.key_index_path.exists()
    last_sealed = log.segments[-2]
    log.truncate_to(last_sealed.base_offset + 1)
    assert not last_sealed.key_index_path.exists()
    check(log, 0.0)


def test_a_damaged_key_index_is_rebuilt_and_reads_stay_correct(tmp_path: Path) -> None:
    """Cut at every byte, or one byte flipped anywhere: after a restart the file is not
    used, reads equal the full scan, and the file is written again, byte for byte."""
    log, clock = filled_log(tmp_path, batches=16)
    check(log, 0.0)
    path = log.segments[0].key_index_path
    data = path.read_bytes()
    damaged = [data[:cut] for cut in range(len(data))] + [
        data[:where] + bytes([data[where] ^ 0x41]) + data[where + 1:] for where in range(len(data))]
    for version in damaged:
        log.close()
        path.write_bytes(version)
        log = Log.open(tmp_path / "t-0", CONFIG, clock=clock, had_clean_shutdown=True)
        check(log, 0.0)
        assert path.read_bytes() == data, f"not rebuilt after damage {version.hex()}"


def test_reads_are_bounded_by_max_offset_and_max_bytes(tmp_path: Path) -> None:
    log, _ = filled_log(tmp_path)
    high_watermark = 30
    read = log.read_key(b"a", 0, 10**6, max_offset=high_watermark)
    offsets = [r.offset for b in iter_batches(read.records) for r in b.records if r.key == b"a"]
    assert offsets == [o for o, k, _ in full_scan(log) if k == b"a" and o < high_watermark]
    assert read.next_offset == high_watermark
    one = log.read_key(b"a", 0, 1)
    assert len(one.batches) == 1  # at least one batch, however small max_bytes
    assert one.next_offset == 8  # the next candidate batch of b"a" (the 5th): gaps are skipped
    assert log.read_key(b"nobody", 0, 100).batches == ()


def test_a_log_never_read_by_key_decodes_nothing_on_append(tmp_path: Path) -> None:
    log, _clock = filled_log(tmp_path, batches=5)
    assert not log.keys.in_use
    key_read(log, b"a", 0)
    assert log.keys.in_use
    log.truncate_to(1)
    assert not log.keys.in_use  # rebuilt by the next key read
    assert os.path.exists(log.directory)


def test_compaction_keeps_key_indexes(tmp_path: Path) -> None:
    log, clock = filled_log(tmp_path)
    check(log, 0.0)
    before = {p.name for p in log.directory.glob("*.keyindex")}
    Cleaner().clean(log, now_ms=clock.now_ms)
    log.purge_deleted_segments()
    sealed = log.segments[:-1]
    assert all(read_key_index(s.key_index_path, base_offset=s.base_offset, covered_bytes=s.size)
               is not None for s in sealed), "a cleaned segment lost its key index"
    assert {p.name for p in log.directory.glob("*.keyindex")} <= before | {
        s.key_index_path.name for s in sealed}
    assert not list(log.directory.glob("*.keyindex.*"))
    check(log, 0.0)


def test_hash_collisions_give_candidates_and_last_offset_stays_exact(tmp_path: Path) -> None:
    """A key index that names every batch for b"a" (as if every key hashed like it): reads
    return more candidates, never fewer records, and last_offset_of_key decodes to the truth."""
    log, clock = filled_log(tmp_path)
    check(log, 0.0)
    sealed = log.segments[0]
    true_entries = set(build_key_index(sealed).entries())
    everything = true_entries | {(key_hash(b"a"), p) for p, _ in sealed.scan_headers()}
    log.close()
    write_key_index(sealed.key_index_path, KeyIndex.from_entries(
        sealed.base_offset, sealed.size, everything))
    log = Log.open(tmp_path / "t-0", CONFIG, clock=clock, had_clean_shutdown=True)
    candidates = log.read_key(b"a", 0, 10**6, max_offset=log.segments[1].base_offset)
    assert len(candidates.batches) == len(list(sealed.scan_headers()))  # most without b"a"
    check(log, 0.0)
    only_others = true_entries | {  # b"c" also named by the batches of b"a" (offsets 0, 8, ...)
        (key_hash(b"c"), position) for position, header in sealed.scan_headers()
        if header.base_offset % 8 == 0}
    log.close()
    write_key_index(sealed.key_index_path, KeyIndex.from_entries(
        sealed.base_offset, sealed.size, only_others))
    log = Log.open(tmp_path / "t-0", CONFIG, clock=clock, had_clean_shutdown=True)
    check(log, 0.0)
    log.truncate_to(log.segments[1].base_offset)
    newest_c = max(o for o, k, _ in full_scan(log) if k == b"c")
    assert newest_c % 8 == 4  # the newest candidate (a batch of b"a", offset + 4) is skipped
    assert log.last_offset_of_key(b"c") == newest_c
