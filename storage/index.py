"""Kafka's sparse segment indexes, ``<base>.index`` and ``<base>.timeindex``, byte for byte.

Byte layout (big-endian, no header, no checksum; a damaged index is rebuilt from the log):

- ``.index`` (``OffsetIndex``): 8-byte entries ``int32 relative_offset, int32 position``, where
  ``relative_offset = offset - base_offset`` and ``position`` is the byte position in ``.log``.
- ``.timeindex`` (``TimeIndex``): 12-byte entries ``int64 timestamp, int32 relative_offset``:
  ``timestamp`` is the largest timestamp seen up to ``offset``, so any record with a greater
  timestamp comes after ``offset``.

Life cycle, as in Kafka's ``AbstractIndex``: a new writable file is preallocated to
``max_index_size`` rounded down to a whole entry, and mapped with ``mmap``; so is an existing
empty one (Kafka would map it with no free slot). A file that already
has bytes is mapped as it is and holds ``length // entry_size`` entries, because Kafka trims an
index to its entries when the segment rolls and on clean close. After an unclean shutdown the
preallocated, zero-filled tail counts as entries, and ``sanity_check()`` rejects it (the offsets
stop increasing); the segment then rebuilds the index. ``writable=False`` maps the file
read-only and never changes it (``samsa log dump/verify``).

Invariants, kept by ``append`` and checked by ``sanity_check``:

- ``OffsetIndex``: offsets strictly increase and are >= ``base_offset``; positions never
  decrease and are >= 0 (checked by Samsa; Kafka does not: with it, a damaged entry that still
  looks ordered can only point at a wrong place below the next entry's position, which the
  segment checks at the entry's first use).
- ``TimeIndex``: timestamps strictly increase; offsets never decrease and are >= ``base_offset``.
  ``is_full()`` keeps the last slot free for the entry written when the segment rolls.
- ``entries * entry_size <= length``; bytes past the entries are zero or stale.

Descriptors and maps (Kafka's ``AbstractIndex`` and ``LazyIndex``, KAFKA-7283): the file's
descriptor is closed as soon as it is mapped (``storage.mapping``: no descriptor stays open). With
``lazy=True`` nothing is read or mapped until the first call that needs the entries; from then on
``length``, ``entries`` and the last entry are kept in memory, and the map itself comes and goes:
a mapped index joins ``maps`` (a ``storage.open_files.LeastRecentlyUsed``), which unmaps the least
recently used ones past its capacity; the next use maps the file again. Unmapped entries stay in
the page cache; ``flush`` fsyncs the file when it wrote since the last flush but is not mapped.

Owner: the ``LogSegment`` that opened the index. Thread-safe since the map can be taken away by
another thread's eviction: every call that touches the map holds the index's lock, and eviction
takes it too; evictions this index causes run after its lock is released (no lock-order cycle).
"""

from __future__ import annotations

import functools
import operator
import os
import struct
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain, islice, pairwise
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, NoReturn, ParamSpec, TypeVar

from storage.errors import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
)
from storage.fsync import fsync_path, record_synced
from storage.mapping import MappedFile, map_file
from storage.open_files import Evictable, LeastRecentlyUsed, evict_all

P = ParamSpec("P")
R = TypeVar("R")

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
NO_TIMESTAMP = -1
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes
# Kafka's "warm section": lookups by in-sync readers land in the last 8 KiB of the index, so a
# search tries that range first and keeps touching the same few (cached) pages.
_WARM_SECTION_BYTES = 8192
_UNPACK_CHUNK_ENTRIES = 1024


class OffsetPosition(NamedTuple):
    """An ``.index`` entry (Kafka's ``OffsetPosition``): the batch holding ``offset`` (Kafka
    indexes a batch's last offset) starts at byte ``position`` of the ``.log``."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A ``.timeindex`` entry (Kafka's ``TimestampOffset``)."""

    timestamp: int
    offset: int


class _Column(NamedTuple):
    """One integer field of an entry: its codec and its byte offset inside the entry."""

    codec: struct.Struct
    start: int


@lru_cache(maxsize=8)
def _repeated(layout: str, count: int) -> struct.Struct:
    return struct.Struct(">" + layout * count)


def _first_out_of_order(values: Sequence[int], *, strict: bool) -> int | None:
    """The first ``i`` with ``values[i]`` not after ``values[i - 1]``, or None if sorted."""
    in_order = operator.lt if strict else operator.le
    if all(map(in_order, values, islice(values, 1, None))):  # C-speed fast path for the common case
        return None
    return next(i for i, (a, b) in enumerate(pairwise(values), 1) if not in_order(a, b))


def _locked(method: Callable[P, R]) -> Callable[P, R]:
    """Run ``method`` under the index's lock; the evictions it caused run once the outermost
    locked call has released the lock."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        index: AbstractIndex = args[0]  # type: ignore[assignment]
        evicted: list[Evictable] = []
        index._lock.acquire()
        try:
            index._depth += 1
            try:
                return method(*args, **kwargs)
            finally:
                index._depth -= 1
                if index._depth == 0:
                    evicted, index._evicted = index._evicted, []
        finally:
            index._lock.release()
            evict_all(evicted)

    return wrapper


_UNLIMITED_MAPS = LeastRecentlyUsed()


class AbstractIndex:
    """The machinery shared by both indexes; subclasses define the entry layout."""

    entry_size: ClassVar[int]
    _entry_codec: ClassVar[struct.Struct]
    _key: ClassVar[_Column]  # what ``lookup`` searches: the offset, or the timestamp
    _relative_offset: ClassVar[_Column]  # what ``truncate_to`` searches

    def __init__(
        self,
        path: Path,
        base_offset: int,
        *,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
        lazy: bool = False,
        maps: LeastRecentlyUsed | None = None,
    ) -> None:
        self._path = Path(path)
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._closed = False
        self._mmap: MappedFile | None = None
        self._maps = maps if maps is not None else _UNLIMITED_MAPS
        self._lock = threading.RLock()
        self._depth = 0
        self._evicted: list[Evictable] = []
        self._dirty = False  # written since the last flush
        if writable and max_index_size < self.entry_size:
            raise ValueError(f"invalid max index size {max_index_size} for {self._path}")
        self._loaded = False
        self._length = self._entries = 0
        # The last entry, cached by append (the hot path); None means "read it from the map".
        self._last: tuple[int, int] | None = None
        if not lazy:
            self._load()

    def _load(self) -> None:
        """Learn the file's length and entries (creating it first when writable and new)."""
        if not self._loaded:
            self._length, self._entries = self._open()
            self._loaded = True

    @property
    def loaded(self) -> bool:
        """Whether the file was read yet (a lazy index is not, until its first use)."""
        return self._loaded

    @property
    def mapped(self) -> bool:
        return self._mmap is not None

    def _open(self) -> tuple[int, int]:
        """Create and preallocate the file when writable and new (as Kafka); the map itself is
        taken at the first read or write.

        Returns (length, entries): a preallocated file has no entries yet; a file that had
        bytes is taken to be trimmed, so all of it is entries. An existing empty file stays
        empty (a trimmed index of a segment without entries); the log re-grows the active one.
        """
        try:
            length = os.stat(self._path).st_size  # one stat (loading 20,000 logs takes 40,000)
        except FileNotFoundError:
            if not self._writable:
                raise
            length = self._round_down(self._max_index_size)
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, length)  # sparse, like Kafka's RandomAccessFile.setLength
            finally:
                os.close(fd)
            return length, 0
        return length, length // self.entry_size

    def _map(self) -> Any:
        """The map, taken now if the LRU let it go (the caller holds the lock)."""
        mapped = self._mmap
        if mapped is None:
            self._load()
            mapped = self._mmap = map_file(self._path, self._length, writable=self._writable)
        self._evicted += self._maps.touch(self)
        return mapped.buffer

    def evict(self) -> None:
        """Unmap (the LRU's call; the entries stay in the page cache and in memory)."""
        with self._lock:
            self._unmap()

    def _round_down(self, size: int) -> int:
        return size - size % self.entry_size

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._path}, entries={self._entries})"

    # -- state ---------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def entries(self) -> int:
        self._load()
        return self._entries

    @property
    def max_entries(self) -> int:
        self._load()
        return self._length // self.entry_size

    @property
    def length(self) -> int:
        """The file's length in bytes (preallocated slots included)."""
        self._load()
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """The bytes the entries occupy."""
        self._load()
        return self._entries * self.entry_size

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset - base_offset`` fits the int32 relative offset."""
        return 0 <= offset - self._base_offset <= INT32_MAX

    def _to_relative(self, offset: int) -> int:
        if not self.can_append_offset(offset):
            raise IndexOffsetOverflowError(
                f"offset {offset} does not fit index {self._path} with base offset "
                f"{self._base_offset} (relative offset must be in [0, {INT32_MAX}])"
            )
        return offset - self._base_offset

    # -- reading -------------------------------------------------------------------------------

    def _buffer(self) -> Any:
        """The mapped entries (the caller holds the lock and lets no view of it escape)."""
        if self._closed:
            raise ValueError(f"index {self._path} is closed")
        self._load()
        if self._length == 0:
            raise ValueError(f"index {self._path} is empty (length 0)")
        return self._map()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"index {self._path} is closed")
        self._load()

    def _bisect(self, target: int, column: _Column, *, inclusive: bool) -> int:
        """How many leading entries have ``column < target`` (``<=`` when inclusive).

        The column must be sorted. Reads single fields from the map: nothing is copied.
        """
        self._check_open()
        count = self._entries
        if count == 0:
            return 0
        buffer, size = self._buffer(), self.entry_size
        unpack, start = column.codec.unpack_from, column.start
        compare = operator.le if inclusive else operator.lt

        def before(slot: int) -> bool:
            return compare(unpack(buffer, slot * size + start)[0], target)

        first_warm = max(0, count - 1 - _WARM_SECTION_BYTES // size)
        low, high = (first_warm + 1, count) if before(first_warm) else (0, first_warm)
        while low < high:
            middle = (low + high) // 2
            if before(middle):
                low = middle + 1
            else:
                high = middle
        return low

    def _check_entry_number(self, n: int) -> None:
        self._check_open()
        if not 0 <= n < self._entries:
            raise IndexError(
                f"entry {n} requested from {self._path}, which has {self._entries} entries"
            )

    def _column_values(self, column: _Column) -> list[int]:
        """One field of every entry, in order (a copy; for ``sanity_check``).

        Unpacks ``_UNPACK_CHUNK_ENTRIES`` entries per call, skipping the other fields with pad
        bytes: several times faster than one ``iter_unpack`` tuple per entry.
        """
        count, size = self._entries, self.entry_size
        if count == 0:
            return []
        layout = f"{column.start}x{column.codec.format.lstrip('>')}"
        layout += f"{size - column.start - column.codec.size}x"
        whole = count - count % _UNPACK_CHUNK_ENTRIES
        data = self._buffer()[: count * size]
        chunks = _repeated(layout, _UNPACK_CHUNK_ENTRIES).iter_unpack(data[: whole * size])
        values = list(chain.from_iterable(chunks))
        values.extend(_repeated(layout, count - whole).unpack_from(data, whole * size))
        return values

    @_locked
    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the file is not a well-formed index for this base offset.

        Checks the length and every entry's order, unlike Kafka (which checks only the last
        entry), so a zero-filled tail is caught. O(entries): about 30 ms for the 2 MiB index of
        a full 1 GiB segment, 0.2 s for a full 10 MiB one.
        """
        self._check_open()
        if self._length % self.entry_size:
            raise CorruptIndexError(
                f"index file {self._path} is corrupt: its length {self._length} is not a multiple "
                f"of the entry size {self.entry_size}"
            )
        self._check_entries()

    def _check_entries(self) -> None:
        raise NotImplementedError

    def _corrupt(self, reason: str) -> CorruptIndexError:
        return CorruptIndexError(f"index file {self._path} is corrupt: {reason}")

    def _check_order(
        self, name: str, values: Sequence[int], *, strict: bool, absolute: int = 0
    ) -> None:
        slot = _first_out_of_order(values, strict=strict)
        if slot is not None:
            relation = "greater than" if strict else "at least"
            raise self._corrupt(
                f"entry {slot} has {name} {absolute + values[slot]}, not {relation} entry {slot - 1}'s "
                f"{absolute + values[slot - 1]} (a zero-filled tail left by an unclean shutdown "
                "looks like this)"
            )

    def _check_first_offset(self, relative_offsets: Sequence[int]) -> None:
        if relative_offsets and relative_offsets[0] < 0:
            raise self._corrupt(
                f"entry 0 has offset {self._base_offset + relative_offsets[0]}, less than the "
                f"base offset {self._base_offset}"
            )

    # -- writing -------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        self._check_open()
        if not self._writable:
            raise ValueError(f"index {self._path} was opened read-only")

    @_locked
    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= ``offset`` (none if all are smaller)."""
        self._check_writable()
        self._truncate_to_entries(
            self._bisect(offset - self._base_offset, self._relative_offset, inclusive=False)
        )

    @_locked
    def truncate(self) -> None:
        """Drop every entry."""
        self._check_writable()
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, entries: int) -> None:
        if entries < self._entries:
            # Kafka leaves the dropped bytes in place. Zeroing them makes a crash before the next
            # trim look like a preallocated tail, which sanity_check rejects, instead of
            # resurrecting entries that point past the truncated log.
            start, end = entries * self.entry_size, self._entries * self.entry_size
            with memoryview(self._buffer()) as view, view.cast("B") as octets:
                octets[start:end] = bytes(end - start)  # a memcpy, whatever the map's type
        self._entries = entries
        self._last = None
        self._dirty = True

    @_locked
    def resize(self, new_size: int) -> bool:
        """Set the file's length to ``new_size`` rounded down to a whole entry; True if it changed.

        Used to trim on roll/close and to re-grow the active segment's index after loading or
        truncation. Shrinking below the entries drops the entries that no longer fit. The file
        is mapped again at its next use.
        """
        self._check_writable()
        if new_size < 0:
            raise ValueError(f"negative size {new_size} for index {self._path}")
        rounded = self._round_down(new_size)
        if rounded == self._length:
            return False
        self._unmap()
        os.truncate(self._path, rounded)
        self._length = rounded
        self._entries = min(self._entries, self.max_entries)
        self._last = None
        self._dirty = True
        return True

    def trim_to_valid_size(self) -> bool:
        """Shrink the file to exactly its entries (done when the segment rolls or closes)."""
        return self.resize(self.size_in_bytes)

    @_locked
    def reset(self) -> None:
        """Drop every entry and make the file ``max_index_size`` of zeros again (segment
        recovery): cut to nothing and regrown sparse, rather than zeroed page by page (after an
        unclean shutdown the whole preallocated tail counts as entries)."""
        self._check_writable()
        self._unmap()
        os.truncate(self._path, 0)
        self._length = self._entries = 0
        self._last = None
        self.resize(self._max_index_size)

    @_locked
    def flush(self) -> None:
        """msync the map, or fsync the file if it is not mapped: the entries are on disk."""
        self._check_open()
        if not (self._writable and self._dirty):
            return
        if self._mmap is not None:
            self._mmap.flush()
            record_synced(self._path, self._length)
        else:
            fsync_path(self._path)
        self._dirty = False

    # -- files ---------------------------------------------------------------------------------

    def _unmap(self) -> None:
        if self._mmap is not None:
            mapped, self._mmap = self._mmap, None
            mapped.close()

    def _forget(self) -> None:
        self._unmap()
        self._closed = True
        self._maps.discard(self)

    @_locked
    def close(self) -> None:
        """Trim a writable index to its entries, then unmap it. Closing twice is harmless."""
        if self._closed:
            return
        try:
            if self._writable and self._loaded:
                self.trim_to_valid_size()
        finally:
            self._forget()

    @_locked
    def release(self) -> None:
        """Unmap without trimming: the file is about to be deleted (or, in tests, a crash)."""
        self._forget()

    @_locked
    def delete(self) -> bool:
        """Unmap and delete the file; False if it did not exist (Kafka's ``deleteIfExists``)."""
        self._forget()
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        return True

    @_locked
    def rename_to(self, new_path: Path) -> None:
        """Rename the file (the map stays valid: it follows the inode, not the name)."""
        new_path = Path(new_path)
        os.replace(self._path, new_path)
        self._path = new_path


class OffsetIndex(AbstractIndex):
    """``<base>.index``: the position in the log of (a batch ending at) an offset."""

    entry_size = 8
    _entry_codec = struct.Struct(">ii")
    _key = _Column(struct.Struct(">i"), 0)
    _relative_offset = _key
    _position = _Column(struct.Struct(">i"), 4)

    @_locked
    def entry(self, n: int) -> OffsetPosition:
        """The ``n``-th entry, with the offset made absolute."""
        self._check_entry_number(n)
        relative, position = self._entry_codec.unpack_from(self._buffer(), n * self.entry_size)
        return OffsetPosition(self._base_offset + relative, position)

    @property
    @_locked
    def last_offset(self) -> int:
        """The last entry's offset; ``base_offset`` when empty."""
        if self._last is not None:
            return self._last[0]
        return self.entry(self._entries - 1).offset if self._entries else self._base_offset

    @_locked
    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``target_offset``; ``(base_offset, 0)`` if none."""
        slot = self._bisect(target_offset - self._base_offset, self._key, inclusive=True) - 1
        return self.entry(slot) if slot >= 0 else OffsetPosition(self._base_offset, 0)

    @_locked
    def fetch_upper_bound_offset(
        self, start_position: int, fetch_size: int
    ) -> OffsetPosition | None:
        """The first entry at or past ``start_position + fetch_size``: an offset sure to lie
        beyond a fetch of ``fetch_size`` bytes from ``start_position`` (Kafka's
        ``fetchUpperBoundOffset``); None if no entry is that far."""
        slot = self._bisect(start_position + fetch_size, self._position, inclusive=False)
        return self.entry(slot) if slot < self._entries else None

    @_locked
    def append(self, offset: int, position: int) -> None:
        """Add ``offset -> position``; ``offset`` must exceed every indexed offset."""
        # Hot path (every append past index.interval.bytes): one combined test, then the write.
        relative = offset - self._base_offset
        last = self._last
        if (
            self._closed
            or not self._writable
            or self.entries >= self._length // 8
            or (self._entries and (last[0] if last else self.last_offset) >= offset)
            or not 0 <= relative <= INT32_MAX
            or not 0 <= position <= INT32_MAX
        ):
            self._reject_offset_entry(offset, position)
        self._entry_codec.pack_into(self._map(), self._entries * 8, relative, position)
        self._entries += 1
        self._last = (offset, position)
        self._dirty = True

    def _reject_offset_entry(self, offset: int, position: int) -> NoReturn:
        """Raise the precise error for an entry ``append`` cannot take."""
        self._check_writable()
        self._buffer()
        if self.is_full():
            raise IndexFullError(
                f"cannot append to full index {self._path} ({self._entries} entries)"
            )
        if self._entries and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"cannot append offset {offset} to index {self._path} at slot {self._entries}: "
                f"not greater than the last offset {self.last_offset}"
            )
        self._to_relative(offset)
        raise ValueError(f"position {position} does not fit index {self._path} (int32)")

    def _check_entries(self) -> None:
        if not self._entries:
            return
        relative_offsets = self._column_values(self._relative_offset)
        self._check_first_offset(relative_offsets)
        self._check_order("offset", relative_offsets, strict=True, absolute=self._base_offset)
        positions = self._column_values(self._position)
        if positions[0] < 0:
            raise self._corrupt(f"entry 0 has a negative position {positions[0]}")
        self._check_order("position", positions, strict=False)


class TimeIndex(AbstractIndex):
    """``<base>.timeindex``: the first offset after which timestamps exceed a given one."""

    entry_size = 12
    _entry_codec = struct.Struct(">qi")
    _key = _Column(struct.Struct(">q"), 0)
    _relative_offset = _Column(struct.Struct(">i"), 8)

    def is_full(self) -> bool:
        # As Kafka: one slot stays free for the entry appended with skip_full_check on roll.
        return self._entries >= self.max_entries - 1

    @_locked
    def entry(self, n: int) -> TimestampOffset:
        """The ``n``-th entry, with the offset made absolute."""
        self._check_entry_number(n)
        timestamp, relative = self._entry_codec.unpack_from(self._buffer(), n * self.entry_size)
        return TimestampOffset(timestamp, self._base_offset + relative)

    @property
    @_locked
    def last_entry(self) -> TimestampOffset:
        """The last entry; ``(NO_TIMESTAMP, base_offset)`` when empty."""
        if self._last is not None:
            return TimestampOffset(*self._last)
        if self._entries:
            return self.entry(self._entries - 1)
        return TimestampOffset(NO_TIMESTAMP, self._base_offset)

    @_locked
    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp``;
        ``(NO_TIMESTAMP, base_offset)`` if none."""
        slot = self._bisect(target_timestamp, self._key, inclusive=True) - 1
        return self.entry(slot) if slot >= 0 else TimestampOffset(NO_TIMESTAMP, self._base_offset)

    @_locked
    def append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add ``timestamp -> offset`` if ``timestamp`` exceeds the last entry's (Kafka's
        ``maybeAppend``); True if an entry was written.

        A timestamp that is not greater is skipped: re-appending the last entry on roll or close
        is normal. ``skip_full_check`` lets the segment write that final entry into the slot
        ``is_full()`` keeps free; an index with no slot at all still raises IndexFullError.
        """
        self._check_writable()
        if not skip_full_check and self.is_full():
            raise IndexFullError(
                f"cannot append to full time index {self._path} ({self._entries} entries)"
            )
        last = self.last_entry
        if self._entries and offset < last.offset:
            raise InvalidOffsetError(
                f"cannot append offset {offset} to time index {self._path} at slot {self._entries}: "
                f"less than the last offset {last.offset}"
            )
        if timestamp <= last.timestamp:
            return False
        if timestamp > INT64_MAX:
            raise ValueError(f"timestamp {timestamp} does not fit time index {self._path} (int64)")
        if self._entries >= self.max_entries:
            raise IndexFullError(
                f"time index {self._path} has no free slot ({self._entries} entries)"
            )
        relative = self._to_relative(offset)
        self._entry_codec.pack_into(
            self._buffer(), self._entries * self.entry_size, timestamp, relative
        )
        self._entries += 1
        self._last = (timestamp, offset)
        self._dirty = True
        return True

    def _check_entries(self) -> None:
        if not self._entries:
            return
        timestamps = self._column_values(self._key)
        relative_offsets = self._column_values(self._relative_offset)
        self._check_first_offset(relative_offsets)
        # Only a timestamp above the last entry's (-1 at first) is ever indexed, so none is
        # negative: a flipped top bit would otherwise pass as "before every record" and the
        # lookup would answer with the entry's offset, skipping the records before it.
        if timestamps[0] < 0:
            raise self._corrupt(f"entry 0 has timestamp {timestamps[0]}, below zero")
        self._check_order("timestamp", timestamps, strict=True)
        self._check_order("offset", relative_offsets, strict=False, absolute=self._base_offset)
