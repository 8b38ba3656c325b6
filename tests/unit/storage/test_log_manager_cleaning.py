"""The log manager's cleaner round and truncation keep the cleaner checkpoint right."""

from __future__ import annotations

from pathlib import Path

from protocol.records import Record, decode_batch, encode_batch
from storage.cleaner import cleaner_checkpoint_file
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log_manager import LogManager

COMPACTED = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=600,
    min_cleanable_dirty_ratio=0.01,
    message_timestamp_after_max_ms=2**62,
)


def keyed(clock: ManualClock, key: bytes, value: bytes) -> bytes:
    return encode_batch([Record(0, clock.now_ms, key, value)], base_offset=0)


def surviving(manager: LogManager, topic: str) -> dict[bytes | None, bytes | None]:
    log = manager.get_log(topic, 0)
    assert log is not None
    latest: dict[bytes | None, bytes | None] = {}
    for segment, position, header in log.batches(0):
        for record in decode_batch(segment.read_batch_bytes(position, header)).records:
            latest[record.key] = record.value
    return latest


def test_cleans_the_dirty_compacted_log_and_checkpoints(tmp_path: Path) -> None:
    clock = ManualClock()
    manager = LogManager([tmp_path], clock=clock, topic_config=lambda topic: COMPACTED)
    manager.startup()
    log = manager.get_or_create_log("users", 0)
    plain = manager.get_or_create_log("events", 0, LogConfig(message_timestamp_after_max_ms=2**62))
    for round_number in range(20):
        for key in (b"a", b"b", b"c"):
            log.append_as_leader(keyed(clock, key, b"%s-%d" % (key, round_number)))
            plain.append_as_leader(keyed(clock, key, b"x"))
    size_before = log.size_in_bytes
    stats = manager.clean_dirtiest_log()
    assert stats is not None
    assert log.size_in_bytes < size_before
    assert surviving(manager, "users") == {b"a": b"a-19", b"b": b"b-19", b"c": b"c-19"}
    checkpoint = cleaner_checkpoint_file(tmp_path).read()
    assert checkpoint[("users", 0)] == stats.end_offset
    assert ("events", 0) not in checkpoint
    manager.shutdown()


def test_truncation_below_the_cleaner_checkpoint_pulls_it_back(tmp_path: Path) -> None:
    clock = ManualClock()
    manager = LogManager([tmp_path], clock=clock, topic_config=lambda topic: COMPACTED)
    manager.startup()
    log = manager.get_or_create_log("users", 0)
    for round_number in range(20):
        log.append_as_leader(keyed(clock, b"k%d" % (round_number % 4), b"v%d" % round_number))
    stats = manager.clean_dirtiest_log()
    assert stats is not None and stats.end_offset > 2
    boundary = next(header.base_offset for _, _, header in log.batches(0) if header.base_offset > 0)
    assert manager.truncate_to("users", 0, boundary)
    assert cleaner_checkpoint_file(tmp_path).read()[("users", 0)] == boundary
    manager.delete_log("users", 0)
    assert ("users", 0) not in cleaner_checkpoint_file(tmp_path).read()
