"""protocol.compression: round trips, Kafka's framings byte by byte, and bad input."""

from __future__ import annotations

import gzip
import io
import random
import struct
import zlib

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_python_codec

from protocol.compression import CompressionType, compress, compression_type, decompress
from protocol.errors import CorruptMessageError, InvalidRecordError

CODECS = list(CompressionType)
COMPRESSED = [codec for codec in CompressionType if codec is not CompressionType.NONE]
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)

# Large inputs are built by repetition so hypothesis need not generate them byte by byte.
payloads = st.one_of(
    st.binary(max_size=300),
    st.builds(
        lambda unit, count: unit * count, st.binary(min_size=1, max_size=40), st.integers(1, 5000)
    ),
)


def sample(size: int) -> bytes:
    """Compressible but not trivial data of ``size`` bytes."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += b"record-%08d|" % (counter * 7919 % 100003)
        counter += 1
    return bytes(out[:size])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(CODECS), data=payloads)
def test_round_trip(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_accepts_any_bytes_like(codec: CompressionType, kind: type) -> None:
    data = sample(5000)
    compressed = compress(codec, kind(data))
    assert decompress(codec, kind(compressed)) == data
    assert decompress(int(codec), compressed) == data


@pytest.mark.parametrize(
    ("codec", "level"),
    [
        (CompressionType.GZIP, 1),
        (CompressionType.GZIP, 9),
        (CompressionType.GZIP, -1),
        (CompressionType.LZ4, 1),
        (CompressionType.LZ4, 12),
        (CompressionType.ZSTD, -5),
        (CompressionType.ZSTD, 19),
    ],
)
def test_levels(codec: CompressionType, level: int) -> None:
    data = sample(100_000)
    assert decompress(codec, compress(codec, data, level=level)) == data


@pytest.mark.parametrize("codec_id", [5, 6, 7, -1, 8])
def test_undefined_codec_ids_are_invalid_records(codec_id: int) -> None:
    with pytest.raises(InvalidRecordError, match=f"codec id {codec_id}"):
        compression_type(codec_id)
    with pytest.raises(InvalidRecordError):
        compress(codec_id, b"x")
    with pytest.raises(InvalidRecordError):
        decompress(codec_id, b"x")


def test_codec_ids_are_kafkas() -> None:
    assert [(codec.name, int(codec)) for codec in CompressionType] == [
        ("NONE", 0),
        ("GZIP", 1),
        ("SNAPPY", 2),
        ("LZ4", 3),
        ("ZSTD", 4),
    ]
    assert all(compression_type(int(codec)) is codec for codec in CompressionType)


# --- bad input ------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED)
def test_empty_input_is_corrupt(codec: CompressionType) -> None:
    with pytest.raises(CorruptMessageError, match=codec.name.lower()):
        decompress(codec, b"")


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_is_corrupt_and_names_the_codec(codec: CompressionType) -> None:
    garbage = bytes(range(7, 250)) * 3
    with pytest.raises(CorruptMessageError, match=codec.name.lower()):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_every_truncation_is_corrupt(codec: CompressionType) -> None:
    compressed = compress(codec, sample(3000))
    for cut in range(1, len(compressed)):
        if codec is CompressionType.SNAPPY and cut == len(XERIAL_HEADER):
            continue  # xerial has no end mark: a cut at a block boundary reads as less data
        with pytest.raises(CorruptMessageError, match=codec.name.lower()):
            decompress(codec, compressed[:cut])


@pytest.mark.parametrize("codec", COMPRESSED)
def test_trailing_garbage_is_corrupt(codec: CompressionType) -> None:
    compressed = compress(codec, sample(3000))
    with pytest.raises(CorruptMessageError, match=codec.name.lower()):
        decompress(codec, compressed + b"\x00\x01garbage")


def test_gzip_flipped_byte_is_corrupt() -> None:
    # Only gzip carries a content checksum; Kafka writes none for lz4 / zstd / snappy and
    # relies on the batch CRC, which covers the compressed bytes.
    compressed = bytearray(compress(CompressionType.GZIP, sample(3000)))
    compressed[len(compressed) // 2] ^= 0xFF
    with pytest.raises(CorruptMessageError, match="gzip"):
        decompress(CompressionType.GZIP, compressed)


# --- gzip ---------------------------------------------------------------------------


def test_gzip_is_rfc1952_and_reads_concatenated_members() -> None:
    data = sample(10_000)
    compressed = compress(CompressionType.GZIP, data)
    assert compressed[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(compressed) == data
    two_members = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(CompressionType.GZIP, two_members) == b"first second"


# --- snappy ---------------------------------------------------------------------------


def xerial_blocks(framed: bytes) -> list[bytes]:
    """The raw snappy blocks of a xerial stream, parsed independently of the code under test."""
    assert framed[:16] == XERIAL_HEADER
    blocks, position = [], 16
    while position < len(framed):
        (length,) = struct.unpack_from(">i", framed, position)
        blocks.append(framed[position + 4 : position + 4 + length])
        position += 4 + length
    assert position == len(framed)
    return blocks


def test_snappy_writes_xerial_framing_with_32_kib_blocks() -> None:
    data = sample(100_000)
    framed = compress(CompressionType.SNAPPY, data)
    blocks = xerial_blocks(framed)
    assert [len(snappy.decompress(block)) for block in blocks] == [32768, 32768, 32768, 1696]
    assert b"".join(snappy.decompress(block) for block in blocks) == data
    assert kafka_python_codec.snappy_decode(framed) == data


def test_snappy_of_nothing_is_the_bare_header() -> None:
    assert compress(CompressionType.SNAPPY, b"") == XERIAL_HEADER
    assert decompress(CompressionType.SNAPPY, XERIAL_HEADER) == b""


def test_snappy_reads_raw_snappy() -> None:
    data = sample(70_000)
    assert decompress(CompressionType.SNAPPY, snappy.compress(data)) == data


def test_snappy_reads_multi_block_xerial_from_another_writer() -> None:
    data = sample(200_000)
    framed = kafka_python_codec.snappy_encode(data, xerial_compatible=True)
    assert len(xerial_blocks(framed)) == 7
    assert decompress(CompressionType.SNAPPY, framed) == data


def test_snappy_reads_odd_but_valid_xerial_streams() -> None:
    first, second = sample(40_000), b"tail"
    concatenated = compress(CompressionType.SNAPPY, first) + compress(
        CompressionType.SNAPPY, second
    )
    assert decompress(CompressionType.SNAPPY, concatenated) == first + second
    # Some producers write version/compat little-endian; they are not interpreted.
    little_endian = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1)
    framed = little_endian + compress(CompressionType.SNAPPY, first)[16:]
    assert decompress(CompressionType.SNAPPY, framed) == first


def test_snappy_bad_xerial_block_length_is_corrupt() -> None:
    framed = bytearray(compress(CompressionType.SNAPPY, sample(1000)))
    struct.pack_into(">i", framed, 16, -5)
    with pytest.raises(CorruptMessageError, match="snappy: xerial block"):
        decompress(CompressionType.SNAPPY, framed)


# --- lz4 ----------------------------------------------------------------------------

JAVA_LZ4_FRAME_HEADER = bytes.fromhex("04224d18604082")  # magic, FLG, BD, HC


def lz4_blocks(frame: bytes) -> list[tuple[int, bool]]:
    """(size, compressed) of each block of a frame with Java's header."""
    assert frame[:7] == JAVA_LZ4_FRAME_HEADER
    blocks, position = [], 7
    while True:
        (word,) = struct.unpack_from("<I", frame, position)
        position += 4
        if word == 0:
            break
        size = word & 0x7FFFFFFF
        blocks.append((size, not word & 0x80000000))
        position += size
    assert position == len(frame)
    return blocks


def test_lz4_writes_the_frame_header_java_writes() -> None:
    data = sample(200_000)
    frame = compress(CompressionType.LZ4, data)
    blocks = lz4_blocks(frame)  # independent blocks, no checksums, no content size
    assert len(blocks) == 4  # 64 KiB blocks
    assert all(compressed for _, compressed in blocks)
    assert kafka_python_codec.lz4_decode(frame) == data


def test_lz4_incompressible_blocks_are_stored() -> None:
    data = random.Random(7).randbytes(70_000)
    frame = compress(CompressionType.LZ4, data)
    assert lz4_blocks(frame)[0] == (65536, False)
    assert decompress(CompressionType.LZ4, frame) == data


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"block_linked": True, "content_checksum": True},
        {"block_checksum": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "store_size": True},
    ],
)
def test_lz4_reads_frames_other_writers_produce(options: dict[str, object]) -> None:
    data = sample(300_000)
    assert decompress(CompressionType.LZ4, lz4.frame.compress(data, **options)) == data


def test_lz4_reads_concatenated_frames() -> None:
    frames = lz4.frame.compress(b"first ") + compress(CompressionType.LZ4, b"second")
    assert decompress(CompressionType.LZ4, frames) == b"first second"


# --- zstd -----------------------------------------------------------------------------


def streamed_zstd(data: bytes) -> bytes:
    """A frame without content size, as Java's ZstdOutputStream and librdkafka write."""
    sink = io.BytesIO()
    with zstandard.ZstdCompressor(level=3).stream_writer(sink, closefd=False) as writer:
        for start in range(0, len(data), 1000):
            writer.write(data[start : start + 1000])
    frame = sink.getvalue()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    return frame


def test_zstd_reads_frames_without_content_size() -> None:
    data = sample(300_000)
    assert decompress(CompressionType.ZSTD, streamed_zstd(data)) == data


def test_zstd_reads_concatenated_frames() -> None:
    frames = streamed_zstd(b"first ") + compress(CompressionType.ZSTD, b"second")
    assert decompress(CompressionType.ZSTD, frames) == b"first second"


def test_zstd_output_is_read_by_another_reader() -> None:
    data = sample(50_000)
    assert kafka_python_codec.zstd_decode(compress(CompressionType.ZSTD, data)) == data


def test_never_leaks_library_exceptions() -> None:
    cases = {
        CompressionType.GZIP: zlib.compress(b"zlib, not gzip"),
        CompressionType.SNAPPY: b"\xff\xff\xff\xff\x0f",
        CompressionType.LZ4: JAVA_LZ4_FRAME_HEADER + b"\x10\x00\x00\x00" + b"\xff" * 16,
        CompressionType.ZSTD: b"\x28\xb5\x2f\xfd" + b"\x00" * 12,
    }
    for codec, data in cases.items():
        with pytest.raises(CorruptMessageError):
            decompress(codec, data)
