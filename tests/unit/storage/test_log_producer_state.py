"""The idempotent producer at the log: duplicates, restarts (clean and crash), truncation,
retention and the ``.snapshot`` files Kafka would write."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from protocol.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError
from protocol.records import Record, encode_batch, iter_batches
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.producer_state import (
    PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    PRODUCER_ID_EXPIRATION_MS,
)
from tests.unit.storage.helpers import as_stored, crash

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1200, retention_ms=-1, file_delete_delay_ms=0)


def idempotent(
    sequence: int, count: int = 1, *, producer_id: int = 42, epoch: int = 0, timestamp: int = NOW
) -> bytes:
    records = [Record(i, timestamp, b"k", b"v" * 100) for i in range(count)]
    return encode_batch(
        records, base_offset=0, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )


def open_log(path: Path, clock: ManualClock, *, clean: bool = True, config: LogConfig = CONFIG) -> Log:
    return Log.open(path / "topic-0", config, clock=clock, had_clean_shutdown=clean)


def snapshot_names(log: Log) -> list[str]:
    return sorted(p.name for p in log.directory.glob("*.snapshot"))


def stored_offsets(log: Log) -> list[int]:
    return [header.base_offset for _, _, header in log.batches()]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


def test_a_duplicate_gets_the_original_offsets_and_adds_nothing(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, clock)
    log.append_as_leader(encode_batch([Record(0, NOW, b"k", b"v")], base_offset=0))
    first = log.append_as_leader(idempotent(0, 3))
    log.append_as_leader(idempotent(3, 2))
    size, end = log.size_in_bytes, log.log_end_offset
    again = log.append_as_leader(idempotent(0, 3))
    assert (again.first_offset, again.last_offset, again.duplicate) == (1, 3, True)
    assert (first.duplicate, again.records_count, again.log_append_time_ms) == (False, 0, -1)
    assert (log.size_in_bytes, log.log_end_offset) == (size, end)
    assert log.append_as_leader(idempotent(3, 2)).first_offset == 4
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(idempotent(6))
    assert log.append_as_leader(idempotent(0, epoch=1)).first_offset == 6  # a bumped epoch
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(idempotent(5, epoch=0))
    assert log.log_end_offset == end + 1


def test_log_append_time_duplicate_answers_the_original_append_time(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    config = LogConfig(message_timestamp_type="LogAppendTime", retention_ms=-1)
    log = open_log(tmp_path, clock, config=config)
    first = log.append_as_leader(idempotent(0))
    clock.advance(5_000)
    again = log.append_as_leader(idempotent(0))
    assert again.duplicate and again.log_append_time_ms == first.log_append_time_ms == NOW


def test_batches_without_a_producer_id_leave_no_state(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, clock)
    for _ in range(3):
        log.append_as_leader(encode_batch([Record(0, NOW, b"k", b"v")], base_offset=0))
    assert len(log.producer_state) == 0


def test_state_survives_a_clean_restart(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, clock)
    for sequence in range(0, 12, 2):
        log.append_as_leader(idempotent(sequence, 2))
    assert len(log.segments) > 1
    log.close()
    assert snapshot_names(log)[-1] == f"{log.log_end_offset:020d}.snapshot"
    reopened = open_log(tmp_path, clock)
    assert reopened.append_as_leader(idempotent(10, 2)).duplicate  # the last batch survives
    with pytest.raises(OutOfOrderSequenceNumberError):
        reopened.append_as_leader(idempotent(13))
    assert reopened.append_as_leader(idempotent(12)).first_offset == 12
    reopened.close()


def test_state_is_rebuilt_after_a_crash_from_the_roll_snapshot(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, clock)
    for sequence in range(0, 16, 2):
        log.append_as_leader(idempotent(sequence, 2))
    log.append_as_follower(as_stored(idempotent(0, producer_id=7, epoch=3), log.log_end_offset))
    active_base = log.active_segment.base_offset
    assert f"{active_base:020d}.snapshot" in snapshot_names(log)
    end = log.log_end_offset
    crash(log)
    recovered = open_log(tmp_path, clock, clean=False)
    assert recovered.log_end_offset == end
    assert snapshot_names(recovered)[-1] == f"{end:020d}.snapshot"  # written after the replay
    assert recovered.append_as_leader(idempotent(14, 2)).duplicate
    assert recovered.append_as_leader(idempotent(1, producer_id=7, epoch=3)).first_offset == end
    with pytest.raises(InvalidProducerEpochError):
        recovered.append_as_leader(idempotent(2, producer_id=7, epoch=2))
    recovered.close()


@pytest.mark.parametrize("damage", ["delete", "corrupt"])
def test_missing_or_corrupt_snapshots_mean_a_longer_replay(tmp_path: Path, clock, damage: str) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, clock)
    for sequence in range(0, 16, 2):
        log.append_as_leader(idempotent(sequence, 2))
    crash(log)
    for path in log.directory.glob("*.snapshot"):
        if damage == "delete":
            path.unlink()
        else:
            data = bytearray(path.read_bytes())
            data[-1] ^= 0xFF
            path.write_bytes(bytes(data))
    recovered = open_log(tmp_path, clock, clean=False)
    assert recovered.append_as_leader(idempotent(14, 2)).duplicate
    assert recovered.append_as_leader(idempotent(16)).first_offset == 16
    recovered.close()


def test_truncation_rewinds_the_state_and_drops_later_snapshots(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, clock)
    for sequence in range(0, 16, 2):
        log.append_as_leader(idempotent(sequence, 2))
    log.close()
    log = open_log(tmp_path, clock)
    assert log.truncate_to(6)
    assert all(int(name[:20]) <= 6 for name in snapshot_names(log))
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(idempotent(8, 2))  # sequences 6.. are gone with their offsets
    assert log.append_as_leader(idempotent(4, 2)).duplicate
    assert log.append_as_leader(idempotent(6, 2)).first_offset == 6
    log.truncate_fully_and_start_at(100)
    assert snapshot_names(log) == [] and len(log.producer_state) == 0
    assert log.append_as_leader(idempotent(77)).first_offset == 100  # unknown producer again
    log.close()


def test_retention_deletes_snapshots_with_their_segments(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, clock)
    for sequence in range(0, 16, 2):
        log.append_as_leader(idempotent(sequence, 2))
    bases = [segment.base_offset for segment in log.segments]
    log.increment_log_start_offset(bases[-1])
    assert log.delete_old_segments() == len(bases) - 1
    assert snapshot_names(log) == [f"{bases[-1]:020d}.snapshot"]
    assert log.append_as_leader(idempotent(14, 2)).duplicate  # the state in memory stays
    log.close()


def test_expired_producers_start_again(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, clock)
    log.append_as_leader(idempotent(0))
    clock.advance(PRODUCER_ID_EXPIRATION_MS + PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS)
    result = log.append_as_leader(idempotent(999, timestamp=clock.milliseconds()))
    assert not result.duplicate and result.first_offset == 1
    log.close()
    clock.advance(PRODUCER_ID_EXPIRATION_MS)
    reopened = open_log(tmp_path, clock)  # expired entries are not loaded from the snapshot
    assert len(reopened.producer_state) == 0
    reopened.close()


def test_follower_appends_are_not_checked(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, clock)
    log.append_as_follower(as_stored(idempotent(5), 0))
    log.append_as_follower(as_stored(idempotent(50), 1))  # a gap: a leader said so
    assert log.producer_state.producers[42].last_sequence == 50
    assert log.append_as_leader(idempotent(50)).duplicate
    log.close()


def test_snapshot_file_is_kafkas_layout(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    """Golden bytes from the format description (ProducerSnapshot v1), not from our encoder."""
    log = open_log(tmp_path, clock)
    log.append_as_leader(encode_batch([Record(0, NOW, b"k", b"v")], base_offset=0))
    log.append_as_leader(idempotent(40, 3, producer_id=9, epoch=2, timestamp=NOW + 5))
    log.append_as_leader(idempotent(0, 1, producer_id=3, epoch=0, timestamp=NOW + 7))
    log.close()
    (name,) = snapshot_names(log)
    assert name == "00000000000000000005.snapshot"
    body = struct.pack(">i", 2)
    body += struct.pack(">qhiqiqiq", 3, 0, 0, 4, 0, NOW + 7, -1, -1)
    body += struct.pack(">qhiqiqiq", 9, 2, 42, 3, 2, NOW + 5, -1, -1)
    assert (log.directory / name).read_bytes() == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert not list(log.directory.glob("*.tmp"))


def test_duplicate_check_happens_before_anything_is_written(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, clock)
    log.append_as_leader(idempotent(0))
    data = log.active_segment.log_path.read_bytes()
    log.append_as_leader(idempotent(0))
    assert log.active_segment.log_path.read_bytes() == data
    assert [h.base_offset for h in iter_batches(data)] == [0]
    assert stored_offsets(log) == [0]
