"""Test helpers for storage: simulate a crash (no flush, no trim, no clean-shutdown work), build
batches, and read segment files independently of the storage code."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c
import pytest

from protocol.compression import CompressionType
from protocol.records import Record, encode_batch
from storage.config import LogConfig
from storage.log import Log
from storage.segment import LogSegment


def abandon_segment(segment: LogSegment) -> None:
    """Release a segment's OS resources the way a killed process does: nothing is trimmed."""
    segment.abandon()  # the process dies: no trim, no msync, every descriptor closed


def crash(log: Log) -> None:
    """Drop ``log`` as a crash would; what reached the page cache stays on disk."""
    for segment in log.segments:
        abandon_segment(segment)
    for pending in log._pending_deletes:
        abandon_segment(pending.segment)


def release_opened_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fixture body (``pytest.fixture(autouse=True)(release_opened_logs)``): every ``Log`` opened
    during the test, directly or by a LogManager, is released afterwards as by ``crash``, so tests
    that leave logs open or offline leak no file descriptors."""
    opened: list[Log] = []
    open_log = Log.open

    def tracking_open(*args: object, **kwargs: object) -> Log:
        log = open_log(*args, **kwargs)  # type: ignore[arg-type]
        opened.append(log)
        return log

    monkeypatch.setattr(Log, "open", tracking_open)
    yield
    for log in opened:
        crash(log)


# -- batches and an independent reader of segment files -------------------------------------------
#
# ``valid_prefix`` re-implements the recovery rules (Kafka's ``LogSegment.recover``) with struct
# and crc32c only, so crash tests compare the storage code with an oracle that shares none of it.

# Segments of a few batches, an index entry every ~150 bytes: recovery and damage tests.
SMALL_SEGMENTS = LogConfig(
    segment_bytes=1200,
    index_interval_bytes=150,
    segment_index_bytes=1024,
    retention_ms=-1,
    message_timestamp_after_max_ms=2**62,
    file_delete_delay_ms=0,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_HEADER_SIZE = 61
_MIN_BATCH_LENGTH = _HEADER_SIZE - 12
_INT32_MAX = 2**31 - 1


def client_batch(
    values: list[bytes],
    *,
    timestamp: int,
    compression: CompressionType = CompressionType.NONE,
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> bytes:
    """A batch as a producer sends it (base offset 0), keys ``k0``, ``k1``, ..."""
    records = [
        Record(offset=i, timestamp=timestamp + i, key=b"k%d" % i, value=value, headers=headers)
        for i, value in enumerate(values)
    ]
    return encode_batch(records, base_offset=0, compression=compression)


def as_stored(batch: bytes, base_offset: int, leader_epoch: int = 0) -> bytes:
    """``batch`` as ``append_as_leader`` stores it: base offset and leader epoch rewritten."""
    stored = bytearray(batch)
    struct.pack_into(">q", stored, 0, base_offset)
    struct.pack_into(">i", stored, 12, leader_epoch)
    return bytes(stored)


@dataclass(frozen=True)
class RawBatch:
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    data: bytes

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def valid_prefix(data: bytes, segment_base: int) -> list[RawBatch]:
    """The batches recovery keeps: stops at the first short, malformed, CRC-failing batch, or one
    whose offsets do not follow the previous batch or do not fit the segment."""
    batches: list[RawBatch] = []
    position, previous_last = 0, segment_base - 1
    while len(data) - position >= _HEADER_SIZE:
        fields = _HEADER.unpack_from(data, position)
        base, length, magic, crc, delta, max_timestamp = (
            fields[0], fields[1], fields[3], fields[4], fields[6], fields[8]
        )
        size = length + 12
        malformed = magic != 2 or length < _MIN_BATCH_LENGTH or fields[12] < 0
        if malformed or position + size > len(data):
            break
        if crc32c.crc32c(data[position + 21 : position + size]) != crc:
            break
        last = base + delta
        if base <= previous_last or not 0 <= last - segment_base <= _INT32_MAX:
            break
        batch = data[position : position + size]
        batches.append(RawBatch(position, base, last, max_timestamp, batch))
        previous_last, position = last, position + size
    return batches


def break_fd(fd: int) -> None:
    """Make ``fd`` fail every write behind its owner's back, as a dying disk would.

    Unlike ``os.close(fd)`` the descriptor number stays taken (a read-only description of
    /dev/null), so a later open cannot reuse it and receive writes meant for the segment.
    """
    read_only = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(read_only, fd)
    finally:
        os.close(read_only)
