"""The producer's batch encoder (``samsa._encoding``) against ``protocol.records``' decoder and
encoder: what it writes decodes to the same records, for every codec, with a valid CRC, and
is byte for byte what ``encode_batch`` writes for the same records."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.compression import CompressionType
from protocol.records import Record, batch_crc_is_valid, decode_batch, encode_batch
from samsa._encoding import (
    BATCH_OVERHEAD,
    BatchBuilder,
    encode_headers,
    record_size_upper_bound,
    set_producer_state,
)

BASE_TIMESTAMP = 1_700_000_000_000

blobs = st.one_of(st.none(), st.binary(max_size=300), st.binary(min_size=8000, max_size=9000))
headers = st.lists(st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=50))),
                   max_size=4)
timestamp_deltas = st.one_of(st.integers(0, 10_000), st.integers(-(2**40), 2**40))
records = st.lists(st.tuples(timestamp_deltas, blobs, blobs, headers), min_size=1, max_size=40)


def build(entries: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
          **close: object) -> bytearray:
    builder = BatchBuilder(size_limit=10**9)
    for delta, key, value, record_headers in entries:
        appended = builder.append(BASE_TIMESTAMP + delta, key, value,
                                  encode_headers(record_headers) if record_headers else None)
        assert appended
    return builder.close(**close)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.data_too_large])
@given(records, st.sampled_from(list(CompressionType)))
def test_records_decode_back_for_every_codec(entries, codec) -> None:  # type: ignore[no-untyped-def]
    batch = build(entries, compression=codec, producer_id=7, producer_epoch=3, base_sequence=11)
    decoded = decode_batch(batch)  # checks the CRC
    header = decoded.header
    assert header.compression is codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 11)
    assert header.records_count == len(entries)
    assert header.last_offset_delta == len(entries) - 1
    assert header.base_timestamp == BASE_TIMESTAMP + entries[0][0]
    assert header.max_timestamp == max(BASE_TIMESTAMP + e[0] for e in entries)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in decoded.records] == [
        (index, BASE_TIMESTAMP + delta, key, value, list(record_headers))
        for index, (delta, key, value, record_headers) in enumerate(entries)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.data_too_large])
@given(records)
def test_uncompressed_bytes_equal_protocol_encode_batch(entries) -> None:  # type: ignore[no-untyped-def]
    ours = build(entries, producer_id=5, producer_epoch=0, base_sequence=100)
    reference = encode_batch(
        [Record(offset, BASE_TIMESTAMP + delta, key, value, tuple(record_headers))
         for offset, (delta, key, value, record_headers) in enumerate(entries)],
        base_offset=0, producer_id=5, producer_epoch=0, base_sequence=100)
    assert bytes(ours) == reference


def test_set_producer_state_rewrites_the_header_and_the_crc() -> None:
    batch = build([(0, b"k", b"v", [])] * 3, compression=CompressionType.LZ4)
    set_producer_state(batch, 42, 9, 1000)
    decoded = decode_batch(batch)
    assert (decoded.header.producer_id, decoded.header.producer_epoch) == (42, 9)
    assert decoded.header.base_sequence == 1000
    assert decoded.header.last_sequence == 1002
    assert batch_crc_is_valid(batch, 0, decoded.header)


def test_the_first_record_always_fits_then_the_size_limit_holds() -> None:
    builder = BatchBuilder(size_limit=300)
    assert builder.append(BASE_TIMESTAMP, None, b"x" * 1000, None)  # larger than the limit
    assert not builder.append(BASE_TIMESTAMP, None, b"y", None)
    assert builder.count == 1

    builder = BatchBuilder(size_limit=300)
    accepted = 0
    while builder.append(BASE_TIMESTAMP, b"key", b"v" * 50, None):
        accepted += 1
    size = builder.size
    assert accepted == builder.count > 1
    assert size <= 300
    assert not builder.append(BASE_TIMESTAMP, b"key", b"v" * 50, None)
    assert builder.size == size  # a refused record leaves nothing behind
    decoded = decode_batch(builder.close())
    assert [r.offset for r in decoded.records] == list(range(accepted))


def test_records_past_the_one_byte_varint_tables() -> None:
    # offset deltas and lengths from 8192 on are encoded without the tables
    builder = BatchBuilder(size_limit=10**9)
    for _ in range(8300):
        builder.append(BASE_TIMESTAMP + 9000, None, b"", None)
    builder.append(BASE_TIMESTAMP - 5, b"k" * 9000, b"v" * 20_000, None)
    decoded = decode_batch(builder.close())
    assert decoded.records[-1].offset == 8300
    assert decoded.records[-1].timestamp == BASE_TIMESTAMP - 5
    assert len(decoded.records[-1].value or b"") == 20_000
    assert decoded.header.max_timestamp == BASE_TIMESTAMP + 9000


@pytest.mark.parametrize(("key", "value"), [(None, None), (b"k" * 10, b"v" * 100), (b"", b"")])
def test_size_upper_bound_covers_a_batch_of_one(key: bytes | None, value: bytes | None) -> None:
    record_headers = encode_headers([("trace", b"x" * 30)])
    builder = BatchBuilder(size_limit=0)
    builder.append(BASE_TIMESTAMP, key, value, record_headers)
    bound = record_size_upper_bound(-1 if key is None else len(key),
                                    -1 if value is None else len(value), len(record_headers))
    assert len(builder.close()) <= bound
    assert bound >= BATCH_OVERHEAD
