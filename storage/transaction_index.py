"""Kafka's aborted-transaction index, ``<base>.txnindex``, byte for byte (``TransactionIndex``).

One file per segment, holding one entry per transaction *aborted* by a marker in that segment
(committed transactions are not indexed). Byte layout, big-endian, no header, no checksum, 34
bytes per entry (Kafka's ``AbortedTxn``)::

    int16 version (0) | int64 producer_id | int64 first_offset | int64 last_offset
    | int64 last_stable_offset

``first_offset`` is the transaction's first offset in the partition (possibly in an older
segment), ``last_offset`` the offset of its ABORT marker, ``last_stable_offset`` the partition's
LSO once the marker is in (the first offset of the oldest other open transaction, else
``last_offset + 1``): a read_committed fetch stops looking at older indexes once an entry's LSO
reaches past what it read (``collect``).

Invariants: ``last_offset`` strictly increases along the file, and every ``last_offset`` is
>= the segment's base offset (``sanity_check``). The file is created on the first append, as
Kafka does, so a segment without aborted transactions has none. A trailing partial entry (a
crash inside an append) is ignored when reading and cut off before the next append; an entry
that breaks the invariants makes ``sanity_check`` raise ``CorruptIndexError`` and the segment
is recovered (the index rebuilt from the log's markers).

Entries are kept in memory (loaded at the first use): read_committed fetches consult them on
every read. Owner: the ``LogSegment``. Appends, truncation and renames come from the log's
owner; the cleaner reads the entries of segments it rewrites from a worker thread, so loading
takes a lock.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from storage.errors import CorruptIndexError
from storage.fsync import fsync_path

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One entry (Kafka's ``AbortedTxn``); also what a Fetch response lists."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ENTRY_VERSION, *self)


class TxnIndexSearchResult(NamedTuple):
    """Kafka's ``TxnIndexSearchResult``: ``complete`` when no later segment can add more."""

    aborted: list[AbortedTxn]
    complete: bool


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The whole entries of ``data`` (a trailing partial entry is ignored, as Kafka reads).

    CorruptIndexError for an entry of a version this code does not know."""
    entries = []
    for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, position)
        if version != ENTRY_VERSION:
            raise CorruptIndexError(f"aborted transaction entry of version {version}")
        entries.append(AbortedTxn(*fields))
    return entries


class TransactionIndex:
    def __init__(self, path: Path, base_offset: int, *, writable: bool = True) -> None:
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        self._entries: list[AbortedTxn] | None = None  # None: not read yet
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path})"

    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, oldest first (read from the file at the first call)."""
        with self._lock:
            if self._entries is None:
                self._entries = decode_entries(self._read_file())
            return self._entries

    @property
    def last_offset(self) -> int | None:
        entries = self.entries
        return entries[-1].last_offset if entries else None

    def _read_file(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""

    # -- writing ------------------------------------------------------------------------------

    def append(self, entry: AbortedTxn) -> None:
        """Add an entry; ValueError unless its last offset follows the previous one."""
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {entry.last_offset} does not follow the one "
                f"ending at {entries[-1].last_offset} in {self.path}"
            )
        self._write_at(len(entries) * ENTRY_SIZE, entry.encode())
        entries.append(entry)

    def _write_at(self, position: int, data: bytes) -> None:
        """Write at ``position``, cutting whatever follows (a partial entry left by a crash)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, position)
            os.pwrite(fd, data, position)
        finally:
            os.close(fd)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above ``offset`` (Kafka's ``truncateTo``)."""
        entries = self.entries
        keep = next((i for i, e in enumerate(entries) if e.last_offset >= offset), len(entries))
        if keep == len(entries):
            return
        del entries[keep:]
        self._truncate_file(keep * ENTRY_SIZE)

    def reset(self) -> None:
        """Empty the index (the segment is being recovered and rebuilds it)."""
        with self._lock:
            self._entries = []
        self._truncate_file(0)

    def _truncate_file(self, size: int) -> None:
        if self.path.exists():
            os.truncate(self.path, size)

    def replace_entries(self, entries: Iterable[AbortedTxn]) -> None:
        """Write ``entries`` as the whole index (the cleaner's new segment)."""
        self.reset()
        for entry in entries:
            self.append(entry)

    def flush(self) -> None:
        if not self.path.exists():
            return
        fsync_path(self.path)

    # -- reading ------------------------------------------------------------------------------

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset) (Kafka's
        ``collectAbortedTxns``): complete once an entry's LSO reaches the upper bound."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """CorruptIndexError when the file breaks the invariants (see the module docstring)."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            return
        with self._lock:
            self._entries = None
        previous = None
        for entry in self.entries:
            if entry.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"{self.path}: aborted transaction {entry} ends below the base offset "
                    f"{self.base_offset}"
                )
            if previous is not None and entry.last_offset <= previous:
                raise CorruptIndexError(f"{self.path}: last offsets do not increase at {entry}")
            previous = entry.last_offset

    # -- files --------------------------------------------------------------------------------

    def rename_to(self, path: Path) -> None:
        """Kafka's ``renameTo``: move the file if there is one; follow the new name either way."""
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
