"""Log compaction for ``cleanup.policy=compact`` (Kafka's ``LogCleaner`` and ``LogCleanerManager``).

A compacted log keeps, for every key, at least the latest record. Offsets of one log::

    log start ── clean section ── first dirty offset ── dirty section ── first uncleanable offset ── ...
                 (cleaned before)                        (new since)         (active segment, high
                                                                              watermark or
                                                                              min.compaction.lag.ms)

A cleaning (``Cleaner.clean``):

1. builds an ``OffsetMap`` (key digest -> latest offset) over the dirty section; when the map is
   full it stops, and this round cleans only up to the last offset that made it in (the *end
   offset*); the rest stays dirty for the next round;
2. groups the segments below the end offset (Kafka's ``groupSegmentsBySize``: each group's log
   bytes <= ``segment.bytes``, its index bytes <= ``segment.index.bytes``, its offsets within
   int32 of its base) and rewrites each group into one segment at the group's first base offset;
3. writes the end offset to the cleaner checkpoint: it is the next round's first dirty offset.

Record rules (``Cleaner.shouldRetainRecord`` and ``MemoryRecords.filterTo``): a record past the
map's latest offset is kept; a keyless record is dropped (Kafka counts it invalid); a record is
dropped when the map holds a later offset for its key; a tombstone (null value) is kept until its
batch's delete horizon has passed. The first cleaning that keeps a tombstone stamps its batch with
a delete horizon of ``now + delete.retention.ms`` (KIP-534: attributes bit 6, the horizon stored
as base_timestamp). A batch keeps its base offset, last offset delta, producer id, epoch and base
sequence, codec, timestamp type and partition leader epoch; a batch that loses nothing and needs
no horizon is copied byte for byte. Control batches are copied as they are (so every
``.txnindex`` entry of the group's segments is copied to the new segment's). Data of aborted
transactions (known from the ABORT markers in the range) is never entered into the map and is
removed; data of a transaction whose marker is not below the first uncleanable offset is kept
and not entered into the map (pass the last stable offset as the high watermark, as Kafka does).

A batch left without records is dropped, except the last batch of each group, which is kept as
an empty batch (61-byte header, Kafka's ``RETAIN_EMPTY``). Kafka keeps the last batch of the
cleaning round so its last offset is not lost; here every group keeps it as well, because start-up
recovery (``storage.recovery``) derives the range a ``.swap`` segment replaces from its last
offset: without it, a crash between the swap steps could leave some of the group's old segments
next to the new one. Kafka also keeps the last batch of each active producer so producer state
can be rebuilt from the log; Samsa has no producer-state snapshots yet, so those are dropped.

Swap, per group, in the order ``storage.recovery`` resolves after a crash: the new segment is
written with the suffix ``.cleaned``, fsynced, renamed to ``.swap`` (the directory is fsynced so
the rename is durable before any old segment is renamed), then ``Log.replace_segments`` renames
the old segments ``.deleted`` and the new one to its regular name. A crash before the ``.swap``
rename of the ``.log`` file leaves the old segments; after it, the new one.

Files: ``<log.dir>/cleaner-offset-checkpoint`` (Kafka's name and text format: ``topic partition
offset`` per compacted log), written after every cleaning.

Memory: the offset map is bounded by entries, sized from a byte budget at the measured CPython
cost of an entry (~120 bytes; ``log.cleaner.io.buffer.load.factor`` of the slots used), so the
128 MiB default holds ~1 million distinct keys per round (the dict grows as keys arrive).
Segment data is read in 1 MiB chunks.

Owner: one cleaner, run by the log manager off the event loop. ``clean`` only reads segments
below the first uncleanable offset and changes the log only through ``Log.replace_segments``; the
caller must keep retention, truncation and other cleanings of the same log from running at the
same time (Kafka pauses them), and must serialise ``replace_segments`` with appends.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import mmh3

from protocol.errors import CorruptMessageError, KafkaStorageError
from protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    ControlRecordType,
    Record,
    TimestampType,
    control_record_type,
    decode_batch,
    encode_batch,
    read_batch_header,
)
from storage.checkpoint import OffsetCheckpointFile
from storage.fsync import fsync_directory
from storage.key_index import write_key_index
from storage.log import Log
from storage.log_keys import build_key_index
from storage.segment import (
    CLEANED_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    LogSegment,
    segment_file_name,
)

logger = logging.getLogger("samsa.storage.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
DEFAULT_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
KAFKA_BYTES_PER_ENTRY = 24  # SkimpyOffsetMap: 16-byte MD5 digest + 8-byte offset
# What one entry really costs here (dict slot + 128-bit int + offset int), measured.
PYTHON_BYTES_PER_ENTRY = 120
INT32_MAX = 2**31 - 1
_READ_CHUNK_BYTES = 1024 * 1024

TopicPartition = tuple[str, int]


# -- offset map -------------------------------------------------------------------------------


class OffsetMap:
    """Key -> latest offset, keyed by the 128-bit MurmurHash3 digest of the key.

    Bounded by ``max_entries = int(memory_bytes // bytes_per_entry * load_factor)``. The default
    ``bytes_per_entry`` is what an entry really costs in CPython (~120 bytes: dict slot, a 128-bit
    int, an offset int), so ``log.cleaner.dedupe.buffer.size`` is a budget of real bytes; it
    holds a fifth of the keys Kafka's 24-byte slots would (pass ``KAFKA_BYTES_PER_ENTRY`` for
    Kafka's count). Two keys
    with the same digest would count as one key; with 128 bits that is as unlikely as with Kafka's
    MD5.
    """

    def __init__(
        self,
        memory_bytes: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        *,
        load_factor: float = DEFAULT_LOAD_FACTOR,
        bytes_per_entry: int = PYTHON_BYTES_PER_ENTRY,
    ) -> None:
        self.slots = memory_bytes // bytes_per_entry
        self.max_entries = int(self.slots * load_factor)
        if self.max_entries < 1:
            raise ValueError(
                f"an offset map of {memory_bytes} bytes cannot hold a single key, so cleaning "
                "would never make progress: raise log.cleaner.dedupe.buffer.size"
            )
        self._entries: dict[int, int] = {}
        self.latest_offset = -1

    def clear(self) -> None:
        self._entries.clear()
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> bool:
        """Map ``key`` to ``offset``; False (nothing changed) when the key is new and the map full."""
        digest = mmh3.hash128(key)
        if len(self._entries) >= self.max_entries and digest not in self._entries:
            return False
        self._entries[digest] = offset
        self.latest_offset = offset
        return True

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``; -1 when it is not in the map."""
        return self._entries.get(mmh3.hash128(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def utilization(self) -> float:
        return len(self._entries) / self.slots


# -- values -----------------------------------------------------------------------------------


class CleaningStep(enum.Enum):
    """The steps of one group's swap, in order (``Cleaner(on_step=...)`` sees each one)."""

    CLEANED_WRITTEN = "cleaned_written"  # .cleaned files written, not yet fsynced
    CLEANED_FLUSHED = "cleaned_flushed"  # .cleaned files fsynced
    SWAP_RENAMED = "swap_renamed"  # renamed to .swap, directory fsynced
    SEGMENTS_REPLACED = "segments_replaced"  # Log.replace_segments done
    CHECKPOINT_WRITTEN = "checkpoint_written"  # once per cleaning, after the last group


StepHook = Callable[[CleaningStep, LogSegment | None], None]


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log and its cleanable range (Kafka's ``LogToClean``)."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool  # max.compaction.lag.ms has passed for a dirty segment

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(frozen=True, slots=True)
class CleanerStats:
    first_dirty_offset: int
    first_uncleanable_offset: int
    end_offset: int  # the new cleaner checkpoint: the next round's first dirty offset
    map_records_read: int
    map_bytes_read: int
    map_utilization: float
    bytes_read: int
    bytes_written: int
    records_read: int
    records_kept: int
    records_removed: int
    tombstones_removed: int
    invalid_records: int  # keyless records, dropped
    aborted_records: int  # records of aborted transactions, dropped
    batches_copied: int
    batches_rewritten: int
    batches_removed: int
    segments_before: int
    segments_after: int


@dataclass
class _Counters:
    map_records_read: int = 0
    map_bytes_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_removed: int = 0
    invalid_records: int = 0
    aborted_records: int = 0
    batches_copied: int = 0
    batches_rewritten: int = 0
    batches_removed: int = 0


# -- which logs, which offsets ----------------------------------------------------------------


def cleaner_checkpoint_file(log_dir: Path) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT)


def truncate_cleaner_checkpoint(
    log_dir: Path, topic_partition: TopicPartition, offset: int
) -> None:
    """After a log is truncated to ``offset``: pull its checkpoint back so the records appended
    after the truncation count as dirty (Kafka's ``maybeTruncateCheckpoint``)."""
    checkpoint = cleaner_checkpoint_file(log_dir)
    offsets = checkpoint.read()
    if offsets.get(topic_partition, -1) > offset:
        offsets[topic_partition] = offset
        checkpoint.write(offsets)


def remove_cleaner_checkpoint(log_dir: Path, topic_partition: TopicPartition) -> None:
    """Forget a deleted (or moved) log's checkpoint."""
    remove_cleaner_checkpoints(log_dir, [topic_partition])


def remove_cleaner_checkpoints(log_dir: Path, topic_partitions: Iterable[TopicPartition]) -> None:
    """Forget the checkpoints of deleted logs: one read, and one rewrite if any was there."""
    checkpoint = cleaner_checkpoint_file(log_dir)
    offsets = checkpoint.read()
    removed = [offsets.pop(key, None) for key in topic_partitions]
    if any(offset is not None for offset in removed):
        checkpoint.write(offsets)


def cleanable_offsets(
    log: Log, checkpoint_offset: int | None, *, now_ms: int, high_watermark: int | None = None
) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) as Kafka's ``cleanableOffsets``.

    The first dirty offset is the checkpointed one, reset to the log start offset when it is
    missing, below the log start or above the log end (a truncated log). The first uncleanable
    offset is the smallest of the active segment's base offset, the high watermark and the base
    offset of the first dirty segment with a record newer than ``min.compaction.lag.ms``, then
    rounded down to the base offset of the segment holding it (``calculateCleanableBytes``).
    """
    first_dirty = checkpoint_offset if checkpoint_offset is not None else log.log_start_offset
    if not log.log_start_offset <= first_dirty <= log.log_end_offset:
        first_dirty = log.log_start_offset
    candidates = [log.active_segment.base_offset]
    if high_watermark is not None:
        candidates.append(high_watermark)
    lag_ms = max(log.config.min_compaction_lag_ms, 0)
    if lag_ms > 0:
        for segment in _non_active_segments_from(log, first_dirty):
            if segment.largest_timestamp > now_ms - lag_ms:
                candidates.append(segment.base_offset)
                break
    uncleanable = max(first_dirty, min(candidates))
    containing = _non_active_segments_from(log, uncleanable)
    return first_dirty, (containing[0] if containing else log.active_segment).base_offset


def _non_active_segments_from(log: Log, offset: int) -> list[LogSegment]:
    """Non-active segments from the one holding ``offset`` on (Kafka's nonActiveLogSegmentsFrom)."""
    segments = log.segments
    return [s for s, after in itertools.pairwise(segments) if after.base_offset > offset]


def _max_compaction_delay_ms(log: Log, first_dirty: int, now_ms: int) -> int:
    """How far past ``max.compaction.lag.ms`` the oldest dirty non-active segment is (0: not)."""
    segments = _non_active_segments_from(log, first_dirty)
    first_batch_timestamps = [t for t in (s.first_batch_timestamp() for s in segments) if t > 0]
    if not first_batch_timestamps:
        return 0
    clean_until_ms = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return max(0, clean_until_ms - min(first_batch_timestamps))


def log_to_clean(
    log: Log, checkpoint_offset: int | None, *, now_ms: int, high_watermark: int | None = None
) -> LogToClean:
    first_dirty, first_uncleanable = cleanable_offsets(
        log, checkpoint_offset, now_ms=now_ms, high_watermark=high_watermark
    )
    # As Kafka, a segment holding the first dirty offset counts as clean and as cleanable.
    clean_bytes = sum(s.size for s in log.segments if s.base_offset < first_dirty)
    cleanable_bytes = sum(
        s.size
        for s in _segments_overlapping(log, min(first_dirty, first_uncleanable), first_uncleanable)
    )
    return LogToClean(
        log=log,
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=first_uncleanable,
        clean_bytes=clean_bytes,
        cleanable_bytes=cleanable_bytes,
        needs_compaction_now=_max_compaction_delay_ms(log, first_dirty, now_ms) > 0,
    )


def _segments_overlapping(log: Log, start: int, end: int) -> list[LogSegment]:
    """Segments holding offsets in [start, end) (Kafka's ``logSegments(from, to)``)."""
    segments = log.segments
    bounds = [s.base_offset for s in segments[1:]] + [max(log.log_end_offset, end)]
    return [
        s
        for s, bound in zip(segments, bounds, strict=True)
        if s.base_offset < end and bound > start
    ]


def _next_base_offsets(log: Log) -> dict[int, int]:
    """Base offset -> the base offset of the next segment (the LEO for the active segment)."""
    segments = log.segments
    bounds = [s.base_offset for s in segments[1:]] + [log.log_end_offset]
    return {s.base_offset: bound for s, bound in zip(segments, bounds, strict=True)}


def cleanable_logs(
    logs: Iterable[Log],
    *,
    now_ms: int,
    checkpoints: Mapping[TopicPartition, int],
    high_watermarks: Mapping[TopicPartition, int] | None = None,
) -> list[LogToClean]:
    """The compacted logs worth cleaning now, dirtiest (highest cleanable ratio) first.

    As Kafka's ``grabFilthiestCompactedLog``: a log qualifies when its cleanable ratio is above
    ``min.cleanable.dirty.ratio`` (strictly, as Kafka's code), or when ``max.compaction.lag.ms``
    has passed for a dirty segment and it has cleanable bytes. ``checkpoints`` are the cleaner
    checkpoints (``cleaner-offset-checkpoint`` of each log's directory); ``high_watermarks``
    (better: last stable offsets) bound what may be cleaned.
    """
    candidates: list[LogToClean] = []
    for log in logs:
        if not log.config.compact:
            continue
        key = (log.topic, log.partition)
        high_watermark = None if high_watermarks is None else high_watermarks.get(key)
        candidate = log_to_clean(
            log, checkpoints.get(key), now_ms=now_ms, high_watermark=high_watermark
        )
        if candidate.total_bytes == 0:
            continue
        forced = candidate.needs_compaction_now and candidate.cleanable_bytes > 0
        if forced or candidate.cleanable_ratio > log.config.min_cleanable_dirty_ratio:
            candidates.append(candidate)
    return sorted(candidates, key=lambda c: c.cleanable_ratio, reverse=True)


# -- the cleaner ------------------------------------------------------------------------------


class Cleaner:
    """Cleans one log at a time; keeps its offset map between rounds (cleared each round)."""

    def __init__(self, *, offset_map: OffsetMap | None = None, on_step: StepHook | None = None):
        self.offset_map = offset_map if offset_map is not None else OffsetMap()
        # Test hook: called after each swap step with the group's new segment.
        self._on_step = on_step

    def clean(self, log: Log, *, now_ms: int, high_watermark: int | None = None) -> CleanerStats:
        """One round of cleaning of ``log``; returns what it did (``end_offset`` is checkpointed).

        ``high_watermark`` bounds the cleanable range; with transactions pass the last stable
        offset (Kafka cleans below the last stable offset, which is <= the high watermark).

        KafkaStorageError (and the log directory goes offline) on an I/O error;
        CorruptMessageError when a batch in the cleanable range is corrupt (nothing is swapped
        for the group holding it; the caller should stop cleaning this log, as Kafka marks it
        uncleanable).
        """
        if not log.config.compact:
            policy = ",".join(log.config.cleanup_policy)
            raise ValueError(f"{log.directory.name} is not compacted (cleanup.policy={policy})")
        log.health.check()
        try:
            return self._clean(log, now_ms, high_watermark)
        except OSError as error:
            log.health.offline_reason = f"{type(error).__name__}: {error}"
            logger.error(
                "I/O error cleaning %s; log directory goes offline: %s", log.directory, error
            )
            raise KafkaStorageError(f"I/O error cleaning {log.directory}: {error}") from error

    def _clean(self, log: Log, now_ms: int, high_watermark: int | None) -> CleanerStats:
        checkpoint = cleaner_checkpoint_file(log.directory.parent)
        first_dirty, first_uncleanable = cleanable_offsets(
            log,
            checkpoint.read().get((log.topic, log.partition)),
            now_ms=now_ms,
            high_watermark=high_watermark,
        )
        segments_before = len(log.segments)
        counters = _Counters()
        outcomes = _TransactionOutcomes.scan(log, first_uncleanable)
        self._build_offset_map(log, first_dirty, first_uncleanable, outcomes, counters)
        end_offset = max(first_dirty, self.offset_map.latest_offset + 1)
        limit = min(end_offset, first_uncleanable)
        to_clean = [s for s in log.segments[:-1] if s.base_offset < limit]
        logger.info(
            "cleaning %s: dirty [%d, %d), cleaning %d segments below %d",
            log.directory.name,
            first_dirty,
            first_uncleanable,
            len(to_clean),
            end_offset,
        )
        for group in group_segments_by_size(log, to_clean):
            if all(segment.size == 0 for segment in group):
                continue  # never swap in an empty segment: there is nothing to clean anyway
            cleaner = _GroupCleaner(log, group, self.offset_map, outcomes, now_ms, counters)
            cleaner.run(self._on_step)
        _write_checkpoint(checkpoint, log, end_offset)
        self._step(CleaningStep.CHECKPOINT_WRITTEN, None)
        return CleanerStats(
            **dataclasses.asdict(counters),
            first_dirty_offset=first_dirty,
            first_uncleanable_offset=first_uncleanable,
            end_offset=end_offset,
            map_utilization=self.offset_map.utilization,
            records_removed=counters.records_read - counters.records_kept,
            segments_before=segments_before,
            segments_after=len(log.segments),
        )

    def _step(self, step: CleaningStep, segment: LogSegment | None) -> None:
        if self._on_step is not None:
            self._on_step(step, segment)

    def _build_offset_map(
        self,
        log: Log,
        start: int,
        end: int,
        outcomes: _TransactionOutcomes,
        counters: _Counters,
    ) -> None:
        """Map every key in [start, end) to its latest offset, until the map is full.

        Afterwards ``latest_offset`` is the last offset the map covers: ``end - 1`` when the
        whole dirty section fit, else the offset of the last record that made it in.
        """
        offset_map = self.offset_map
        offset_map.clear()
        offset_map.update_latest_offset(start - 1)
        next_base_offsets = _next_base_offsets(log)
        for segment in _segments_overlapping(log, start, end):
            position = segment.offset_index.lookup(start).position
            if not self._map_segment(segment, position, start, outcomes, counters):
                return
            # Offsets missing at the end of a segment (cleaned away) are covered too.
            offset_map.update_latest_offset(min(next_base_offsets[segment.base_offset], end) - 1)

    def _map_segment(
        self,
        segment: LogSegment,
        position: int,
        start: int,
        outcomes: _TransactionOutcomes,
        counters: _Counters,
    ) -> bool:
        """Add one segment's keys from ``position``; False when the map filled up."""
        offset_map = self.offset_map
        for _, header, data in _segment_batches(segment, position):
            counters.map_bytes_read += header.size_in_bytes
            if header.last_offset < start:
                continue
            counters.map_records_read += header.records_count
            if header.is_control or not outcomes.is_mappable(header):
                offset_map.update_latest_offset(header.last_offset)
                continue
            for record in decode_batch(data).records:
                key = record.key
                if (
                    key is not None
                    and record.offset >= start
                    and not offset_map.put(key, record.offset)
                ):
                    return False
            offset_map.update_latest_offset(header.last_offset)
        return True


def group_segments_by_size(log: Log, segments: list[LogSegment]) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: consecutive runs that fit one segment.

    A group's log bytes stay <= ``segment.bytes``, its offset-index and time-index bytes each
    <= ``segment.index.bytes``, and (unless the next segment is empty) the next segment's last
    offset, bounded by the base offset after it, is within int32 of the group's base offset.
    """
    config = log.config
    next_base_offsets = _next_base_offsets(log)
    groups: list[list[LogSegment]] = []
    remaining = list(segments)
    while remaining:
        group = [remaining.pop(0)]
        log_bytes = group[0].size
        index_bytes = group[0].offset_index.size_in_bytes
        time_index_bytes = group[0].time_index.size_in_bytes
        while remaining:
            candidate = remaining[0]
            last_offset_bound = next_base_offsets[candidate.base_offset] - 1
            if (
                log_bytes + candidate.size > config.segment_bytes
                or index_bytes + candidate.offset_index.size_in_bytes > config.segment_index_bytes
                or time_index_bytes + candidate.time_index.size_in_bytes
                > config.segment_index_bytes
                or (candidate.size > 0 and last_offset_bound - group[0].base_offset > INT32_MAX)
            ):
                break
            group.append(remaining.pop(0))
            log_bytes += candidate.size
            index_bytes += candidate.offset_index.size_in_bytes
            time_index_bytes += candidate.time_index.size_in_bytes
        groups.append(group)
    return groups


def _write_checkpoint(checkpoint: OffsetCheckpointFile, log: Log, end_offset: int) -> None:
    offsets = checkpoint.read()
    offsets[(log.topic, log.partition)] = end_offset
    checkpoint.write(offsets)


# -- transactions -----------------------------------------------------------------------------


@dataclass
class _TransactionOutcomes:
    """Which transactional batches below the first uncleanable offset were aborted or are open.

    Kafka reads this from the aborted-transaction index; Samsa has none yet, so one header scan
    pairs each transactional batch with the next end marker of its producer.
    """

    aborted: set[int] = field(default_factory=set)  # base offsets
    undecided: set[int] = field(default_factory=set)

    @classmethod
    def scan(cls, log: Log, end: int) -> _TransactionOutcomes:
        outcomes = cls()
        open_batches: dict[int, list[int]] = {}
        for segment in log.segments:
            if segment.base_offset >= end:
                break
            for position, header in segment.scan_headers(0):
                if header.is_control and header.records_count > 0:
                    outcomes._on_marker(segment, position, header, open_batches)
                elif header.is_transactional:
                    open_batches.setdefault(header.producer_id, []).append(header.base_offset)
        for base_offsets in open_batches.values():
            outcomes.undecided.update(base_offsets)
        return outcomes

    def _on_marker(
        self,
        segment: LogSegment,
        position: int,
        header: BatchHeader,
        open_batches: dict[int, list[int]],
    ) -> None:
        batch = decode_batch(segment.read_batch_bytes(position, header))
        record_type = control_record_type(batch.records[0])
        if record_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return
        base_offsets = open_batches.pop(header.producer_id, [])
        if record_type is ControlRecordType.ABORT:
            self.aborted.update(base_offsets)

    def is_mappable(self, header: BatchHeader) -> bool:
        return not header.is_transactional or (
            header.base_offset not in self.aborted and header.base_offset not in self.undecided
        )

    def is_aborted(self, header: BatchHeader) -> bool:
        return header.is_transactional and header.base_offset in self.aborted


# -- cleaning one group -----------------------------------------------------------------------


class _GroupCleaner:
    """Rewrites one group of segments into a ``.cleaned`` segment and swaps it in."""

    def __init__(
        self,
        log: Log,
        group: list[LogSegment],
        offset_map: OffsetMap,
        outcomes: _TransactionOutcomes,
        now_ms: int,
        counters: _Counters,
    ) -> None:
        self.log = log
        self.group = group
        self.offset_map = offset_map
        self.outcomes = outcomes
        self.now_ms = now_ms
        self.delete_horizon_ms = now_ms + log.config.delete_retention_ms
        self.counters = counters
        self.changed = len(group) > 1  # merging segments is a change in itself
        self._pending = bytearray()
        self._pending_largest_offset = -1
        self._pending_max_timestamp = -1
        self._pending_offset_of_max_timestamp = -1

    def run(self, on_step: StepHook | None) -> None:
        def step(name: CleaningStep, segment: LogSegment) -> None:
            if on_step is not None:
                on_step(name, segment)

        cleaned = self._create_cleaned_segment()
        try:
            self._write(cleaned)
            # Every marker is kept, so every aborted transaction the old indexes list stays
            # true (Kafka keeps the entries of the markers it retains).
            cleaned.txn_index.replace_entries(
                entry for segment in self.group for entry in segment.txn_index.entries
            )
            step(CleaningStep.CLEANED_WRITTEN, cleaned)
            if not self.changed:
                cleaned.delete_files()  # nothing to gain from swapping in an identical copy
                return
            cleaned.on_become_inactive()
            cleaned.flush()
            self._keep_key_index(cleaned)
            self._keep_last_modified(cleaned)
            step(CleaningStep.CLEANED_FLUSHED, cleaned)
        except Exception:
            cleaned.delete_files()  # Kafka's deleteIfExists on an aborted cleaning
            raise
        cleaned.change_file_suffix(SWAP_SUFFIX)
        fsync_directory(self.log.directory)
        step(CleaningStep.SWAP_RENAMED, cleaned)
        self.log.replace_segments(cleaned, self.group)
        step(CleaningStep.SEGMENTS_REPLACED, cleaned)

    def _keep_key_index(self, cleaned: LogSegment) -> None:
        """Segments read by key keep a key index through cleaning: the new segment's is written
        beside it, and swapped in with its other files (``storage.log_keys``)."""
        if any(segment.key_index_path.exists() for segment in self.group):
            write_key_index(cleaned.key_index_path, build_key_index(cleaned))

    def _create_cleaned_segment(self) -> LogSegment:
        base_offset = self.group[0].base_offset
        for suffix in SEGMENT_SUFFIXES:  # a leftover of an earlier aborted attempt
            (self.log.directory / (segment_file_name(base_offset, suffix) + CLEANED_SUFFIX)).unlink(
                missing_ok=True
            )
        return LogSegment(
            self.log.directory,
            base_offset,
            clock=self.log.clock,
            index_interval_bytes=self.log.config.index_interval_bytes,
            max_index_size=self.log.config.segment_index_bytes,
            file_suffix=CLEANED_SUFFIX,
            files=self.log.open_files,
            maps=self.log.index_maps,
        )

    def _keep_last_modified(self, cleaned: LogSegment) -> None:
        """Give the new file the old files' mtime, as Kafka does (retention may fall back on it)."""
        handle = self.group[-1].log_file.acquire()
        status = os.fstat(handle.fd)
        os.utime(cleaned.log_path, ns=(status.st_atime_ns, status.st_mtime_ns))

    def _write(self, cleaned: LogSegment) -> None:
        last_segment = self.group[-1]
        for segment in self.group:
            for position, header, data in _segment_batches(segment, 0):
                is_group_last = (
                    segment is last_segment and position + header.size_in_bytes >= segment.size
                )
                self.counters.bytes_read += header.size_in_bytes
                self._emit(self._filter(header, data, is_group_last), header, data)
                if len(self._pending) >= self.log.config.index_interval_bytes:
                    self._append_pending(cleaned)
        self._append_pending(cleaned)

    def _emit(
        self, output: bytes | _Original | None, header: BatchHeader, data: memoryview
    ) -> None:
        if output is None:
            self.counters.batches_removed += 1
            self.changed = True
            return
        if isinstance(output, _Original):
            self.counters.batches_copied += 1
            self._buffer(data, header)
            return
        self.counters.batches_rewritten += 1
        self.changed = True
        self._buffer(output, read_batch_header(output))

    def _buffer(self, data: bytes | memoryview, header: BatchHeader) -> None:
        self._pending += data
        self.counters.bytes_written += len(data)
        self._pending_largest_offset = header.last_offset
        if header.max_timestamp > self._pending_max_timestamp:
            self._pending_max_timestamp = header.max_timestamp
            self._pending_offset_of_max_timestamp = header.last_offset

    def _append_pending(self, cleaned: LogSegment) -> None:
        if not self._pending:
            return
        if cleaned.offset_index.is_full() or cleaned.time_index.is_full():
            # The group's indexes fit segment.index.bytes, but entries fall where the appends
            # do; a sparser index beats an IndexFullError.
            cleaned.bytes_since_last_index_entry = 0
        cleaned.append(
            [self._pending],
            largest_offset=self._pending_largest_offset,
            largest_timestamp=self._pending_max_timestamp,
            offset_of_max_timestamp=self._pending_offset_of_max_timestamp,
        )
        self._pending = bytearray()
        self._pending_max_timestamp = -1

    def _filter(
        self, header: BatchHeader, data: memoryview, is_group_last: bool
    ) -> bytes | _Original | None:
        """The batch to write: ``ORIGINAL`` (its bytes as they are), new bytes, or None (dropped)."""
        if header.is_control:
            return _Original.ORIGINAL
        batch = decode_batch(data)
        self.counters.records_read += len(batch.records)
        if self.outcomes.is_aborted(header):
            self.counters.aborted_records += len(batch.records)
            retained: list[Record] = []
        else:
            retained = self._retained_records(header, batch.records)
        self.counters.records_kept += len(retained)
        needs_horizon = not header.has_delete_horizon and any(r.value is None for r in retained)
        if len(retained) == len(batch.records) and not needs_horizon:
            return _Original.ORIGINAL
        if retained:
            horizon = self.delete_horizon_ms if needs_horizon else header.delete_horizon_ms
            return _encode_like(header, retained, delete_horizon_ms=horizon)
        if is_group_last:
            return _encode_like(header, [], delete_horizon_ms=None)
        return None

    def _retained_records(self, header: BatchHeader, records: tuple[Record, ...]) -> list[Record]:
        latest_offset = self.offset_map.latest_offset
        lookup = self.offset_map.get
        horizon = header.delete_horizon_ms
        tombstones_expired = horizon is not None and self.now_ms >= horizon
        retained: list[Record] = []
        for record in records:
            if record.offset > latest_offset:
                retained.append(record)
            elif record.key is None:
                self.counters.invalid_records += 1
            elif lookup(record.key) > record.offset:
                continue
            elif record.value is None and tombstones_expired:
                self.counters.tombstones_removed += 1
            else:
                retained.append(record)
        return retained


class _Original(enum.Enum):
    """The filter's answer "write the batch's original bytes"."""

    ORIGINAL = enum.auto()


def _encode_like(
    header: BatchHeader, records: list[Record], *, delete_horizon_ms: int | None
) -> bytes:
    """``records`` in a batch with ``header``'s offsets, producer fields, codec and epoch."""
    log_append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    empty = not records
    return encode_batch(
        records,
        base_offset=header.base_offset,
        last_offset_delta=header.last_offset_delta,
        # Kafka's writeEmptyHeader stamps an empty batch with the original max timestamp
        base_timestamp=header.max_timestamp if empty else None,
        max_timestamp=header.max_timestamp if (log_append_time or empty) else None,
        compression=header.compression,
        timestamp_type=header.timestamp_type,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        delete_horizon_ms=delete_horizon_ms,
    )


def _segment_batches(
    segment: LogSegment, start_position: int
) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """Every batch of ``segment`` from ``start_position``: (position, header, its bytes).

    Reads 1 MiB at a time; a batch larger than that is read on its own.
    """
    position, end = start_position, segment.size
    handle = segment.log_file.acquire()  # held to the end: the LRU cannot close it under us
    while position < end:
        chunk = memoryview(os.pread(handle.fd, min(_READ_CHUNK_BYTES, end - position), position))
        consumed = 0
        while len(chunk) - consumed >= BATCH_HEADER_SIZE:
            header = read_batch_header(chunk, consumed)
            size = header.size_in_bytes
            if consumed + size > len(chunk):
                break
            yield position + consumed, header, chunk[consumed : consumed + size]
            consumed += size
        if consumed == 0:
            header = read_batch_header(chunk)  # CorruptMessageError if even a header is missing
            consumed = header.size_in_bytes
            if position + consumed > end:
                raise CorruptMessageError(
                    f"batch at position {position} of {segment.log_path} runs past its end"
                )
            data = memoryview(os.pread(handle.fd, consumed, position))
            yield position, header, data
        position += consumed
