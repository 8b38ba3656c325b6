"""Samsa's files are Kafka's files: ``.log`` read by kafka-python, ``.index`` / ``.timeindex``
equal to an independent computation of Kafka's rules, 20-digit names, checkpoint text."""

from __future__ import annotations

import random
import re
import struct
import warnings
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

from protocol.compression import CompressionType
from protocol.records import Record, encode_batch
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, LogManager
from tests.unit.storage.helpers import crash, release_opened_logs

release_logs = pytest.fixture(autouse=True)(release_opened_logs)

with warnings.catch_warnings():  # kafka-python loads its schemas with importlib's legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import MemoryRecords

NOW = 1_700_000_000_000
EPOCH = 7
CONFIG = LogConfig(segment_bytes=3_000, index_interval_bytes=300, segment_index_bytes=4_096,
                   retention_ms=-1, message_timestamp_after_max_ms=2**62)


def varied_records(rng: random.Random, count: int, timestamp: int) -> list[Record]:
    """Null keys and values, empty ones, headers with null values and non-ASCII keys."""
    records = []
    for i in range(count):
        key = rng.choice([None, b"", b"key-%d" % i, rng.randbytes(20)])
        value = rng.choice([None, b"", rng.randbytes(rng.randrange(1, 300)), b"v" * 1000])
        headers = tuple(
            (rng.choice(["h", "trace-id", "ключ"]), rng.choice([None, b"", rng.randbytes(8)]))
            for _ in range(rng.randrange(3))
        )
        records.append(Record(i, timestamp + rng.randrange(-5_000, 5_000), key, value, headers))
    return records


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
def test_kafka_python_reads_our_segment_files(tmp_path: Path, codec: CompressionType) -> None:
    clock = ManualClock(NOW)
    log = Log.open(tmp_path / "t-0", CONFIG, clock=clock)
    rng = random.Random(int(codec))
    expected: list[tuple[int, list[Record]]] = []
    for _ in range(25):
        records = varied_records(rng, rng.randrange(1, 6), NOW)
        batch = encode_batch(records, base_offset=0, compression=codec)
        first = log.append_as_leader(batch, leader_epoch=EPOCH).first_offset
        expected.append((first, records))
    log.close()
    assert len(log.segments) > 2
    seen = []
    for segment in log.segments:
        memory_records = MemoryRecords(segment.log_path.read_bytes())
        while memory_records.has_next():
            batch = memory_records.next_batch()
            assert batch.validate_crc() and batch.magic == 2
            assert batch.leader_epoch == EPOCH and batch.compression_type == int(codec)
            records = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
            seen.append((batch.base_offset, records))
        assert memory_records.valid_bytes() == segment.size
    assert seen == [
        (first, [(first + r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records])
        for first, records in expected
    ]


# -- indexes -----------------------------------------------------------------------------------


@dataclass
class Append:
    """One append: its batches as (size, max timestamp, last offset)."""

    first_offset: int
    batches: list[tuple[int, int, int]]

    @property
    def size(self) -> int:
        return sum(size for size, _, _ in self.batches)

    @property
    def last_offset(self) -> int:
        return self.batches[-1][2]

    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """The largest timestamp and the last offset of the first batch holding it."""
        best = (-1, self.batches[0][2])
        for _, timestamp, last_offset in self.batches:
            if timestamp > best[0]:
                best = (timestamp, last_offset)
        return best


def expected_indexes(appends: list[Append], base: int, interval: int) -> tuple[bytes, bytes]:
    """Kafka's LogSegment.append: before writing an append, if more than ``interval`` bytes were
    written since the last entry, index the append's last offset at the append's position; the
    time index takes (max timestamp so far, its offset) when the timestamp grew. On roll/close
    the max timestamp so far is appended once more if it is new."""
    offsets, times = [], []
    position = since_last = 0
    max_timestamp, offset_of_max = -1, base
    for append in appends:
        timestamp, offset = append.max_timestamp_and_offset
        if timestamp > max_timestamp:
            max_timestamp, offset_of_max = timestamp, offset
        if since_last > interval:
            offsets.append(struct.pack(">ii", append.last_offset - base, position))
            if not times or max_timestamp > struct.unpack(">qi", times[-1])[0]:
                times.append(struct.pack(">qi", max_timestamp, offset_of_max - base))
            since_last = 0
        since_last += append.size
        position += append.size
    if max_timestamp >= 0 and (not times or max_timestamp > struct.unpack(">qi", times[-1])[0]):
        times.append(struct.pack(">qi", max_timestamp, offset_of_max - base))
    return b"".join(offsets), b"".join(times)


def split_by_roll(appends: list[Append], segment_bytes: int) -> list[list[Append]]:
    """Kafka's size rule: roll before an append that would take the segment past segment.bytes."""
    segments: list[list[Append]] = [[]]
    size = 0
    for append in appends:
        if segments[-1] and size + append.size > segment_bytes:
            segments.append([])
            size = 0
        segments[-1].append(append)
        size += append.size
    return segments


def write_appends(log: Log, rng: random.Random, *, batches_per_append: int) -> list[Append]:
    appends = []
    for _ in range(70):
        encoded, shape = [], []
        for _ in range(rng.randrange(1, batches_per_append + 1)):
            count = rng.randrange(1, 4)
            timestamp = NOW + rng.randrange(-10_000, 10_000)
            records = [Record(i, timestamp - i, None, rng.randbytes(rng.randrange(5, 120)))
                       for i in range(count)]
            encoded.append(encode_batch(records, base_offset=0))
            shape.append((len(encoded[-1]), timestamp, count - 1))
        first = log.append_as_leader(b"".join(encoded)).first_offset
        batches, offset = [], first
        for size, timestamp, last_delta in shape:
            batches.append((size, timestamp, offset + last_delta))
            offset += last_delta + 1
        appends.append(Append(first, batches))
    return appends


def index_bytes(log: Log) -> list[tuple[bytes, bytes]]:
    return [
        (segment.offset_index.path.read_bytes(), segment.time_index.path.read_bytes())
        for segment in log.segments
    ]


@pytest.mark.parametrize("batches_per_append", [1, 3])
def test_index_files_follow_kafkas_rule(tmp_path: Path, batches_per_append: int) -> None:
    clock = ManualClock(NOW)
    log = Log.open(tmp_path / "t-0", CONFIG, clock=clock)
    rng = random.Random(batches_per_append)
    appends = write_appends(log, rng, batches_per_append=batches_per_append)
    log.close()
    groups = split_by_roll(appends, CONFIG.segment_bytes)
    assert [s.base_offset for s in log.segments] == [group[0].first_offset for group in groups]
    expected = [
        expected_indexes(group, segment.base_offset, CONFIG.index_interval_bytes)
        for group, segment in zip(groups, log.segments, strict=True)
    ]
    assert index_bytes(log) == expected
    assert all(offsets for offsets, _ in expected[:-1])  # the test indexes something


def test_recovery_rebuilds_indexes_batch_by_batch(tmp_path: Path) -> None:
    """Kafka's LogSegment.recover indexes per batch: the same bytes as appends of one batch."""
    clock = ManualClock(NOW)
    for name, batches_per_append in (("single-0", 1), ("multi-0", 3)):
        log = Log.open(tmp_path / name, CONFIG, clock=clock)
        appends = write_appends(log, random.Random(9), batches_per_append=batches_per_append)
        crash(log)
        recovered = Log.open(log.directory, CONFIG, clock=clock, had_clean_shutdown=False)
        recovered.close()
        per_batch = []
        for append in appends:
            first = append.first_offset
            for batch in append.batches:
                per_batch.append(Append(first, [batch]))
                first = batch[2] + 1
        bases = [s.base_offset for s in recovered.segments] + [recovered.log_end_offset]
        groups = [[a for a in per_batch if lo <= a.last_offset < hi] for lo, hi in pairwise(bases)]
        expected = [
            expected_indexes(group, base, CONFIG.index_interval_bytes)
            for group, base in zip(groups, bases, strict=False)
        ]
        assert index_bytes(recovered) == expected


# -- names and checkpoints -------------------------------------------------------------------


def test_file_names_are_20_digit_base_offsets(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = Log.open(tmp_path / "my.topic_name-17", CONFIG, clock=clock)
    log.truncate_fully_and_start_at(12_345_678_901)
    for _ in range(60):
        log.append_as_leader(encode_batch([Record(0, NOW, b"k", b"v" * 100)], base_offset=0))
    log.close()
    names = sorted(p.name for p in log.directory.iterdir()
                   if p.suffix != ".snapshot" and p.name != "leader-epoch-checkpoint")
    # Kafka's per-partition leader epoch file: the one epoch (0) from the log start offset.
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n1\n0 12345678901\n"
    stems = sorted({name.split(".")[0] for name in names})
    assert stems == [f"{s.base_offset:020d}" for s in log.segments]
    assert stems[0] == "00000000012345678901" and len(stems) > 1
    assert all(re.fullmatch(r"\d{20}\.(log|index|timeindex)", name) for name in names)
    assert len(names) == 3 * len(stems)
    # Producer snapshots: one per roll (at the new segment's base) and one at the LEO on close.
    snapshots = sorted(p.name for p in log.directory.glob("*.snapshot"))
    offsets = [s.base_offset for s in log.segments[1:]] + [log.log_end_offset]
    assert snapshots == [f"{offset:020d}.snapshot" for offset in offsets]


def test_checkpoint_files_are_kafkas_text_format(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    manager = LogManager([tmp_path], default_config=CONFIG, clock=clock)
    manager.startup()
    manager.checkpoint()
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_bytes() == b"0\n0\n"
    for topic, partition, records in [("t", 10, 3), ("t", 2, 1), ("a.b_c-d", 0, 2), ("t", 0, 0)]:
        log = manager.get_or_create_log(topic, partition)
        for _ in range(records):
            log.append_as_leader(encode_batch([Record(0, NOW, b"k", b"v")], base_offset=0))
    manager.get_or_create_log("t", 10).increment_log_start_offset(2)
    manager.shutdown()
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_bytes() == (
        b"0\n4\na.b_c-d 0 2\nt 0 0\nt 2 1\nt 10 3\n"
    )
    assert (tmp_path / LOG_START_OFFSET_CHECKPOINT).read_bytes() == (
        b"0\n4\na.b_c-d 0 0\nt 0 0\nt 2 0\nt 10 2\n"
    )


def test_recovery_of_a_segment_rolled_for_a_full_index_does_not_raise(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    config = LogConfig(segment_index_bytes=64, index_interval_bytes=0,
                       message_timestamp_after_max_ms=2**62)
    log = Log.open(tmp_path / "t-0", config, clock=clock)
    for n in range(20):  # three batches per append
        log.append_as_leader(b"".join(
            encode_batch([Record(0, NOW + 3 * n + i, None, b"v")], base_offset=0) for i in range(3)
        ))
    assert len(log.segments) > 2
    crash(log)
    recovered = Log.open(log.directory, config, clock=clock, had_clean_shutdown=False)
    assert recovered.log_end_offset == 60
    assert all(recovered.read(offset, 1) is not None for offset in range(60))
