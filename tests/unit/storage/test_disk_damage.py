"""Disk damage at any byte (issue 13, G8): one bit flipped or a file cut short in a closed
segment, an index or a checkpoint of a stopped broker. Loading must give a valid prefix of what
was written or report the file and position, and never a record that differs from the original.

The oracle is the bytes the test appended (``as_stored``), compared byte for byte; nothing here
uses the verification code to judge the verification code.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.records import decode_batch
from storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from storage.clock import ManualClock
from storage.errors import CorruptCheckpointError
from storage.log import Log
from storage.log_manager import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, LogManager
from storage.verification import find_damage, should_verify
from tests.unit.storage.helpers import (
    SMALL_SEGMENTS,
    as_stored,
    client_batch,
    crash,
    release_opened_logs,
)

release_logs = pytest.fixture(autouse=True)(release_opened_logs)

CONFIG = SMALL_SEGMENTS
DAMAGE_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
BATCHES = 36
EPOCHS = (0, 0, 0, 1, 1, 4)  # per block of six batches: epochs go up along the log


def build(directory: Path, clock: ManualClock, *, epoch_changes: bool = False) -> tuple[Log, list[bytes]]:
    """A log of several segments, the active one not empty; every batch as stored."""
    log = Log.open(directory, CONFIG, clock=clock)
    stored = []
    for n in range(BATCHES):
        clock.advance(5)
        epoch = EPOCHS[n * len(EPOCHS) // BATCHES] if epoch_changes else 0
        batch = client_batch([b"value-%03d-" % n + b"x" * (n % 7) * 9] * (1 + n % 3),
                             timestamp=clock.now_ms)
        first_offset = log.append_as_leader(batch, leader_epoch=epoch).first_offset
        stored.append(as_stored(batch, first_offset, epoch))
    assert len(log.segments) >= 4 and log.active_segment.size > 0
    return log, stored


def log_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def kept_bytes(directory: Path) -> bytes:
    return b"".join(path.read_bytes() for path in log_files(directory))


def batch_starts(stored: list[bytes]) -> list[int]:
    starts, position = [], 0
    for batch in stored:
        starts.append(position)
        position += len(batch)
    return [*starts, position]


def damage_file(path: Path, data: st.DataObject) -> int:
    """Flip one bit or cut the file, at a position hypothesis picks; returns that position."""
    size = path.stat().st_size
    position = data.draw(st.integers(0, size - 1), label="position")
    if data.draw(st.booleans(), label="truncate"):
        os.truncate(path, position)
    else:
        bit = data.draw(st.integers(0, 7), label="bit")
        with open(path, "r+b") as handle:
            old = os.pread(handle.fileno(), 1, position)[0]
            os.pwrite(handle.fileno(), bytes([old ^ (1 << bit)]), position)
    return position


def assert_reads_are_original(log: Log, stored: list[bytes]) -> None:
    """Every offset reads back as the original batch holding it, byte for byte."""
    originals = {}
    for raw in stored:
        batch = decode_batch(raw)
        for record in batch.records:
            originals[record.offset] = raw
    for offset in range(log.log_start_offset, log.log_end_offset):
        piece = log.read(offset, 1, min_one_message=True)
        assert piece is not None
        data = piece.read()
        assert data == originals[offset], f"offset {offset} reads a different batch"


# -- closed segments ------------------------------------------------------------------------------


@DAMAGE_SETTINGS
@given(data=st.data())
def test_damage_anywhere_in_a_closed_segment_leaves_a_valid_prefix_and_is_reported(
    tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture,
    data: st.DataObject,
) -> None:
    root = tmp_path_factory.mktemp("segment")
    clock = ManualClock()
    log, stored = build(root / "t-0", clock)
    leo = log.log_end_offset
    closed = log_files(log.directory)[:-1]
    crash(log)
    which = data.draw(st.integers(0, len(closed) - 1), label="segment")
    before = sum(path.stat().st_size for path in closed[:which])
    damaged_at = before + damage_file(closed[which], data)
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="samsa.storage.log"):
        reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=False,
                            recovery_point=leo)
    original = b"".join(stored)
    kept = kept_bytes(log.directory)
    starts = batch_starts(stored)
    assert original.startswith(kept) and len(kept) in starts, "not a prefix of whole batches"
    first_damaged = max(start for start in starts if start <= damaged_at)
    assert len(kept) <= first_damaged, "a damaged batch was kept"
    assert "corrupt log data" in caplog.text and "position" in caplog.text
    kept_count = starts.index(len(kept))
    last = decode_batch(stored[kept_count - 1]).last_offset if kept_count else -1
    assert reopened.log_end_offset == last + 1
    assert_reads_are_original(reopened, stored)
    appended = reopened.append_as_leader(client_batch([b"after"], timestamp=clock.now_ms))
    assert appended.first_offset == reopened.log_end_offset - 1
    reopened.close()


def test_a_segment_cut_at_a_batch_boundary_is_found_by_its_time_index(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Rule 7: the cut leaves whole batches, the CRCs all pass; the closed segment's time
    index still names its last batch, so the loss is found and the later segments go."""
    clock = ManualClock()
    log, stored = build(tmp_path / "t-0", clock)
    first = log.segments[0]
    first_batches = [b for b in stored if decode_batch(b).base_offset < log.segments[1].base_offset]
    crash(log)
    os.truncate(first.log_path, sum(map(len, first_batches[:-1])))
    with caplog.at_level(logging.ERROR, logger="samsa.storage.log"):
        reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=True,
                            verify_on_startup="always")
    assert "the end of the segment was cut off" in caplog.text
    assert [s.base_offset for s in reopened.segments] == [0]
    assert kept_bytes(log.directory) == b"".join(first_batches[:-1])
    reopened.close()


def test_an_epoch_flipped_down_is_found_against_the_previous_batch(tmp_path: Path) -> None:
    clock = ManualClock()
    log, stored = build(tmp_path / "t-0", clock, epoch_changes=True)
    crash(log)
    position = sum(map(len, stored[:-2]))  # a batch of epoch 4, after one of epoch 4
    path = log.active_segment.log_path
    offset_in_file = position - sum(p.stat().st_size for p in log_files(log.directory)[:-1])
    with open(path, "r+b") as handle:
        os.pwrite(handle.fileno(), (1).to_bytes(4, "big"), offset_in_file + 12)
    reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=False)
    assert kept_bytes(log.directory) == b"".join(stored[:-3])  # cut before the earlier one
    assert [e.epoch for e in reopened.leader_epoch_cache.entries] == [0, 1, 4]
    reopened.close()


@pytest.mark.parametrize(("mode", "clean", "verified"), [
    ("unclean", False, True), ("unclean", True, False), ("always", True, True),
    ("never", False, False),
])
def test_when_the_startup_verification_runs(mode: str, clean: bool, verified: bool) -> None:
    assert should_verify(mode, had_clean_shutdown=clean) is verified


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match=r"samsa\.log\.verify\.on\.startup"):
        should_verify("sometimes", had_clean_shutdown=True)


def test_an_intact_log_passes(tmp_path: Path) -> None:
    log, _ = build(tmp_path / "t-0", ManualClock(), epoch_changes=True)
    assert find_damage(log.segments) is None
    log.close()


# -- indexes --------------------------------------------------------------------------------------


def answers(log: Log, now_ms: int) -> tuple[list[bytes], list[object]]:
    reads = []
    for offset in range(log.log_end_offset):
        piece = log.read(offset, 700)
        assert piece is not None
        reads.append(piece.read())
    times = [log.offset_for_timestamp(t) for t in range(now_ms - 300, now_ms + 20, 3)]
    return reads, times


@DAMAGE_SETTINGS
@given(data=st.data())
def test_damage_anywhere_in_an_index_never_changes_an_answer(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """A flipped entry that still looks ordered can point at a wrong position or offset: it is
    caught at its first use (checked against the log) and the indexes rebuilt. Clean shutdown
    and no start-up verification: the case where the index files are trusted the most."""
    root = tmp_path_factory.mktemp("index")
    clock = ManualClock()
    log, _ = build(root / "t-0", clock)
    log.close()
    reference_dir = root / "reference-0"
    shutil.copytree(log.directory, reference_dir)
    reference = Log.open(reference_dir, CONFIG, clock=clock, had_clean_shutdown=True)
    expected = answers(reference, clock.now_ms)
    reference.close()
    suffix = data.draw(st.sampled_from([".index", ".timeindex"]), label="suffix")
    files = [p for p in sorted(log.directory.glob(f"*{suffix}")) if p.stat().st_size > 0]
    target = data.draw(st.sampled_from(files), label="file")
    damage_file(target, data)
    reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=True,
                        verify_on_startup="never")
    assert answers(reopened, clock.now_ms) == expected
    reopened.close()


def test_an_index_entry_moved_to_another_batch_is_caught_at_use(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An entry whose position is moved to a later batch start (still ordered, still a batch):
    a lookup would skip records. The first use finds the batch there starts past the entry's
    offset; the indexes are rebuilt and the ERROR names the index file."""
    clock = ManualClock()
    log, stored = build(tmp_path / "t-0", clock)
    segment = log.segments[0]
    entries = [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)]
    assert len(entries) >= 2
    log.close()
    _, later_position = entries[1]
    with open(segment.offset_index.path, "r+b") as handle:
        os.pwrite(handle.fileno(), later_position.to_bytes(4, "big"), 4)
    reopened = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=True,
                        verify_on_startup="never")
    with caplog.at_level(logging.ERROR, logger="samsa.storage.log"):
        assert_reads_are_original(reopened, stored)
    assert f"{segment.offset_index.path}: entry" in caplog.text
    reopened.close()


# -- checkpoints ----------------------------------------------------------------------------------


@DAMAGE_SETTINGS
@given(data=st.data())
def test_damage_anywhere_in_a_checkpoint_never_yields_a_different_record(
    tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture,
    data: st.DataObject,
) -> None:
    """A malformed checkpoint is reported (file, line) and replaced by a safe value; one that
    is still well-formed (a digit turned into another) may move the log start (Kafka's
    checkpoints carry no checksum), but every record served is still the original one and the
    leader epoch cache still matches the batches."""
    root = tmp_path_factory.mktemp("checkpoint")
    clock = ManualClock()
    manager = LogManager([root], default_config=CONFIG, clock=clock)
    manager.startup()
    log, stored = build(root / "t-0", clock, epoch_changes=True)
    manager.add_log(log)
    manager.checkpoint()
    expected_epochs = log.leader_epoch_cache.entries
    crash(log)
    name = data.draw(st.sampled_from(
        [RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, f"t-0/{LEADER_EPOCH_CHECKPOINT}"]),
        label="file")
    damage_file(root / name, data)
    reader = (LeaderEpochCheckpointFile if name.endswith(LEADER_EPOCH_CHECKPOINT)
              else OffsetCheckpointFile)(root / name)
    try:
        reader.read()
        malformed = False
    except CorruptCheckpointError:
        malformed = True
    caplog.clear()
    restarted = LogManager([root], default_config=CONFIG, clock=clock)
    with caplog.at_level(logging.WARNING):
        restarted.startup()
    reopened = restarted.get_log("t", 0)
    assert reopened is not None
    assert_reads_are_original(reopened, stored)
    if reopened.log_end_offset > reopened.log_start_offset:
        assert reopened.leader_epoch_cache.latest_epoch == expected_epochs[-1].epoch
    if malformed:
        assert f"{root / name}, line" in caplog.text
    restarted.shutdown()
