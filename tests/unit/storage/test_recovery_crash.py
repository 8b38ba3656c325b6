"""Crash recovery: a killed broker's files, cut or corrupted anywhere, reopen to a valid prefix.

Every damaged log is compared with an independent oracle (``helpers.valid_prefix``: struct and
crc32c, none of the storage code) and with the bytes the test itself appended.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.compression import CompressionType
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.inspect import verify_partition_directory
from storage.log import Log
from storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
)
from storage.segment import LogSegment
from tests.unit.storage.helpers import (
    SMALL_SEGMENTS,
    as_stored,
    client_batch,
    crash,
    release_opened_logs,
    valid_prefix,
)

release_logs = pytest.fixture(autouse=True)(release_opened_logs)

CONFIG = SMALL_SEGMENTS
EPOCH = 2
CRASH_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# (values, codec) per batch; a few records each, so segments roll every 5-15 batches.
BATCHES = st.lists(
    st.tuples(
        st.lists(st.binary(max_size=60), min_size=1, max_size=4),
        st.sampled_from(list(CompressionType)),
    ),
    min_size=12,
    max_size=30,
)


def build_log(
    directory: Path, specs: list[tuple[list[bytes], CompressionType]], clock: ManualClock
) -> tuple[Log, list[bytes]]:
    """Append one batch per spec; returns the log and every batch as it must be stored."""
    log = Log.open(directory, CONFIG, clock=clock)
    stored = []
    for values, codec in specs:
        clock.advance(7)
        batch = client_batch(values, timestamp=clock.now_ms, compression=codec)
        first_offset = log.append_as_leader(batch, leader_epoch=EPOCH).first_offset
        stored.append(as_stored(batch, first_offset, EPOCH))
    return log, stored


def segment_batches(log: Log, stored: list[bytes]) -> list[list[bytes]]:
    """``stored`` split by segment, checking the files hold exactly those bytes."""
    by_segment, remaining = [], list(stored)
    for segment in log.segments:
        data = segment.log_path.read_bytes()
        batches = [batch.data for batch in valid_prefix(data, segment.base_offset)]
        assert batches == remaining[: len(batches)] and b"".join(batches) == data
        by_segment.append(batches)
        remaining = remaining[len(batches) :]
    assert not remaining
    return by_segment


def check_log_holds(log: Log, expected: list[list[bytes]]) -> None:
    """Segments hold exactly ``expected``; LEO follows; every offset reads its batch back."""
    assert len(log.segments) == len(expected)
    for segment, batches in zip(log.segments, expected, strict=True):
        assert segment.log_path.read_bytes() == b"".join(batches)
        for batch in valid_prefix(b"".join(batches), segment.base_offset):
            for offset in range(batch.base_offset, batch.next_offset):
                piece = log.read(offset, 1)
                assert piece is not None and piece.read() == batch.data
    active = log.segments[-1].base_offset
    tail = valid_prefix(b"".join(expected[-1]), active)
    assert log.log_end_offset == (tail[-1].next_offset if tail else active)


def append_close_verify(log: Log, clock: ManualClock) -> None:
    leo = log.log_end_offset
    batch = client_batch([b"after"], timestamp=clock.now_ms)
    assert log.append_as_leader(batch, leader_epoch=EPOCH).first_offset == leo
    piece = log.read(leo, 1)
    assert piece is not None and piece.read() == as_stored(batch, leo, EPOCH)
    log.close()
    assert verify_partition_directory(log.directory) == []


# -- damage to the active segment ----------------------------------------------------------------

PROTECTED = (range(8, 12), range(16, 2**31))  # batch_length, magic, CRC and what the CRC covers


def damage(path: Path, kind: str, data: st.DataObject) -> int:
    """Damage ``path`` in place; returns the first byte position that changed."""
    original = path.read_bytes()
    size = len(original)
    if kind == "truncate":
        cut = data.draw(st.integers(0, size - 1), label="cut")
        os.truncate(path, cut)
        return cut
    if kind == "overwrite":
        start = data.draw(st.integers(0, size - 1), label="start")
        noise = data.draw(st.binary(min_size=1, max_size=min(64, size - start)), label="noise")
        changed = bytearray(original)
        changed[start : start + len(noise)] = noise
        path.write_bytes(changed)
        return next((i for i in range(size) if changed[i] != original[i]), size)
    tail = data.draw(st.integers(1, 300), label="tail")
    noise = bytes(tail)
    if kind == "garbage":
        noise = data.draw(st.binary(min_size=tail, max_size=tail), label="garbage")
    with open(path, "ab") as handle:
        handle.write(noise)
    return size


@pytest.mark.parametrize("kind", ["truncate", "overwrite", "zero_tail", "garbage"])
@CRASH_SETTINGS
@given(specs=BATCHES, data=st.data())
def test_damaged_active_segment_recovers_to_the_longest_valid_prefix(
    kind: str, specs: list[tuple[list[bytes], CompressionType]], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as root:
        clock = ManualClock()
        log, stored = build_log(Path(root) / "t-0", specs, clock)
        expected = segment_batches(log, stored)
        active, leo = log.active_segment, log.log_end_offset
        crash(log)
        first_change = damage(active.log_path, kind, data)
        reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=False,
                            recovery_point=data.draw(st.integers(0, leo), label="recovery point"))
        survivors = valid_prefix(active.log_path.read_bytes(), active.base_offset)
        written = expected[-1]
        intact = 0  # batches wholly before the first changed byte
        while intact < len(written) and sum(map(len, written[: intact + 1])) <= first_change:
            intact += 1
        assert [b.data for b in survivors[:intact]] == written[:intact]
        assert len(survivors) >= intact
        if intact < len(written):
            inside = first_change - sum(map(len, written[:intact]))
            if kind == "truncate" or any(inside in r for r in PROTECTED):
                assert len(survivors) == intact, "nothing from the first damaged batch on survives"
        check_log_holds(reopened, [*expected[:-1], [b.data for b in survivors]])
        append_close_verify(reopened, clock)


def test_damage_outside_the_crc_is_not_detected_as_in_kafka(tmp_path: Path) -> None:
    """The partition leader epoch (bytes 12-15) is outside the CRC, as in Kafka: a flipped epoch
    survives recovery when the start-up verification is off; the batch is otherwise intact."""
    clock = ManualClock()
    log, stored = build_log(tmp_path / "t-0", [([b"a"], CompressionType.NONE)] * 3, clock)
    path = log.active_segment.log_path
    crash(log)
    data = bytearray(path.read_bytes())
    data[len(stored[0]) + 12] ^= 0x40  # second batch's leader epoch
    path.write_bytes(data)
    reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=False,
                        verify_on_startup="never")
    assert reopened.log_end_offset == 3
    assert path.read_bytes() == bytes(data)
    append_close_verify(reopened, clock)


def test_an_epoch_flipped_up_is_found_against_the_next_batch(tmp_path: Path) -> None:
    """With the start-up verification (Samsa's default after a crash) the flipped epoch is
    above the next batch's: either header may be the damaged one, so the log is cut before the
    earlier batch."""
    clock = ManualClock()
    log, stored = build_log(tmp_path / "t-0", [([b"a"], CompressionType.NONE)] * 3, clock)
    path = log.active_segment.log_path
    crash(log)
    data = bytearray(path.read_bytes())
    data[len(stored[0]) + 12] ^= 0x40  # second batch's leader epoch
    path.write_bytes(data)
    reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=False)
    assert reopened.log_end_offset == 1
    assert path.read_bytes() == stored[0]
    append_close_verify(reopened, clock)


# -- damage to older segments ----------------------------------------------------------------------


def flip_protected_byte(path: Path, batches: list[bytes], index: int, rng: random.Random) -> int:
    """Corrupt one CRC-covered byte of batch ``index`` of the file; returns its position."""
    start = sum(map(len, batches[:index]))
    position = start + rng.randrange(21, len(batches[index]))
    data = bytearray(path.read_bytes())
    data[position] ^= rng.randrange(1, 256)
    path.write_bytes(data)
    return position


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=BATCHES, data=st.data())
def test_damage_in_an_older_segment_above_the_recovery_point_truncates_there(
    specs: list[tuple[list[bytes], CompressionType]], data: st.DataObject
) -> None:
    """As Kafka: the damaged segment is cut at the bad batch and every later segment deleted."""
    with tempfile.TemporaryDirectory() as root:
        clock = ManualClock()
        log, stored = build_log(Path(root) / "t-0", specs * 2, clock)
        expected = segment_batches(log, stored)
        segments = log.segments
        k = data.draw(st.integers(0, len(segments) - 2), label="damaged segment")
        j = data.draw(st.integers(0, len(expected[k]) - 1), label="damaged batch")
        recovery_point = data.draw(st.integers(0, segments[k + 1].base_offset - 1))
        crash(log)
        rng = random.Random(data.draw(st.integers(0, 2**32), label="seed"))
        flip_protected_byte(segments[k].log_path, expected[k], j, rng)
        reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=False,
                            recovery_point=recovery_point)
        check_log_holds(reopened, [*expected[:k], expected[k][:j]])
        for later in segments[k + 1 :]:
            assert not later.log_path.exists()
            assert not later.offset_index.path.exists() and not later.time_index.path.exists()
        append_close_verify(reopened, clock)


def test_damage_below_the_recovery_point_is_trusted_not_scanned(tmp_path: Path) -> None:
    """Unclean shutdown, damage in a segment wholly below the recovery point, start-up
    verification off: not scanned (Kafka trusts flushed data). The bad batch stays, readers get
    it with its bad CRC, and ``samsa log verify`` is what finds it."""
    clock = ManualClock()
    specs = [([b"x" * 40, b"y" * 40], CompressionType.NONE)] * 30
    log, stored = build_log(tmp_path / "t-0", specs, clock)
    expected = segment_batches(log, stored)
    segments, leo = log.segments, log.log_end_offset
    assert len(segments) >= 3
    log.flush()
    crash(log)
    position = flip_protected_byte(segments[0].log_path, expected[0], 1, random.Random(7))
    damaged = segments[0].log_path.read_bytes()
    reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=False,
                        recovery_point=segments[1].base_offset, verify_on_startup="never")
    assert [s.base_offset for s in reopened.segments] == [s.base_offset for s in segments]
    assert reopened.log_end_offset == leo
    assert segments[0].log_path.read_bytes() == damaged
    bad = valid_prefix(expected[0][1], 0)[0]
    piece = reopened.read(bad.base_offset, 1)
    assert piece is not None and piece.read() != bad.data
    reopened.close()
    problems = verify_partition_directory(log.directory)
    assert [(p.path, p.position) for p in problems] == [
        (segments[0].log_path, len(expected[0][0]))
    ]
    assert "CRC mismatch" in problems[0].reason
    assert len(expected[0][0]) <= position < len(expected[0][0]) + len(expected[0][1])


def test_damage_below_the_recovery_point_is_cut_by_the_startup_verification(
    tmp_path: Path,
) -> None:
    """The same damage with ``samsa.log.verify.on.startup=unclean`` (the default): the log is
    cut before the bad batch, the later segments go, nothing corrupt is left to serve."""
    clock = ManualClock()
    specs = [([b"x" * 40, b"y" * 40], CompressionType.NONE)] * 30
    log, stored = build_log(tmp_path / "t-0", specs, clock)
    expected = segment_batches(log, stored)
    segments = log.segments
    log.flush()
    crash(log)
    flip_protected_byte(segments[0].log_path, expected[0], 1, random.Random(7))
    reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=False,
                        recovery_point=segments[1].base_offset)
    assert [s.base_offset for s in reopened.segments] == [0]
    assert segments[0].log_path.read_bytes() == expected[0][0]
    assert reopened.log_end_offset == 2
    reopened.close()
    assert verify_partition_directory(log.directory) == []


def test_damage_below_the_recovery_point_inside_its_segment_is_scanned(tmp_path: Path) -> None:
    """The segment holding the recovery point is scanned whole, as Kafka's recoverLog does."""
    clock = ManualClock()
    log, stored = build_log(tmp_path / "t-0", [([b"z" * 50], CompressionType.GZIP)] * 20, clock)
    expected = segment_batches(log, stored)
    segments = log.segments
    crash(log)
    flip_protected_byte(segments[1].log_path, expected[1], 1, random.Random(3))
    reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=False,
                        recovery_point=segments[1].base_offset + 3)
    check_log_holds(reopened, [expected[0], expected[1][:1]])
    append_close_verify(reopened, clock)


# -- index files ---------------------------------------------------------------------------------

INDEX_DAMAGE = ["delete", "partial_entry", "garbage", "preallocated"]
INDEX_CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=100, segment_index_bytes=2400,
                         retention_ms=-1, message_timestamp_after_max_ms=2**62)


def index_specs() -> list[tuple[int, bytes]]:
    """(timestamp skew, value) per batch: timestamps jump back and forth, as producers' do."""
    rng = random.Random(11)
    return [(rng.randrange(-3000, 3000), bytes(rng.randrange(20, 120))) for _ in range(60)]


def build_index_log(directory: Path, clock: ManualClock) -> Log:
    log = Log.open(directory, INDEX_CONFIG, clock=clock)
    start = clock.now_ms
    for n, (skew, value) in enumerate(index_specs()):
        log.append_as_leader(client_batch([value, value], timestamp=start + 10 * n + skew))
    return log


def damage_index(path: Path, kind: str) -> None:
    size = path.stat().st_size
    if kind == "delete":
        path.unlink()
    elif kind == "partial_entry":
        os.truncate(path, size - 3 if size >= 8 else 5)
    elif kind == "garbage":
        path.write_bytes(random.Random(path.name).randbytes(max(size, 96)))
    else:  # a crash before the trim at roll/close: the zero-filled preallocated tail remains
        os.truncate(path, INDEX_CONFIG.segment_index_bytes)


def index_entries(segment: LogSegment) -> tuple[list[object], list[object]]:
    offsets = [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)]
    times = [segment.time_index.entry(n) for n in range(segment.time_index.entries)]
    return offsets, times


def assert_same_answers(log: Log, reference: Log, now_ms: int) -> None:
    assert log.log_end_offset == reference.log_end_offset
    for segment, twin in zip(log.segments, reference.segments, strict=True):
        assert index_entries(segment) == index_entries(twin)
        for offset in range(segment.base_offset, segment.next_offset() + 1):
            assert segment.offset_index.lookup(offset) == twin.offset_index.lookup(offset)
    for offset in range(log.log_end_offset):
        for max_bytes in (1, 700):
            a, b = log.read(offset, max_bytes), reference.read(offset, max_bytes)
            assert a is not None and b is not None and a.read() == b.read()
    for timestamp in [*range(now_ms - 3500, now_ms + 4200, 37), -1, -2, -3]:
        assert log.offset_for_timestamp(timestamp) == reference.offset_for_timestamp(timestamp)


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("which", [0, 1, -1], ids=["first", "middle", "active"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("kind", INDEX_DAMAGE)
def test_damaged_index_is_rebuilt(
    tmp_path: Path, kind: str, suffix: str, which: int, clean: bool
) -> None:
    clock = ManualClock()
    reference = build_index_log(tmp_path / "ref-0", clock)
    reference.close()
    reference = Log.open(reference.directory, INDEX_CONFIG, clock=clock, had_clean_shutdown=True)
    log = build_index_log(tmp_path / "t-0", clock)
    assert len(log.segments) >= 3
    segment = log.segments[which]
    log.close() if clean else crash(log)
    damage_index(segment.log_path.with_suffix(suffix), kind)
    reopened = Log.open(log.directory, INDEX_CONFIG, clock=clock, had_clean_shutdown=clean,
                        recovery_point=0 if clean else log.segments[-1].base_offset)
    assert_same_answers(reopened, reference, clock.now_ms)
    reopened.close()
    reference.close()
    assert verify_partition_directory(log.directory) == []


# -- checkpoint files (via the log manager) ------------------------------------------------------

MANGLED = {
    "garbage": (b"\x00\xff\x13garbage", 1),
    "no_final_newline": (b"0\n1\nt 0 5", 3),
    "count_mismatch": (b"0\n3\nt 0 5\n", 2),
    "bad_offset": (b"0\n1\nt 0 five\n", 3),
    "bad_version": (b"7\n1\nt 0 5\n", 1),
}


def crashed_manager_dir(root: Path, clock: ManualClock) -> tuple[Path, dict[str, bytes]]:
    """A log dir whose broker checkpointed, appended more and was killed; its segment bytes."""
    manager = LogManager([root], default_config=CONFIG, clock=clock)
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    for n in range(40):
        log.append_as_leader(client_batch([b"v%d" % n] * 3, timestamp=clock.now_ms))
        if n == 20:
            log.flush()
            manager.checkpoint()
    crash(log)
    return root, {p.name: p.read_bytes() for p in sorted(log.directory.iterdir())}


@pytest.mark.parametrize("name", [RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT])
@pytest.mark.parametrize("mangling", sorted(MANGLED))
def test_corrupt_checkpoint_is_named_and_recovery_falls_back(
    tmp_path: Path, name: str, mangling: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As Kafka: a corrupt checkpoint is logged (file and line) and ignored; the recovery point
    falls back to a full scan, the log start offset to the first segment. No data is lost."""
    clock = ManualClock()
    root, before = crashed_manager_dir(tmp_path / "d0", clock)
    content, line = MANGLED[mangling]
    (root / name).write_bytes(content)
    manager = LogManager([root], default_config=CONFIG, clock=clock)
    with caplog.at_level("WARNING", logger="samsa.storage.log_manager"):
        manager.startup()
    assert f"{root / name}, line {line}" in caplog.text
    log = manager.get_log("t", 0)
    assert log is not None and log.log_end_offset == 120 and log.log_start_offset == 0
    segment_names = {n for n in before if n.endswith(".log")}
    assert all((root / "t-0" / n).read_bytes() == before[n] for n in segment_names)
    manager.shutdown()


@pytest.mark.parametrize("content", [None, b""], ids=["missing", "empty"])
def test_missing_or_empty_recovery_checkpoint_means_full_recovery(
    tmp_path: Path, content: bytes | None
) -> None:
    clock = ManualClock()
    root, _ = crashed_manager_dir(tmp_path / "d0", clock)
    path = root / RECOVERY_POINT_CHECKPOINT
    path.unlink()
    if content is not None:
        path.write_bytes(content)
    first = root / "t-0" / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    data[-5] ^= 0xFF  # only a scan from offset 0 can find this
    first.write_bytes(data)
    manager = LogManager([root], default_config=CONFIG, clock=clock)
    manager.startup()
    log = manager.get_log("t", 0)
    assert log is not None and len(log.segments) == 1
    assert log.log_end_offset == valid_prefix(bytes(data), 0)[-1].next_offset
    manager.shutdown()
    assert (root / CLEAN_SHUTDOWN_FILE).exists()


# -- leftovers of interrupted operations ---------------------------------------------------------


def closed_log(directory: Path, clock: ManualClock) -> tuple[Log, list[list[bytes]]]:
    log, stored = build_log(directory, [([b"q" * 30] * 2, CompressionType.NONE)] * 24, clock)
    expected = segment_batches(log, stored)
    log.close()
    assert len(expected) >= 3
    return log, expected


def copy_segment(directory: Path, base: int, suffix: str, *, from_base: int | None = None) -> None:
    stem = f"{from_base if from_base is not None else base:020d}"
    for extension in (".log", ".index", ".timeindex"):
        shutil.copy(directory / f"{stem}{extension}", directory / f"{base:020d}{extension}{suffix}")


def reopen(log: Log, clock: ManualClock) -> Log:
    return Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=True)


def assert_no_leftovers(directory: Path) -> None:
    assert not [p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap",
                                                                    ".deleted", ".tmp")]


@pytest.mark.parametrize("suffix", [".deleted", ".cleaned", ".tmp"])
def test_deleted_cleaned_and_tmp_files_are_removed(tmp_path: Path, suffix: str) -> None:
    clock = ManualClock()
    log, expected = closed_log(tmp_path / "t-0", clock)
    first = log.segments[1].base_offset
    copy_segment(log.directory, first, suffix, from_base=0)
    if suffix == ".tmp":
        (log.directory / "leader-epoch-checkpoint.tmp").write_bytes(b"0\n1\n")
    reopened = reopen(log, clock)
    assert_no_leftovers(log.directory)
    check_log_holds(reopened, expected)
    append_close_verify(reopened, clock)


def test_swap_with_a_matching_cleaned_file_is_dropped(tmp_path: Path) -> None:
    """A cleaning that had not renamed all its files to .swap: the originals are still whole."""
    clock = ManualClock()
    log, expected = closed_log(tmp_path / "t-0", clock)
    (log.directory / "00000000000000000000.log.swap").write_bytes(b"".join(expected[0][:1]))
    (log.directory / "00000000000000000000.index.cleaned").write_bytes(b"")
    reopened = reopen(log, clock)
    assert_no_leftovers(log.directory)
    check_log_holds(reopened, expected)
    append_close_verify(reopened, clock)


def test_swap_without_cleaned_completes_and_replaces_the_segments_it_covers(
    tmp_path: Path,
) -> None:
    """A cleaning that reached the swap step: its segment replaces the first two segments,
    whose offsets it covers; later segments are untouched."""
    clock = ManualClock()
    log, expected = closed_log(tmp_path / "t-0", clock)
    cleaned = expected[0][1:] + expected[1]  # the "cleaner" dropped the first batch
    directory = log.directory
    (directory / "00000000000000000000.log.swap").write_bytes(b"".join(cleaned))
    (directory / "00000000000000000000.index.swap").write_bytes(b"\x00" * 24)
    for extension in (".log", ".index", ".timeindex"):  # the first original renamed, not the 2nd
        os.replace(directory / f"{0:020d}{extension}", directory / f"{0:020d}{extension}.deleted")
    reopened = reopen(log, clock)
    assert_no_leftovers(directory)
    assert reopened.log_start_offset == 0
    check_log_holds(reopened, [cleaned, *expected[2:]])
    append_close_verify(reopened, clock)


def test_orphaned_index_files_are_removed(tmp_path: Path) -> None:
    """A crash inside ``mark_deleted`` after the ``.log`` was renamed leaves its indexes."""
    clock = ManualClock()
    log, expected = closed_log(tmp_path / "t-0", clock)
    first = log.segments[0]
    os.replace(first.log_path, f"{first.log_path}.deleted")
    reopened = reopen(log, clock)
    assert reopened.segments[0].base_offset == log.segments[1].base_offset
    assert not first.offset_index.path.exists() and not first.time_index.path.exists()
    check_log_holds(reopened, expected[1:])
    reopened.close()
