"""Record batches to Arrow, checked against ``protocol.records`` (the reference decoder)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.compression import CompressionType
from protocol.errors import CorruptMessageError
from protocol.records import (
    ControlRecordType,
    Record,
    TimestampType,
    encode_batch,
    encode_control_record,
)
from pyspark_samsa.arrow import SCHEMA, SCHEMA_WITH_HEADERS, decode_batches
from pyspark_samsa.walk import PADDING, record_starts

BASE_TIMESTAMP = 1_700_000_000_000


def expected_rows(records: list[Record], start: int, end: int, *, headers: bool,
                  log_append_time: int | None = None) -> list[dict[str, Any]]:
    rows = []
    for record in records:
        if not start <= record.offset < end:
            continue
        timestamp = record.timestamp if log_append_time is None else log_append_time
        row = {"key": record.key, "value": record.value, "topic": "t", "partition": 3,
               "offset": record.offset, "timestamp": timestamp * 1000,
               "timestampType": 0 if log_append_time is None else 1}
        if headers:
            row["headers"] = [{"key": k, "value": v} for k, v in record.headers]
        rows.append(row)
    return rows


def decoded_rows(buffer: bytes, start: int, end: int, *, headers: bool) -> list[dict[str, Any]]:
    decoded = decode_batches(buffer, start=start, end=end, topic="t", partition=3,
                             include_headers=headers)
    if decoded.batch is None:
        return []
    assert decoded.batch.schema.equals(SCHEMA_WITH_HEADERS if headers else SCHEMA)
    decoded.batch.validate(full=True)
    table = decoded.batch.cast(decoded.batch.schema.set(
        5, pa.field("timestamp", pa.int64())))  # compare timestamps as microseconds
    return table.to_pylist()


def make_records(rng: random.Random, count: int, first_offset: int, *, headers: bool,
                 sizes: list[int]) -> list[Record]:
    records = []
    for index in range(count):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.choice(sizes))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.choice(sizes))
        record_headers = tuple((f"h{j}", None if j == 1 else b"v%d" % j)
                               for j in range(rng.randrange(3))) if headers else ()
        timestamp = BASE_TIMESTAMP + rng.randrange(-10**6, 10**9)
        records.append(Record(first_offset + index, timestamp, key, value, record_headers))
    return records


def batches_of(records: list[Record], size: int, **options: Any) -> bytes:
    return b"".join(encode_batch(records[i:i + size], **options)
                    for i in range(0, len(records), size))


@pytest.mark.parametrize("codec", list(CompressionType))
@pytest.mark.parametrize("headers", [False, True])
def test_every_codec_matches_the_reference_decoder(codec: CompressionType, headers: bool) -> None:
    rng = random.Random(int(codec) * 2 + headers)
    records = make_records(rng, 700, 1000, headers=headers, sizes=[0, 3, 12, 13, 40, 300])
    buffer = batches_of(records, 37, compression=codec)
    for start, end in [(0, 10**9), (1005, 1600), (1040, 1041), (1700, 1800), (0, 1000)]:
        assert decoded_rows(buffer, start, end, headers=headers) == expected_rows(
            records, start, end, headers=headers)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), count=st.integers(1, 400), per_batch=st.integers(1, 200),
       sizes=st.lists(st.integers(0, 20_000), min_size=1, max_size=4))
def test_any_record_sizes_decode_exactly(seed: int, count: int, per_batch: int,
                                         sizes: list[int]) -> None:
    """Uniform, nearly uniform and random sizes: the vectorised walk and its fallback."""
    rng = random.Random(seed)
    records = make_records(rng, count, 0, headers=False, sizes=sizes)
    buffer = batches_of(records, per_batch)
    start, end = sorted(rng.sample(range(count + 2), 2))
    assert decoded_rows(buffer, start, end, headers=False) == expected_rows(
        records, start, end, headers=False)


def test_record_starts_of_uniform_and_growing_records() -> None:
    for count in (1, 63, 64, 65, 200, 9000):
        records = [Record(n, BASE_TIMESTAMP + n, None, b"x" * 100) for n in range(count)]
        section = encode_batch(records)[61:]
        buffer = np.frombuffer(section + bytes(PADDING), dtype=np.uint8)
        starts = record_starts(buffer, len(section), np.array([0]), np.array([count]))
        position, expected = 0, []
        for _ in range(count):
            expected.append(position)
            length = section[position] | ((section[position + 1] & 0x7F) << 7) \
                if section[position] & 0x80 else section[position]
            position += (2 if section[position] & 0x80 else 1) + (length >> 1)
        assert starts.tolist() == expected


def test_log_append_time_and_control_batches() -> None:
    records = [Record(n, BASE_TIMESTAMP + n, b"k", b"v%d" % n) for n in range(10)]
    appended = encode_batch(records[:5], timestamp_type=TimestampType.LOG_APPEND_TIME,
                            max_timestamp=BASE_TIMESTAMP + 999)
    marker = encode_batch([encode_control_record(ControlRecordType.COMMIT, coordinator_epoch=0,
                                                 offset=5, timestamp=BASE_TIMESTAMP)],
                          is_control=True, is_transactional=True, producer_id=7,
                          producer_epoch=0)
    rest = [Record(n + 1, r.timestamp, r.key, r.value) for n, r in enumerate(records[5:], 5)]
    buffer = appended + marker + encode_batch(rest)
    rows = decoded_rows(buffer, 0, 100, headers=False)
    assert [r["offset"] for r in rows] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert [r["timestampType"] for r in rows] == [1] * 5 + [0] * 5
    assert {r["timestamp"] for r in rows[:5]} == {(BASE_TIMESTAMP + 999) * 1000}
    decoded = decode_batches(buffer, start=0, end=100, topic="t", partition=0,
                             include_headers=False)
    assert (decoded.next_offset, decoded.reached_end, decoded.consumed_bytes) == (
        11, False, len(buffer))


def test_a_batch_cut_short_is_left_for_the_next_read() -> None:
    records = [Record(n, BASE_TIMESTAMP, None, b"v") for n in range(20)]
    first, second = encode_batch(records[:10]), encode_batch(records[10:])
    for cut in (5, 20, 61, len(second) - 1):
        decoded = decode_batches(first + second[:cut], start=0, end=100, topic="t",
                                 partition=0, include_headers=False)
        assert decoded.consumed_bytes == len(first) and decoded.next_offset == 10
        assert decoded.batch is not None and decoded.batch.num_rows == 10


def test_reading_stops_at_the_end_of_the_range() -> None:
    records = [Record(n, BASE_TIMESTAMP, None, b"v") for n in range(30)]
    buffer = batches_of(records, 10)
    decoded = decode_batches(buffer, start=0, end=15, topic="t", partition=0,
                             include_headers=False)
    assert decoded.reached_end and decoded.next_offset == 20
    assert decoded.batch is not None and decoded.batch.column("offset").to_pylist() == list(range(15))
    past = decode_batches(buffer[decoded.consumed_bytes:], start=20, end=20, topic="t",
                          partition=0, include_headers=False)
    assert past.reached_end and past.batch is None and past.consumed_bytes == 0


@pytest.mark.parametrize("damage", ["crc", "count", "length"])
def test_damaged_batches_raise(damage: str) -> None:
    records = [Record(n, BASE_TIMESTAMP, None, b"value-%d" % n) for n in range(50)]
    batch = bytearray(encode_batch(records))
    if damage == "crc":
        batch[-1] ^= 0xFF
    elif damage == "count":  # declares one record more than it holds (CRC made to match)
        batch[57:61] = (51).to_bytes(4, "big")
        batch = bytearray(_recrc(batch))
    else:  # a record length pointing past the end of the batch
        batch[61] = 0x7E
        batch = bytearray(_recrc(batch))
    with pytest.raises(CorruptMessageError):
        decode_batches(bytes(batch), start=0, end=100, topic="t", partition=0,
                       include_headers=False)


def _recrc(batch: bytearray) -> bytes:
    import crc32c

    batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)
