"""Validation of batches before they are appended (Kafka's ``LogValidator``, batch level).

The produce hot path parses each 61-byte batch header and checks the CRC (C crc32c over the
batch); records are decoded only where Kafka must look inside a batch: keyless records on a
compacted topic. Timestamps are checked per batch (``base_timestamp`` and ``max_timestamp``) rather
than per record, so a record inside a batch whose timestamp lies between the two is not checked:
the price of never decoding records on the hot path.

``validate_batches`` returns the parsed headers with their positions; it never mutates input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from protocol.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
)
from protocol.records import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    TimestampType,
    batch_crc_is_valid,
    decode_batch,
    read_batch_header,
)

_CONTROL_FLAG = 0x20  # attributes bit 5
_KEYLESS_MESSAGE = "Compacted topic cannot accept message without key in topic partition."


class RecordValidationError(InvalidRecordError):
    """INVALID_RECORD naming the offending records by their index in the batch, so a client
    fails just those (Produce ``record_errors``, KIP-467) and retries nothing."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


@dataclass(frozen=True, slots=True)
class ValidationRules:
    max_message_bytes: int
    from_client: bool = True
    require_keys: bool = False
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 2**63 - 1


class ValidatedBatches(NamedTuple):
    """Parsed headers and their positions; a NamedTuple because it is built per produce."""

    positions: list[int]
    headers: list[BatchHeader]

    @property
    def records_count(self) -> int:
        return sum(header.records_count for header in self.headers)


def validate_batches(
    buffer: bytes | bytearray | memoryview, rules: ValidationRules, *, now_ms: int
) -> ValidatedBatches:
    """Parse and check every batch in ``buffer``; raise the Kafka error of the first bad one.

    The loop is the produce hot path: one combined test per batch; only a batch that fails it
    goes through the detailed checks, which name the problem.
    """
    view = memoryview(buffer)
    end = len(view)
    if end == 0:
        raise InvalidRecordError("produce request carries no record batches")
    positions: list[int] = []
    headers: list[BatchHeader] = []
    check_client = rules.from_client
    check_time = check_client and rules.timestamp_type == TimestampType.CREATE_TIME
    lowest = now_ms - rules.timestamp_before_max_ms
    highest = now_ms + rules.timestamp_after_max_ms
    position = 0
    while position < end:
        header = read_batch_header(view, position)
        size = header.batch_length + LOG_OVERHEAD
        good = size <= end - position and size <= rules.max_message_bytes
        good = good and batch_crc_is_valid(view, position, header)
        if good and check_client:
            good = (
                header.base_offset == 0
                and header.records_count == header.last_offset_delta + 1
                and not header.attributes & _CONTROL_FLAG
                and (header.producer_id < 0 or header.base_sequence >= 0)
                and not rules.require_keys
            )
        if good and check_time:
            good = (lowest <= header.base_timestamp <= highest or header.base_timestamp == -1) and (
                lowest <= header.max_timestamp <= highest or header.max_timestamp == -1
            )
        if not good:
            _check_structure(view, position, header, rules)
            if check_client:
                _check_client_batch(view, position, header, rules, now_ms)
        positions.append(position)
        headers.append(header)
        position += size
    return ValidatedBatches(positions, headers)


def _check_structure(
    view: memoryview, position: int, header: BatchHeader, rules: ValidationRules
) -> None:
    if header.size_in_bytes > len(view) - position:
        raise CorruptMessageError(
            f"batch at byte {position} claims {header.size_in_bytes} bytes but only "
            f"{len(view) - position} remain"
        )
    if header.size_in_bytes > rules.max_message_bytes:
        raise MessageTooLargeError(
            f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes "
            f"({rules.max_message_bytes})"
        )
    if not batch_crc_is_valid(view, position, header):
        raise CorruptMessageError(f"CRC mismatch in batch at byte {position}")


def _check_client_batch(
    view: memoryview, position: int, header: BatchHeader, rules: ValidationRules, now_ms: int
) -> None:
    if header.base_offset != 0:
        raise InvalidRecordError(
            f"batch at byte {position} has base offset {header.base_offset}; clients must send 0"
        )
    # Only client batches: a compacted batch from a leader keeps its offset range with fewer records.
    if header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"batch at byte {position} has {header.records_count} records but "
            f"last offset delta {header.last_offset_delta}"
        )
    if header.is_control:
        raise InvalidRecordError("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(f"invalid sequence number {header.base_sequence}")
    if rules.timestamp_type == TimestampType.CREATE_TIME:
        _check_timestamps(header, rules, now_ms)
    if rules.require_keys:
        batch = decode_batch(view[position : position + header.size_in_bytes], verify_crc=False)
        keyless = [
            (record.offset - header.base_offset, _KEYLESS_MESSAGE)
            for record in batch.records
            if record.key is None
        ]
        if keyless:
            raise RecordValidationError(_KEYLESS_MESSAGE, keyless)


def _check_timestamps(header: BatchHeader, rules: ValidationRules, now_ms: int) -> None:
    for timestamp in (header.base_timestamp, header.max_timestamp):
        if timestamp == NO_TIMESTAMP:
            continue
        if timestamp < now_ms - rules.timestamp_before_max_ms:
            raise InvalidTimestampError(
                f"timestamp {timestamp} is more than message.timestamp.before.max.ms "
                f"({rules.timestamp_before_max_ms}) before now ({now_ms})"
            )
        if timestamp > now_ms + rules.timestamp_after_max_ms:
            raise InvalidTimestampError(
                f"timestamp {timestamp} is more than message.timestamp.after.max.ms "
                f"({rules.timestamp_after_max_ms}) after now ({now_ms})"
            )
