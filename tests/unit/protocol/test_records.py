"""protocol.records: RecordBatch v2 round trips, kafka-python cross-checks, golden bytes,
header parsing under truncation and corruption, malformed records, control records."""

from __future__ import annotations

import dataclasses
import mmap
import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import decode_varint as kafka_python_decode_varint
from kafka.record.util import encode_varint as kafka_python_encode_varint

from protocol.compression import CompressionType
from protocol.errors import CorruptMessageError, InvalidRecordError
from protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    ControlRecordType,
    Record,
    RecordBatch,
    TimestampType,
    _new_batch_header,
    _new_record,
    batch_crc_is_valid,
    control_record_type,
    decode_batch,
    decode_control_record,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_batch,
    encode_control_record,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    increment_sequence,
    iter_batches,
    read_batch_header,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
CODECS = list(CompressionType)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies -----------------------------------------------------------------------

VARINT_EDGES = [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, -8193, 2**20, -(2**20)]
int32s = st.one_of(
    st.sampled_from([*VARINT_EDGES, INT32_MIN, INT32_MAX]), st.integers(INT32_MIN, INT32_MAX)
)
int64s = st.one_of(
    st.sampled_from([*VARINT_EDGES, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX, 2**62, -(2**62)]),
    st.integers(INT64_MIN, INT64_MAX),
)
timestamps = st.one_of(
    st.sampled_from([INT64_MIN, INT64_MAX, NO_TIMESTAMP, 0]),
    st.integers(1_500_000_000_000, 1_800_000_000_000),
    int64s,
)
blobs = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.builds(
        lambda unit, count: unit * count, st.binary(min_size=1, max_size=20), st.integers(1, 4000)
    ),
)
headers = st.lists(
    st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=30))), max_size=3
).map(tuple)
offset_deltas = st.one_of(
    st.sampled_from([0, 1, 63, 64, 8191, 8192, 2**20, INT32_MAX - 1, INT32_MAX]),
    st.integers(0, INT32_MAX),
)


@st.composite
def record_lists(
    draw: st.DrawFn, *, timestamp_strategy: st.SearchStrategy[int] = timestamps
) -> tuple[int, list[Record]]:
    """(base_offset, records) with increasing offsets from base_offset, any int64 base."""
    deltas = sorted(set(draw(st.lists(offset_deltas, min_size=1, max_size=6))))
    base_offset = draw(
        st.one_of(
            st.sampled_from([0, INT64_MAX - deltas[-1], INT64_MIN]),
            st.integers(INT64_MIN, INT64_MAX - deltas[-1]),
        )
    )
    records = [
        Record(
            base_offset + delta, draw(timestamp_strategy), draw(blobs), draw(blobs), draw(headers)
        )
        for delta in deltas
    ]
    return base_offset, records


def sample_records(count: int = 5, *, base_offset: int = 0) -> list[Record]:
    return [
        Record(
            offset=base_offset + index,
            timestamp=1_700_000_000_000 + index * 10,
            key=None if index % 3 == 0 else b"key-%d" % index,
            value=None if index == 2 else b"value-%d|" % index * 20,
            headers=() if index % 2 else (("trace", b"t%d" % index), ("ñ-ü", None)),
        )
        for index in range(count)
    ]


def raw_batch(
    records_section: bytes,
    count: int,
    *,
    attributes: int = 0,
    magic: int = MAGIC_V2,
    base_offset: int = 0,
    base_timestamp: int = 0,
) -> bytes:
    """A batch assembled by hand (not by encode_batch), with a correct CRC."""
    body = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            max(count - 1, 0),
            base_timestamp,
            base_timestamp,
            -1,
            -1,
            -1,
            count,
        )
        + records_section
    )
    crc = crc32c.crc32c(body)
    return struct.pack(">qiibI", base_offset, len(body) + 9, -1, magic, crc) + body


def unsigned(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag(value: int) -> bytes:
    return unsigned((value << 1) ^ (value >> 63))


def raw_record(*fields: bytes, length: int | None = None) -> bytes:
    body = b"".join(fields)
    return zigzag(len(body) if length is None else length) + body


# --- round trips -----------------------------------------------------------------------


@FAST
@given(drawn=record_lists(), codec=st.sampled_from(CODECS))
def test_round_trip_any_records_any_codec(
    drawn: tuple[int, list[Record]], codec: CompressionType
) -> None:
    base_offset, records = drawn
    data = encode_batch(records, base_offset=base_offset, compression=codec)
    batch = decode_batch(data)
    assert batch.records == tuple(records)
    header = batch.header
    assert header.base_offset == base_offset
    assert header.last_offset == records[-1].offset
    assert header.records_count == len(records)
    assert header.size_in_bytes == len(data)
    assert header.compression is codec
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(NO_TIMESTAMP, *(record.timestamp for record in records))
    assert batch_crc_is_valid(data, 0, header)


@FAST
@given(
    drawn=record_lists(),
    producer_id=int64s,
    producer_epoch=st.integers(-(2**15), 2**15 - 1),
    base_sequence=int32s,
    partition_leader_epoch=int32s,
    is_transactional=st.booleans(),
    delete_horizon_ms=st.one_of(st.none(), st.integers(0, 2**45)),
    codec=st.sampled_from(CODECS),
)
def test_round_trip_batch_fields(
    drawn: tuple[int, list[Record]],
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    is_transactional: bool,
    delete_horizon_ms: int | None,
    codec: CompressionType,
) -> None:
    base_offset, records = drawn
    data = encode_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=is_transactional,
        delete_horizon_ms=delete_horizon_ms,
    )
    batch = decode_batch(data)
    assert batch.records == tuple(records)
    header = batch.header
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        producer_id,
        producer_epoch,
        base_sequence,
    )
    assert header.partition_leader_epoch == partition_leader_epoch
    assert header.is_transactional is is_transactional
    assert header.is_control is False
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert header.has_delete_horizon is (delete_horizon_ms is not None)
    assert header.delete_horizon_ms == delete_horizon_ms
    if delete_horizon_ms is not None:
        assert header.base_timestamp == delete_horizon_ms


@FAST
@given(drawn=record_lists(), codec=st.sampled_from(CODECS), append_time=st.integers(0, 2**45))
def test_log_append_time_gives_every_record_the_max_timestamp(
    drawn: tuple[int, list[Record]], codec: CompressionType, append_time: int
) -> None:
    base_offset, records = drawn
    data = encode_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        max_timestamp=append_time,
    )
    batch = decode_batch(data)
    assert batch.header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.header.max_timestamp == append_time
    assert batch.records == tuple(
        dataclasses.replace(record, timestamp=append_time) for record in records
    )


def test_extreme_timestamps_wrap_like_java() -> None:
    records = [
        Record(0, INT64_MIN, None, b"a"),
        Record(1, INT64_MAX, None, b"b"),
        Record(2, -1, None, b"c"),
    ]
    batch = decode_batch(encode_batch(records))
    assert batch.records == tuple(records)
    assert batch.header.base_timestamp == INT64_MIN
    assert batch.header.max_timestamp == INT64_MAX


def test_max_timestamp_is_at_least_no_timestamp_as_in_kafkas_builder() -> None:
    records = [Record(0, -5, None, b"a"), Record(1, -7, None, b"b")]
    assert decode_batch(encode_batch(records)).header.max_timestamp == NO_TIMESTAMP


def test_accepts_bytearray_memoryview_and_mmap_buffers() -> None:
    data = encode_batch(sample_records(), compression=CompressionType.LZ4)
    expected = decode_batch(data)
    prefix = b"\x00" * 7
    with mmap.mmap(-1, len(prefix) + len(data)) as mapped:
        mapped.write(prefix + data)
        for buffer in (bytearray(prefix + data), memoryview(prefix + data), mapped):
            assert read_batch_header(buffer, len(prefix)) == expected.header
            assert decode_batch(buffer, len(prefix)) == expected
            assert batch_crc_is_valid(buffer, len(prefix), expected.header)


# --- empty and filtered batches (compaction) --------------------------------------------


def test_empty_batch_keeps_offsets_and_producer_state() -> None:
    data = encode_batch(
        [],
        base_offset=100,
        last_offset_delta=9,
        max_timestamp=1234,
        producer_id=7,
        producer_epoch=2,
        base_sequence=50,
        compression=CompressionType.ZSTD,
    )
    batch = decode_batch(data)
    assert batch.records == ()
    header = batch.header
    assert (header.base_offset, header.last_offset, header.next_offset) == (100, 109, 110)
    assert (header.base_timestamp, header.max_timestamp) == (NO_TIMESTAMP, 1234)
    assert header.compression is CompressionType.NONE  # as Kafka's writeEmptyHeader
    assert (header.base_sequence, header.last_sequence) == (50, 59)
    assert len(data) == BATCH_HEADER_SIZE
    assert list(DefaultRecordBatch(bytearray(data))) == []


def test_empty_batch_needs_a_base_offset() -> None:
    with pytest.raises(ValueError, match="base_offset"):
        encode_batch([])


def test_filtered_batch_keeps_its_last_offset() -> None:
    records = sample_records(10)
    kept = [records[1], records[4]]
    data = encode_batch(kept, base_offset=0, last_offset_delta=9, base_sequence=0)
    batch = decode_batch(data)
    assert batch.records == tuple(kept)
    assert (batch.base_offset, batch.last_offset, batch.header.last_sequence) == (0, 9, 9)


@pytest.mark.parametrize(
    ("offsets", "base_offset", "last_offset_delta"),
    [
        ([0, 0], None, None),
        ([1, 0], None, None),
        ([5], 6, None),
        ([0, 2**31], None, None),
        ([INT64_MAX], None, 1),
        ([], 0, 2**31),
    ],
)
def test_rejects_offsets_that_kafka_cannot_encode(
    offsets: list[int], base_offset: int | None, last_offset_delta: int | None
) -> None:
    records = [Record(offset, 0, None, None) for offset in offsets]
    with pytest.raises(ValueError):
        encode_batch(records, base_offset=base_offset, last_offset_delta=last_offset_delta)


def test_rejects_out_of_range_fields() -> None:
    records = sample_records(2)
    with pytest.raises(ValueError, match="out of range"):
        encode_batch(records, producer_epoch=2**15)
    with pytest.raises(ValueError, match="last_offset_delta"):
        encode_batch(records, last_offset_delta=0)
    with pytest.raises(ValueError, match="KIP-534"):
        encode_batch(records, base_timestamp=5, delete_horizon_ms=6)
    with pytest.raises(ValueError, match="int64"):
        encode_batch([Record(0, 2**63, None, None)])


def test_last_sequence_wraps_like_kafka() -> None:
    data = encode_batch(
        sample_records(6), base_sequence=INT32_MAX - 1, producer_id=1, producer_epoch=0
    )
    assert read_batch_header(data).last_sequence == 3
    assert read_batch_header(encode_batch(sample_records(2))).last_sequence == NO_SEQUENCE
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(5, 3) == 8


# --- kafka-python cross-checks ----------------------------------------------------------

KAFKA_PYTHON_CODECS = list(CompressionType)  # kafka-python supports all five


def kafka_python_records(data: bytes) -> list[tuple[object, ...]]:
    batch = DefaultRecordBatch(bytearray(data))
    assert batch.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]


def as_tuples(records: list[Record] | tuple[Record, ...]) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


def kafka_python_build(records: list[Record], codec: CompressionType, **producer: object) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=producer.get("is_transactional", False),
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        batch_size=2**30,
    )
    for record in records:
        assert (
            builder.append(
                record.offset, record.timestamp, record.key, record.value, list(record.headers)
            )
            is not None
        )
    return bytes(builder.build())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    drawn=record_lists(
        timestamp_strategy=st.integers(0, 2**50)
    ),  # kafka-python does not wrap int64
    codec=st.sampled_from(KAFKA_PYTHON_CODECS),
)
def test_kafka_python_reads_what_we_write(
    drawn: tuple[int, list[Record]], codec: CompressionType
) -> None:
    base_offset, records = drawn
    data = encode_batch(records, base_offset=base_offset, compression=codec)
    assert kafka_python_records(data) == as_tuples(records)
    assert DefaultRecordBatch(bytearray(data)).compression_type == codec


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
def test_we_read_what_kafka_python_writes(codec: CompressionType) -> None:
    records = sample_records(300)  # compressible, so kafka-python keeps the codec
    data = kafka_python_build(
        records, codec, producer_id=42, producer_epoch=3, base_sequence=17, is_transactional=True
    )
    batch = decode_batch(data)
    assert batch.header.compression is codec
    assert batch.records == tuple(records)
    assert (batch.header.producer_id, batch.header.producer_epoch, batch.header.base_sequence) == (
        42,
        3,
        17,
    )
    assert batch.is_transactional


def test_we_read_kafka_python_memory_records() -> None:
    first, second = sample_records(3), sample_records(4, base_offset=3)
    data = kafka_python_build(first, CompressionType.NONE) + kafka_python_build(
        second, CompressionType.GZIP
    )
    ours = list(iter_batches(data))
    theirs = MemoryRecords(data)
    for batch in ours:
        assert theirs.has_next()
        assert as_tuples(batch.records) == kafka_python_records(bytes(theirs.next_batch()._buffer))


# Fields both fill alike: base_offset 0, partition_leader_epoch 0, base_timestamp = first
# record's, max_timestamp = largest, offset deltas 0..n-1, record attributes 0.
GOLDEN_HEX = (
    "00000000000000000000006400000000022c43ccf100100000000200000181914ab00000000181914ab01400"
    "00000000000539000500000007000000032e000000066b2d300a76616c7565020a74726163650474301c0014"
    "02066b2d310a76616c75650016002804010102066b2d3201"
)


def golden_records() -> list[Record]:
    base = 1_656_000_000_000
    return [
        Record(0, base, b"k-0", b"value", (("trace", b"t0"),)),
        Record(1, base + 10, b"k-1", b"value", ()),
        Record(2, base + 20, None, None, (("k-2", None),)),
    ]


def test_golden_bytes_match_kafka_python() -> None:
    records = golden_records()
    ours = encode_batch(
        records,
        partition_leader_epoch=0,
        producer_id=1337,
        producer_epoch=5,
        base_sequence=7,
        is_transactional=True,
    )
    theirs = kafka_python_build(
        records,
        CompressionType.NONE,
        producer_id=1337,
        producer_epoch=5,
        base_sequence=7,
        is_transactional=True,
    )
    assert ours == theirs
    assert ours.hex() == GOLDEN_HEX


def test_golden_bytes_for_many_records_match_kafka_python() -> None:
    records = sample_records(200)
    assert encode_batch(records, partition_leader_epoch=0) == kafka_python_build(
        records, CompressionType.NONE
    )


# --- header parsing, truncation, CRC ------------------------------------------------------


def test_header_layout() -> None:
    data = encode_batch(
        sample_records(3, base_offset=10),
        partition_leader_epoch=4,
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
        compression=CompressionType.SNAPPY,
    )
    header = read_batch_header(data)
    assert struct.unpack_from(">qiib", data) == (10, len(data) - LOG_OVERHEAD, 4, 2)
    assert header == BatchHeader(*struct.unpack_from(">qiibIhiqqqhii", data))
    assert header.attributes == 2
    assert (header.last_offset_delta, header.records_count, header.next_offset) == (2, 3, 13)


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
def test_every_truncation_is_corrupt(codec: CompressionType) -> None:
    data = encode_batch(sample_records(4), compression=codec)
    for cut in range(len(data)):
        if cut < BATCH_HEADER_SIZE:
            with pytest.raises(CorruptMessageError, match=f"{cut} of {BATCH_HEADER_SIZE} bytes"):
                read_batch_header(data[:cut])
        else:
            assert not batch_crc_is_valid(data[:cut], 0, read_batch_header(data[:cut]))
        with pytest.raises(CorruptMessageError, match="truncated"):
            decode_batch(data[:cut])
        with pytest.raises(CorruptMessageError):
            decode_batch(data[:cut], verify_crc=False)


def test_every_single_byte_change_in_the_crc_region_is_detected() -> None:
    data = encode_batch(sample_records(4), compression=CompressionType.LZ4)
    header = read_batch_header(data)
    for position in range(17, len(data)):  # crc itself, then attributes..end
        for flip in (0x01, 0x80, 0xFF):
            corrupted = bytearray(data)
            corrupted[position] ^= flip
            header_as_stored = BatchHeader(*struct.unpack_from(">qiibIhiqqqhii", corrupted))
            assert not batch_crc_is_valid(corrupted, 0, header_as_stored), (position, flip)
    corrupted = bytearray(data)
    corrupted[40] ^= 0x10
    with pytest.raises(CorruptMessageError, match=f"stored crc = {header.crc}"):
        decode_batch(corrupted)


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    data = bytearray(encode_batch(sample_records(3), compression=CompressionType.ZSTD))
    set_base_offset(data, 0, 5_000_000_000)
    set_partition_leader_epoch(memoryview(data), 0, 77)
    header = read_batch_header(data)
    assert (header.base_offset, header.partition_leader_epoch) == (5_000_000_000, 77)
    assert batch_crc_is_valid(data, 0, header)
    assert [record.offset for record in decode_batch(data).records] == [
        5_000_000_000 + i for i in range(3)
    ]


def test_set_max_timestamp_rewrites_the_crc() -> None:
    data = bytearray(b"\xee" * 5 + encode_batch(sample_records(3)))
    set_max_timestamp(data, 5, TimestampType.LOG_APPEND_TIME, 1_800_000_000_000)
    batch = decode_batch(data, 5)
    assert batch.header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert {record.timestamp for record in batch.records} == {1_800_000_000_000}
    assert {timestamp for _, timestamp, *_ in kafka_python_records(bytes(data[5:]))} == {
        1_800_000_000_000
    }
    with pytest.raises(CorruptMessageError, match="truncated"):
        set_max_timestamp(data[:-1], 5, TimestampType.CREATE_TIME, 1, verify_crc=False)
    data[-1] ^= 1
    with pytest.raises(CorruptMessageError, match="CRC"):
        set_max_timestamp(data, 5, TimestampType.CREATE_TIME, 1)


@pytest.mark.parametrize("codec", CODECS)
def test_set_log_append_time_in_place(codec: CompressionType) -> None:
    data = bytearray(encode_batch(sample_records(4), compression=codec))
    set_log_append_time(data, 0, 1_900_000_000_000, verify_crc=False)
    batch = decode_batch(data)
    assert (batch.header.timestamp_type, batch.header.max_timestamp) == (
        TimestampType.LOG_APPEND_TIME,
        1_900_000_000_000,
    )
    assert {record.timestamp for record in batch.records} == {1_900_000_000_000}
    before = bytes(data)
    set_log_append_time(data, 0, 1_900_000_000_000)  # unchanged: no rewrite
    assert bytes(data) == before


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_rejected(magic: int) -> None:
    legacy = bytearray(encode_batch(sample_records(2)))
    legacy[16] = magic
    for buffer in (bytes(legacy), bytes(legacy[:30])):  # also shorter than a v2 header
        with pytest.raises(InvalidRecordError, match=f"legacy message format \\(magic {magic}\\)"):
            read_batch_header(buffer)
        with pytest.raises(InvalidRecordError):
            decode_batch(buffer)


def test_unknown_magic_is_invalid() -> None:
    data = bytearray(encode_batch(sample_records(1)))
    data[16] = 3
    with pytest.raises(InvalidRecordError, match="unknown magic 3"):
        read_batch_header(data)


def test_header_sanity_checks() -> None:
    data = bytearray(encode_batch(sample_records(1)))
    struct.pack_into(">i", data, 8, 48)
    with pytest.raises(CorruptMessageError, match="batch_length 48"):
        read_batch_header(data)
    data = bytearray(encode_batch(sample_records(1)))
    struct.pack_into(">i", data, 57, -1)
    with pytest.raises(CorruptMessageError, match="negative records_count"):
        read_batch_header(data)
    with pytest.raises(ValueError):
        read_batch_header(data, -1)


def test_undefined_codec_is_an_invalid_record() -> None:
    data = raw_batch(raw_record(b"\x00\x00\x00\x01\x01\x00"), 1, attributes=6)
    assert read_batch_header(data).attributes == 6
    with pytest.raises(InvalidRecordError, match="codec id 6"):
        decode_batch(data)


def test_bad_compressed_payload_is_corrupt() -> None:
    data = raw_batch(b"not lz4 at all", 1, attributes=int(CompressionType.LZ4))
    with pytest.raises(CorruptMessageError, match="lz4"):
        decode_batch(data)


# --- malformed records ----------------------------------------------------------------------

GOOD = raw_record(b"\x00", zigzag(0), zigzag(0), zigzag(-1), zigzag(1), b"v", zigzag(0))


def test_raw_helpers_build_a_valid_batch() -> None:
    assert decode_batch(raw_batch(GOOD, 1, base_timestamp=5)).records == (Record(0, 5, None, b"v"),)


@pytest.mark.parametrize(
    ("section", "count", "problem"),
    [
        (GOOD, 2, "declares 2 records, its records end after 1"),
        (GOOD + GOOD, 1, "has 8 bytes after its 1 records"),
        (
            raw_record(b"\x00", b"\x00\x00\x01\x01v\x00", length=60),
            1,
            "record length 60 does not fit",
        ),
        (raw_record(b"\x00", b"\x00\x00\x01\x01v\x00", length=-3), 1, "record length -3"),
        (
            raw_record(b"\x00", b"\x00\x00\x01\x02v\x00\x00"),
            1,
            "record length 8, its fields take 7",
        ),
        (raw_record(b"\x00\x00\x00", zigzag(-2), b"\x00"), 1, "key length -2"),
        (raw_record(b"\x00\x00\x00\x01", zigzag(9), b"v\x00"), 1, "value length 9 runs past"),
        (raw_record(b"\x00\x00\x00\x01\x01", zigzag(-1)), 1, "invalid header count -1"),
        (raw_record(b"\x00\x00\x00\x01\x01", zigzag(1), zigzag(-1), b"\x01"), 1, "null header key"),
        (raw_record(b"\x00", b"\xff" * 10, b"\x00"), 1, "longer than 10 bytes"),
        (raw_record(b"\x00\x00", b"\xff" * 5, b"\x00"), 1, "longer than 5 bytes"),
        (b"\xff\xff", 1, "record is truncated"),
    ],
)
def test_malformed_records_are_corrupt_and_say_where(
    section: bytes, count: int, problem: str
) -> None:
    data = raw_batch(section, count, base_offset=3)
    with pytest.raises(CorruptMessageError, match=problem) as caught:
        decode_batch(data)
    assert "position" in str(caught.value)


def test_malformed_compressed_records_say_where_in_the_decompressed_data() -> None:
    from protocol.compression import compress

    section = GOOD + raw_record(b"\x00\x00\x02", zigzag(-2), b"\x00")
    data = raw_batch(
        compress(CompressionType.GZIP, section), 2, attributes=int(CompressionType.GZIP)
    )
    with pytest.raises(
        CorruptMessageError, match=f"record 1 at byte {len(GOOD)} of the decompressed"
    ):
        decode_batch(data)


def test_record_attributes_are_ignored_and_invalid_utf8_header_keys_round_trip() -> None:
    section = raw_record(b"\x7f\x00\x00\x01\x02v", zigzag(1), zigzag(2), b"\xff\xfe", zigzag(-1))
    batch = decode_batch(raw_batch(section, 1))
    (record,) = batch.records
    assert record.value == b"v"
    assert record.headers == (("\udcff\udcfe", None),)
    again = encode_batch([record], base_timestamp=0)
    assert decode_batch(again).records == batch.records
    assert b"\x04\xff\xfe\x01" in again  # the key's original bytes


def test_empty_batch_records_are_not_read_as_in_kafka() -> None:
    assert decode_batch(raw_batch(b"anything", 0)).records == ()


# --- iter_batches ------------------------------------------------------------------------------


def test_iter_batches_reads_consecutive_batches() -> None:
    batches = [
        encode_batch(sample_records(3, base_offset=3 * n), compression=codec)
        for n, codec in enumerate(CODECS)
    ]
    data = b"".join(batches)
    decoded = list(iter_batches(data))
    assert [batch.base_offset for batch in decoded] == [0, 3, 6, 9, 12]
    assert [batch.header.compression for batch in decoded] == CODECS
    assert list(iter_batches(b"")) == []


def test_iter_batches_partial_tail() -> None:
    first = encode_batch(sample_records(3))
    data = first + encode_batch(sample_records(3, base_offset=3))
    for cut in (len(first) + 5, len(first) + 40, len(data) - 1):
        assert [b.base_offset for b in iter_batches(data[:cut], allow_partial_tail=True)] == [0]
        with pytest.raises(CorruptMessageError):
            list(iter_batches(data[:cut]))


# --- control records -------------------------------------------------------------------------------


@pytest.mark.parametrize("marker", [ControlRecordType.ABORT, ControlRecordType.COMMIT])
@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_control_batch_round_trip(marker: ControlRecordType, codec: CompressionType) -> None:
    record = encode_control_record(
        marker, coordinator_epoch=12, offset=500, timestamp=1_700_000_000_000
    )
    assert record.key == struct.pack(">hh", 0, marker)
    assert record.value == struct.pack(">hi", 0, 12)
    data = encode_batch(
        [record],
        is_control=True,
        is_transactional=True,
        producer_id=99,
        producer_epoch=4,
        compression=codec,
    )
    batch = decode_batch(data)
    assert batch.is_control and batch.is_transactional
    assert decode_control_record(batch.records[0]) == (marker, 12)
    (theirs,) = DefaultRecordBatch(bytearray(data))
    assert (theirs.version, theirs.type, theirs.offset) == (0, int(marker), 500)


def test_control_record_types() -> None:
    def control(key: bytes | None, value: bytes | None = None) -> Record:
        return Record(0, 0, key, value)

    assert control_record_type(control(struct.pack(">hh", 0, 2))) is ControlRecordType.LEADER_CHANGE
    assert control_record_type(control(struct.pack(">hh", 1, 99))) is ControlRecordType.UNKNOWN
    for bad_key in (None, b"\x00\x00\x01", struct.pack(">hh", -1, 0)):
        with pytest.raises(InvalidRecordError):
            control_record_type(control(bad_key))
    with pytest.raises(InvalidRecordError, match="LEADER_CHANGE"):
        decode_control_record(control(struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 1)))
    for bad_value in (None, b"\x00\x00\x00", struct.pack(">hi", -1, 1)):
        with pytest.raises(InvalidRecordError):
            decode_control_record(control(struct.pack(">hh", 0, 1), bad_value))
    assert decode_control_record(
        control(struct.pack(">hh", 0, 0), struct.pack(">hi", 3, 8) + b"x")
    ) == (
        ControlRecordType.ABORT,
        8,
    )
    with pytest.raises(ValueError):
        encode_control_record(
            ControlRecordType.LEADER_CHANGE, coordinator_epoch=0, offset=0, timestamp=0
        )


# --- varints ----------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(value=int32s)
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) <= 5
    assert decode_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))
    assert encoded == encode_varlong(value)
    out = bytearray()
    kafka_python_encode_varint(value, out.append)
    assert encoded == bytes(out)


@settings(max_examples=300, deadline=None)
@given(value=int64s)
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) <= 10
    assert decode_varlong(memoryview(encoded + b"\x00")) == (value, len(encoded))
    assert kafka_python_decode_varint(encoded, 0) == (value, len(encoded))


@settings(max_examples=200, deadline=None)
@given(
    value=st.one_of(
        st.sampled_from([0, 127, 128, 16383, 16384, 2**32 - 1]), st.integers(0, 2**32 - 1)
    )
)
def test_unsigned_varint_round_trip(value: int) -> None:
    encoded = encode_unsigned_varint(value)
    assert decode_unsigned_varint(bytearray(encoded)) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "hex_bytes"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (-65, "8101"),
        (8191, "fe7f"),
        (8192, "808001"),
        (INT32_MAX, "feffffff0f"),
        (INT32_MIN, "ffffffff0f"),
    ],
)
def test_varint_known_bytes(value: int, hex_bytes: str) -> None:
    assert encode_varint(value).hex() == hex_bytes
    assert decode_varint(bytes.fromhex(hex_bytes)) == (value, len(hex_bytes) // 2)


def test_varlong_extremes() -> None:
    assert encode_varlong(INT64_MAX).hex() == "feffffffffffffffff01"
    assert encode_varlong(INT64_MIN).hex() == "ffffffffffffffffff01"


def test_varint_errors() -> None:
    for encode, bad in (
        (encode_varint, 2**31),
        (encode_varint, INT32_MIN - 1),
        (encode_varlong, 2**63),
        (encode_unsigned_varint, -1),
        (encode_unsigned_varint, 2**32),
    ):
        with pytest.raises(ValueError):
            encode(bad)
    for decode, data in (
        (decode_varint, b""),
        (decode_varint, b"\x80"),
        (decode_varlong, b"\xff" * 9),
        (decode_unsigned_varint, b"\x80\x80"),
    ):
        with pytest.raises(CorruptMessageError, match="truncated"):
            decode(data)
    with pytest.raises(CorruptMessageError, match="longer than 5 bytes"):
        decode_varint(b"\xff" * 5 + b"\x01")
    with pytest.raises(CorruptMessageError, match="longer than 10 bytes"):
        decode_varlong(b"\xff" * 10 + b"\x01")


def test_five_byte_varint_keeps_the_low_32_bits_like_java() -> None:
    # Java's readUnsignedVarint shifts the 5th byte left by 28 in an int, dropping its high bits.
    assert decode_varint(b"\xfe\xff\xff\xff\x7f") == (INT32_MAX, 5)


# --- fast constructors ----------------------------------------------------------------------------


def test_fast_constructors_build_the_real_frozen_classes() -> None:
    record = _new_record(1, 2, b"k", None, (("h", b"v"),))
    assert type(record) is Record
    assert record == Record(1, 2, b"k", None, (("h", b"v"),))
    assert hash(record) == hash(Record(1, 2, b"k", None, (("h", b"v"),)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.offset = 5  # type: ignore[misc]
    fields = tuple(range(13))
    header = _new_batch_header(fields)
    assert type(header) is BatchHeader
    assert header == BatchHeader(*fields)
    assert dataclasses.astuple(header) == fields
    assert dataclasses.replace(header, crc=99).crc == 99


def test_public_constants() -> None:
    assert (MAGIC_V2, LOG_OVERHEAD, BATCH_HEADER_SIZE) == (2, 12, 61)
    assert (
        NO_PRODUCER_ID
        == NO_PRODUCER_EPOCH
        == NO_SEQUENCE
        == NO_PARTITION_LEADER_EPOCH
        == NO_TIMESTAMP
        == -1
    )
    assert [(t.name, int(t)) for t in TimestampType] == [("CREATE_TIME", 0), ("LOG_APPEND_TIME", 1)]
    batch = decode_batch(encode_batch(sample_records(2)))
    assert isinstance(batch, RecordBatch)
    assert (batch.next_offset, batch.size_in_bytes) == (2, batch.header.size_in_bytes)
