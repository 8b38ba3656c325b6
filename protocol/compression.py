"""Compression codecs of RecordBatch v2: the records section, compressed as a whole.

The codec id is bits 0-2 of the batch attributes. Formats, as Kafka's Java client
writes and reads them (clients/.../common/compress/):

- NONE (0)   the records section as is.
- GZIP (1)   RFC 1952 gzip members (zlib container ``wbits=31``, CRC-32 and size
             trailer checked). Java's GZIPInputStream reads concatenated members,
             so we do too.
- SNAPPY (2) xerial snappy-java framing, which is what SnappyOutputStream writes::

                 magic    8 bytes  b"\\x82SNAPPY\\x00"
                 version  int32    1   (big-endian; ignored on read: some
                 compat   int32    1    producers write these little-endian)
                 blocks   { int32 big-endian length, raw snappy of <= 32 KiB input }*

             Reading accepts this framing (including a second header at a block
             boundary, from concatenated streams) and plain raw snappy, which
             SnappyInputStream also falls back to when the magic is absent.
- LZ4 (3)    one LZ4 frame. Java's Lz4BlockOutputStream writes FLG 0x60 (version 01,
             independent blocks, no block or content checksum, no content size) and
             BD 0x40 (64 KiB blocks); its reader rejects linked (dependent) blocks and
             block sizes outside 64 KiB..4 MiB. We write exactly that header.
- ZSTD (4)   zstd frames. Java (zstd-jni ZstdOutputStream) and librdkafka stream
             their output, so the frame header usually has no content size; we
             decompress frame by frame with a streaming decompressor.
- 5..7       not defined by Kafka: ``InvalidRecordError`` (see ``compression_type``).

Invariants: ``decompress(c, compress(c, data)) == data`` for every codec; bad
compressed input raises ``CorruptMessageError`` naming the codec, never a raw
zlib / lz4 / zstd / snappy exception. Concatenated gzip members / lz4 frames / zstd
frames / xerial streams are read; any other bytes after the last one are corrupt (Java
ignores trailing bytes after a gzip member or lz4 frame; no Kafka client writes them).
Pure functions, no state, no I/O.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import TYPE_CHECKING

import lz4.frame
import snappy
import zstandard

from protocol.errors import CorruptMessageError, InvalidRecordError

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["CompressionType", "compress", "compression_type", "decompress"]


class CompressionType(IntEnum):
    """Kafka's codec ids, as stored in attributes bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_CODECS_BY_ID = tuple(CompressionType)


def compression_type(codec_id: int) -> CompressionType:
    """The codec for an attributes value's bits 0-2.

    Ids 5-7 raise ``InvalidRecordError`` (INVALID_RECORD, not retriable): the batch CRC
    covers the attributes, so a well-formed batch carrying id 5-7 is exactly what the
    producer sent and resending it cannot help. CORRUPT_MESSAGE would be wrong because
    it is retriable and means "damaged in transit". (Java throws IllegalArgumentException
    from CompressionType.forId here, which its broker reports as UNKNOWN_SERVER_ERROR.)
    """
    if 0 <= codec_id < len(_CODECS_BY_ID):
        return _CODECS_BY_ID[codec_id]
    raise InvalidRecordError(f"unknown compression codec id {codec_id}")


# --- gzip -------------------------------------------------------------------

_GZIP_WBITS = 31  # 16 + 15: gzip header and trailer, 32 KiB window
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_DEFAULT_LEVEL = 6  # Java's Deflater.DEFAULT_COMPRESSION (-1) is zlib level 6


def _gzip_compress(data: Buffer, level: int | None) -> bytes:
    compressor = zlib.compressobj(
        _GZIP_DEFAULT_LEVEL if level is None or level < 0 else level, zlib.DEFLATED, _GZIP_WBITS
    )
    return compressor.compress(data) + compressor.flush()


def _gzip_decompress(data: memoryview) -> bytes:
    parts: list[bytes] = []
    remaining: bytes | memoryview = data
    while remaining:
        if bytes(remaining[:2]) != _GZIP_MAGIC:
            raise CorruptMessageError(
                "gzip: bytes after the last gzip member are not a gzip member"
            )
        decompressor = zlib.decompressobj(_GZIP_WBITS)
        try:
            parts.append(decompressor.decompress(remaining))
        except zlib.error as e:
            raise CorruptMessageError(f"gzip: invalid compressed data ({e})") from None
        if not decompressor.eof:
            raise CorruptMessageError("gzip: compressed data is truncated")
        remaining = decompressor.unused_data
    return b"".join(parts)


# --- snappy -------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible 1
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java SnappyOutputStream.DEFAULT_BLOCK_SIZE
_INT32 = struct.Struct(">i")


def _snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, view.nbytes, _XERIAL_BLOCK_SIZE):
        block = snappy.compress(view[start : start + _XERIAL_BLOCK_SIZE])
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_decompress(block: memoryview) -> bytes:
    try:
        return bytes(snappy.decompress(block))
    except snappy.UncompressError as e:
        raise CorruptMessageError(f"snappy: invalid compressed block ({e!r})") from None


def _snappy_decompress(data: memoryview) -> bytes:
    if bytes(data[:8]) != _XERIAL_MAGIC:
        return _snappy_raw_decompress(data)
    parts: list[bytes] = []
    position, end = 0, data.nbytes
    while position < end:
        if bytes(data[position : position + 8]) == _XERIAL_MAGIC:
            position += len(_XERIAL_HEADER)  # a (repeated) stream header, not a block
            continue
        if position + 4 > end:
            raise CorruptMessageError(f"snappy: xerial block length truncated at byte {position}")
        (length,) = _INT32.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > end:
            raise CorruptMessageError(
                f"snappy: xerial block at byte {position - 4} declares {length} bytes,"
                f" {end - position} remain"
            )
        parts.append(_snappy_raw_decompress(data[position : position + length]))
        position += length
    if position > end:
        raise CorruptMessageError("snappy: xerial stream header truncated")
    return b"".join(parts)


# --- lz4 ------------------------------------------------------------------------

_LZ4_DEFAULT_LEVEL = 9  # Kafka's CompressionType.LZ4.defaultLevel(), fast compressor


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    # Java uses lz4's fast compressor at the default level and HC otherwise; in
    # lz4.frame, level 0 is the fast compressor and 3..16 are HC levels.
    frame_level = 0 if level is None or level == _LZ4_DEFAULT_LEVEL else level
    compressed: bytes = lz4.frame.compress(
        data,
        compression_level=frame_level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,  # Java's reader: "Dependent block stream is unsupported"
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )
    return compressed


def _lz4_decompress(data: memoryview) -> bytes:
    parts: list[bytes] = []
    position, end = 0, data.nbytes
    while position < end:
        try:
            chunk, used = lz4.frame.decompress(data[position:], return_bytes_read=True)
        except RuntimeError as e:
            raise CorruptMessageError(f"lz4: invalid frame at byte {position} ({e})") from None
        if used <= 0:
            raise CorruptMessageError(f"lz4: no progress decoding frame at byte {position}")
        parts.append(chunk)
        position += used
    return b"".join(parts)


# --- zstd -----------------------------------------------------------------------

_ZSTD_DEFAULT_LEVEL = 3  # Kafka's CompressionType.ZSTD.defaultLevel()


def _zstd_compress(data: Buffer, level: int | None) -> bytes:
    compressor = zstandard.ZstdCompressor(level=_ZSTD_DEFAULT_LEVEL if level is None else level)
    return compressor.compress(memoryview(data))


def _zstd_decompress(data: memoryview) -> bytes:
    # ZstdDecompressor.decompress() refuses frames without a content size, which is
    # what streaming encoders (Java's ZstdOutputStream, librdkafka) write; a
    # decompressobj streams one frame, and we loop over concatenated frames.
    parts: list[bytes] = []
    remaining: bytes | memoryview = data
    decompressor = zstandard.ZstdDecompressor()
    while remaining:
        stream = decompressor.decompressobj()
        try:
            parts.append(stream.decompress(remaining))
        except zstandard.ZstdError as e:
            raise CorruptMessageError(f"zstd: invalid compressed data ({e})") from None
        if not stream.eof:
            raise CorruptMessageError("zstd: compressed data is truncated")
        remaining = stream.unused_data
    return b"".join(parts)


# --- dispatch -------------------------------------------------------------------


def compress(codec: CompressionType | int, data: Buffer, *, level: int | None = None) -> bytes:
    """Compress a records section with ``codec``; ``level`` None means Kafka's default.

    Levels follow Kafka's ``compression.<codec>.level`` (KIP-390): gzip 1-9, lz4 1-17
    (9 = the fast compressor), zstd -131072..22; snappy has none.
    """
    codec = compression_type(codec)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        return _gzip_compress(data, level)
    if codec is CompressionType.SNAPPY:
        return _snappy_compress(data)
    if codec is CompressionType.LZ4:
        return _lz4_compress(data, level)
    return _zstd_compress(data, level)


def decompress(codec: CompressionType | int, data: Buffer) -> bytes:
    """Decompress a records section; ``CorruptMessageError`` if it is not valid ``codec`` data."""
    codec = compression_type(codec)
    view = memoryview(data)
    if codec is CompressionType.NONE:
        return bytes(view)
    if not view.nbytes:
        raise CorruptMessageError(f"{codec.name.lower()}: compressed data is empty")
    if codec is CompressionType.GZIP:
        return _gzip_decompress(view)
    if codec is CompressionType.SNAPPY:
        return _snappy_decompress(view)
    if codec is CompressionType.LZ4:
        return _lz4_decompress(view)
    return _zstd_decompress(view)
