"""Records from fetched bytes: the consumer's decoding hot path.

A fetch response's records section for one partition is kept as the bytes the broker sent (a
memoryview of the response frame). ``parse_batches`` reads only the 61-byte batch headers (the
layout is in ``protocol.records``); ``CompletedFetch.take`` decodes batch by batch, straight
into ``ConsumerRecord`` objects, only as many as ``poll()`` returns, and advances the
partition's position. Records below the position (the first batch of a fetch usually starts
before it) are skipped; control batches are always skipped; with ``read_committed`` the
batches of aborted transactions are skipped, using the response's aborted-transaction list
(Kafka's Fetcher does the same).

Why not ``protocol.records.decode_batch``: it builds a ``Record`` per record, which the
consumer would then copy into a ``ConsumerRecord``; here each record is built once.

State: a ``CompletedFetch`` belongs to the consumer's event loop, like the ``PartitionState``
it advances.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import crc32c

from protocol.compression import compression_type, decompress
from protocol.errors import CorruptMessageError
from samsa._positions import PartitionState
from samsa.types import ConsumerRecord, TopicPartition

__all__ = ["CompletedFetch", "Decoders", "decode_records", "parse_batches"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CONTROL_KEY = struct.Struct(">hh")
_HEADER_SIZE = 61
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20

Deserializer = Callable[[bytes | None], Any] | None


class _RecordTwin:
    """ConsumerRecord's slots without the frozen dataclass's per-field object.__setattr__
    (3-5x the cost of a plain store): ``decode_records`` makes one with ``object.__new__``,
    fills its slots with plain stores (no ``__init__`` frame: half the cost again) and gives it
    ConsumerRecord's class, whose layout matches (``__class__`` assignment checks), as
    protocol.records does for Record. A test compares the two."""

    __slots__ = ConsumerRecord.__slots__


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """Zigzag varint/varlong at ``position``: (value, position after it)."""
    byte = data[position]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), position + 1
    second = data[position + 1]
    if second < 0x80:  # two bytes: most record lengths, value sizes, deltas
        value = (byte & 0x7F) | (second << 7)
        return (value >> 1) ^ -(value & 1), position + 2
    value = (byte & 0x7F) | ((second & 0x7F) << 7)
    shift = 14
    position += 2
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), position
        shift += 7
        if shift > 63:
            raise CorruptMessageError(f"varint at byte {position} is too long")


def _varint_or_byte(data: bytes, position: int) -> tuple[int, int]:
    """A non-negative length (-1, null, is the caller's); CorruptMessageError otherwise."""
    value, position = _varint(data, position)
    if value < 0:
        raise CorruptMessageError(f"negative length {value} at byte {position}")
    return value, position


def decode_records(data: bytes, count: int, *, topic: str, partition: int, base_offset: int,
                   base_timestamp: int, log_append_time: int | None, leader_epoch: int,
                   min_offset: int, key_deserializer: Deserializer = None,
                   value_deserializer: Deserializer = None) -> list[ConsumerRecord]:
    """The ``count`` records of a batch's (uncompressed) records section, as ConsumerRecords;
    those below ``min_offset`` are left out. The hot path of every consumer: one-byte varints
    are read inline and each record is built once, in place."""
    records: list[ConsumerRecord] = []
    append = records.append
    timestamp_type = 0 if log_append_time is None else 1
    cls, twin, new = ConsumerRecord, _RecordTwin, object.__new__
    position = 0
    try:
        for _ in range(count):
            # Each varint: one byte inline, two bytes inline, longer ones through _varint.
            byte = data[position]
            if byte < 0x80:
                length, position = (byte >> 1) ^ -(byte & 1), position + 1
            elif data[position + 1] < 0x80:
                length = (byte & 0x7F) | (data[position + 1] << 7)
                length, position = (length >> 1) ^ -(length & 1), position + 2
            else:
                length, position = _varint(data, position)
            end = position + length
            byte = data[position + 1]  # data[position]: record attributes, unused
            if byte < 0x80:
                timestamp_delta, position = (byte >> 1) ^ -(byte & 1), position + 2
            else:
                timestamp_delta, position = _varint(data, position + 1)
            byte = data[position]
            if byte < 0x80:
                offset_delta, position = (byte >> 1) ^ -(byte & 1), position + 1
            elif data[position + 1] < 0x80:
                offset_delta = (byte & 0x7F) | (data[position + 1] << 7)
                offset_delta, position = (offset_delta >> 1) ^ -(offset_delta & 1), position + 2
            else:
                offset_delta, position = _varint(data, position)
            offset = base_offset + offset_delta
            if offset < min_offset:
                position = end
                continue
            if data[position] == 1:  # zigzag(-1): null
                key, key_size, position = None, -1, position + 1
            else:
                key_size, position = _varint_or_byte(data, position)
                key = data[position:position + key_size]
                position += key_size
            byte = data[position]
            if byte == 1:
                value, value_size, position = None, -1, position + 1
            else:
                if byte < 0x80 and not byte & 1:
                    value_size, position = byte >> 1, position + 1
                elif data[position + 1] < 0x80 and not byte & 1:
                    value_size = ((byte & 0x7F) | (data[position + 1] << 7)) >> 1
                    position += 2
                else:
                    value_size, position = _varint_or_byte(data, position)
                value = data[position:position + value_size]
                position += value_size
            if data[position] == 0:
                headers: tuple[tuple[str, bytes | None], ...] = ()
                position += 1
            else:
                headers, position = _headers(data, position)
            if position != end:
                raise CorruptMessageError(
                    f"record at offset {offset} of {topic}-{partition}: length {length} does"
                    f" not match its fields")
            if log_append_time is None:
                timestamp = base_timestamp + timestamp_delta
            else:
                timestamp = log_append_time
            if key_deserializer is not None:
                key = key_deserializer(key)
            if value_deserializer is not None:
                value = value_deserializer(value)
            record: Any = new(twin)
            record.topic = topic
            record.partition = partition
            record.offset = offset
            record.timestamp = timestamp
            record.timestamp_type = timestamp_type
            record.key = key
            record.value = value
            record.headers = headers
            record.leader_epoch = leader_epoch
            record.serialized_key_size = key_size
            record.serialized_value_size = value_size
            record.__class__ = cls
            append(record)
    except IndexError:
        raise CorruptMessageError(
            f"a record batch of {topic}-{partition} at offset {base_offset} is truncated"
        ) from None
    return records


def _headers(data: bytes, position: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, position = _varint(data, position)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        length, position = _varint(data, position)
        key = data[position:position + length].decode("utf-8", "surrogateescape")
        position += length
        length, position = _varint(data, position)
        if length < 0:
            headers.append((key, None))
        else:
            headers.append((key, data[position:position + length]))
            position += length
    return tuple(headers), position


class _Batch:
    __slots__ = ("attributes", "base_offset", "base_timestamp", "count", "crc", "end",
                 "last_offset", "leader_epoch", "max_timestamp", "position", "producer_id")

    def __init__(self, position: int, fields: tuple[int, ...]) -> None:
        (self.base_offset, batch_length, self.leader_epoch, _, self.crc, self.attributes,
         last_offset_delta, self.base_timestamp, self.max_timestamp, self.producer_id, _, _,
         self.count) = fields
        self.position = position
        self.end = position + 12 + batch_length
        self.last_offset = self.base_offset + last_offset_delta


def parse_batches(view: memoryview) -> list[_Batch]:
    """The complete batches in a fetched records section (a trailing partial one is cut
    off by the broker's size limit and left out, as Kafka's clients do)."""
    batches = []
    position, end = 0, view.nbytes
    while end - position >= _HEADER_SIZE:
        fields = _HEADER.unpack_from(view, position)
        if fields[3] != 2:
            raise CorruptMessageError(f"record batch with magic {fields[3]} (only v2 is read)")
        batch = _Batch(position, fields)
        if batch.end > end or fields[1] < _HEADER_SIZE - 12:
            break
        batches.append(batch)
        position = batch.end
    return batches


class CompletedFetch:
    """One partition's share of a fetch response: its batches, decoded as ``poll()`` asks."""

    __slots__ = ("_aborted", "_aborted_producers", "_batch_end", "_batches", "_index",
                 "_pending", "_pending_index", "epoch", "next_fetch_offset", "tp", "view")

    def __init__(self, tp: TopicPartition, epoch: int, view: memoryview, batches: list[_Batch],
                 aborted: Iterable[tuple[int, int]] | None) -> None:
        self.tp = tp
        self.epoch = epoch
        self.view = view
        self._batches = batches
        self._index = 0
        self._batch_end = -1
        self._pending: list[ConsumerRecord] = []
        self._pending_index = 0
        self.next_fetch_offset = batches[-1].last_offset + 1
        self._aborted = [(first_offset, producer) for producer, first_offset in aborted or ()]
        heapq.heapify(self._aborted)
        self._aborted_producers: set[int] = set()

    @property
    def exhausted(self) -> bool:
        return self._index >= len(self._batches) and self._pending_index >= len(self._pending)

    def take(self, state: PartitionState, max_records: int, decoders: Decoders,
             out: list[ConsumerRecord]) -> None:
        """Append up to ``max_records`` records to ``out``, advancing ``state.position``: past
        each record returned, and past the end of each batch wholly returned or skipped."""
        wanted = len(out) + max_records
        while True:
            pending = self._pending
            if self._pending_index < len(pending):
                stop = min(len(pending), self._pending_index + wanted - len(out))
                last = pending[stop - 1]
                out += pending[self._pending_index:stop]
                self._pending_index = stop
                state.position = last.offset + 1
                state.leader_epoch = last.leader_epoch
                if stop < len(pending):
                    return
            if state.position is not None and state.position < self._batch_end:
                state.position = self._batch_end  # past a compacted or skipped tail
            if len(out) >= wanted or self._index >= len(self._batches):
                return
            batch = self._batches[self._index]
            # A batch that fails (CRC, deserializer) raises again on every poll until the
            # application seeks past it, as Java's consumer does.
            try:
                self._pending = self._decode(batch, state.position or 0, decoders)
            except Exception:
                if out:  # hand out what was taken; the failure comes again on the next take
                    return
                raise
            self._pending_index = 0
            self._index += 1
            self._batch_end = batch.last_offset + 1

    def _decode(self, batch: _Batch, position: int, decoders: Decoders) -> list[ConsumerRecord]:
        if batch.last_offset < position:
            return []
        view = self.view
        if decoders.check_crcs and crc32c.crc32c(view[batch.position + 21:batch.end]) != batch.crc:
            raise CorruptMessageError(
                f"record batch at offset {batch.base_offset} of {self.tp.topic}-"
                f"{self.tp.partition} fails its CRC check")
        if decoders.read_committed and self._skip_transactional(batch):
            return []
        if batch.attributes & _CONTROL_BIT:
            return []
        payload = view[batch.position + _HEADER_SIZE:batch.end]
        codec = batch.attributes & 0x07
        data = bytes(payload) if codec == 0 else decompress(compression_type(codec), payload)
        append_time = batch.max_timestamp if batch.attributes & _TIMESTAMP_TYPE_BIT else None
        return decode_records(
            data, batch.count, topic=self.tp.topic, partition=self.tp.partition,
            base_offset=batch.base_offset, base_timestamp=batch.base_timestamp,
            log_append_time=append_time, leader_epoch=batch.leader_epoch, min_offset=position,
            key_deserializer=decoders.key, value_deserializer=decoders.value)

    def _skip_transactional(self, batch: _Batch) -> bool:
        """Kafka's rule: a transactional batch of a producer with an aborted transaction
        starting at or before it is skipped until that producer's ABORT marker."""
        while self._aborted and self._aborted[0][0] <= batch.last_offset:
            self._aborted_producers.add(heapq.heappop(self._aborted)[1])
        if not batch.attributes & _TRANSACTIONAL_BIT:
            return False
        if batch.attributes & _CONTROL_BIT:
            if self._is_abort_marker(batch):
                self._aborted_producers.discard(batch.producer_id)
            return True
        return batch.producer_id in self._aborted_producers

    def _is_abort_marker(self, batch: _Batch) -> bool:
        payload = self.view[batch.position + _HEADER_SIZE:batch.end]
        records = decode_records(bytes(payload), 1, topic="", partition=0, base_offset=0,
                                 base_timestamp=0, log_append_time=None, leader_epoch=-1,
                                 min_offset=0)
        key = records[0].key if records else None
        return key is not None and len(key) >= 4 and _CONTROL_KEY.unpack_from(key)[1] == 0


class Decoders:
    __slots__ = ("check_crcs", "key", "read_committed", "value")

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.check_crcs: bool = config["check.crcs"]
        self.read_committed = config["isolation.level"] == "read_committed"
        self.key: Deserializer = config["key.deserializer"]
        self.value: Deserializer = config["value.deserializer"]
