"""The ordered segment list of one partition log, its segments awaiting deletion, and the
reads that walk the list (Kafka's ``LogSegments`` plus the segment-level half of ``LocalLog``:
delayed deletion, ``read``, the timestamp searches of ListOffsets, the layout readers plan by).

Invariants:
- ``segments`` is sorted by base offset with no two segments sharing one; ``base_offsets[i]``
  is ``segments[i].base_offset``; the last segment is the active one (the log's only writable
  segment) once the log is loaded;
- a segment taken out with ``remove`` is renamed ``*.deleted`` at once and waits in
  ``pending_deletes`` for ``file.delete.delay.ms``: fetch slices and flushes that already hold
  its file descriptors stay valid until ``purge_due`` hands it back for unlinking.

Owner: the ``Log`` that holds it. Changes to the list (``add``, ``insert``, ``remove``,
``drop_after``) take ``lock``, shared with the log, because the cleaner swaps segments from a
worker thread while the owner appends and rolls; readers on other threads copy the list with
``snapshot`` (``read`` does). The list attributes are read directly on the append path (no copy, no lock): the
owner is the only one that appends to the end of the list.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field

from protocol.records import decode_batch
from storage.segment import FetchSlice, LogSegment, SegmentDescription, TimestampAndOffset


@dataclass(frozen=True, slots=True)
class LogLayout:
    """A log's segments as readers plan work by them (``Log.describe_segments``).

    ``segments`` are oldest first, the active one last; contiguous: each one's ``end_offset`` is
    the next one's ``base_offset``, the last one's is ``log_end_offset``, and the first one holds
    ``log_start_offset`` (or is the active segment, when the log is empty).
    """

    log_start_offset: int
    log_end_offset: int
    segments: tuple[SegmentDescription, ...]


@dataclass
class PendingDelete:
    """A removed segment and when (monotonic ms) its files may be unlinked."""

    due_ms: int
    segment: LogSegment = field(compare=False)


class LogSegments:
    def __init__(self, lock: threading.RLock) -> None:
        self.segments: list[LogSegment] = []
        self.base_offsets: list[int] = []
        self.pending_deletes: list[PendingDelete] = []
        self.lock = lock

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    def index_for(self, offset: int) -> int:
        """The position of the segment that holds ``offset`` (the first one below it)."""
        return max(0, bisect.bisect_right(self.base_offsets, offset) - 1)

    def snapshot(self) -> tuple[list[LogSegment], list[int]]:
        """Copies of the list and its base offsets, consistent with each other."""
        with self.lock:
            return list(self.segments), list(self.base_offsets)

    def add(self, segment: LogSegment) -> None:
        """Append ``segment`` as the new last (active) segment."""
        with self.lock:
            self.segments.append(segment)
            self.base_offsets.append(segment.base_offset)

    def insert(self, segment: LogSegment) -> None:
        """Put ``segment`` at its place by base offset (the cleaner's swap)."""
        with self.lock:
            position = bisect.bisect_left(self.base_offsets, segment.base_offset)
            self.segments.insert(position, segment)
            self.base_offsets.insert(position, segment.base_offset)

    def drop_after(self, index: int) -> list[LogSegment]:
        """Take every segment after position ``index`` out of the list (recovery deletes their
        files itself, at once: nothing can hold them while the log loads)."""
        with self.lock:
            dropped = self.segments[index + 1 :]
            del self.segments[index + 1 :]
            del self.base_offsets[index + 1 :]
            return dropped

    def remove(self, segments: list[LogSegment], due_ms: int) -> None:
        """Take ``segments`` out now, rename them ``*.deleted``; unlinked once ``due_ms`` passed."""
        with self.lock:
            for segment in segments:
                index = self.segments.index(segment)
                del self.segments[index]
                del self.base_offsets[index]
                segment.mark_deleted()
                self.pending_deletes.append(PendingDelete(due_ms, segment))

    def purge_due(self, now_ms: int, *, force: bool = False) -> list[LogSegment]:
        """Forget the removed segments whose delay has passed (all with ``force``) and return
        them; the caller unlinks their files."""
        due = [p for p in self.pending_deletes if force or p.due_ms <= now_ms]
        self.pending_deletes = [p for p in self.pending_deletes if p not in due]
        return [pending.segment for pending in due]

    # -- reads (I/O: the caller turns an OSError into its directory going offline) -----------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        limit: int,
        log_end_offset: int,
        min_one_message: bool,
    ) -> FetchSlice | None:
        """A slice from the segment holding ``start_offset``, ending below offset ``limit``;
        None when nothing below ``limit`` is there."""
        segments, bases = self.snapshot()
        first = max(0, bisect.bisect_right(bases, start_offset) - 1)
        for index in range(first, len(segments)):
            segment = segments[index]
            if segment.base_offset >= limit:
                return None
            segment_end = bases[index + 1] if index + 1 < len(bases) else log_end_offset
            max_position = None
            if limit < segment_end:
                found = segment.translate_offset(limit)
                max_position = None if found is None else found[0]
            piece = segment.read(
                start_offset, max_bytes, max_position=max_position, min_one_message=min_one_message
            )
            if piece is not None:
                return piece
        return None

    def search_timestamp(self, timestamp: int, log_start_offset: int) -> TimestampAndOffset | None:
        """The first offset at or above ``log_start_offset`` with a timestamp >= ``timestamp``."""
        for segment in self.segments:
            if segment.max_timestamp_so_far >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_offset(self) -> TimestampAndOffset | None:
        """The (first) record with the largest timestamp (KIP-734); one batch is decoded."""
        best = max(self.segments, key=lambda segment: segment.max_timestamp_so_far)
        if best.max_timestamp_so_far < 0:
            return None
        found = best.translate_offset(best.offset_of_max_timestamp_so_far)
        if found is None:
            return None
        position, header = found
        batch = decode_batch(best.read_batch_bytes(position, header), verify_crc=False)
        for record in batch.records:
            if record.timestamp == best.max_timestamp_so_far:
                return TimestampAndOffset(record.timestamp, record.offset)
        return TimestampAndOffset(header.max_timestamp, header.last_offset)


def describe_layout(
    segments: list[LogSegment], log_start_offset: int, log_end_offset: int
) -> LogLayout:
    """The layout of ``segments`` (a snapshot), leaving out those wholly below the log start
    offset; one 61-byte read per segment at most (its first batch's timestamp)."""
    ends = [segment.base_offset for segment in segments[1:]] + [log_end_offset]
    # Ends never decrease: what goes is a prefix. The active segment always stays.
    first = next((i for i, end in enumerate(ends) if end > log_start_offset), len(ends) - 1)
    pairs = zip(segments[first:], ends[first:], strict=True)
    described = tuple(segment.describe(end) for segment, end in pairs)
    return LogLayout(log_start_offset, log_end_offset, described)
