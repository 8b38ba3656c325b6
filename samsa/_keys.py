"""Per-key reads: every record of one key in one partition, through Samsa's own SamsaReadKey
API (key 10002), which the partition's leader serves from its per-segment key indexes instead
of reading the partition from the start.

A read asks the leader for the key's batches from an offset; the answer holds whole batches
(which may also hold other keys' records, and, for a 64-bit hash collision, none of this key's)
and the offset to continue from. Here the records whose key equals the key (compared as bytes,
before any deserializer) and whose offset is at least the one asked for are kept; control
batches are skipped; with ``read_committed`` the broker already left out aborted batches.

- ``read_key_records``: catch up, page by page, to the high watermark (or last stable offset)
  the first answer names, and return the records.
- ``stream_key``: the same, then live: each later request is a long poll
  (``fetch.max.wait.ms``) that the broker answers as soon as a batch of the key is readable.

Leadership errors are retried after a metadata refresh (``Cluster.retrying``) until
``default.api.timeout.ms``; a Kafka broker, which does not know the API, answers
``UnsupportedVersionError``.

State: none of its own; the coroutines run on the ``Cluster``'s event loop.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import crc32c

from protocol.compression import compression_type, decompress
from protocol.errors import CorruptMessageError, UnknownTopicOrPartitionError, error_for_code
from protocol.messages.samsa_read_key_request import SamsaReadKeyRequest
from protocol.messages.samsa_read_key_response import SamsaReadKeyResponse
from protocol.records import BATCH_HEADER_SIZE
from samsa._cluster import Cluster
from samsa._decoding import (
    _CONTROL_BIT,
    _TIMESTAMP_TYPE_BIT,
    Decoders,
    _varint,
    decode_records,
    parse_batches,
)
from samsa.types import ConsumerRecord, TopicPartition

__all__ = ["KeyCursor", "KeyPage", "read_key_page", "read_key_records", "stream_key"]

READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class KeyPage:
    """One answer: the key's records in it, where to continue, and how far the partition is
    readable (the high watermark, or the last stable offset for read_committed)."""

    records: list[ConsumerRecord]
    next_offset: int
    readable_end: int


async def read_key_page(
    cluster: Cluster, tp: TopicPartition, key: bytes, start_offset: int, decoders: Decoders, *,
    max_bytes: int, max_wait_ms: int = 0,
) -> KeyPage:
    """One SamsaReadKey request to the partition's leader (leader moves retried)."""
    isolation_level = READ_COMMITTED if decoders.read_committed else 0
    request = SamsaReadKeyRequest(
        topic=tp.topic, partition=tp.partition, key=key, start_offset=start_offset,
        max_bytes=max_bytes, max_wait_ms=max_wait_ms, isolation_level=isolation_level)

    await _check_known(cluster, tp)

    async def attempt() -> SamsaReadKeyResponse:
        response: SamsaReadKeyResponse = await cluster.send(await cluster.leader_for(tp), request)
        if response.error_code:
            raise error_for_code(response.error_code)(
                f"reading a key of {tp.topic}-{tp.partition} from offset {start_offset}")
        return response

    response = await cluster.retrying(attempt, what="reading a key")
    records = [] if response.records is None else _records_of_key(
        memoryview(response.records), tp, key, start_offset, decoders)
    readable_end = (response.last_stable_offset if decoders.read_committed
                    else response.high_watermark)
    return KeyPage(records, max(response.next_offset, start_offset), readable_end)


async def read_key_records(
    cluster: Cluster, tp: TopicPartition, key: bytes, start_offset: int, decoders: Decoders, *,
    max_bytes: int,
) -> list[ConsumerRecord]:
    """Every record of ``key`` from ``start_offset`` up to what is readable now."""
    page = await read_key_page(cluster, tp, key, start_offset, decoders, max_bytes=max_bytes)
    records, end = list(page.records), page.readable_end
    while page.next_offset < end:
        page = await read_key_page(cluster, tp, key, page.next_offset, decoders,
                                   max_bytes=max_bytes)
        records += page.records
    return records


class KeyCursor:
    """A live read of one key: ``next_page`` catches up from ``offset`` without waiting, then
    long-polls (``max_wait_ms``) once it reached the readable end. Used by ``stream_key`` and by
    the blocking consumer's ``subscribe_key``."""

    def __init__(self, cluster: Cluster, tp: TopicPartition, key: bytes, offset: int,
                 decoders: Decoders, *, max_bytes: int, max_wait_ms: int) -> None:
        self.cluster, self.tp, self.key, self.offset = cluster, tp, key, offset
        self.decoders, self.max_bytes, self.max_wait_ms = decoders, max_bytes, max_wait_ms
        self.caught_up = False

    async def next_page(self) -> list[ConsumerRecord]:
        page = await read_key_page(
            self.cluster, self.tp, self.key, self.offset, self.decoders,
            max_bytes=self.max_bytes, max_wait_ms=self.max_wait_ms if self.caught_up else 0)
        self.offset = page.next_offset
        self.caught_up = self.offset >= page.readable_end
        return page.records


async def stream_key(cursor: KeyCursor, idle_timeout: float | None = None
                     ) -> AsyncIterator[ConsumerRecord]:
    """The records of the cursor's key from its offset, then each new one as it becomes
    readable; ends only when no record came for ``idle_timeout`` seconds (if given)."""
    last = time.monotonic()
    while True:
        records = await cursor.next_page()
        for record in records:
            yield record
        if records:
            last = time.monotonic()
        elif idle_timeout is not None and time.monotonic() - last >= idle_timeout:
            return


async def _check_known(cluster: Cluster, tp: TopicPartition) -> None:
    """A partition the metadata does not know fails at once (as ``samsa.segments``)."""
    for attempt in range(2):
        info = cluster.topics.get(tp.topic)
        if info is not None and tp.partition in info.partitions:
            return
        if attempt == 0:
            await cluster.refresh_metadata([tp.topic])
    raise UnknownTopicOrPartitionError(f"no such partition: {tp.topic}-{tp.partition}")


def _records_of_key(view: memoryview, tp: TopicPartition, key: bytes, start_offset: int,
                    decoders: Decoders) -> list[ConsumerRecord]:
    found: list[ConsumerRecord] = []
    for batch in parse_batches(view):
        if batch.attributes & _CONTROL_BIT or batch.last_offset < start_offset:
            continue
        if decoders.check_crcs and crc32c.crc32c(view[batch.position + 21:batch.end]) != batch.crc:
            raise CorruptMessageError(f"record batch at offset {batch.base_offset} of "
                                      f"{tp.topic}-{tp.partition} fails its CRC check")
        payload = view[batch.position + BATCH_HEADER_SIZE:batch.end]
        codec = batch.attributes & 0x07
        data = bytes(payload) if codec == 0 else decompress(compression_type(codec), payload)
        append_time = batch.max_timestamp if batch.attributes & _TIMESTAMP_TYPE_BIT else None
        for start, end in _records_with_key(data, batch.count, key):
            records = decode_records(
                data[start:end], 1, topic=tp.topic, partition=tp.partition,
                base_offset=batch.base_offset, base_timestamp=batch.base_timestamp,
                log_append_time=append_time, leader_epoch=batch.leader_epoch,
                min_offset=start_offset)
            found += (_deserialized(record, decoders) for record in records if record.key == key)
    return found


def _records_with_key(data: bytes, count: int, key: bytes) -> list[tuple[int, int]]:
    """(start, end) of each record of a records section whose key field is ``key``.

    Why not decode every record and compare: a batch holds ~100 records of other keys for each
    one of this key's, and building them all was most of a key read's time. Here the key's
    encoding (zigzag varint length + bytes) is searched with ``bytes.find``; only a record
    that contains a hit has its key field parsed (a hit inside a value or header is no match),
    and the walk from record to record reads only each record's length."""
    needle = _zigzag_varint(len(key)) + key
    hit = data.find(needle)
    found: list[tuple[int, int]] = []
    position = 0
    for _ in range(count):
        if hit < 0:
            break
        byte = data[position]  # the record's length: one or two bytes inline, else _varint
        if byte < 0x80:
            length, body = (byte >> 1) ^ -(byte & 1), position + 1
        elif data[position + 1] < 0x80:
            length = (byte & 0x7F) | (data[position + 1] << 7)
            length, body = (length >> 1) ^ -(length & 1), position + 2
        else:
            length, body = _varint(data, position)
        end = body + length
        if hit < end:
            if _key_field_is(data, body, key):
                found.append((position, end))
            hit = data.find(needle, end)
        position = end
    return found


def _key_field_is(data: bytes, body: int, key: bytes) -> bool:
    """Whether the record whose body (after its length) starts at ``body`` has ``key``."""
    _, position = _varint(data, body + 1)  # after the attributes byte: timestamp delta
    _, position = _varint(data, position)  # offset delta
    length, position = _varint(data, position)
    return length == len(key) and data[position:position + length] == key


def _zigzag_varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _deserialized(record: ConsumerRecord, decoders: Decoders) -> ConsumerRecord:
    if decoders.key is None and decoders.value is None:
        return record
    return dataclasses.replace(
        record,
        key=record.key if decoders.key is None else decoders.key(record.key),
        value=record.value if decoders.value is None else decoders.value(record.value))
