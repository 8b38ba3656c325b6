"""The pure half of an append: the validation rules of a config, offsets assigned to validated
batches, what an append returns.

Zero-copy (``assign_offsets``): each batch becomes a new 16-byte prefix (base offset, batch
length, partition leader epoch; none of them under the CRC) followed by a view of the producer's
bytes after it, so nothing of the batch is copied. LogAppendTime topics change the CRC-covered max
timestamp, so ``assign_offsets_log_append_time`` works on a copy (and rewrites the CRC).

Invariants: offsets are handed out contiguously from ``next_offset``, one batch after another,
each batch taking ``last_offset_delta + 1`` of them; the bytes returned are exactly the bytes
written. No state: the ``Log`` calls these on its owner's thread and does the I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from protocol.errors import InvalidRecordError
from protocol.records import (
    BatchHeader,
    TimestampType,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from storage.config import LogConfig
from storage.producer_state import BatchMetadata
from storage.validator import ValidatedBatches, ValidationRules

# The first 16 bytes of a batch: base offset, batch length, partition leader epoch (not CRC'd).
_PREFIX = struct.Struct(">qii")


class AppendResult(NamedTuple):
    """What an append did. A NamedTuple, not a frozen dataclass: built once per produce."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    records_count: int
    size_in_bytes: int
    rolled: bool
    flush_due: bool
    # A retried idempotent batch: the offsets are the original append's; nothing was written.
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class AppendCondition:
    """What must hold for a conditional append (SamsaConditionalProduce), checked by the
    leader's ``Log.append_as_leader`` just before it hands out offsets.

    ``expected_end_offset``: the log end offset must be this (-1: no such condition).
    ``key``: when not None, the last record with this key must be at ``expected_key_offset``
    (-1: no record may have the key). Both may be given: the end offset is checked first.
    """

    expected_end_offset: int = -1
    key: bytes | None = None
    expected_key_offset: int = -1


def validation_rules(config: LogConfig, *, from_client: bool) -> ValidationRules:
    """What ``validate_batches`` checks under a topic's config, for a client or a replica."""
    log_append_time = config.message_timestamp_type == "LogAppendTime"
    return ValidationRules(
        max_message_bytes=config.max_message_bytes,
        from_client=from_client,
        require_keys=config.compact and from_client,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME,
        timestamp_before_max_ms=config.message_timestamp_before_max_ms,
        timestamp_after_max_ms=config.message_timestamp_after_max_ms,
    )


def assign_offsets(
    records: bytes | bytearray | memoryview,
    validated: ValidatedBatches,
    leader_epoch: int,
    next_offset: int,
) -> tuple[list[bytes | memoryview], list[int]]:
    """The parts to write (prefix, rest of batch, prefix, ...) and each batch's base offset."""
    view = memoryview(records)
    parts: list[bytes | memoryview] = []
    base_offsets: list[int] = []
    for position, header in zip(validated.positions, validated.headers, strict=True):
        parts.append(_PREFIX.pack(next_offset, header.batch_length, leader_epoch))
        parts.append(view[position + _PREFIX.size : position + header.size_in_bytes])
        base_offsets.append(next_offset)
        next_offset += header.last_offset_delta + 1
    return parts, base_offsets


def assign_offsets_log_append_time(
    records: bytes | bytearray | memoryview,
    validated: ValidatedBatches,
    leader_epoch: int,
    next_offset: int,
    now_ms: int,
) -> tuple[bytearray, list[int]]:
    """A copy of ``records`` with offsets, leader epoch and the log append time set."""
    buffer = bytearray(records)
    base_offsets: list[int] = []
    for position, header in zip(validated.positions, validated.headers, strict=True):
        set_base_offset(buffer, position, next_offset)
        set_partition_leader_epoch(buffer, position, leader_epoch)
        set_log_append_time(buffer, position, now_ms)
        base_offsets.append(next_offset)
        next_offset += header.last_offset_delta + 1
    return buffer, base_offsets


def follower_base_offsets(headers: Sequence[BatchHeader], log_end_offset: int) -> list[int]:
    """A replica's batches keep their offsets: they must start at or after the log end offset
    and increase (gaps allowed: offsets compaction removed); INVALID_RECORD otherwise."""
    first = headers[0].base_offset
    if first < log_end_offset:
        raise InvalidRecordError(
            f"batch base offset {first} is below the log end offset {log_end_offset}"
        )
    previous = first - 1
    for header in headers:
        if header.base_offset <= previous:
            raise InvalidRecordError(f"offsets out of order at base offset {header.base_offset}")
        previous = header.last_offset
    return [header.base_offset for header in headers]


def duplicate_result(
    duplicate: BatchMetadata, log_append_time: int, log_start_offset: int
) -> AppendResult:
    """A retried batch: the original append's offsets, nothing written.

    Kafka puts the batch's max timestamp in the log append time field even for CreateTime
    topics; here it is only given for LogAppendTime topics, where it is the log append time.
    """
    return AppendResult(
        duplicate.first_offset,
        duplicate.last_offset,
        duplicate.timestamp,
        duplicate.last_offset,
        duplicate.timestamp if log_append_time >= 0 else -1,
        log_start_offset,
        0,
        0,
        False,
        False,
        duplicate=True,
    )


def has_producer_id(headers: Sequence[BatchHeader]) -> bool:
    """The produce hot path's only producer-state cost for batches without a producer id."""
    for header in headers:  # noqa: SIM110 - a plain loop: any() with a generator costs more
        if header.producer_id >= 0:
            return True
    return False


def max_timestamp_of(
    headers: Sequence[BatchHeader], base_offsets: list[int], log_append_time: int
) -> tuple[int, int]:
    """The largest batch max timestamp and the last offset of the (first) batch holding it."""
    if log_append_time >= 0:
        return log_append_time, base_offsets[-1] + headers[-1].last_offset_delta
    best_timestamp, best_offset = -1, base_offsets[0] + headers[0].last_offset_delta
    for base_offset, header in zip(base_offsets, headers, strict=True):
        if header.max_timestamp > best_timestamp:
            best_timestamp, best_offset = header.max_timestamp, base_offset + header.last_offset_delta
    return best_timestamp, best_offset
