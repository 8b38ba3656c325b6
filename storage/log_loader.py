"""Loading a partition log at open: its segments read back, recovered where needed (Kafka's
``LogLoader``).

Steps, in order:
1. leftovers of interrupted operations are resolved (``storage.recovery``: ``.deleted``, ``.tmp``,
   ``.cleaned``, ``.swap``); a completed swap's segment gets its indexes rebuilt;
2. every ``<base>.log`` is opened oldest first. The active (last) segment's indexes are checked
   now; a missing or corrupt one (``LogSegment.sanity_check``) is recovered: its batches checked
   and its indexes rebuilt. Every older segment's indexes are left unread (``lazy_indexes``):
   they are checked, and rebuilt if missing or corrupt, at their first use (KAFKA-7283), so
   start-up reads one index pair per partition whatever the number of segments;
3. after an unclean shutdown every segment from the one holding the recovery point on is
   recovered; the first one cut short (a bad batch), or, in a log that is not compacted, ending
   short of the next segment's base offset (cut at a batch boundary by a power loss), ends the
   log: the segments after it are deleted, since offsets must stay contiguous;
4. when ``samsa.log.verify.on.startup`` says so (``storage.verification``: after an unclean
   shutdown by default), every segment's batches are verified, those below the recovery point
   too; at the first damaged batch the log is cut (an ERROR names the file, position and
   offset) and the segments after it are deleted, leaving a valid prefix;
5. an empty directory gets one empty segment at the log start offset; the log end offset is the
   active segment's next offset (an unreadable tail found there, damage after a clean shutdown,
   is recovered too rather than failing the whole directory).

Invariants on return: the segment list is sorted and non-empty, everything in it passed the
checks above, and ``LoadedLogOffsets`` says where the log starts and ends and from which segment
on recovery rebuilt files (the producer-state replay refills their ``.txnindex`` from there).

Owner: runs once, inside ``Log.open``, before the log is shared with anyone; the ``Log`` then
finishes loading (producer state, snapshots, a log start offset past the recovered end) with
what is returned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import CorruptMessageError, InvalidRecordError
from storage.errors import CorruptIndexError
from storage.leader_epoch import EpochStart
from storage.log_segments import LogSegments
from storage.recovery import clean_partition_directory
from storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    parse_base_offset,
    segment_file_name,
)
from storage.verification import VERIFY_UNCLEAN, BatchDamage, should_verify, verify_segments

# The Log's logger: what loading reports reads as the log's own messages.
logger = logging.getLogger("samsa.storage.log")


@dataclass(frozen=True, slots=True)
class LoadedLogOffsets:
    log_start_offset: int
    log_end_offset: int
    # The lowest base offset of a segment recovery rebuilt; None when none was.
    recovered_from: int | None
    # Where each leader epoch starts in the batches, when the start-up verification read them.
    epoch_starts: tuple[EpochStart, ...] | None = None


class LogLoader:
    def __init__(
        self,
        directory: Path,
        segments: LogSegments,
        new_segment: Callable[..., LogSegment],
        *,
        contiguous: bool = True,
    ) -> None:
        self.directory = directory
        self.segments = segments
        self.new_segment = new_segment
        # Offsets run on from one segment to the next (no compaction): a hole ends the log.
        self.contiguous = contiguous
        self.recovered_from: int | None = None
        # The directory's file names after the start-up clean-up (``load``).
        self.names: list[str] = []

    def load(
        self, recovery_point: int, log_start_offset: int, had_clean_shutdown: bool,
        verify_on_startup: str = VERIFY_UNCLEAN,
    ) -> LoadedLogOffsets:
        """Fill the (empty) segment list from the directory; see the module docstring."""
        verify = should_verify(verify_on_startup, had_clean_shutdown=had_clean_shutdown)
        cleanup = clean_partition_directory(self.directory)
        self.names = cleanup.names
        present = set(self.names)
        bases = sorted(parse_base_offset(name) for name in self.names if name.endswith(LOG_SUFFIX))
        for base in bases:
            # After an unclean shutdown the active segment is recovered below: not checked first.
            lazy = base != bases[-1] or not had_clean_shutdown
            segment = self._open_segment(base, lazy=lazy, present=present)
            if base in cleanup.completed_swaps:
                self._recover_segment(segment, "completed swap")
            self.segments.add(segment)
        epoch_starts = self._verify() if verify else None
        if not had_clean_shutdown:
            self._recover_from(recovery_point)
        if not self.segments.segments:
            self.segments.add(self.new_segment(log_start_offset))
        log_end_offset = self._active_next_offset()
        start = max(log_start_offset, self.segments.segments[0].base_offset)
        return LoadedLogOffsets(start, log_end_offset, self.recovered_from, epoch_starts)

    def _open_segment(self, base: int, *, lazy: bool, present: set[str]) -> LogSegment:
        """``present``: the directory's file names."""
        if lazy:
            return self.new_segment(base, lazy_indexes=True)
        indexes_present = all(
            segment_file_name(base, suffix) in present for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        )
        segment = self.new_segment(base)
        if not indexes_present:
            self._recover_segment(segment, "missing index file")
            return segment
        try:
            segment.sanity_check()
        except CorruptIndexError as error:
            self._recover_segment(segment, f"corrupt index ({error})")
        return segment

    def _recover_segment(self, segment: LogSegment, why: str) -> int:
        result = segment.recover()
        self._note_recovered(segment)
        if result.truncated_bytes:
            logger.warning(
                "truncated %s at position %d (offset %d): %d invalid bytes removed: %s",
                segment.log_path, result.valid_bytes, result.next_offset,
                result.truncated_bytes, result.reason,
            )
        else:
            logger.info("rebuilt indexes of %s (%s)", segment.log_path, why)
        return result.truncated_bytes

    def _verify(self) -> tuple[EpochStart, ...]:
        """Cut the log at the first damaged batch (``storage.verification``); returns where
        each leader epoch starts in what is kept (entries past the cut go with the cache's
        truncation to the log end offset)."""
        verification = verify_segments(self.segments.segments)
        damage = verification.damage
        if damage is not None:
            self._report_and_cut(damage)
        return verification.epoch_starts

    def _report_and_cut(self, damage: BatchDamage) -> None:
        logger.error(
            "%s: corrupt log data found by the start-up verification in %s; truncating the "
            "log to offset %d, the rest is refetched from the leader if there is one",
            self.directory.name, damage.describe(), damage.offset,
        )
        self._cut(damage)

    def _cut(self, damage: BatchDamage) -> None:
        index = damage.segment_index
        segment = self.segments.segments[index]
        if damage.position == 0 and index > 0 and damage.offset < segment.base_offset:
            index -= 1  # emptied, it would leave a gap before its base offset: it goes too
        else:
            segment.cut_at(damage.position)  # kept even if empty, as recovery keeps a cut one
            self._note_recovered(segment)
        for later in self.segments.drop_after(index):
            logger.warning("deleting %s: it follows corrupt data", later.log_path)
            later.delete_files()

    def _note_recovered(self, segment: LogSegment) -> None:
        if self.recovered_from is None or segment.base_offset < self.recovered_from:
            self.recovered_from = segment.base_offset

    def _recover_from(self, recovery_point: int) -> None:
        """Scan every segment from the one holding ``recovery_point``; cut at the first bad batch."""
        segments = self.segments.segments
        start = self.segments.index_for(recovery_point)
        cut: LogSegment | None = None
        for index in range(start, len(segments)):
            if self._recover_segment(segments[index], "unclean shutdown") or self._hole_after(
                index
            ):
                cut = segments[index]
                for later in self.segments.drop_after(index):
                    logger.warning("deleting %s: it follows a truncated segment", later.log_path)
                    later.delete_files()
                break
        for segment in segments[start:]:
            if segment.size or segment is cut:  # an empty, uncut segment has nothing to sync
                segment.flush()

    def _hole_after(self, index: int) -> bool:
        """A recovered segment that ends short of the next one's base offset in a log that is
        not compacted: its tail never reached the disk while a later segment's did (a power
        loss after a roll, cut at a batch boundary, so no bad batch shows it)."""
        segments = self.segments.segments
        if not self.contiguous or index + 1 >= len(segments):
            return False
        end, following = segments[index].next_offset(), segments[index + 1].base_offset
        if end < following:
            logger.warning("%s ends at offset %d, short of the next segment's %d: the log ends "
                           "there", segments[index].log_path, end, following)
            return True
        return False

    def _active_next_offset(self) -> int:
        """The LEO from the active segment; an unreadable tail (damage after a clean shutdown)
        is recovered rather than stopping the whole directory from loading."""
        segment = self.segments.active
        try:
            return segment.next_offset()
        except (CorruptMessageError, InvalidRecordError) as error:
            self._recover_segment(segment, f"unreadable batch after a clean shutdown ({error})")
            return segment.next_offset()


def load_rolling_timestamp(segment: LogSegment) -> None:
    """The time-based roll of a reopened segment counts from its first batch's timestamp."""
    if segment.rolling_based_timestamp is None and segment.size > 0:
        for _, header in segment.scan_headers(0):
            segment.rolling_based_timestamp = header.max_timestamp
            break
