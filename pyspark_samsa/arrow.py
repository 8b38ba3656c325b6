"""Record batches (RecordBatch v2 bytes, as fetched or as stored in ``.log`` files) to Arrow.

The output is exactly Spark's Kafka schema: key binary, value binary, topic string, partition
int32, offset int64, timestamp timestamp[us, UTC], timestampType int32, and with headers
list<struct<key string, value binary>>.

How (the hot path of every read, so no Python object per record):

1. Per batch, in Python: the 61-byte header is parsed and checked (magic, CRC-32C as Kafka's
   consumers check it), batches wholly below ``start`` are skipped, the first batch at or
   past ``end`` stops the chunk; control batches (transaction markers) are skipped, as a
   consumer skips them, and so are aborted transactions' batches when reading read_committed
   (``pyspark_samsa.aborted``). The records sections (decompressed: every codec) are joined into
   one buffer.
2. Where each record starts (a chain: a record starts where the previous one ends) is found
   by ``pyspark_samsa.walk``: vectorised guesses, checked, walked in Python only where wrong.
3. Everything else is vectorised with numpy over all records of the chunk: the varints
   (timestamp delta, offset delta, key and value lengths, header count), offsets and
   timestamps; key and value columns are binary-view arrays pointing into the joined buffer,
   cast by Arrow (C++) to plain binary. Headers, when asked for, are parsed in Python for the
   records that have any.

Records below ``start`` or at/after ``end`` (the range may begin or end inside a batch) are
filtered out, so a range always yields the same rows: reads are deterministic.

Malformed input raises ``CorruptMessageError`` naming the batch; nothing is skipped silently.
Pure functions: no I/O, no state.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import crc32c
import numpy as np
import pyarrow as pa

from protocol.compression import decompress
from protocol.errors import CorruptMessageError
from protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, read_batch_header
from pyspark_samsa.aborted import AbortedTransactions
from pyspark_samsa.walk import PADDING, record_starts

__all__ = ["HEADERS_TYPE", "Decoded", "arrow_schema", "decode_batches", "empty_batch"]

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()),
                                                       ("value", pa.binary())])))
_BASE_FIELDS = [
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
]
SCHEMA = pa.schema(_BASE_FIELDS)
SCHEMA_WITH_HEADERS = pa.schema([*_BASE_FIELDS, ("headers", HEADERS_TYPE)])

_BATCH_LENGTH = struct.Struct(">i")
_ATTRIBUTES_OFFSET = 21
_CONTROL = 0x20
_LOG_APPEND_TIME = 0x08
_CODEC = 0x07
_FOUR = np.arange(4)
_TWELVE = np.arange(12)


def arrow_schema(include_headers: bool) -> pa.Schema:
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


def empty_batch(include_headers: bool) -> pa.RecordBatch:
    schema = arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


@dataclass(slots=True)
class Decoded:
    """One chunk decoded: the rows in range (None if none), the offset after the last whole
    batch looked at (None if there was none), whether a batch at or past ``end`` was met, and
    how many bytes of the buffer were whole batches."""

    batch: pa.RecordBatch | None
    next_offset: int | None
    reached_end: bool
    consumed_bytes: int


@dataclass(slots=True)
class _Batches:
    """The batches of a chunk that hold records: their records sections joined in ``data``."""

    parts: list[Any]
    counts: list[int]
    base_offsets: list[int]
    base_timestamps: list[int]
    max_timestamps: list[int]
    log_append: list[bool]


def decode_batches(buffer: Any, *, start: int, end: int, topic: str, partition: int,
                   include_headers: bool, aborted: AbortedTransactions | None = None) -> Decoded:
    """Decode the whole batches at the head of ``buffer`` into Spark's Kafka rows within
    offsets [start, end); a batch cut short at the end of the buffer is left for later.
    ``aborted``: read_committed, leaving out what it says holds no rows."""
    view = memoryview(buffer).cast("B")
    batches, next_offset, reached_end, consumed = _scan(view, start, end, aborted)
    if not batches.counts:
        return Decoded(None, next_offset, reached_end, consumed)
    data = b"".join([*batches.parts, bytes(PADDING)])
    columns = _columns(data, batches, include_headers)
    keep = (columns["offset"] >= start) & (columns["offset"] < end)
    if not keep.all():
        columns = {name: column[keep] for name, column in columns.items()}
    count = len(columns["offset"])
    if count == 0:
        return Decoded(None, next_offset, reached_end, consumed)
    record_batch = _record_batch(data, columns, topic, partition, include_headers)
    return Decoded(record_batch, next_offset, reached_end, consumed)


def _scan(view: memoryview, start: int, end: int, aborted: AbortedTransactions | None
          ) -> tuple[_Batches, int | None, bool, int]:
    batches = _Batches([], [], [], [], [], [])
    position, size = 0, len(view)
    next_offset: int | None = None
    while position + LOG_OVERHEAD <= size:
        batch_size = _BATCH_LENGTH.unpack_from(view, position + 8)[0] + LOG_OVERHEAD
        if position + batch_size > size and batch_size >= BATCH_HEADER_SIZE:
            break  # cut short by the fetch size or the read: the next read starts here
        header = read_batch_header(view, position)
        if header.last_offset < start:
            next_offset = header.next_offset
            position += batch_size
            continue
        if header.base_offset >= end:
            return batches, next_offset, True, position
        batch_end = position + batch_size
        if crc32c.crc32c(view[position + _ATTRIBUTES_OFFSET:batch_end]) != header.crc:
            raise CorruptMessageError(
                f"record batch at offset {header.base_offset} fails its CRC check")
        next_offset = header.next_offset
        if aborted is None:
            rows = not header.attributes & _CONTROL
        else:
            rows = not aborted.holds_no_rows(view, position, header)
        if rows and header.records_count > 0:
            payload = view[position + BATCH_HEADER_SIZE:batch_end]
            codec = header.attributes & _CODEC
            batches.parts.append(payload if codec == 0 else decompress(codec, payload))
            batches.counts.append(header.records_count)
            batches.base_offsets.append(header.base_offset)
            batches.base_timestamps.append(header.base_timestamp)
            batches.max_timestamps.append(header.max_timestamp)
            batches.log_append.append(bool(header.attributes & _LOG_APPEND_TIME))
        position = batch_end
        if next_offset >= end:
            return batches, next_offset, True, position
    return batches, next_offset, False, position


# --- records ---------------------------------------------------------------------------------


def _varint_at(data: bytes, position: int) -> tuple[int, int]:
    value = 0
    for index in range(5):
        byte = data[position + index]
        value |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            value &= 0xFFFFFFFF
            return (value >> 1) ^ -(value & 1), position + index + 1
    raise CorruptMessageError(f"varint at byte {position} is longer than 5 bytes")


def _varints(buffer: np.ndarray, positions: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints at ``positions`` (at most ``max_bytes`` each), vectorised: their
    values (int64) and the positions after them."""
    try:
        byte = buffer[positions]
        after = positions + 1
        pending = np.flatnonzero(byte >= 0x80)
        if not pending.size:  # every one a single byte (-64..63): most fields of most records
            value = byte.astype(np.int64)
            return (value >> 1) ^ -(value & 1), after
        wide = (byte & 0x7F).astype(np.uint64)
        shift = 7
        while pending.size:
            if shift >= 7 * max_bytes:
                raise CorruptMessageError(f"a varint is longer than {max_bytes} bytes")
            at = after[pending]
            byte = buffer[at]
            wide[pending] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
            after[pending] = at + 1
            pending = pending[byte >= 0x80]
            shift += 7
    except IndexError:
        raise CorruptMessageError("a record field runs past the end of its batch") from None
    if max_bytes == 5:  # Java keeps the low 32 bits of a 5-byte varint
        wide &= np.uint64(0xFFFFFFFF)
    signed = (wide >> np.uint64(1)).astype(np.int64) ^ -(wide & np.uint64(1)).astype(np.int64)
    return signed, after


def _columns(data: bytes, batches: _Batches, include_headers: bool) -> dict[str, np.ndarray]:
    """Every record's fields; ``data`` is the joined records sections plus ``PADDING``."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    counts = np.array(batches.counts, dtype=np.int64)
    section_starts = np.cumsum([0] + [len(part) for part in batches.parts[:-1]], dtype=np.int64)
    record_start = record_starts(buffer, len(data) - PADDING, section_starts, counts)
    lengths, body = _varints(buffer, record_start, 5)
    record_end = body + lengths
    timestamp_delta, position = _varints(buffer, body + 1, 10)  # body[0]: attributes, unused
    offset_delta, position = _varints(buffer, position, 5)
    key_length, key_start = _varints(buffer, position, 5)
    value_length, value_start = _varints(buffer, key_start + np.maximum(key_length, 0), 5)
    value_end = value_start + np.maximum(value_length, 0)
    if (key_length < -1).any() or (value_length < -1).any() or (value_end > record_end).any():
        raise CorruptMessageError("a record's key or value runs past the end of the record")
    columns = {
        "offset": np.repeat(np.array(batches.base_offsets, dtype=np.int64), counts) + offset_delta,
        "timestamp": _timestamps(batches, counts, timestamp_delta),
        "timestampType": np.repeat(np.array(batches.log_append, dtype=np.int32), counts),
        "key_start": key_start, "key_length": key_length,
        "value_start": value_start, "value_length": value_length,
    }
    if include_headers:
        columns["header_start"] = value_end
        columns["record_end"] = record_end
    return columns


def _timestamps(batches: _Batches, counts: np.ndarray, delta: np.ndarray) -> np.ndarray:
    milliseconds = np.repeat(np.array(batches.base_timestamps, dtype=np.int64), counts) + delta
    if any(batches.log_append):  # LOG_APPEND_TIME: every record's timestamp is max_timestamp
        appended = np.repeat(np.array(batches.log_append), counts)
        maximum = np.repeat(np.array(batches.max_timestamps, dtype=np.int64), counts)
        milliseconds = np.where(appended, maximum, milliseconds)
    return milliseconds


# --- Arrow -----------------------------------------------------------------------------------


def _record_batch(data: bytes, columns: dict[str, np.ndarray], topic: str, partition: int,
                  include_headers: bool) -> pa.RecordBatch:
    count = len(columns["offset"])
    source = pa.py_buffer(data)
    buffer = np.frombuffer(data, dtype=np.uint8)
    arrays = [
        _binary(source, buffer, columns["key_start"], columns["key_length"]),
        _binary(source, buffer, columns["value_start"], columns["value_length"]),
        _constant_string(topic, count),
        pa.array(np.full(count, partition, dtype=np.int32)),
        pa.array(columns["offset"]),
        pa.array(columns["timestamp"] * 1000, type=pa.timestamp("us", tz="UTC")),
        pa.array(columns["timestampType"]),
    ]
    if include_headers:
        arrays.append(_headers(data, columns["header_start"], columns["record_end"]))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))


def _binary(source: pa.Buffer, buffer: np.ndarray, starts: np.ndarray,
            lengths: np.ndarray) -> pa.Array:
    """A binary column of the byte ranges [start, start + length) of ``source`` (length -1:
    null), built as Arrow binary views into ``source`` and cast to binary in C++."""
    count = len(starts)
    valid = lengths >= 0
    if not valid.any():
        return pa.nulls(count, pa.binary())
    views = np.zeros((count, 16), dtype=np.uint8)
    words = views.view(np.int32)  # (count, 4): length, prefix or inline bytes, buffer, offset
    sizes = np.maximum(lengths, 0)
    words[:, 0] = sizes
    inline = sizes <= 12
    if not inline.any():  # the common case: no fancy indexing of the views
        views[:, 4:8] = buffer[starts[:, None] + _FOUR]
        words[:, 3] = starts
    else:
        short = np.flatnonzero(inline)
        indexes = starts[short, None] + _TWELVE
        gathered = buffer[np.minimum(indexes, len(buffer) - 1)]
        gathered[sizes[short, None] <= _TWELVE] = 0
        views[short, 4:16] = gathered
        long = np.flatnonzero(~inline)
        if long.size:
            views[long, 4:8] = buffer[starts[long, None] + _FOUR]
            words[long, 3] = starts[long]
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(pa.binary_view(), count, [validity, pa.py_buffer(views), source],
                                  null_count=int(count - valid.sum()))
    return array.cast(pa.binary())


def _constant_string(text: str, count: int) -> pa.Array:
    encoded = text.encode()
    offsets = np.arange(count + 1, dtype=np.int32) * len(encoded)
    return pa.Array.from_buffers(pa.string(), count,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(encoded * count)])


def _headers(data: bytes, header_start: np.ndarray, record_end: np.ndarray) -> pa.Array:
    buffer = np.frombuffer(data, dtype=np.uint8)
    header_count, after = _varints(buffer, header_start, 5)
    count = len(header_start)
    none = header_count == 0
    if (header_count < 0).any() or (after[none] != record_end[none]).any():
        raise CorruptMessageError("a record's headers do not fill the end of the record")
    if none.all():
        offsets = pa.array(np.zeros(count + 1, dtype=np.int32))
        empty = pa.array([], HEADERS_TYPE.value_type)
        return pa.ListArray.from_arrays(offsets, empty, type=HEADERS_TYPE)
    rows: list[list[tuple[str, bytes | None]]] = []
    for index in range(count):
        if none[index]:
            rows.append([])
            continue
        rows.append(_parse_headers(data, int(after[index]), int(header_count[index]),
                                   int(record_end[index])))
    return pa.array(rows, type=HEADERS_TYPE)


def _parse_headers(data: bytes, position: int, count: int,
                   end: int) -> list[tuple[str, bytes | None]]:
    headers: list[tuple[str, bytes | None]] = []
    try:
        for _ in range(count):
            key_length, position = _varint_at(data, position)
            if key_length < 0:
                raise CorruptMessageError("null header key")
            key = data[position:position + key_length].decode("utf-8", "replace")
            position += key_length
            value_length, position = _varint_at(data, position)
            value = None if value_length < 0 else data[position:position + value_length]
            position += max(value_length, 0)
            headers.append((key, value))
    except IndexError:
        raise CorruptMessageError("a record's headers are truncated") from None
    if position != end:
        raise CorruptMessageError("a record's headers do not fill the end of the record")
    return headers
