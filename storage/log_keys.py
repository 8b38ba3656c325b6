"""Per-key reads of one partition log: the batches holding records of one key, found through
the key indexes (``storage.key_index``) instead of a scan of the partition.

Where the entries come from:
- a sealed segment (every one but the active): its ``.keyindex`` file, checked whole once
  and then looked up in place (``KeyIndexFile``, kept on the ``LogSegment``); missing, corrupt
  or stale (built for another size of the segment) -> rebuilt by one scan of the segment and
  written (temp + fsync + rename);
- the active segment: an ``ActiveKeyMap`` in memory, created by the first key read of the log
  and extended at each later key read by scanning what was appended since (nothing is added to
  the append path, so a log nobody reads by key pays nothing). When the log rolls, the map of
  the segment that stopped being active becomes that segment's key index (caught up and written
  by ``write_pending``, run by the broker off the event loop, or by the next key read).

Reads return candidate batches (a batch holds a record whose key has the same 64-bit hash):
exact keys are compared by whoever decodes the records (the client for a key read);
``last_offset_of_key`` decodes its candidates and is exact.

Invariants: ``lock`` guards the active map, the maps awaiting sealing, every segment's
``key_index`` and the writing of ``.keyindex`` files; it is held briefly (scans run outside
it). Truncation takes it (``Log._truncate_segments``) and bumps a generation, so a build on a
worker thread never installs an index of bytes the truncation removed. A ``KeyIndex`` on a segment always
describes ``covered_bytes == segment.size``; one that does not is ignored and rebuilt.
Owner: the ``Log``; ``write_pending``/``prepare`` may run on worker threads.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from protocol.records import BATCH_HEADER_SIZE, BatchHeader, decode_batch, read_batch_header
from storage.key_index import (
    ActiveKeyMap,
    KeyIndex,
    KeyIndexFile,
    SealedKeyIndex,
    batch_key_hashes,
    key_hash,
    read_key_index,
    write_key_index,
)
from storage.segment import LogSegment
from storage.transaction_index import AbortedTxn

logger = logging.getLogger("samsa.storage.log")

# How far the active map may lag the active segment before the broker catches it up on a
# worker thread rather than in the key read itself, on the event loop.
ACTIVE_LAG_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class KeyRead:
    """The result of ``Log.read_key``: whole batches, in offset order, that may hold records of
    the key at or above the start offset (compare keys and offsets when decoding), and the offset
    to continue from (the limit, e.g. the high watermark, when every candidate below it was
    returned)."""

    batches: tuple[bytes, ...]
    next_offset: int

    @property
    def records(self) -> bytes:
        return b"".join(self.batches)

    @property
    def size_in_bytes(self) -> int:
        return sum(len(batch) for batch in self.batches)


def build_key_index(segment: LogSegment) -> KeyIndex:
    """One scan of ``segment``: every (key hash, batch position) of its records."""
    active = ActiveKeyMap(segment.base_offset)
    catch_up(active, segment)
    return active.sealed()


def catch_up(active: ActiveKeyMap, segment: LogSegment) -> None:
    """Extend ``active`` with the batches appended to ``segment`` since it last looked."""
    end = segment.size
    if active.covered_bytes >= end:
        return
    for position, header in segment.scan_headers(active.covered_bytes, end):
        data = segment.read_batch_bytes(position, header)
        active.add_batch(position, batch_key_hashes(data, header))
    active.covered_bytes = end


class LogKeys:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._active: ActiveKeyMap | None = None
        # Maps of segments that stopped being active, awaiting their key index file.
        self._sealing: list[tuple[LogSegment, ActiveKeyMap]] = []
        # Bumped by every truncation: a build that began before one is not installed.
        self._generation = 0

    @property
    def in_use(self) -> bool:
        """Whether the log was read by key (it then keeps an active map and writes key indexes
        at rolls)."""
        return self._active is not None

    def on_roll(self, old_active: LogSegment, new_active: LogSegment) -> None:
        """The owner rolled: a map of ``old_active`` waits to be written as its key index."""
        with self.lock:
            if self._active is not None and self._active.base_offset == old_active.base_offset:
                self._sealing.append((old_active, self._active))
                self._active = ActiveKeyMap(new_active.base_offset)

    def invalidate(self) -> None:
        """A truncation: maps are rebuilt by the next key read (caller holds ``lock``)."""
        self._active = None
        self._sealing.clear()
        self._generation += 1

    # -- entries --------------------------------------------------------------------------

    def active_positions(self, segment: LogSegment, hash_value: int) -> list[int]:
        with self.lock:
            active = self._active
            if active is None or active.base_offset != segment.base_offset:
                active = self._active = ActiveKeyMap(segment.base_offset)
            catch_up(active, segment)
            return active.positions_of(hash_value)

    def sealed_positions(self, segment: LogSegment, hash_value: int) -> list[int]:
        try:
            return self._sealed_index(segment).positions_of(hash_value)
        except FileNotFoundError:
            # Its file went under this read (the segment was deleted, or cut by a truncation
            # since this read copied the segment list): this once, from the log itself.
            return build_key_index(segment).positions_of(hash_value)

    def _sealed_index(self, segment: LogSegment) -> SealedKeyIndex:
        """The segment's key index: loaded, caught up from its map, read or built. Scans and
        builds run outside ``lock`` (the owner's roll takes it); the result is installed (and
        its file written) under it, unless a truncation came in between."""
        with self.lock:
            loaded = segment.key_index
            if loaded is not None and loaded.covered_bytes == segment.size:
                return loaded
            sealing = self._take_sealing(segment)
            generation = self._generation
        index: SealedKeyIndex | None = None
        if sealing is not None:
            catch_up(sealing, segment)
            built = sealing.sealed()
        else:
            index = read_key_index(segment.key_index_path, base_offset=segment.base_offset,
                                   covered_bytes=segment.size,
                                   current_path=lambda: segment.key_index_path)
            if index is not None:
                built = None
            else:
                logger.info("building key index of %s", segment.log_path)
                built = build_key_index(segment)
        with self.lock:
            if built is not None:
                index = built
                if generation == self._generation and built.covered_bytes == segment.size and (
                        not segment.deleted):  # a deleted one's file would be an orphan
                    write_key_index(segment.key_index_path, built)
                    # Looked up in the file from now on: no memory held per segment.
                    index = KeyIndexFile(built.base_offset, built.covered_bytes,
                                         built.entry_count, lambda: segment.key_index_path)
            assert index is not None
            if generation == self._generation and index.covered_bytes == segment.size:
                segment.key_index = index
        return index

    def _take_sealing(self, segment: LogSegment) -> ActiveKeyMap | None:
        for entry in self._sealing:
            if entry[0] is segment:
                self._sealing.remove(entry)
                return entry[1]
        return None

    def write_pending(self) -> int:
        """Write the key index of each segment that stopped being active since the last call
        (off the event loop); returns how many were written."""
        with self.lock:
            pending = [segment for segment, _ in self._sealing]
        for segment in pending:
            self._sealed_index(segment)
        return len(pending)

    def prepare(self, segments: Sequence[LogSegment]) -> None:
        """Load or build the key index of every sealed segment of ``segments`` and the map of
        the last one (the active segment), so the reads that follow on the owner only look up
        entries and scan what was appended since."""
        for segment in segments[:-1]:
            self._sealed_index(segment)
        self._prepare_active(segments[-1])

    def _prepare_active(self, segment: LogSegment) -> None:
        """Build the active map, or what it lags behind the segment, outside ``lock`` (appends
        go on meanwhile: the map covers what was there, the next key read scans the rest); a
        new map is installed if none was made meanwhile, the lag merged if nobody extended the
        map meanwhile."""
        with self.lock:
            active, generation = self._active, self._generation
            if active is not None and active.base_offset == segment.base_offset:
                start = active.covered_bytes
            else:
                active, start = None, 0
        delta = ActiveKeyMap(segment.base_offset, covered_bytes=start)
        catch_up(delta, segment)
        with self.lock:
            if generation != self._generation:
                return
            if active is None and (
                self._active is None or self._active.base_offset < segment.base_offset
            ):
                self._active = delta
            elif active is not None and self._active is active and active.covered_bytes == start:
                active.merge(delta)

    def prepared(self, segments: Sequence[LogSegment]) -> bool:
        """Whether ``prepare(segments)`` has little to do: every sealed segment's index loaded,
        and the active map at most ``ACTIVE_LAG_BYTES`` behind the active segment."""
        with self.lock:
            active = self._active
            if active is None or active.base_offset != segments[-1].base_offset:
                return False
            if segments[-1].size - active.covered_bytes > ACTIVE_LAG_BYTES:
                return False
            return all(segment.key_index is not None
                       and segment.key_index.covered_bytes == segment.size
                       for segment in segments[:-1])

# -- reads over a copy of the segment list ------------------------------------------------------


def _candidates(
    keys: LogKeys, segments: Sequence[LogSegment], hash_value: int
) -> Iterator[tuple[LogSegment, list[int]]]:
    last = len(segments) - 1
    for number, segment in enumerate(segments):
        if number == last:
            yield segment, keys.active_positions(segment, hash_value)
        else:
            yield segment, keys.sealed_positions(segment, hash_value)


def _read_batch(segment: LogSegment, position: int) -> tuple[BatchHeader, bytes]:
    handle = segment.log_file.acquire()  # held: the LRU cannot close it meanwhile
    head = os.pread(handle.fd, BATCH_HEADER_SIZE, position)
    header = read_batch_header(head)
    rest = os.pread(handle.fd, header.size_in_bytes - BATCH_HEADER_SIZE, position + len(head))
    return header, head + rest


def _start_position(segment: LogSegment, start_offset: int) -> int:
    """Candidates before this position end below ``start_offset`` (the offset index says)."""
    if start_offset <= segment.base_offset:
        return 0
    found = segment.translate_offset(start_offset)
    return segment.size if found is None else found[0]


def read_key(
    keys: LogKeys, segments: Sequence[LogSegment], key: bytes, start_offset: int,
    max_bytes: int, limit: int,
) -> KeyRead:
    """Candidate batches of ``key`` from ``start_offset`` up to ``limit`` (exclusive), at least
    one, at most ``max_bytes`` beyond the first; ``segments`` start with the one holding
    ``start_offset`` and end with the active segment."""
    hash_value, size = key_hash(key), 0
    batches: list[bytes] = []
    for segment, positions in _candidates(keys, segments, hash_value):
        if segment.base_offset >= limit:
            break
        start_position = _start_position(segment, start_offset)
        for position in positions:
            if position < start_position:
                continue
            header, data = _read_batch(segment, position)
            if header.last_offset < start_offset:
                continue
            if header.last_offset >= limit:
                return KeyRead(tuple(batches), max(start_offset, header.base_offset))
            if batches and size + len(data) > max_bytes:
                return KeyRead(tuple(batches), header.base_offset)
            batches.append(data)
            size += len(data)
    return KeyRead(tuple(batches), max(limit, start_offset))


def last_offset_of_key(
    keys: LogKeys, segments: Sequence[LogSegment], key: bytes, log_start_offset: int,
    aborted: Callable[[], Sequence[AbortedTxn]] = tuple,
) -> int:
    """The offset of the newest record with exactly ``key``, -1 when there is none: newest
    segment first, newest candidate batch first, stopping at the first batch that holds one.
    Control batches are skipped, and so are transactional batches of a transaction in
    ``aborted()`` (asked for only when a candidate is transactional)."""
    hash_value = key_hash(key)
    aborted_transactions: Sequence[AbortedTxn] | None = None
    last = len(segments) - 1
    for number in range(last, -1, -1):
        segment = segments[number]
        if number == last:
            positions = keys.active_positions(segment, hash_value)
        else:
            positions = keys.sealed_positions(segment, hash_value)
        for position in reversed(positions):
            header, data = _read_batch(segment, position)
            if header.is_control or header.last_offset < log_start_offset:
                continue
            if header.is_transactional:
                if aborted_transactions is None:
                    aborted_transactions = aborted()
                if _is_aborted(header, aborted_transactions):
                    continue
            found = max((record.offset for record in decode_batch(data, verify_crc=False).records
                         if record.key == key and record.offset >= log_start_offset), default=-1)
            if found >= 0:
                return found
    return -1


def _is_aborted(header: BatchHeader, aborted: Sequence[AbortedTxn]) -> bool:
    return any(transaction.producer_id == header.producer_id
               and transaction.first_offset <= header.base_offset <= transaction.last_offset
               for transaction in aborted)
