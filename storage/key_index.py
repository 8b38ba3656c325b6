"""Per-segment key index (Samsa's own ``<base_offset>.keyindex``): which batches of a segment
hold a record with a given key, so a read of one key's records ("every record of key K in
this partition") touches only those batches instead of the whole partition.

An entry maps the 64-bit hash of a record key (``mmh3.hash64(key)[0]``, unsigned) to the file
position of a batch holding a record with that key; one entry per (key hash, batch), however
many records of the key the batch holds. Records with a null key and control batches
(transaction markers) are not indexed. The index names *candidates*: two keys may share a hash,
so whoever needs exact keys decodes the candidate batches and compares (see ``storage.log_keys``).

On disk (all integers big-endian)::

    offset  size  field
    0       4     magic  b"SKIX"
    4       1     version (0)
    5       3     zero
    8       8     base_offset       int64, the segment's (its file name)
    16      8     covered_bytes     int64, the size of the .log the entries describe
    24      4     entry count N     uint32
    28      8*N   key hashes        uint64, ascending; equal hashes ordered by position
    28+8N   4*N   batch positions   uint32, entry i's batch starts there in the .log
    28+12N  4     CRC-32C (Castagnoli) of bytes [0, 28+12N)

Invariants: a file is trusted only when its length is ``32 + 12*N``, magic, version and CRC
match, and ``base_offset`` and ``covered_bytes`` are those of the segment it sits beside (a
segment cut by truncation or recovery no longer matches, so its stale index is never used).
Anything else is "missing or corrupt": the caller rebuilds the index from the log. Files are
written to ``.keyindex.tmp``, fsynced and renamed; the directory is not fsynced, because a key
index lost in a crash is rebuilt like a corrupt one.

Lookups: a sealed segment's index, once written or checked, is a ``KeyIndexFile``: only its
header is kept, and each lookup binary-searches the file's hashes with 8-byte ``pread`` calls
(about 17 for 140,000 entries) and reads the matching positions with one more, so the key
indexes of a long log cost no memory. A ``KeyIndex`` (arrays in memory) is what a build
produces before it is written.

State: ``KeyIndex`` and ``KeyIndexFile`` are immutable; ``ActiveKeyMap`` (the active segment's
entries, in memory) belongs to the ``Log`` that holds the segment and changes under its key
lock.
"""

from __future__ import annotations

import array
import bisect
import os
import struct
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
import mmh3

from protocol.errors import CorruptMessageError, InvalidRecordError
from protocol.records import BatchHeader, decode_batch
from storage.errors import CorruptIndexError
from storage.fsync import fsync

KEY_INDEX_SUFFIX = ".keyindex"
MAGIC = b"SKIX"
VERSION = 0
_HEADER = struct.Struct(">4sB3xqqI")
_CRC = struct.Struct(">I")
_HASH = struct.Struct(">Q")
ENTRY_BYTES = 12  # 8-byte hash + 4-byte position


def key_hash(key: bytes) -> int:
    """The 64-bit unsigned hash the key index stores for ``key``."""
    return int(mmh3.hash64(key, signed=False)[0])


def batch_key_hashes(data: bytes, header: BatchHeader) -> set[int]:
    """The distinct key hashes of one batch's records (none for a control batch). A batch
    that does not decode contributes nothing: a reader of the whole log would fail on it too."""
    if header.is_control or header.records_count == 0:
        return set()
    try:
        batch = decode_batch(data, verify_crc=False)
    except (CorruptMessageError, InvalidRecordError):
        return set()
    return {key_hash(record.key) for record in batch.records if record.key is not None}


@dataclass(frozen=True, slots=True)
class KeyIndex:
    """A sealed segment's key index: ``hashes`` ascending, ``positions[i]`` belongs to
    ``hashes[i]``; ``covered_bytes`` is the segment size it was built from."""

    base_offset: int
    covered_bytes: int
    hashes: array.array  # 'Q'
    positions: array.array  # 'I'

    @property
    def entry_count(self) -> int:
        return len(self.hashes)

    def positions_of(self, hash_value: int) -> list[int]:
        """Positions of the batches that may hold the key with ``hash_value``, ascending."""
        low = bisect.bisect_left(self.hashes, hash_value)
        high = bisect.bisect_right(self.hashes, hash_value, low)
        return list(self.positions[low:high])

    @classmethod
    def from_entries(
        cls, base_offset: int, covered_bytes: int, entries: Iterable[tuple[int, int]]
    ) -> KeyIndex:
        ordered = sorted(entries)
        hashes = array.array("Q", (hash_value for hash_value, _ in ordered))
        positions = array.array("I", (position for _, position in ordered))
        return cls(base_offset, covered_bytes, hashes, positions)

    def entries(self) -> Iterator[tuple[int, int]]:
        return zip(self.hashes, self.positions, strict=True)


@dataclass(slots=True)
class ActiveKeyMap:
    """The active segment's key index in memory: hash -> batch positions (ascending), for the
    batches of ``[0, covered_bytes)`` of the segment at ``base_offset``. Extended by scanning
    from ``covered_bytes`` to the segment's current size (``storage.log_keys``)."""

    base_offset: int
    covered_bytes: int = 0
    # An array of uint32 per key hash (4 bytes a position, not a list of int objects): a
    # segment.bytes of 1 GiB holds millions of (key, batch) pairs.
    positions: dict[int, array.array] = field(default_factory=dict)

    def add_batch(self, position: int, hashes: Iterable[int]) -> None:
        for hash_value in hashes:
            found = self.positions.get(hash_value)
            if found is None:
                found = self.positions[hash_value] = array.array("I")
            found.append(position)

    def positions_of(self, hash_value: int) -> list[int]:
        return list(self.positions.get(hash_value, ()))

    def merge(self, later: ActiveKeyMap) -> None:
        """Add ``later``'s entries, which start where this map's coverage ends."""
        for hash_value, positions in later.positions.items():
            found = self.positions.get(hash_value)
            if found is None:
                self.positions[hash_value] = positions
            else:
                found.extend(positions)
        self.covered_bytes = later.covered_bytes

    def sealed(self) -> KeyIndex:
        entries = ((h, p) for h, positions in self.positions.items() for p in positions)
        return KeyIndex.from_entries(self.base_offset, self.covered_bytes, entries)


def encode_key_index(index: KeyIndex) -> bytes:
    hashes, positions = array.array("Q", index.hashes), array.array("I", index.positions)
    if sys.byteorder == "little":
        hashes.byteswap()
        positions.byteswap()
    body = b"".join((
        _HEADER.pack(MAGIC, VERSION, index.base_offset, index.covered_bytes, len(hashes)),
        hashes.tobytes(), positions.tobytes(),
    ))
    return body + _CRC.pack(crc32c.crc32c(body))


def decode_key_index(data: bytes, *, entries: bool = True) -> KeyIndex:
    """Raises ``CorruptIndexError`` for anything but a whole, well-formed file; with
    ``entries`` False only checks it (the arrays come back empty)."""
    if len(data) < _HEADER.size + _CRC.size:
        raise CorruptIndexError(f"key index of {len(data)} bytes is shorter than its header")
    magic, version, base_offset, covered_bytes, count = _HEADER.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise CorruptIndexError(f"key index has magic {magic!r} version {version}")
    expected = _HEADER.size + ENTRY_BYTES * count + _CRC.size
    if len(data) != expected:
        raise CorruptIndexError(f"key index of {len(data)} bytes, {expected} expected")
    (stored,) = _CRC.unpack_from(data, expected - _CRC.size)
    if crc32c.crc32c(memoryview(data)[: expected - _CRC.size]) != stored:
        raise CorruptIndexError("key index fails its CRC check")
    hashes_end = _HEADER.size + 8 * count
    hashes, positions = array.array("Q"), array.array("I")
    if not entries:
        return KeyIndex(base_offset, covered_bytes, hashes, positions)
    hashes.frombytes(data[_HEADER.size : hashes_end])
    positions.frombytes(data[hashes_end : hashes_end + 4 * count])
    if sys.byteorder == "little":
        hashes.byteswap()
        positions.byteswap()
    return KeyIndex(base_offset, covered_bytes, hashes, positions)


def key_index_path(log_path: Path) -> Path:
    """``00000000000000000042.keyindex`` beside ``00000000000000000042.log`` (suffixes such
    as ``.cleaned`` kept: ``.log.cleaned`` -> ``.keyindex.cleaned``)."""
    name = log_path.name
    base, _, rest = name.partition(".")
    suffix = rest[len("log") :]
    return log_path.with_name(f"{base}{KEY_INDEX_SUFFIX}{suffix}")


def write_key_index(path: Path, index: KeyIndex) -> None:
    """Replace ``path``: ``.tmp`` file, fsync, rename (no directory fsync, see docstring)."""
    temp = path.with_name(path.name + ".tmp")
    with open(temp, "wb") as handle:
        handle.write(encode_key_index(index))
        handle.flush()
        fsync(handle.fileno(), temp)
    os.replace(temp, path)


@dataclass(frozen=True, slots=True)
class KeyIndexFile:
    """A ``.keyindex`` checked whole once (length, magic, version, CRC, segment) and then
    looked up in place: a binary search by ``pread`` of the hashes, one ``pread`` of the
    positions, so a loaded key index costs no memory however big its segment. ``path`` gives
    the file's current name (segments are renamed: ``.cleaned``, ``.swap``, ``.deleted``)."""

    base_offset: int
    covered_bytes: int
    entry_count: int
    path: Callable[[], Path]

    def positions_of(self, hash_value: int) -> list[int]:
        """As ``KeyIndex.positions_of``; FileNotFoundError if the file went meanwhile."""
        fd = os.open(self.path(), os.O_RDONLY)
        try:
            hashes = _HashColumn(fd, self.entry_count)
            low = bisect.bisect_left(hashes, hash_value)
            high = bisect.bisect_right(hashes, hash_value, low)
            if low == high:
                return []
            start = _HEADER.size + 8 * self.entry_count + 4 * low
            data = os.pread(fd, 4 * (high - low), start)
        finally:
            os.close(fd)
        return list(struct.unpack(f">{high - low}I", data))


class _HashColumn:
    """The file's hashes as a sequence for ``bisect``: each item one 8-byte ``pread``."""

    __slots__ = ("count", "fd")

    def __init__(self, fd: int, count: int) -> None:
        self.fd, self.count = fd, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> int:
        return int(_HASH.unpack(os.pread(self.fd, 8, _HEADER.size + 8 * index))[0])


SealedKeyIndex = KeyIndex | KeyIndexFile


def read_key_index(path: Path, *, base_offset: int, covered_bytes: int,
                   current_path: Callable[[], Path] | None = None) -> KeyIndexFile | None:
    """The index in ``path`` if it is whole and describes this segment as it is; else None.
    Only its header is kept: lookups read the file (``current_path``: its name then)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        index = decode_key_index(data, entries=False)
    except CorruptIndexError:
        return None
    if index.base_offset != base_offset or index.covered_bytes != covered_bytes:
        return None
    return KeyIndexFile(base_offset, covered_bytes, _count(data), current_path or (lambda: path))


def _count(data: bytes) -> int:
    return int(_HEADER.unpack_from(data)[4])
