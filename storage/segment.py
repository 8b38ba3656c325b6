"""One log segment: ``<base>.log`` with its sparse ``.index`` and ``.timeindex``.

Files (named by the 20-digit zero-padded base offset, Kafka's layout byte for byte):

- ``.log``: RecordBatch v2 batches back to back, exactly as appended.
- ``.index``: (int32 relative offset, int32 position) entries; one entry per append once more than
  ``index.interval.bytes`` of log were written since the last entry. The entry names the *last*
  offset of the append and the position where the append *starts*, as Kafka's ``LogSegment``.
- ``.timeindex``: (int64 max timestamp so far, int32 relative offset of the batch holding it),
  written alongside the offset index entries.
- ``.txnindex``: the transactions aborted by a marker in this segment (``storage.transaction_index``),
  created at the first one; appended by the log, truncated with the segment, reset by ``recover``
  (the log rebuilds it while it replays the producer state).
- ``.keyindex``: Samsa's own, the batches holding each record key (``storage.key_index``),
  written for a sealed segment of a log that is read by key (``storage.log_keys``); loaded into
  ``key_index``. Truncation and recovery delete it (it would describe bytes no longer there);
  it is renamed and deleted with the other files.

Invariants: ``size`` is the length of valid data in ``.log``; batches start at position 0 and
follow each other without gaps; base offsets strictly increase. Every offset in the segment is
``>= base_offset`` and ``< base_offset + 2**31``.

State is owned by the ``Log`` that holds the segment (one task); ``flush`` may run on a worker
thread: it only fsyncs. Reads use ``os.pread`` and never move a file position.

Descriptors and maps (``storage.open_files``): the ``.log`` is a ``SegmentFile`` in the broker's
LRU of open files, so it may be closed between two uses and reopened by the next; every use holds
the ``OpenFile`` it acquired (a ``FetchSlice`` holds it until it is sent). The indexes are mapped
without a descriptor and unmapped by the LRU of maps. With ``lazy_indexes`` (every segment but
the active one, at load) the index files are not even read until first used: the first use
checks them (present, ``sanity_check``) and rebuilds a missing or corrupt one from the log then,
not at start-up; ``max_timestamp_so_far`` is read from the time index at its first use as well
(Kafka's ``LazyIndex``, KAFKA-7283).

Index entries against the log (damaged disks, issue 13's G8). Kafka's sanity check of an index
looks at its length and last entry only and its files carry no checksum, so a flipped bit that
keeps the entries ordered goes unseen: a lookup can then land inside a batch (serving bytes
that are no batch) or on a later batch (skipping records). Samsa's checks (``storage.index``):
every entry ordered, offsets and positions, the last position inside the log, and the time
index's last timestamp not below the last batches' (a cut file). Then each entry read from disk
is checked against the log at its first use (``lookup_position``, ``_checked_time_entry``): an
offset entry must name a whole batch with a valid CRC that starts at or below its offset; a time
entry's offset must be held by a batch whose max timestamp is the entry's. A failed check is
logged as an ERROR naming the index file and entry, and both indexes are rebuilt from the log.
Entries this process wrote (past the data it loaded) or rebuilt are trusted.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from protocol.errors import CorruptMessageError, InvalidRecordError
from protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    batch_crc_is_valid,
    decode_batch,
    read_batch_header,
)
from storage.clock import Clock
from storage.errors import CorruptIndexError
from storage.fsync import fdatasync
from storage.index import OffsetIndex, TimeIndex
from storage.index import TimestampOffset as TimeIndexEntry  # the segment has its own
from storage.key_index import KEY_INDEX_SUFFIX, SealedKeyIndex, key_index_path
from storage.open_files import LeastRecentlyUsed, OpenFile, SegmentFile
from storage.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, KEY_INDEX_SUFFIX)
# Suffixes of interrupted operations (see storage.recovery for how start-up resolves them).
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

# How much of the log a header scan reads per pread: headers are 61 bytes, batches are usually
# small, so one read serves many headers.
_SCAN_CHUNK_BYTES = 64 * 1024
# Buffers per pwritev call (Linux's IOV_MAX is 1024).
_IOV_MAX = 1024


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_base_offset(file_name: str) -> int:
    """The base offset of ``00000000000000001234.log`` (and of ``.index``, ``.log.swap``, ...)."""
    return int(file_name.split(".", 1)[0])


logger = logging.getLogger("samsa.storage.log")

_UNLIMITED = LeastRecentlyUsed()


@dataclass(frozen=True, slots=True)
class FetchSlice:
    """A byte range of a segment file, to be sent as is (``os.sendfile``) or read.

    Holds the ``OpenFile`` it was read from: its descriptor stays open while the slice lives,
    whatever the LRU of open files or a segment deletion does meanwhile.
    """

    file: OpenFile
    path: Path
    position: int
    length: int
    first_offset: int

    @property
    def fd(self) -> int:
        return self.file.fd

    def read(self) -> bytes:
        return os.pread(self.file.fd, self.length, self.position)


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int


@dataclass(frozen=True, slots=True)
class SegmentDescription:
    """One segment's offset range, size and timestamps (the layout readers plan work by)."""

    base_offset: int
    end_offset: int  # exclusive: the next segment's base offset, or the log end offset
    size_in_bytes: int
    first_timestamp: int  # the max timestamp of the first batch; -1 when the segment is empty
    max_timestamp: int  # the largest record timestamp; -1 when there is none


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    valid_bytes: int
    truncated_bytes: int
    next_offset: int
    reason: str | None


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        clock: Clock,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        file_suffix: str = "",
        writable: bool = True,
        files: LeastRecentlyUsed | None = None,
        maps: LeastRecentlyUsed | None = None,
        lazy_indexes: bool = False,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.file_suffix = file_suffix
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.writable = writable
        self._clock = clock
        self.log_path = self._path(LOG_SUFFIX)
        self.log_file = SegmentFile(
            self.log_path, files if files is not None else _UNLIMITED, writable=writable
        )
        handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
        self.size = os.fstat(handle.fd).st_size
        # Indexes of a loaded segment are checked at their first use (lazy); a new one's are new.
        self._indexes_checked = not (lazy_indexes and self.size > 0)
        # Index entries read from disk are checked against the log at their first use (see
        # "Index entries against the log" in the module docstring); those written by this
        # process, or rebuilt from a checked scan, are trusted.
        self._indexes_trusted = self.size == 0
        # Entries at or past the loaded data are our own appends: the sanity check keeps the
        # loaded ones below it (positions ordered, the last one inside the log).
        self._trusted_from_position = self.size
        self._verified_positions: set[int] = set()
        self._verified_times: set[tuple[int, int]] = set()
        self._index_check_lock = threading.Lock()
        index_options = {
            "max_index_size": max_index_size, "writable": writable, "maps": maps,
            "lazy": not self._indexes_checked,
        }
        self._offset_index = OffsetIndex(self._path(INDEX_SUFFIX), base_offset, **index_options)  # type: ignore[arg-type]
        self._time_index = TimeIndex(self._path(TIME_INDEX_SUFFIX), base_offset, **index_options)  # type: ignore[arg-type]
        self.txn_index = TransactionIndex(
            self._path(TXN_INDEX_SUFFIX), base_offset, writable=writable
        )
        self.created_ms = clock.milliseconds()
        self.bytes_since_last_index_entry = 0
        # The timestamp of the segment's first batch decides when segment.ms rolls it.
        self.rolling_based_timestamp: int | None = None
        # (max timestamp so far, its offset): read from the time index at the first use.
        self._max_timestamp: tuple[int, int] | None = None
        # The loaded key index (storage.log_keys owns it, under its lock).
        self.key_index: SealedKeyIndex | None = None
        self.closed = False
        self.deleted = False
        self._deleted_files: list[tuple[Path, int]] = []

    def _path(self, suffix: str) -> Path:
        return self.directory / (segment_file_name(self.base_offset, suffix) + self.file_suffix)

    @property
    def key_index_path(self) -> Path:
        return key_index_path(self.log_path)

    def drop_key_index(self) -> None:
        """The log changed under the key index (truncation, recovery): it goes, file and all."""
        self.key_index = None
        self.key_index_path.unlink(missing_ok=True)

    @property
    def fd(self) -> int:
        """The ``.log``'s descriptor now; the LRU may close it once nobody holds it, so code
        that can run beside other segments' I/O uses ``log_file.acquire()`` instead (tests)."""
        return self.log_file.acquire().fd

    # -- indexes (checked at first use) -------------------------------------------------------

    @property
    def offset_index(self) -> OffsetIndex:
        if not self._indexes_checked:
            self._check_indexes()
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if not self._indexes_checked:
            self._check_indexes()
        return self._time_index

    @property
    def time_index_path(self) -> Path:
        """The ``.timeindex`` file's path, without reading or checking the index."""
        return self._time_index.path

    @property
    def indexes_checked(self) -> bool:
        """Whether the index files were read and checked yet (False: lazy, never used)."""
        return self._indexes_checked

    def _check_indexes(self) -> None:
        """First use of a lazily loaded segment's indexes: a missing or corrupt one is rebuilt."""
        with self._index_check_lock:
            if self._indexes_checked:
                return
            problem = self._index_problem()
            self._indexes_checked = True
            if problem is not None:
                logger.info("rebuilding indexes of %s at first use (%s)", self.log_path, problem)
                self.rebuild_indexes()

    def _index_problem(self) -> str | None:
        for index in (self._offset_index, self._time_index):
            if not index.path.exists():
                return f"missing {index.path.name}"
        try:
            self._sanity_check_indexes()
        except CorruptIndexError as error:
            return f"corrupt index ({error})"
        return None

    def _time_index_end_problem(self) -> str | None:
        """A rolled or cleanly closed segment got a final time index entry with its largest
        timestamp (``on_become_inactive``): if a batch after the last offset index entry has a
        timestamp above the last time index entry's, entries were cut off, and timestamp
        searches would skip the segment (Samsa's check; Kafka's sanity check only compares the
        last entry with the first). One scan from the last offset index entry to the end."""
        last_timestamp = self._time_index.last_entry.timestamp
        entry = self._offset_index.lookup(2**63 - 1)
        position = entry.position
        if position and self._offset_entry_problem(entry.offset, position) is not None:
            position = 0
        try:
            last_batch = max((h.max_timestamp for _, h in self.scan_headers(position)), default=-1)
        except (CorruptMessageError, InvalidRecordError):
            return None  # the log itself is damaged: not the index's problem
        if last_batch > last_timestamp:
            return (f"it ends at timestamp {last_timestamp}, below the last batches' "
                    f"{last_batch}")
        return None

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset()[0]

    @max_timestamp_so_far.setter
    def max_timestamp_so_far(self, timestamp: int) -> None:
        self._max_timestamp = (timestamp, self._max_timestamp_and_offset()[1])

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset()[1]

    @offset_of_max_timestamp_so_far.setter
    def offset_of_max_timestamp_so_far(self, offset: int) -> None:
        self._max_timestamp = (self._max_timestamp_and_offset()[0], offset)

    def _max_timestamp_and_offset(self) -> tuple[int, int]:
        found = self._max_timestamp
        if found is None:
            found = self._max_timestamp = tuple(self.time_index.last_entry)  # type: ignore[assignment]
        return found  # type: ignore[return-value]

    def _set_max_timestamp(self, timestamp: int, offset: int) -> None:
        self._max_timestamp = (timestamp, offset)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"

    # -- appending ----------------------------------------------------------------------------

    def append(
        self,
        parts: Sequence[bytes | bytearray | memoryview],
        *,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        first_batch_timestamp: int | None = None,
    ) -> int:
        """Write already-validated batches (given as buffers to concatenate) at the end.

        Returns the position they start at. One ``pwritev`` call: the parts are never joined.
        """
        position = self.size
        self._check_relative(largest_offset)
        handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
        length = _write_fully(handle.fd, parts, position)
        if length == 0:
            return position
        self.size = position + length
        if self.rolling_based_timestamp is None and position == 0:
            self.rolling_based_timestamp = first_batch_timestamp
        if largest_timestamp > self.max_timestamp_so_far:
            self._set_max_timestamp(largest_timestamp, offset_of_max_timestamp)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += length
        return position

    def _check_relative(self, offset: int) -> None:
        if not 0 <= offset - self.base_offset <= 2**31 - 1:
            raise InvalidRecordError(
                f"offset {offset} cannot be stored in segment {self.log_path} "
                f"(base offset {self.base_offset})"
            )

    def can_hold_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 2**31 - 1

    def should_roll(
        self, *, segment_bytes: int, roll_ms: int, append_bytes: int, max_timestamp: int,
        largest_offset: int,
    ) -> bool:
        """Kafka's roll rule: size, age (by the first batch's timestamp), full index, offset range."""
        if self.size > segment_bytes - append_bytes:
            return True
        if self.size > 0 and self._time_waited_for_roll(max_timestamp) > roll_ms:
            return True
        return (
            self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.can_hold_offset(largest_offset)
        )

    def _time_waited_for_roll(self, max_timestamp: int) -> int:
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return max_timestamp - self.rolling_based_timestamp
        return self._clock.milliseconds() - self.created_ms

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def on_become_inactive(self) -> None:
        """Called when a newer segment takes over: final time-index entry, indexes trimmed."""
        if self.max_timestamp_so_far >= 0:
            self.time_index.append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
            )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    # -- reading ------------------------------------------------------------------------------

    def scan_headers(
        self, start_position: int = 0, end_position: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Batch headers from ``start_position`` on, with their positions (no CRC check)."""
        end = self.size if end_position is None else end_position
        position = start_position
        handle = self.log_file.acquire()
        chunk = b""
        chunk_start = position
        while position + LOG_OVERHEAD <= end:
            relative = position - chunk_start
            if relative + BATCH_HEADER_SIZE > len(chunk):
                chunk = os.pread(handle.fd, min(_SCAN_CHUNK_BYTES, end - position), position)
                chunk_start, relative = position, 0
            header = read_batch_header(chunk, relative)
            if position + header.size_in_bytes > end:
                return
            yield position, header
            position += header.size_in_bytes

    def lookup_position(self, offset: int) -> int:
        """Where a scan for ``offset`` may start: the offset index's entry for it, checked
        against the log at its first use (a damaged index is rebuilt, see the docstring)."""
        entry = self.offset_index.lookup(offset)
        position = entry.position
        if position == 0 or self._indexes_trusted or position >= self._trusted_from_position:
            return position
        if position in self._verified_positions:
            return position
        problem = self._offset_entry_problem(entry.offset, entry.position)
        if problem is None:
            self._verified_positions.add(entry.position)
            return entry.position
        self._rebuild_damaged_index(self._offset_index.path, entry, problem)
        return self.offset_index.lookup(offset).position

    def _offset_entry_problem(self, offset: int, position: int) -> str | None:
        """Why ``(offset, position)`` cannot be an offset index entry of this log: the batch
        there must be whole, have a valid CRC and start at or below ``offset``."""
        if position + BATCH_HEADER_SIZE > self.size:
            return f"position {position} is past the end of the log ({self.size} bytes)"
        handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
        try:
            header = read_batch_header(os.pread(handle.fd, BATCH_HEADER_SIZE, position))
        except (CorruptMessageError, InvalidRecordError) as error:
            return f"no batch starts at position {position} ({error})"
        if header.base_offset > offset:
            return f"the batch at position {position} starts at offset {header.base_offset}"
        if position + header.size_in_bytes > self.size:
            return f"the batch at position {position} runs past the end of the log"
        data = os.pread(handle.fd, header.size_in_bytes, position)
        if not batch_crc_is_valid(data, 0, header):
            return f"the batch at position {position} fails its CRC check"
        return None

    def _rebuild_damaged_index(self, path: Path, entry: object, problem: str) -> None:
        with self._index_check_lock:
            if self._indexes_trusted:
                return  # another reader rebuilt it meanwhile
            logger.error("%s: entry %s does not match %s (%s); rebuilding the indexes from "
                         "the log", path, entry, self.log_path.name, problem)
            self.rebuild_indexes()

    def translate_offset(
        self, offset: int, starting_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset``, with its position."""
        position = self.lookup_position(offset)
        for batch_position, header in self.scan_headers(max(position, starting_position)):
            if header.last_offset >= offset:
                return batch_position, header
        return None

    def read(
        self,
        start_offset: int,
        max_size: int,
        *,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchSlice | None:
        """Up to ``max_size`` bytes from the batch holding ``start_offset``.

        As Kafka, the slice may end inside a batch (clients drop a partial trailing batch);
        with ``min_one_message`` the whole first batch is returned even if it exceeds max_size.
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, header = found
        limit = self.size if max_position is None else max_position
        if position >= limit:
            return None
        size = max_size
        if min_one_message:
            size = max(max_size, header.size_in_bytes)
        length = min(limit - position, size)
        if length <= 0:
            return None
        handle = self.log_file.acquire()
        return FetchSlice(handle, handle.path, position, length, header.base_offset)

    def read_batch_bytes(self, position: int, header: BatchHeader) -> bytes:
        handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
        return os.pread(handle.fd, header.size_in_bytes, position)

    def next_offset(self) -> int:
        """The offset after the last batch (base offset when empty)."""
        position = self.lookup_position(2**63 - 1)
        last: BatchHeader | None = None
        for _, header in self.scan_headers(position):
            last = header
        return self.base_offset if last is None else last.next_offset

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with a timestamp >= ``timestamp``."""
        index_offset = self._checked_time_entry(timestamp).offset
        position = self.lookup_position(max(index_offset, starting_offset))
        for batch_position, header in self.scan_headers(position):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            batch = decode_batch(self.read_batch_bytes(batch_position, header), verify_crc=False)
            for record in batch.records:
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return TimestampAndOffset(record.timestamp, record.offset)
        return None

    def _checked_time_entry(self, timestamp: int) -> TimeIndexEntry:
        """The time index's entry for ``timestamp``, checked against the log at its first use:
        the batch holding its offset must have its timestamp as max timestamp."""
        entry = self.time_index.lookup(timestamp)
        if entry.timestamp < 0 or self._indexes_trusted or entry in self._verified_times:
            return entry
        found = self.translate_offset(entry.offset)
        if found is not None and found[1].base_offset <= entry.offset and (
            found[1].max_timestamp == entry.timestamp
        ):
            self._verified_times.add(entry)
            return entry
        problem = "no batch holds its offset" if found is None else (
            f"the batch holding its offset has max timestamp {found[1].max_timestamp}")
        self._rebuild_damaged_index(self._time_index.path, entry, problem)
        return self.time_index.lookup(timestamp)

    def first_batch_timestamp(self) -> int:
        """The max timestamp of the first batch, -1 when empty (Kafka's getFirstBatchTimestamp);
        one 61-byte read unless the append path already noted it."""
        if self.rolling_based_timestamp is not None:
            return self.rolling_based_timestamp
        if self.size < BATCH_HEADER_SIZE:
            return -1
        handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
        return read_batch_header(os.pread(handle.fd, BATCH_HEADER_SIZE, 0)).max_timestamp

    def describe(self, end_offset: int) -> SegmentDescription:
        """This segment as a ``SegmentDescription``; ``end_offset`` is the log's to give."""
        return SegmentDescription(
            base_offset=self.base_offset,
            end_offset=end_offset,
            size_in_bytes=self.size,
            first_timestamp=self.first_batch_timestamp(),
            max_timestamp=self.max_timestamp_so_far,
        )

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime when the segment has no timestamps."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
        return os.fstat(handle.fd).st_mtime_ns // 1_000_000

    # -- recovery -----------------------------------------------------------------------------

    def recover(self) -> RecoveryResult:
        """Rebuild both indexes from the log; truncate at the first invalid batch.

        A batch is valid when its header parses, it lies wholly inside the file and its CRC
        matches. Everything from the first invalid batch on is cut off.
        """
        self._indexes_checked = True  # rebuilt now, whatever they held
        self.txn_index.reset()
        self.drop_key_index()
        valid_bytes, next_offset, reason = self._reindex()
        truncated = self.size - valid_bytes
        if truncated:
            handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
            os.ftruncate(handle.fd, valid_bytes)
            self.size = valid_bytes
        self.bytes_since_last_index_entry = 0
        # As a clean close does: the largest timestamp goes into the time index, then both
        # indexes are trimmed (the log re-grows the active segment's).
        self.on_become_inactive()
        return RecoveryResult(valid_bytes, truncated, next_offset, reason)

    def rebuild_indexes(self) -> None:
        """Rebuild the offset and time indexes from the log, leaving the log and ``.txnindex``
        as they are: a segment below the recovery point whose index was missing or corrupt at
        its first use. Invalid bytes found are reported, not cut (the data was flushed; only a
        recovery after an unclean shutdown truncates)."""
        self._indexes_checked = True
        valid_bytes, _, reason = self._reindex()
        if valid_bytes < self.size:
            logger.error(
                "%s: invalid data at position %d (%s); the index covers what precedes it",
                self.log_path, valid_bytes, reason,
            )
        self.on_become_inactive()

    def _reindex(self) -> tuple[int, int, str | None]:
        self._indexes_trusted = True  # from here on, every entry comes from a checked scan
        self._verified_positions.clear()
        self._verified_times.clear()
        self._offset_index.reset()
        self._time_index.reset()
        self._set_max_timestamp(-1, self.base_offset)
        self.rolling_based_timestamp = None
        return self._scan_valid_prefix()

    def _scan_valid_prefix(self) -> tuple[int, int, str | None]:
        if self.size == 0:
            return 0, self.base_offset, None
        handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
        with mmap.mmap(handle.fd, self.size, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                return self._index_batches(view)
            finally:
                view.release()

    def _index_batches(self, view: memoryview) -> tuple[int, int, str | None]:
        position, last_index_position, next_offset = 0, 0, self.base_offset
        previous_last_offset = self.base_offset - 1
        while position < len(view):
            header, reason = check_batch(view, position)
            if header is None:
                return position, next_offset, reason
            if header.base_offset <= previous_last_offset or not self.can_hold_offset(
                header.last_offset
            ):
                return position, next_offset, (
                    f"batch base offset {header.base_offset} does not follow {previous_last_offset}"
                )
            if self.rolling_based_timestamp is None:
                self.rolling_based_timestamp = header.max_timestamp
            if header.max_timestamp > self.max_timestamp_so_far:
                self._set_max_timestamp(header.max_timestamp, header.last_offset)
            # Appends index once per append, recovery once per batch: a segment rolled for a
            # full index may need more slots now; a sparser index is still a correct one.
            indexes_full = self._offset_index.is_full() or self._time_index.is_full()
            if position - last_index_position > self.index_interval_bytes and not indexes_full:
                self._offset_index.append(header.last_offset, position)
                self._time_index.append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
                )
                last_index_position = position
            previous_last_offset = header.last_offset
            next_offset = header.next_offset
            position += header.size_in_bytes
        return position, next_offset, None

    def cut_at(self, position: int) -> RecoveryResult:
        """Drop the ``.log`` from ``position`` (a batch start: the start-up verification found
        damage there or just after) and rebuild the indexes over what stays."""
        if position < self.size:
            handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
            os.ftruncate(handle.fd, position)
            self.size = position
        return self.recover()

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``; returns the bytes removed."""
        found = self.translate_offset(offset)
        if found is not None:
            self.drop_key_index()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.resize_indexes(self.max_index_size)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
        os.ftruncate(handle.fd, position)
        self.size = position
        self.bytes_since_last_index_entry = 0
        self._reload_max_timestamp()
        if position == 0:
            self.rolling_based_timestamp = None
        return removed

    def _reload_max_timestamp(self) -> None:
        timestamp, offset = self.time_index.last_entry
        position = self.lookup_position(offset)
        for _, header in self.scan_headers(position):
            if header.max_timestamp > timestamp:
                timestamp, offset = header.max_timestamp, header.last_offset
        self._set_max_timestamp(timestamp, offset)

    def sanity_check(self) -> None:
        """Raises CorruptIndexError when an index cannot be trusted (the caller rebuilds)."""
        self._sanity_check_indexes()
        self.txn_index.sanity_check()
        self._indexes_checked = True

    def _sanity_check_indexes(self) -> None:
        offset_index = self._offset_index
        offset_index.sanity_check()
        self._time_index.sanity_check()
        # ">=": a batch starts at every entry's position, so none can point at the end either.
        if offset_index.entries and offset_index.entry(offset_index.entries - 1)[1] >= self.size:
            raise CorruptIndexError(
                f"{offset_index.path}: last entry points past the end of {self.log_path}"
            )
        problem = self._time_index_end_problem()
        if problem is not None:
            raise CorruptIndexError(f"{self._time_index.path}: {problem}")

    # -- files --------------------------------------------------------------------------------

    def flush(self) -> None:
        if self.deleted:  # taken out of the log while a flush was under way: nothing to keep
            return
        handle = self.log_file.acquire()  # held: the LRU cannot close it meanwhile
        fdatasync(handle.fd, self.log_path)
        self._offset_index.flush()
        self._time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Trim the indexes and let go of the files; slices in flight keep their descriptor."""
        if self.closed:
            return
        self.closed = True
        self._offset_index.close()
        self._time_index.close()
        self.log_file.release()

    def abandon(self) -> None:
        """Let go of every file at once without trimming or flushing, as a killed process does
        (crash tests); descriptors held by slices are closed too."""
        if self.closed:
            return
        self.closed = True
        self.log_file.close_now()
        self._offset_index.release()
        self._time_index.release()

    def change_file_suffix(self, new_suffix: str) -> None:
        """Rename all three files (e.g. to ``.deleted`` or from ``.swap``); fds stay valid.

        The ``.log`` file is renamed last: recovery treats a ``.log.swap`` as the mark of an
        unfinished swap and rebuilds the indexes, so a crash between renames is harmless.
        """
        old_key_index_path = self.key_index_path
        self.file_suffix = new_suffix
        if old_key_index_path.exists():
            os.replace(old_key_index_path, self._path(KEY_INDEX_SUFFIX))
        self._offset_index.rename_to(self._path(INDEX_SUFFIX))
        self._time_index.rename_to(self._path(TIME_INDEX_SUFFIX))
        self.txn_index.rename_to(self._path(TXN_INDEX_SUFFIX))
        self.log_path = self._path(LOG_SUFFIX)
        self.log_file.rename(self.log_path)

    def mark_deleted(self) -> None:
        """Taken out of its log: indexes released, files renamed ``*.deleted``.

        The ``.log`` descriptor is pinned open (out of the LRU) so reads of a list copied before
        the removal still work until ``delete_files``. The files' inodes are remembered: a newer
        segment with the same base offset may be deleted meanwhile and take the same
        ``.deleted`` names.
        """
        self.log_file.pin()
        self._offset_index.release()
        self._time_index.release()
        self.deleted = True
        self._deleted_files = []
        for suffix in SEGMENT_SUFFIXES:
            path = self._path(suffix)
            target = Path(f"{path}{DELETED_SUFFIX}")
            try:
                inode = os.stat(path).st_ino
                os.replace(path, target)
            except FileNotFoundError:
                continue
            self._deleted_files.append((target, inode))
        self.log_path = Path(f"{self.log_path}{DELETED_SUFFIX}")
        self.log_file.path = self.log_path
        self.txn_index.path = Path(f"{self.txn_index.path}{DELETED_SUFFIX}")

    def delete_files(self) -> None:
        """Close and unlink the files (those renamed by ``mark_deleted``, or the regular ones)."""
        if not self.deleted:
            self.close()
            for suffix in SEGMENT_SUFFIXES:
                self._path(suffix).unlink(missing_ok=True)
            return
        for path, inode in self._deleted_files:
            try:
                if os.stat(path).st_ino == inode:
                    path.unlink()
            except FileNotFoundError:
                pass
        if not self.closed:
            self.closed = True
            self.log_file.release()


def check_batch(view: memoryview, position: int) -> tuple[BatchHeader | None, str | None]:
    remaining = len(view) - position
    if remaining < BATCH_HEADER_SIZE:
        return None, f"{remaining} trailing bytes are too few for a batch header"
    try:
        header = read_batch_header(view, position)
    except (CorruptMessageError, InvalidRecordError) as error:
        return None, str(error)
    if header.size_in_bytes > remaining:
        return None, f"batch of {header.size_in_bytes} bytes runs past the end of the file"
    if not batch_crc_is_valid(view, position, header):
        return None, f"CRC mismatch in batch at base offset {header.base_offset}"
    return header, None


def _write_fully(fd: int, parts: Sequence[bytes | bytearray | memoryview], position: int) -> int:
    """``pwritev`` all parts at ``position`` (resuming after short writes); returns the bytes."""
    total = sum(len(part) for part in parts)
    written = 0
    if len(parts) <= _IOV_MAX:
        written = os.pwritev(fd, parts, position)
        if written == total:
            return total  # the common case: one call wrote everything
    views = deque(memoryview(part).cast("B") for part in parts if len(part))
    while True:
        position += written
        _consume(views, written)
        if not views:
            return total
        written = os.pwritev(fd, list(islice(views, _IOV_MAX)), position)


def _consume(views: deque[memoryview], count: int) -> None:
    """Drop ``count`` written bytes from the front of ``views``."""
    while count:
        head = views[0]
        if count >= head.nbytes:
            count -= head.nbytes
            views.popleft()
        else:
            views[0] = head[count:]
            count = 0
