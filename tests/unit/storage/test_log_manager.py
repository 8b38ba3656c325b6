"""The log manager: log.dirs placement, clean and unclean restarts, flush policy, deletion, and
sticky I/O errors that take one directory offline."""

from __future__ import annotations

import contextlib
import os
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from protocol.errors import KafkaStorageError
from protocol.records import Record, encode_batch
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
from tests.unit.storage.helpers import (
    break_fd,
    client_batch,
    crash,
    release_opened_logs,
    valid_prefix,
)

release_logs = pytest.fixture(autouse=True)(release_opened_logs)

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=600, message_timestamp_after_max_ms=2**62, retention_ms=-1)
ONE_SEGMENT = LogConfig(message_timestamp_after_max_ms=2**62)


def start(
    dirs: list[Path], clock: ManualClock, config: LogConfig = CONFIG, verify: str = "unclean"
) -> LogManager:
    manager = LogManager(dirs, default_config=config, clock=clock, verify_on_startup=verify)
    manager.startup()
    return manager


def fill(log: Log, batches: int, *, records: int = 2) -> None:
    for n in range(batches):
        log.append_as_leader(client_batch([b"value-%d" % n] * records, timestamp=NOW + n))


def crash_all(manager: LogManager) -> None:
    for log in manager.logs.values():
        crash(log)


def log_of(manager: LogManager, topic: str, partition: int) -> Log:
    log = manager.get_log(topic, partition)
    assert log is not None
    return log


# -- placement -----------------------------------------------------------------------------------


def test_partitions_go_to_the_least_loaded_directory(tmp_path: Path) -> None:
    dirs = [tmp_path / name for name in ("d0", "d1", "d2")]
    clock = ManualClock(NOW)
    manager = start(dirs, clock)
    for partition in range(7):
        manager.get_or_create_log("t", partition)
    placed = {p: log_of(manager, "t", p).directory.parent.name for p in range(7)}
    assert placed == {0: "d0", 1: "d1", 2: "d2", 3: "d0", 4: "d1", 5: "d2", 6: "d0"}
    manager.delete_log("t", 1)
    manager.delete_log("t", 4)
    assert manager.get_or_create_log("u", 0).directory.parent.name == "d1"
    assert manager.get_or_create_log("t", 0) is log_of(manager, "t", 0)  # existing: not moved
    manager.shutdown()
    restarted = start(dirs, clock)
    assert {key: log.directory.parent.name for key, log in restarted.logs.items()} == {
        ("t", 0): "d0", ("t", 2): "d2", ("t", 3): "d0", ("t", 5): "d2", ("t", 6): "d0",
        ("u", 0): "d1",
    }
    restarted.shutdown()


# -- clean shutdown and restarts -------------------------------------------------------------------


def test_clean_shutdown_writes_the_marker_and_kafka_checkpoints(tmp_path: Path) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    clock = ManualClock(NOW)
    manager = start(dirs, clock)
    for topic, partition, batches in [("b", 0, 3), ("a", 1, 2), ("a", 10, 4), ("a", 2, 1)]:
        fill(manager.get_or_create_log(topic, partition), batches)
    log_of(manager, "a", 10).increment_log_start_offset(5)
    manager.shutdown(broker_epoch=42)
    d0, d1 = dirs  # b-0, a-10 in d0; a-1, a-2 in d1
    assert (d0 / RECOVERY_POINT_CHECKPOINT).read_bytes() == b"0\n2\na 10 8\nb 0 6\n"
    assert (d0 / LOG_START_OFFSET_CHECKPOINT).read_bytes() == b"0\n2\na 10 5\nb 0 0\n"
    assert (d1 / RECOVERY_POINT_CHECKPOINT).read_bytes() == b"0\n2\na 1 4\na 2 2\n"
    assert (d1 / LOG_START_OFFSET_CHECKPOINT).read_bytes() == b"0\n2\na 1 0\na 2 0\n"
    for directory in dirs:
        assert (directory / CLEAN_SHUTDOWN_FILE).read_bytes() == b'{"version":0,"brokerEpoch":42}'
        assert not list(directory.glob("*.tmp"))
    restarted = start(dirs, clock)
    assert not any((directory / CLEAN_SHUTDOWN_FILE).exists() for directory in dirs)
    assert restarted.previous_broker_epoch == 42
    assert log_of(restarted, "a", 10).log_start_offset == 5
    assert log_of(restarted, "a", 10).log_end_offset == 8
    restarted.shutdown()


def corrupt_last_batch(log: Log) -> tuple[Path, bytes]:
    """Flip a CRC-covered byte inside the last batch of the active segment; framing stays."""
    path = log.active_segment.log_path
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x5A
    path.write_bytes(data)
    return path, bytes(data)


def test_restart_after_clean_shutdown_does_not_scan_the_segments(tmp_path: Path) -> None:
    """As Kafka: a clean-shutdown marker means no recovery, so damage done after the stop is
    not found at start; the bad batch is served as is and ``samsa log verify`` reports it."""
    clock = ManualClock(NOW)
    manager = start([tmp_path], clock)
    fill(manager.get_or_create_log("t", 0), 12)
    manager.shutdown()
    path, damaged = corrupt_last_batch(log_of(manager, "t", 0))
    restarted = start([tmp_path], clock)
    log = log_of(restarted, "t", 0)
    assert log.log_end_offset == 24 and path.read_bytes() == damaged
    restarted.shutdown()
    problems = verify_partition_directory(log.directory)
    assert len(problems) == 1 and "CRC mismatch" in problems[0].reason


def test_garbage_after_a_clean_shutdown_does_not_stop_the_directory_from_loading(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    manager = start([tmp_path], clock)
    fill(manager.get_or_create_log("t", 0), 12)
    manager.shutdown()
    path = log_of(manager, "t", 0).active_segment.log_path
    valid = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(random.Random(5).randbytes(100))
    restarted = start([tmp_path], clock)
    assert log_of(restarted, "t", 0).log_end_offset == 24
    assert path.read_bytes() == valid


def test_restart_after_a_crash_recovers_from_the_checkpointed_recovery_point(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    manager = start([tmp_path], clock)
    log = manager.get_or_create_log("t", 0)
    fill(log, 20)
    log.flush()
    manager.checkpoint()
    checkpointed = log.recovery_point
    fill(log, 4)
    first = log.segments[0]
    assert len(log.segments) >= 3 and log.segments[1].base_offset < checkpointed
    crash_all(manager)
    below = bytearray(first.log_path.read_bytes())
    below[-3] ^= 0x5A  # in a flushed segment below the recovery point: trusted, not scanned
    first.log_path.write_bytes(below)
    path, damaged = corrupt_last_batch(log)  # above it, in the active segment: scanned
    restarted = start([tmp_path], clock, verify="never")  # Kafka's way
    recovered = log_of(restarted, "t", 0)
    assert first.log_path.read_bytes() == bytes(below)
    assert path.read_bytes() == b"".join(
        b.data for b in valid_prefix(damaged, recovered.active_segment.base_offset)
    )
    assert recovered.log_end_offset == 46  # the last batch (2 records) went
    assert recovered.recovery_point == recovered.log_end_offset
    restarted.shutdown()


def test_restart_after_a_crash_verifies_the_segments_below_the_recovery_point(
    tmp_path: Path,
) -> None:
    """samsa.log.verify.on.startup=unclean (the default): the damaged batch below the recovery
    point is found and the log cut before it, the later segments deleted."""
    clock = ManualClock(NOW)
    manager = start([tmp_path], clock)
    log = manager.get_or_create_log("t", 0)
    fill(log, 20)
    log.flush()
    manager.checkpoint()
    first = log.segments[0]
    crash_all(manager)
    below = bytearray(first.log_path.read_bytes())
    below[-3] ^= 0x5A  # inside the last batch of the first segment
    first.log_path.write_bytes(below)
    kept = valid_prefix(bytes(below), first.base_offset)
    restarted = start([tmp_path], clock)
    recovered = log_of(restarted, "t", 0)
    assert len(recovered.segments) == 1
    assert first.log_path.read_bytes() == b"".join(b.data for b in kept)
    assert recovered.log_end_offset == kept[-1].last_offset + 1
    restarted.shutdown()


# -- flush policy -------------------------------------------------------------------------------


def test_flush_messages_marks_the_append_that_reaches_n_unflushed_records(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    manager = start([tmp_path], clock)
    log = manager.get_or_create_log("t", 0, LogConfig(flush_messages=5))

    def append(records: int) -> bool:
        return log.append_as_leader(client_batch([b"v"] * records, timestamp=NOW)).flush_due

    assert [append(2), append(2), append(1), append(1)] == [False, False, True, True]
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 6
    assert [append(4), append(1)] == [False, True]
    manager.shutdown()


def test_flush_ms_flushes_only_the_logs_that_are_due(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    manager = start([tmp_path], clock)
    fast = manager.get_or_create_log("fast", 0, LogConfig(flush_ms=1_000))
    slow = manager.get_or_create_log("slow", 0, LogConfig(flush_ms=5_000))
    idle = manager.get_or_create_log("idle", 0, LogConfig(flush_ms=0))
    assert manager.flush_due_logs() == 0  # nothing unflushed anywhere
    for log in (fast, slow):
        fill(log, 3)
    clock.advance(999)
    assert manager.flush_due_logs() == 0
    clock.advance(1)
    assert manager.flush_due_logs() == 1
    assert (fast.recovery_point, slow.recovery_point, idle.recovery_point) == (6, 0, 0)
    assert manager.flush_due_logs() == 0
    clock.advance(4_000)
    assert manager.flush_due_logs() == 1 and slow.recovery_point == 6
    manager.shutdown()


def test_the_recovery_point_moves_only_on_flush(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    manager = start([tmp_path], clock)
    log = manager.get_or_create_log("t", 0)
    fill(log, 20)
    assert len(log.segments) > 1 and log.recovery_point == 0  # rolls do not flush by themselves
    manager.checkpoint()
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_bytes() == b"0\n1\nt 0 0\n"
    log.flush(up_to_offset=10)
    assert log.recovery_point == 10
    fill(log, 2)
    manager.checkpoint()
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_bytes() == b"0\n1\nt 0 10\n"
    manager.shutdown()
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_bytes() == b"0\n1\nt 0 44\n"


# -- deleting a partition --------------------------------------------------------------------------


def test_delete_log_moves_the_directory_aside_then_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock(NOW)
    manager = start([tmp_path], clock)
    fill(manager.get_or_create_log("t", 0), 3)
    fill(manager.get_or_create_log("t", 1), 3)
    removed: list[Path] = []
    with monkeypatch.context() as patch:  # the broker "crashes" before rmtree finishes
        patch.setattr("storage.log_manager.shutil.rmtree", lambda path, **_: removed.append(path))
        assert manager.delete_log("t", 0) is True
    assert manager.delete_log("t", 0) is False
    [aside] = removed
    assert re.fullmatch(r"t-0\.[0-9a-f]{32}-delete", aside.name) and aside.parent == tmp_path
    assert not (tmp_path / "t-0").exists() and (aside / "00000000000000000000.log").exists()
    manager.shutdown()
    assert (tmp_path / LOG_START_OFFSET_CHECKPOINT).read_bytes() == b"0\n1\nt 1 0\n"
    restarted = start([tmp_path], clock)
    assert not aside.exists() and set(restarted.logs) == {("t", 1)}
    assert restarted.delete_log("t", 1) is True
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == []
    restarted.shutdown()


# -- sticky I/O errors --------------------------------------------------------------------------

_DISK_CALLS = ("open", "pread", "pwrite", "pwritev", "fsync", "fdatasync", "ftruncate", "replace", "rename",
               "unlink", "close", "fstat", "stat")


@contextlib.contextmanager
def no_disk_access(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any file-system call inside the block fails the test (not with an OSError)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"touched the disk: {args!r}")

    with monkeypatch.context() as patch:
        for name in _DISK_CALLS:
            patch.setattr(os, name, refuse)
        yield


def offline_setup(tmp_path: Path) -> tuple[LogManager, ManualClock]:
    """p0, p2, p4 in d0 (p4 empty, p2 with flushed and unflushed data); p1, p3 in d1. Then
    p0's active segment stops accepting writes and an append takes d0 offline."""
    clock = ManualClock(NOW)
    manager = start([tmp_path / "d0", tmp_path / "d1"], clock, ONE_SEGMENT)
    for partition in range(5):
        manager.get_or_create_log("t", partition)
    for partition in (0, 1, 2, 3):
        fill(log_of(manager, "t", partition), 12)
    log_of(manager, "t", 2).flush(up_to_offset=8)
    broken = log_of(manager, "t", 0)
    break_fd(broken.active_segment.fd)
    with pytest.raises(KafkaStorageError, match="I/O error"):
        fill(broken, 1)
    assert broken.log_end_offset == 24
    return manager, clock


BATCH = client_batch([b"x"], timestamp=NOW)
FOLLOWER_BATCH = encode_batch([Record(100, NOW, b"k", b"v")])


OFFLINE_CALLS: list[object] = [
    pytest.param(2, lambda log: log.append_as_leader(BATCH), id="append_as_leader"),
    pytest.param(2, lambda log: log.append_as_follower(FOLLOWER_BATCH), id="append_as_follower"),
    pytest.param(2, lambda log: log.read(0, 100), id="read"),
    pytest.param(2, lambda log: log.offset_for_timestamp(NOW), id="offset_for_timestamp"),
    pytest.param(2, lambda log: log.offset_for_timestamp(-3), id="offset_for_max_timestamp"),
    pytest.param(2, lambda log: log.offset_for_timestamp(-1), id="offset_for_latest"),
    pytest.param(2, lambda log: log.flush(), id="flush"),
    pytest.param(2, lambda log: log.roll(), id="roll"),
    pytest.param(2, lambda log: log.truncate_to(4), id="truncate_to"),
    pytest.param(2, lambda log: log.truncate_fully_and_start_at(50), id="truncate_fully"),
    pytest.param(2, lambda log: log.delete_old_segments(), id="delete_old_segments"),
    pytest.param(2, lambda log: log.close(), id="close"),
    pytest.param(0, lambda log: log.append_as_leader(BATCH), id="append_to_the_broken_log"),
    pytest.param(2, lambda log: log.increment_log_start_offset(4), id="increment_log_start_offset"),
    pytest.param(4, lambda log: log.flush(), id="flush_with_nothing_unflushed"),
    pytest.param(4, lambda log: log.roll(), id="roll_of_an_empty_active_segment"),
    pytest.param(2, lambda log: log.truncate_to(10**6), id="truncate_to_beyond_the_end"),
]


@pytest.mark.parametrize(("partition", "call"), OFFLINE_CALLS)
def test_every_call_on_an_offline_directory_raises_without_touching_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partition: int, call: Callable[[Log], object]
) -> None:
    manager, _ = offline_setup(tmp_path)
    log = log_of(manager, "t", partition)
    def state() -> tuple[int, ...]:
        return log.log_start_offset, log.log_end_offset, log.recovery_point, len(log.segments)

    before = state()
    with no_disk_access(monkeypatch), pytest.raises(KafkaStorageError, match="offline"):
        call(log)
    assert state() == before


def test_other_directories_keep_working_and_only_they_are_checkpointed(tmp_path: Path) -> None:
    manager, clock = offline_setup(tmp_path)
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    health = manager.health[d0]
    assert health.offline_reason is not None and "Bad file descriptor" in health.offline_reason
    assert manager.health[d1].offline_reason is None
    healthy = log_of(manager, "t", 1)
    fill(healthy, 2)
    assert healthy.log_end_offset == 28 and healthy.read(26, 100) is not None
    assert manager.get_or_create_log("new", 0).directory.parent == d1  # d0 gets no new logs
    clock.advance(10**6)
    assert manager.run_retention() == 0 and manager.flush_due_logs() == 0  # d0's logs skipped
    manager.shutdown()
    assert (d1 / CLEAN_SHUTDOWN_FILE).exists() and not (d0 / CLEAN_SHUTDOWN_FILE).exists()
    assert (d1 / RECOVERY_POINT_CHECKPOINT).read_bytes() == b"0\n3\nnew 0 0\nt 1 28\nt 3 24\n"
    assert not (d0 / RECOVERY_POINT_CHECKPOINT).exists()
    for log in manager.logs.values():  # what a stopped process would do to d0's files
        if log.directory.parent == d0:
            crash(log)
    restarted = start([d0, d1], clock)  # d0 is recovered (no marker); nothing was lost
    assert log_of(restarted, "t", 0).log_end_offset == 24
    assert log_of(restarted, "t", 2).log_end_offset == 24
    restarted.shutdown()


def test_a_directory_that_cannot_be_written_goes_offline_on_roll(tmp_path: Path) -> None:
    """Running as root, chmod cannot make a directory unwritable: the partition directory is
    moved away behind the log's back instead, so creating the next segment fails."""
    clock = ManualClock(NOW)
    manager = start([tmp_path / "d0", tmp_path / "d1"], clock)
    log = manager.get_or_create_log("t", 0)
    other = manager.get_or_create_log("t", 1)
    fill(log, 2)
    log.directory.rename(tmp_path / "elsewhere")
    with pytest.raises(KafkaStorageError):
        log.roll()
    assert manager.health[tmp_path / "d0"].offline_reason is not None
    with pytest.raises(KafkaStorageError, match="offline"):
        log.read(0, 100)
    fill(other, 1)
    assert other.log_end_offset == 2
    manager.shutdown()


# -- found while writing these tests -------------------------------------------------------------


def test_a_log_start_offset_beyond_the_recovered_end_restarts_the_log_there(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    manager = start([tmp_path], clock)
    log = manager.get_or_create_log("t", 0)
    fill(log, 10)
    log.increment_log_start_offset(20)  # DeleteRecords up to the end
    manager.checkpoint()
    crash_all(manager)
    path = log.active_segment.log_path
    os.truncate(path, path.stat().st_size - 10)  # the last batch is lost: the LEO falls to 18
    restarted = start([tmp_path], clock)
    recovered = log_of(restarted, "t", 0)
    assert (recovered.log_start_offset, recovered.log_end_offset) == (20, 20)
    assert recovered.append_as_leader(BATCH).first_offset == 20


def test_verify_finds_nothing_wrong_with_a_healthy_live_log(tmp_path: Path) -> None:
    """``samsa log verify`` is documented to work on a live broker's files."""
    clock = ManualClock(NOW)
    manager = start([tmp_path], clock)
    fill(manager.get_or_create_log("t", 0), 12)
    try:
        assert verify_partition_directory(tmp_path / "t-0") == []
    finally:
        manager.shutdown()
