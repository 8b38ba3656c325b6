"""RecordBatch v2 (magic 2): the unit of records on the wire and in ``.log`` segment files.

Byte layout, big-endian, identical on the wire and on disk (Kafka's DefaultRecordBatch)::

    offset size field                   CRC   notes
         0    8 base_offset             no    rewritten by the leader
         8    4 batch_length            no    bytes after this field
        12    4 partition_leader_epoch  no    rewritten by the leader
        16    1 magic                   no    2; byte 16 is the magic in every format
        17    4 crc                     -     uint32 CRC-32C of bytes 21..end
        21    2 attributes              yes   see below
        23    4 last_offset_delta       yes   also the last sequence delta
        27    8 base_timestamp          yes   the delete horizon when bit 6 is set
        35    8 max_timestamp           yes   the log append time for LOG_APPEND_TIME
        43    8 producer_id             yes
        51    2 producer_epoch          yes
        53    4 base_sequence           yes
        57    4 records_count           yes
        61    - records                 yes   compressed as a whole unless codec NONE

    attributes: bits 0-2 codec (protocol.compression), 3 timestamp type (1 = LOG_APPEND_TIME),
    4 transactional, 5 control, 6 delete horizon set (KIP-534), 7-15 unused (0).

    record:  length varint (bytes after it) | attributes int8 (unused, 0)
             | timestamp_delta varlong | offset_delta varint
             | key_length varint (-1 = null) | key | value_length varint (-1 = null) | value
             | header_count varint | headers: key_length varint | key (UTF-8)
                                             | value_length varint (-1 = null) | value

    varint / varlong: zigzag, then little-endian groups of 7 bits with a continuation bit
    (protobuf); at most 5 / 10 bytes, as Java's ByteUtils reads them.

Invariants:
- size_in_bytes = batch_length + LOG_OVERHEAD >= BATCH_HEADER_SIZE; records_count >= 0.
- The CRC covers attributes..end, so base_offset and partition_leader_epoch are rewritten
  in place without recomputing it; rewriting max_timestamp or attributes needs a new CRC.
- last_offset = base_offset + last_offset_delta survives compaction even when the last
  records (or all of them) are removed, so producer sequence state can be rebuilt.
- Record offsets are base_offset + offset_delta with 0 <= delta <= last_offset_delta.
- Timestamp deltas wrap in int64 like Java's long arithmetic, so any int64 timestamps
  round-trip. In a LOG_APPEND_TIME batch every record's timestamp is max_timestamp; the
  stored deltas are ignored on read, as in Kafka.

Pure functions and frozen values: no I/O, no state, nothing owned by any task.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

import crc32c

from protocol.compression import CompressionType, compress, compression_type, decompress
from protocol.errors import CorruptMessageError, InvalidRecordError

if TYPE_CHECKING:
    from typing_extensions import Buffer

MAGIC_V2 = 2
LOG_OVERHEAD = 12  # int64 base_offset + int32 batch_length
BATCH_HEADER_SIZE = 61
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35
_PARTITION_LEADER_EPOCH_OFFSET = 12
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
_DELETE_HORIZON_MASK = 0x40

_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TRANSACTION_MARKER = struct.Struct(">hi")  # version, coordinator_epoch
assert _HEADER.size == BATCH_HEADER_SIZE

Header = tuple[str, bytes | None]  # Kafka header keys are UTF-8 strings, values nullable
_Bytes = bytes | bytearray | memoryview


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(IntEnum):
    """Key of a control record: int16 version 0, int16 type (Kafka's ControlRecordType)."""

    UNKNOWN = -1  # a type this code does not know; readers skip it, as Kafka's do
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2  # KRaft
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte batch header, parsed without touching the records."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        """The codec; InvalidRecordError for the undefined ids 5-7."""
        return compression_type(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & _TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & _DELETE_HORIZON_MASK else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordBatch:
    header: BatchHeader
    records: tuple[Record, ...]

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def size_in_bytes(self) -> int:
        return self.header.size_in_bytes

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control


# A frozen dataclass's __init__ sets each field through object.__setattr__, which costs
# 3-5x a plain attribute store, and records are built by the thousand per batch. These
# twins have the same slots, so an instance built with plain stores can take on the
# frozen class (__class__ assignment checks the layouts match). Tests compare the two.
class _BatchHeaderTwin:
    __slots__ = BatchHeader.__slots__

    def __init__(self, *fields: int) -> None:
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = fields


class _RecordTwin:
    __slots__ = Record.__slots__

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Header, ...],
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers


def _new_batch_header(fields: tuple[int, ...]) -> BatchHeader:
    header = _BatchHeaderTwin(*fields)
    header.__class__ = BatchHeader  # type: ignore[assignment]
    return header  # type: ignore[return-value]


def _new_record(
    offset: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[Header, ...],
) -> Record:
    record = _RecordTwin(offset, timestamp, key, value, headers)
    record.__class__ = Record  # type: ignore[assignment]
    return record  # type: ignore[return-value]


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping from INT32_MAX to 0 as producer sequences do."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


# --- varints ------------------------------------------------------------------------


class _Malformed(Exception):
    """A record field is invalid; the caller adds where the record is."""


_ONE_BYTE = tuple(bytes((value,)) for value in range(0x80))
_NULL_LENGTH = b"\x01"  # zigzag(-1)


def _unsigned_varint_bytes(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_unsigned(data: _Bytes, position: int, max_bytes: int) -> tuple[int, int]:
    """Unsigned varint of at most ``max_bytes``; IndexError when it runs off the end."""
    value = 0
    for index in range(max_bytes):
        byte = data[position + index]
        value |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            return value, position + index + 1
    raise _Malformed(f"varint at byte {position} is longer than {max_bytes} bytes")


def _read_varint(data: _Bytes, position: int) -> tuple[int, int]:
    byte = data[position]
    if byte < 0x80:  # one byte: -64..63
        return (byte >> 1) ^ -(byte & 1), position + 1
    second = data[position + 1]
    if second < 0x80:  # two bytes: -8192..8191, most lengths and offset deltas
        value = (byte & 0x7F) | (second << 7)
        return (value >> 1) ^ -(value & 1), position + 2
    value, position = _read_unsigned(data, position, 5)
    value &= 0xFFFFFFFF  # Java keeps the low 32 bits of a 5-byte varint
    return (value >> 1) ^ -(value & 1), position


def _read_varlong(data: _Bytes, position: int) -> tuple[int, int]:
    byte = data[position]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), position + 1
    second = data[position + 1]
    if second < 0x80:  # timestamp deltas of up to 8 s
        value = (byte & 0x7F) | (second << 7)
        return (value >> 1) ^ -(value & 1), position + 2
    value, position = _read_unsigned(data, position, 10)
    value &= 0xFFFFFFFFFFFFFFFF  # and the low 64 bits of a 10-byte varlong
    return (value >> 1) ^ -(value & 1), position


def _checked_read(
    reader: Callable[[_Bytes, int], tuple[int, int]], buffer: _Bytes, position: int, what: str
) -> tuple[int, int]:
    try:
        return reader(buffer, position)
    except IndexError:
        raise CorruptMessageError(f"{what} at position {position} is truncated") from None
    except _Malformed as e:
        raise CorruptMessageError(str(e)) from None


def encode_unsigned_varint(value: int) -> bytes:
    """Unsigned varint of a uint32 (compact lengths and tagged fields of the protocol)."""
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    return _unsigned_varint_bytes(value)


def decode_unsigned_varint(buffer: _Bytes, position: int = 0) -> tuple[int, int]:
    """(uint32 value, position after it); CorruptMessageError if truncated or > 5 bytes."""
    value, end = _checked_read(_read_unsigned_5, buffer, position, "unsigned varint")
    return value & 0xFFFFFFFF, end


def _read_unsigned_5(data: _Bytes, position: int) -> tuple[int, int]:
    return _read_unsigned(data, position, 5)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of an int32."""
    if not -(2**31) <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _unsigned_varint_bytes((value << 1) ^ (value >> 31))


def decode_varint(buffer: _Bytes, position: int = 0) -> tuple[int, int]:
    """(int32 value, position after it); CorruptMessageError if truncated or > 5 bytes."""
    return _checked_read(_read_varint, buffer, position, "varint")


def encode_varlong(value: int) -> bytes:
    """Zigzag varint of an int64 (same bytes as encode_varint for int32 values)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _unsigned_varint_bytes((value << 1) ^ (value >> 63))


def decode_varlong(buffer: _Bytes, position: int = 0) -> tuple[int, int]:
    """(int64 value, position after it); CorruptMessageError if truncated or > 10 bytes."""
    return _checked_read(_read_varlong, buffer, position, "varlong")


# --- batch header -----------------------------------------------------------------


def read_batch_header(buffer: Buffer, position: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``position``; the records need not be present.

    CorruptMessageError: fewer than 61 bytes, batch_length < 49 or records_count < 0.
    InvalidRecordError: magic other than 2 (checked first whenever byte 16 is present).
    """
    if position < 0:
        raise ValueError(f"negative position {position}")
    try:
        fields = _HEADER.unpack_from(buffer, position)
    except struct.error:
        raise _short_header_error(buffer, position) from None
    if fields[3] != MAGIC_V2:
        raise _magic_error(fields[3], position)
    if fields[1] < _MIN_BATCH_LENGTH:
        raise CorruptMessageError(
            f"record batch at position {position} has batch_length {fields[1]},"
            f" below the minimum {_MIN_BATCH_LENGTH}"
        )
    if fields[12] < 0:
        raise CorruptMessageError(
            f"record batch at position {position} has a negative records_count {fields[12]}"
        )
    return _new_batch_header(fields)


def _short_header_error(buffer: Buffer, position: int) -> Exception:
    view = memoryview(buffer)
    available = max(0, view.nbytes - position)
    if available > 16 and view[position + 16] != MAGIC_V2:
        return _magic_error(view[position + 16], position)
    return CorruptMessageError(
        f"record batch header at position {position} is truncated:"
        f" {available} of {BATCH_HEADER_SIZE} bytes available"
    )


def _magic_error(magic: int, position: int) -> InvalidRecordError:
    if magic in (0, 1):
        return InvalidRecordError(
            f"legacy message format (magic {magic}) is not supported; Kafka 4 dropped it"
            f" (batch at position {position})"
        )
    return InvalidRecordError(f"unknown magic {magic} in record batch at position {position}")


def batch_crc_is_valid(buffer: Buffer, position: int, header: BatchHeader) -> bool:
    """CRC-32C over attributes..end equals the stored crc; False if the batch is cut short."""
    view = memoryview(buffer)
    end = position + header.size_in_bytes
    if end > view.nbytes:
        return False
    return crc32c.crc32c(view[position + _ATTRIBUTES_OFFSET : end]) == header.crc


def set_base_offset(buffer: Buffer, position: int, base_offset: int) -> None:
    """Rewrite base_offset in place (writable buffer). Not covered by the CRC: no recompute."""
    _INT64.pack_into(buffer, position, base_offset)


def set_partition_leader_epoch(buffer: Buffer, position: int, epoch: int) -> None:
    """Rewrite partition_leader_epoch in place. Not covered by the CRC: no recompute."""
    _INT32.pack_into(buffer, position + _PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buffer: Buffer,
    position: int,
    timestamp_type: TimestampType,
    max_timestamp: int,
    *,
    verify_crc: bool = True,
) -> None:
    """Set the timestamp type and max_timestamp in place and recompute the CRC.

    Kafka's setMaxTimestamp, which its leader applies to every batch it does not
    recompress. The old CRC is checked first so that a damaged batch never gets a fresh,
    valid CRC (CorruptMessageError); pass ``verify_crc=False`` only if it was just checked.
    """
    header = read_batch_header(buffer, position)
    attributes = (header.attributes & ~_TIMESTAMP_TYPE_MASK) | (timestamp_type << 3)
    if attributes == header.attributes and max_timestamp == header.max_timestamp:
        return
    end = position + header.size_in_bytes
    if end > memoryview(buffer).nbytes:
        raise CorruptMessageError(f"record batch at position {position} is truncated")
    if verify_crc and not batch_crc_is_valid(buffer, position, header):
        raise CorruptMessageError(f"record batch at position {position} fails its CRC check")
    _INT16.pack_into(buffer, position + _ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buffer, position + _MAX_TIMESTAMP_OFFSET, max_timestamp)
    view = memoryview(buffer)[position + _ATTRIBUTES_OFFSET : end]
    _UINT32.pack_into(buffer, position + _CRC_OFFSET, crc32c.crc32c(view))


def set_log_append_time(
    buffer: Buffer, position: int, log_append_time: int, *, verify_crc: bool = True
) -> None:
    """Stamp a batch LOG_APPEND_TIME: every record's timestamp becomes ``log_append_time``."""
    set_max_timestamp(
        buffer, position, TimestampType.LOG_APPEND_TIME, log_append_time, verify_crc=verify_crc
    )


# --- decoding ---------------------------------------------------------------------


def decode_batch(buffer: Buffer, position: int = 0, *, verify_crc: bool = True) -> RecordBatch:
    """Decode the batch at ``position`` with all its records, decompressing as needed.

    CorruptMessageError for a truncated batch, a CRC mismatch, bad compressed data or
    malformed records (the message says which record and at which byte);
    InvalidRecordError for a magic other than 2 or an undefined codec id.
    """
    header = read_batch_header(buffer, position)
    view = memoryview(buffer)
    end = position + header.size_in_bytes
    if end > view.nbytes:
        raise CorruptMessageError(
            f"record batch at position {position} is truncated: {header.size_in_bytes} bytes"
            f" declared, {view.nbytes - position} available"
        )
    if verify_crc:
        computed = crc32c.crc32c(view[position + _ATTRIBUTES_OFFSET : end])
        if computed != header.crc:
            raise CorruptMessageError(
                f"record batch at position {position} is corrupt"
                f" (stored crc = {header.crc}, computed crc = {computed})"
            )
    if header.records_count == 0:  # Kafka does not look at the records of an empty batch
        return RecordBatch(header, ())
    payload = view[position + BATCH_HEADER_SIZE : end]
    codec = header.compression
    if codec is CompressionType.NONE:
        records = _decode_records(bytes(payload), header, position, position + BATCH_HEADER_SIZE)
    else:
        records = _decode_records(decompress(codec, payload), header, position, None)
    return RecordBatch(header, records)


def _decode_records(
    data: bytes, header: BatchHeader, batch_position: int, origin: int | None
) -> tuple[Record, ...]:
    """``origin``: buffer position of data[0], or None when data was decompressed."""
    base_offset, base_timestamp = header.base_offset, header.base_timestamp
    log_append_time = header.max_timestamp if header.attributes & _TIMESTAMP_TYPE_MASK else None
    records: list[Record] = []
    position, end = 0, len(data)
    for index in range(header.records_count):
        if position >= end:
            raise CorruptMessageError(
                f"record batch at position {batch_position} declares {header.records_count}"
                f" records, its records end after {index}"
            )
        try:
            record, position = _decode_record(
                data, position, base_offset, base_timestamp, log_append_time
            )
        except (_Malformed, IndexError) as e:
            problem = str(e) if isinstance(e, _Malformed) else "record is truncated"
            where = _where(batch_position, origin, position)
            raise CorruptMessageError(f"record {index} {where}: {problem}") from None
        records.append(record)
    if position != end:
        raise CorruptMessageError(
            f"record batch at position {batch_position} has {end - position} bytes"
            f" after its {header.records_count} records"
        )
    return tuple(records)


def _where(batch_position: int, origin: int | None, position: int) -> str:
    if origin is None:
        return (
            f"at byte {position} of the decompressed records"
            f" of the batch at position {batch_position}"
        )
    return f"at position {origin + position} (batch at position {batch_position})"


def _decode_record(
    data: bytes, position: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> tuple[Record, int]:
    # The per-record hot path of every consumer: the common one-byte varints (timestamp
    # delta, null key, no headers) are read inline rather than through a call.
    length, position = _read_varint(data, position)
    end = position + length
    if length < 0 or end > len(data):
        raise _Malformed(
            f"record length {length} does not fit in the {len(data) - position} bytes left"
        )
    # data[position] is the record attributes byte: Kafka defines none, and ignores it
    byte = data[position + 1]
    if byte < 0x80:
        timestamp_delta, position = (byte >> 1) ^ -(byte & 1), position + 2
    else:
        timestamp_delta, position = _read_varlong(data, position + 1)
    offset_delta, position = _read_varint(data, position)
    if data[position] == 1:  # zigzag(-1): null key
        key, position = None, position + 1
    else:
        key, position = _read_nullable_bytes(data, position, end, "key")
    value, position = _read_nullable_bytes(data, position, end, "value")
    headers: tuple[Header, ...] = ()
    if data[position] == 0:  # no headers
        position += 1
    else:
        header_count, position = _read_varint(data, position)
        headers, position = _read_headers(data, position, end, header_count)
    if position != end:
        raise _Malformed(f"record length {length}, its fields take {position - end + length}")
    if log_append_time is not None:
        timestamp = log_append_time
    else:
        timestamp = base_timestamp + timestamp_delta
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            timestamp = _wrap_int64(timestamp)
    return _new_record(base_offset + offset_delta, timestamp, key, value, headers), position


def _read_nullable_bytes(
    data: bytes, position: int, end: int, what: str
) -> tuple[bytes | None, int]:
    length, position = _read_varint(data, position)
    if length < 0:
        if length == -1:
            return None, position
        raise _Malformed(f"{what} length {length}")
    stop = position + length
    if stop > end:
        raise _Malformed(f"{what} length {length} runs past the end of the record")
    return data[position:stop], stop


def _read_headers(
    data: bytes, position: int, end: int, count: int
) -> tuple[tuple[Header, ...], int]:
    if count < 0 or count > end - position:
        raise _Malformed(f"invalid header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        key, position = _read_nullable_bytes(data, position, end, "header key")
        if key is None:
            raise _Malformed("null header key")
        value, position = _read_nullable_bytes(data, position, end, "header value")
        # surrogateescape: a key that is not valid UTF-8 still round-trips byte for byte
        headers.append((key.decode("utf-8", "surrogateescape"), value))
    return tuple(headers), position


def _wrap_int64(value: int) -> int:
    return ((value - _INT64_MIN) & 0xFFFFFFFFFFFFFFFF) + _INT64_MIN


def iter_batches(
    buffer: Buffer, *, verify_crc: bool = True, allow_partial_tail: bool = False
) -> Iterator[RecordBatch]:
    """Decode consecutive batches filling ``buffer``.

    ``allow_partial_tail``: stop quietly at a batch cut short by the end of the buffer,
    as Kafka clients do with fetch responses trimmed to max_bytes; otherwise it is a
    CorruptMessageError.
    """
    view = memoryview(buffer)
    position, end = 0, view.nbytes
    while position < end:
        if allow_partial_tail and _is_partial(view, position, end):
            return
        batch = decode_batch(view, position, verify_crc=verify_crc)
        yield batch
        position += batch.header.size_in_bytes


def _is_partial(view: memoryview, position: int, end: int) -> bool:
    if end - position < LOG_OVERHEAD:
        return True
    (batch_length,) = _INT32.unpack_from(view, position + 8)
    return batch_length >= _MIN_BATCH_LENGTH and position + LOG_OVERHEAD + batch_length > end


# --- encoding ---------------------------------------------------------------------


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    compression: CompressionType = CompressionType.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode one batch as Kafka's MemoryRecordsBuilder would.

    Defaults: base_offset = first record's offset; last_offset_delta = last record's
    delta (the cleaner passes the original batch's, so the batch keeps its last offset);
    base_timestamp = first record's timestamp, or delete_horizon_ms when given (sets
    attributes bit 6, KIP-534); max_timestamp = the largest record timestamp but at
    least NO_TIMESTAMP, as Kafka's builder computes it (pass the log append time for
    LOG_APPEND_TIME, or the original value for an emptied batch). An empty batch needs
    an explicit base_offset and, like Kafka's writeEmptyHeader, is written uncompressed.
    ValueError for offsets that do not increase from base_offset or a field out of range.
    """
    if base_offset is None:
        if not records:
            raise ValueError("an empty batch needs an explicit base_offset")
        base_offset = records[0].offset
    base_timestamp = _base_timestamp(records, base_timestamp, delete_horizon_ms)
    payload: bytes | bytearray
    payload, last_delta, largest_timestamp = _encode_records(records, base_offset, base_timestamp)
    if last_offset_delta is None:
        last_offset_delta = max(last_delta, 0)
    elif not max(last_delta, 0) <= last_offset_delta <= _INT32_MAX:
        raise ValueError(
            f"last_offset_delta {last_offset_delta} is outside {max(last_delta, 0)}..{_INT32_MAX}"
        )
    if base_offset + last_offset_delta > _INT64_MAX:
        raise ValueError(f"last offset {base_offset + last_offset_delta} exceeds int64")
    compression = compression_type(compression) if records else CompressionType.NONE
    if compression is not CompressionType.NONE:
        payload = compress(compression, payload)
    attributes = _attributes(
        compression, timestamp_type, is_transactional, is_control, delete_horizon_ms is not None
    )
    fields = (
        base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload), partition_leader_epoch,
        MAGIC_V2, 0, attributes, last_offset_delta, base_timestamp,
        max(largest_timestamp, NO_TIMESTAMP) if max_timestamp is None else max_timestamp,
        producer_id, producer_epoch, base_sequence, len(records),
    )  # fmt: skip
    return _assemble(fields, payload)


def _base_timestamp(
    records: Sequence[Record], base_timestamp: int | None, delete_horizon_ms: int | None
) -> int:
    if delete_horizon_ms is not None:
        if base_timestamp is not None and base_timestamp != delete_horizon_ms:
            raise ValueError("base_timestamp and delete_horizon_ms must agree (KIP-534)")
        return delete_horizon_ms
    if base_timestamp is not None:
        return base_timestamp
    return records[0].timestamp if records else NO_TIMESTAMP


def _assemble(fields: tuple[int, ...], payload: bytes | bytearray) -> bytes:
    """Header ``fields`` (crc ignored) + records section, with the CRC filled in."""
    header = bytearray(BATCH_HEADER_SIZE)
    try:
        _HEADER.pack_into(header, 0, *fields)
    except struct.error as e:
        raise ValueError(f"a batch header field is out of range: {e}") from None
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[_ATTRIBUTES_OFFSET:]))
    _UINT32.pack_into(header, _CRC_OFFSET, crc)
    return b"".join((header, payload))


def _attributes(
    compression: CompressionType,
    timestamp_type: TimestampType,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
) -> int:
    attributes = int(compression)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= _TRANSACTIONAL_MASK
    if is_control:
        attributes |= _CONTROL_MASK
    if has_delete_horizon:
        attributes |= _DELETE_HORIZON_MASK
    return attributes


def _encode_records(
    records: Sequence[Record], base_offset: int, base_timestamp: int
) -> tuple[bytearray, int, int]:
    """(records section, last offset delta, largest timestamp); -1 / NO_TIMESTAMP if empty."""
    out = bytearray()
    previous_delta = -1
    largest = smallest = records[0].timestamp if records else NO_TIMESTAMP
    for record in records:
        offset_delta = record.offset - base_offset
        if not previous_delta < offset_delta <= _INT32_MAX:
            raise ValueError(
                f"record offset {record.offset} does not increase from base offset"
                f" {base_offset} by 0..{_INT32_MAX} (previous delta {previous_delta})"
            )
        previous_delta = offset_delta
        timestamp = record.timestamp
        if timestamp > largest:
            largest = timestamp
        elif timestamp < smallest:
            smallest = timestamp
        timestamp_delta = timestamp - base_timestamp
        if not _INT64_MIN <= timestamp_delta <= _INT64_MAX:
            timestamp_delta = _wrap_int64(timestamp_delta)  # as Java's long subtraction does
        _encode_record(out, offset_delta, timestamp_delta, record)
    if not _INT64_MIN <= smallest <= largest <= _INT64_MAX:
        raise ValueError(f"record timestamps {smallest}..{largest} exceed int64")
    return out, previous_delta, largest


def _encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, record: Record) -> None:
    # Hot path of every producer: one join per record, no intermediate buffers.
    key, value, headers = record.key, record.value, record.headers
    parts = [
        b"\x00",  # attributes: Kafka defines no record attributes
        _unsigned_varint_bytes((timestamp_delta << 1) ^ (timestamp_delta >> 63)),
        _unsigned_varint_bytes(offset_delta << 1),
    ]
    if key is None:
        parts.append(_NULL_LENGTH)
    else:
        parts += (_unsigned_varint_bytes(len(key) << 1), key)
    if value is None:
        parts.append(_NULL_LENGTH)
    else:
        parts += (_unsigned_varint_bytes(len(value) << 1), value)
    if headers:
        _append_headers(parts, headers)
    else:
        parts.append(_ONE_BYTE[0])
    body = b"".join(parts)
    out += _unsigned_varint_bytes(len(body) << 1)
    out += body


def _append_headers(parts: list[bytes], headers: tuple[Header, ...]) -> None:
    parts.append(_unsigned_varint_bytes(len(headers) << 1))
    for key, value in headers:
        key_bytes = key.encode("utf-8", "surrogateescape")
        parts += (_unsigned_varint_bytes(len(key_bytes) << 1), key_bytes)
        if value is None:
            parts.append(_NULL_LENGTH)
        else:
            parts += (_unsigned_varint_bytes(len(value) << 1), value)


# --- control records ----------------------------------------------------------------


def encode_control_record(
    record_type: ControlRecordType, *, coordinator_epoch: int, offset: int, timestamp: int
) -> Record:
    """An end-transaction marker (ABORT or COMMIT) for a control batch.

    key = int16 version 0 + int16 type; value = EndTransactionMarker: int16 version 0 +
    int32 coordinator_epoch. Write it with encode_batch(..., is_control=True,
    is_transactional=True) and the producer's id and epoch, as Kafka does.
    """
    if record_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"{record_type!r} is not an end-transaction marker type")
    key = _CONTROL_KEY.pack(0, record_type)
    value = _END_TRANSACTION_MARKER.pack(0, coordinator_epoch)
    return Record(offset=offset, timestamp=timestamp, key=key, value=value)


def control_record_type(record: Record) -> ControlRecordType:
    """The type in a control record's key; UNKNOWN for types this code does not know.

    InvalidRecordError (Kafka's InvalidRecordException) for a key under 4 bytes or a
    negative version; later key versions are read as version 0, as Kafka does.
    """
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError(
            f"control record at offset {record.offset} has a key of"
            f" {0 if key is None else len(key)} bytes, needs 4"
        )
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"control record at offset {record.offset}: version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


def decode_control_record(record: Record) -> tuple[ControlRecordType, int]:
    """(ABORT or COMMIT, coordinator_epoch) of an end-transaction marker record.

    InvalidRecordError if it is another control type, the value is under 6 bytes or
    its version is negative; later value versions are read as version 0, as Kafka does.
    """
    record_type = control_record_type(record)
    if record_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(
            f"control record at offset {record.offset} is {record_type.name},"
            " not an end-transaction marker"
        )
    value = record.value
    if value is None or len(value) < _END_TRANSACTION_MARKER.size:
        raise InvalidRecordError(
            f"end-transaction marker at offset {record.offset} has a value under 6 bytes"
        )
    version, coordinator_epoch = _END_TRANSACTION_MARKER.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(
            f"end-transaction marker at offset {record.offset}: version {version}"
        )
    return record_type, coordinator_epoch
