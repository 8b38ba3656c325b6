"""One partition's live log (Kafka's ``UnifiedLog``): append, read, roll, flush, truncate,
retention and the cleaner's swap over an ordered run of segments.

Invariants:
- segments are sorted by base offset, never overlap, and the last one is the active segment
  (the only one appended to);
- ``log_start_offset <= first offset readable``, ``log_end_offset`` (LEO) is the next offset to
  assign, ``recovery_point <= log_end_offset`` and everything below ``recovery_point`` is fsynced;
- removed segments are renamed ``*.deleted`` and unlinked only after ``file.delete.delay.ms`` so
  fetch slices and flushes already holding their file descriptors stay valid.

Pieces, each in its own module: ``storage.log_loader`` (opening: leftovers, recovery, index
rebuilds), ``storage.log_segments`` (the segment list, delayed deletion, reads over the list),
``storage.log_append`` (offset assignment, ``AppendResult``), ``storage.log_producers`` (producer
state and its snapshots), ``storage.log_dirs`` (directory names, ``DirectoryHealth``),
``storage.log_keys`` (per-key reads through the ``.keyindex`` files and the active segment's
key map, ``storage.key_index``), ``storage.leader_epoch`` (the leader epoch cache,
``leader-epoch-checkpoint``: every appended batch with a leader epoch >= 0 is assigned before
it is written; truncations and log start increments trim it; rebuilt from the batch headers
when the file is missing or corrupt).

Durability decisions (Kafka's): an append is written to the page cache, not fsynced; a flush
happens when ``flush.messages`` unflushed records accumulate (``AppendResult.flush_due``), when
``flush.ms`` elapses (the log manager's schedule) and, for older segments, after a roll
(``AppendResult.rolled``). The caller runs ``flush`` off the event loop; it only fsyncs (each
segment's file and indexes, and the directory when a segment is new since the last flush) and
then raises ``recovery_point``. By default replication, not fsync, is what makes acks=all
durable; with ``flush.messages`` reached the broker answers only after the flush covering the
append (``broker.group_commit``, as Kafka flushes inside its append).

I/O errors are sticky: the first ``OSError`` takes the log directory offline (``DirectoryHealth``)
and every later call raises ``KafkaStorageError`` without touching the disk.

Threads: appends, reads and truncation happen on the owner (the broker's event loop);
maintenance (flush, retention, purge, checkpoints, and the cleaner's swap) may run on worker
threads. Every change to the segment list takes ``_lock``; the broker runs the maintenance jobs of
one log one at a time, so retention never races a cleaning of the same log.

Idempotent producers (``storage.producer_state``): a client batch with a producer id is checked
after validation and before offsets are handed out; a retried batch (a duplicate of one of the
producer's last 5) is answered with its original offsets (``AppendResult.duplicate``) and nothing
is written. Batches without a producer id skip all of it. Snapshots (``<offset>.snapshot``) are
taken when a segment rolls, on a clean close and after recovery or truncation; they go with their
segment on retention, those above a truncation point go with it (see ``storage.log_producers``).
The producer state belongs to the owner: retention deletes snapshot files of removed segments but
never touches the state, and producer expiry runs on the owner, at most every
``producer.id.expiration.check.interval.ms``, when a producer's batch arrives (or when
``remove_expired_producers`` is called).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn, TypeVar

from protocol.errors import KafkaStorageError, OffsetConflictError, OffsetOutOfRangeError
from protocol.records import BatchHeader, TimestampType, read_batch_header
from storage.clock import Clock
from storage.config import LogConfig
from storage.fsync import fsync_directory
from storage.leader_epoch import LeaderEpochFileCache, load_leader_epoch_cache
from storage.limits import is_resource_limit, resource_limit_message
from storage.log_append import (
    AppendCondition,
    AppendResult,
    assign_offsets,
    assign_offsets_log_append_time,
    duplicate_result,
    follower_base_offsets,
    has_producer_id,
    max_timestamp_of,
    validation_rules,
)
from storage.log_dirs import DirectoryHealth, parse_topic_partition
from storage.log_keys import KeyRead, LogKeys, last_offset_of_key, read_key
from storage.log_loader import LogLoader, load_rolling_timestamp
from storage.log_producers import LogProducers, replicated_markers
from storage.log_segments import LogLayout, LogSegments, PendingDelete, describe_layout
from storage.log_transactions import (
    collect_aborted_transactions,
    end_marker_batch,
    upper_bound_offset,
)
from storage.open_files import LeastRecentlyUsed, evict_all
from storage.producer_snapshot import remove_stray_snapshots, snapshot_offsets_in
from storage.producer_state import (
    PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    EndMarker,
    ProducerAppend,
    ProducerStateManager,
)
from storage.retention import deletable_segments
from storage.segment import FetchSlice, LogSegment, TimestampAndOffset
from storage.transaction_index import AbortedTxn
from storage.validator import ValidatedBatches, ValidationRules, validate_batches
from storage.verification import VERIFY_UNCLEAN

# Re-exported: other packages import these from here.
__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendCondition",
    "AppendResult",
    "DirectoryHealth",
    "Log",
    "LogLayout",
    "parse_topic_partition",
]

logger = logging.getLogger("samsa.storage.log")

# ListOffsets special timestamps (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4

T = TypeVar("T")

class Log:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        clock: Clock,
        health: DirectoryHealth | None = None,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
        open_files: LeastRecentlyUsed | None = None,
        index_maps: LeastRecentlyUsed | None = None,
    ) -> None:
        self.directory = directory
        # The broker's LRUs of open segment files and mapped indexes (storage.open_files);
        # None: unbounded, each log its own.
        self.open_files = open_files if open_files is not None else LeastRecentlyUsed()
        self.index_maps = index_maps if index_maps is not None else LeastRecentlyUsed()
        self.config = config  # the setter also prepares the validation rules
        self.clock = clock
        self.health = health or DirectoryHealth(directory.parent)
        self.topic, self.partition = parse_topic_partition(directory.name)
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.recovery_point = 0
        # Bumped by every truncation: a flush that started before one must not raise the
        # recovery point over data appended after it (which that flush never synced).
        self._truncations = 0
        self.last_flush_ms = clock.monotonic_ms()
        # Guards the segment list: the cleaner swaps segments from a worker thread while the
        # owner appends and rolls. Held only for list changes and renames, never for I/O loops.
        self._lock = threading.RLock()
        self._segment_list = LogSegments(self._lock)
        # Held by the cleaner for a whole round; retention skips a log being cleaned (Kafka
        # pauses one for the other) so the cleaner's swap never meets a segment already gone.
        self.maintenance_lock = threading.Lock()
        self.producers = LogProducers(
            directory, clock, producer_id_expiration_ms=producer_id_expiration_ms
        )
        # Memory only until ``_load`` opens ``leader-epoch-checkpoint`` (storage.leader_epoch).
        self.leader_epoch_cache = LeaderEpochFileCache()
        # Key indexes and the active segment's key map (storage.log_keys), once read by key.
        self.keys = LogKeys()

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        clock: Clock,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
        health: DirectoryHealth | None = None,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
        open_files: LeastRecentlyUsed | None = None,
        index_maps: LeastRecentlyUsed | None = None,
        verify_on_startup: str = VERIFY_UNCLEAN,
    ) -> Log:
        """Load (and if needed recover) the log in ``directory``, creating it when absent;
        ``verify_on_startup`` is ``samsa.log.verify.on.startup`` (``storage.verification``)."""
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(
            directory, config, clock=clock, health=health,
            producer_id_expiration_ms=producer_id_expiration_ms,
            open_files=open_files, index_maps=index_maps,
        )
        log._load(recovery_point, log_start_offset, had_clean_shutdown, verify_on_startup)
        return log

    def _load(
        self, recovery_point: int, log_start_offset: int, had_clean_shutdown: bool,
        verify_on_startup: str = VERIFY_UNCLEAN,
    ) -> None:
        """Segments by the ``LogLoader``; then what needs the live log: a log start offset
        past the recovered end, the active segment's indexes, producer state and snapshots."""
        loader = LogLoader(self.directory, self._segment_list, self._new_segment,
                           contiguous=not self.config.compact)
        loaded = loader.load(recovery_point, log_start_offset, had_clean_shutdown,
                             verify_on_startup)
        self.log_end_offset = loaded.log_end_offset
        self.log_start_offset = loaded.log_start_offset
        self.recovery_point = self.log_end_offset
        # One listing of the directory serves the load, unless a restart of the log changed it.
        listed: list[str] | None = loader.names
        if self.log_start_offset > self.log_end_offset:
            # Recovery lost offsets the checkpoint says were already handed out: never hand
            # them out again; restart the log, empty, at the log start offset (as Kafka).
            logger.warning(
                "%s: log start offset %d is past the recovered end %d; restarting the log there",
                self.directory.name, self.log_start_offset, self.log_end_offset,
            )
            self.truncate_fully_and_start_at(self.log_start_offset)
            self.purge_deleted_segments(force=True)
            listed = None
        self.leader_epoch_cache = load_leader_epoch_cache(
            self.directory, self._headers_from, log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset, recovered_from=loaded.recovered_from,
            scanned_epochs=loaded.epoch_starts,
        )
        self.active_segment.resize_indexes(self.config.segment_index_bytes)
        load_rolling_timestamp(self.active_segment)
        snapshots = remove_stray_snapshots(
            self.directory, self._segment_list.base_offsets,
            None if listed is None else snapshot_offsets_in(listed))
        self._rebuild_producer_state(replay=True, recovered_from=loaded.recovered_from,
                                     snapshot_offsets=snapshots)

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        return (header for _, _, header in self.batches(offset))

    def _new_segment(self, base_offset: int, *, lazy_indexes: bool = False) -> LogSegment:
        return LogSegment(
            self.directory,
            base_offset,
            clock=self.clock,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            files=self.open_files,
            maps=self.index_maps,
            lazy_indexes=lazy_indexes,
        )

    # -- properties ---------------------------------------------------------------------------

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segment_list.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segment_list.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segment_list.segments)

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    @property
    def _pending_deletes(self) -> list[PendingDelete]:
        return self._segment_list.pending_deletes

    def _segment_index_for(self, offset: int) -> int:
        return self._segment_list.index_for(offset)

    def _guard(self, action: Callable[[], T]) -> T:
        """Run an I/O action; the first OSError takes the directory offline (sticky), except a
        process limit (too many open files, no memory map left): that fails this call only."""
        self.health.check()
        try:
            return action()
        except OSError as error:
            if is_resource_limit(error):
                self._limit_reached(error)
            self._go_offline(error)

    def _limit_reached(self, error: OSError) -> NoReturn:
        message = resource_limit_message(error)
        logger.error("%s: %s", self.directory.name, message)
        # Make room for the next call: a quarter of the open files and maps are let go.
        evict_all(self.open_files.shrink(len(self.open_files) // 4 + 1))
        evict_all(self.index_maps.shrink(len(self.index_maps) // 4 + 1))
        raise KafkaStorageError(f"{self.directory.name}: {message}") from error

    def _go_offline(self, error: OSError) -> NoReturn:
        self.health.offline_reason = f"{type(error).__name__}: {error}"
        logger.error("I/O error in %s; log directory goes offline: %s", self.directory, error)
        raise KafkaStorageError(f"I/O error in {self.directory}: {error}") from error

    # -- appending ----------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """A topic config change: takes effect from the next append."""
        self._config = config
        self._client_rules = self.validation_rules(from_client=True)
        self._replica_rules = self.validation_rules(from_client=False)

    def validation_rules(self, *, from_client: bool = True) -> ValidationRules:
        return validation_rules(self._config, from_client=from_client)

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = 0,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_verified: bool = False,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        """Validate client batches, assign offsets from the LEO, stamp the leader epoch, append.

        ``origin`` COORDINATOR: the group coordinator's batches (validated as a replica's,
        producer epoch checked but no sequence). ``transaction_verified``: the transaction
        coordinator has this partition in the producer's transaction (see
        ``storage.producer_state``). ``condition`` (a conditional append): checked after
        validation and the producer check — so a retried idempotent batch is still answered
        with its original offsets — and before offsets are handed out, in the same call on the
        owner's thread, so nothing can append in between; OFFSET_CONFLICT when it does not
        hold, and nothing is written.

        Zero-copy: each batch is written as a new 16-byte prefix (base offset, batch length,
        leader epoch; none of them under the CRC) followed by the client's bytes after it.
        LogAppendTime topics change the CRC-covered max timestamp, so they take a copy.
        """
        self.health.check()
        now_ms = self.clock.milliseconds()
        rules = self._client_rules if origin is AppendOrigin.CLIENT else self._replica_rules
        validated = validate_batches(records, rules, now_ms=now_ms)
        log_append_time = now_ms if self._client_rules.timestamp_type == TimestampType.LOG_APPEND_TIME else -1
        producers = None
        if has_producer_id(validated.headers):
            producers = self._check_producers(
                validated, log_append_time, origin, transaction_verified
            )
            if producers.duplicate is not None:
                return duplicate_result(producers.duplicate, log_append_time, self.log_start_offset)
        if condition is not None:
            self.check_condition(condition)
        if log_append_time >= 0:
            buffer, base_offsets = assign_offsets_log_append_time(
                records, validated, leader_epoch, self.log_end_offset, now_ms
            )
            return self._append(
                [buffer], len(buffer), validated, base_offsets, now_ms, producers, leader_epoch
            )
        parts, base_offsets = assign_offsets(records, validated, leader_epoch, self.log_end_offset)
        return self._append(parts, len(records), validated, base_offsets, -1, producers, leader_epoch)

    def check_condition(self, condition: AppendCondition) -> None:
        """OFFSET_CONFLICT, with the actual offset, unless ``condition`` holds now."""
        if condition.expected_end_offset >= 0 and condition.expected_end_offset != self.log_end_offset:
            raise OffsetConflictError(
                f"{self.directory.name}: expected end offset {condition.expected_end_offset}, "
                f"the log end offset is {self.log_end_offset}",
                current_offset=self.log_end_offset)
        if condition.key is None:
            return
        actual = self.last_offset_of_key(condition.key)
        if actual == condition.expected_key_offset:
            return
        expected = condition.expected_key_offset
        wanted = ("no record with the key" if expected < 0
                  else f"the last record with the key at offset {expected}")
        found = "no record has it" if actual < 0 else f"the last one is at offset {actual}"
        raise OffsetConflictError(f"{self.directory.name}: expected {wanted}, {found}",
                                  current_offset=actual)

    def _check_producers(
        self,
        validated: ValidatedBatches,
        log_append_time: int,
        origin: AppendOrigin,
        transaction_verified: bool,
    ) -> ProducerAppend:
        self.producers.maybe_expire()
        return self.producer_state.check_client_append(
            validated.headers, self.log_end_offset, log_append_time=log_append_time,
            origin=origin, transaction_verified=transaction_verified,
        )

    def append_end_marker(
        self, producer_id: int, producer_epoch: int, marker: EndMarker, *, leader_epoch: int = 0
    ) -> AppendResult:
        """Write the COMMIT or ABORT marker of the producer's transaction (the coordinator's
        WriteTxnMarkers); raises INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED."""
        self.health.check()
        now_ms, offset = self.clock.milliseconds(), self.log_end_offset
        data = end_marker_batch(
            producer_id, producer_epoch, marker, base_offset=offset, timestamp=now_ms,
            leader_epoch=leader_epoch,
        )
        header = read_batch_header(data)
        producers = self.producer_state.check_marker(header, marker, offset, timestamp=now_ms)
        validated = ValidatedBatches([0], [header])
        return self._append([data], len(data), validated, [offset], -1, producers, leader_epoch)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append batches that already carry offsets (replication, the cleaner's tests)."""
        self.health.check()
        validated = validate_batches(records, self._replica_rules, now_ms=self.clock.milliseconds())
        base_offsets = follower_base_offsets(validated.headers, self.log_end_offset)
        producers = None
        if has_producer_id(validated.headers):
            self.producers.maybe_expire()
            markers = replicated_markers(records, validated.positions, validated.headers)
            producers = self.producer_state.prepare_replica_append(validated.headers, markers)
        return self._append([records], len(records), validated, base_offsets, -1, producers)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """A new leader epoch starts at ``start_offset`` (Kafka's ``assignEpochStartOffset``,
        called on becoming leader before anything of that epoch is written)."""
        self._guard(lambda: self.leader_epoch_cache.assign(epoch, start_offset))

    def _append(
        self,
        parts: Sequence[bytes | bytearray | memoryview],
        size: int,
        validated: ValidatedBatches,
        base_offsets: list[int],
        log_append_time: int,
        producers: ProducerAppend | None = None,
        leader_epoch: int | None = None,
    ) -> AppendResult:
        """``leader_epoch``: stamped on every batch by this leader; None: each batch's own."""
        headers = validated.headers
        last_offset = base_offsets[-1] + headers[-1].last_offset_delta
        max_timestamp, offset_of_max = max_timestamp_of(headers, base_offsets, log_append_time)
        rolled = self._maybe_roll(size, max_timestamp, base_offsets[0], last_offset)
        epochs = [h.partition_leader_epoch if leader_epoch is None else leader_epoch for h in headers]
        # Before the data: the checkpoint never misses an epoch the log holds (Kafka's order).
        self._guard(lambda: self.leader_epoch_cache.assign_all(zip(epochs, base_offsets, strict=True)))
        self.health.check()
        try:
            self.active_segment.append(
                parts,
                largest_offset=last_offset,
                largest_timestamp=max_timestamp,
                offset_of_max_timestamp=offset_of_max,
                first_batch_timestamp=max(headers[0].max_timestamp, log_append_time),
            )
        except OSError as error:
            self._go_offline(error)
        self.log_end_offset = last_offset + 1
        if producers is not None:
            self.producer_state.apply(producers)
            if producers.completed:
                self._guard(lambda: self.producers.index_aborted(self.active_segment, producers.completed))
        return AppendResult(
            base_offsets[0],
            last_offset,
            max_timestamp,
            offset_of_max,
            log_append_time,
            self.log_start_offset,
            validated.records_count,
            size,
            rolled,
            self.log_end_offset - self.recovery_point >= self._config.flush_messages,
        )

    def _maybe_roll(
        self, append_bytes: int, max_timestamp: int, first_offset: int, largest_offset: int
    ) -> bool:
        segment = self.active_segment
        if not segment.should_roll(
            segment_bytes=self.config.segment_bytes,
            roll_ms=self.config.segment_ms - self.config.segment_jitter_ms,
            append_bytes=append_bytes,
            max_timestamp=max_timestamp,
            largest_offset=largest_offset,
        ):
            return False
        # A follower's batch may start far past the LEO (offsets lost to compaction): the new
        # segment starts at the batch, as Kafka's max(first offset, LEO).
        self.roll(max(first_offset, self.log_end_offset))
        return True

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``base_offset`` (default: the log end offset).

        An empty active segment at that offset is reused.
        """
        self.health.check()
        base = self.log_end_offset if base_offset is None else max(base_offset, self.log_end_offset)
        active = self.active_segment
        if active.size == 0 and active.base_offset == base:
            return active

        def do_roll() -> LogSegment:
            with self._lock:
                active.on_become_inactive()
                segment = self._new_segment(base)
                self._segment_list.add(segment)
                self.keys.on_roll(active, segment)
                return segment

        segment = self._guard(do_roll)
        logger.info("rolled %s to new segment at offset %d", self.directory.name, segment.base_offset)
        # The snapshot at the new segment's base lets recovery replay this segment alone.
        self._guard(lambda: self.producers.take_snapshot(segment.base_offset))
        return segment

    # -- producer state -----------------------------------------------------------------------

    @property
    def producer_state(self) -> ProducerStateManager:
        return self.producers.state

    def remove_expired_producers(self) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` (owner only)."""
        return self.producers.remove_expired()

    def _rebuild_producer_state(self, *, replay: bool, recovered_from: int | None = None,
                                snapshot_offsets: list[int] | None = None) -> None:
        """Kafka's ``truncateAndReload`` + ``rebuildProducerState`` (see ``LogProducers``)."""
        self._guard(
            lambda: self.producers.rebuild(
                self._segment_list.segments, self.log_start_offset, self.log_end_offset, replay=replay,
                recovered_from=recovered_from, snapshot_offsets=snapshot_offsets,
            )
        )

    # -- transactions -------------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, at least the log start offset
        (Kafka's ``maybeIncrementFirstUnstableOffset``); None when no transaction is open."""
        first = self.producer_state.first_unstable_offset
        return None if first is None else max(first, self.log_start_offset)

    def aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch from ``start_offset`` must know,
        for a read ending below ``upper_bound`` (see ``storage.log_transactions``)."""
        with self._lock:
            segments, log_end_offset = list(self._segment_list.segments), self.log_end_offset
        upper = min(upper_bound, upper_bound_offset(segments, start_offset, log_end_offset))
        return self._guard(lambda: collect_aborted_transactions(segments, start_offset, upper))

    def aborted_transactions_between(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, end_offset), over as many
        segments as that spans (a key read crosses segments; a fetch never does)."""
        with self._lock:
            segments = list(self._segment_list.segments)
        return self._guard(lambda: collect_aborted_transactions(segments, start_offset, end_offset))

    # -- reading ------------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchSlice | None:
        """A slice of the segment holding ``start_offset``; None when nothing is readable yet.

        ``max_offset`` (exclusive, e.g. the high watermark) caps what is returned.
        """
        limit = self._read_limit(start_offset, max_offset)
        if start_offset >= limit:
            return None
        log_end_offset = self.log_end_offset
        return self._guard(
            lambda: self._segment_list.read(
                start_offset, max_bytes, limit=limit, log_end_offset=log_end_offset,
                min_one_message=min_one_message,
            )
        )

    def _read_limit(self, start_offset: int, max_offset: int | None) -> int:
        """Where a read from ``start_offset`` stops (exclusive): ``max_offset`` or the LEO;
        OFFSET_OUT_OF_RANGE unless ``start_offset`` is in [log start offset, LEO]."""
        self.health.check()
        if not self.log_start_offset <= start_offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside [{self.log_start_offset}, "
                f"{self.log_end_offset}] of {self.directory.name}"
            )
        return self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)

    def describe_segments(self) -> LogLayout:
        """The segment layout, read-only: one 61-byte read per segment at most (its first
        batch's timestamp, unless known). Segments wholly below the log start offset (raised by
        DeleteRecords, removed at the next retention run) are left out; base offsets are the
        segments' own (their file names), so the first may be below the log start offset."""
        self.health.check()
        with self._lock:  # retention and the cleaner change the list from worker threads
            segments, log_end_offset = list(self._segment_list.segments), self.log_end_offset
            log_start_offset = max(self.log_start_offset, segments[0].base_offset)
        return self._guard(lambda: describe_layout(segments, log_start_offset, log_end_offset))

    def batches(self, start_offset: int = 0) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """Every batch header from the one holding ``start_offset``: (segment, position, header)."""
        segments = self._segment_list.segments
        for segment in segments[self._segment_index_for(start_offset) :]:
            for position, header in segment.scan_headers(0):
                if header.last_offset >= start_offset:
                    yield segment, position, header

    def read_key(
        self, key: bytes, start_offset: int, max_bytes: int, *, max_offset: int | None = None
    ) -> KeyRead:
        """The batches holding records of ``key`` from ``start_offset`` (``storage.log_keys``):
        candidates by key hash, in offset order, at least one and at most ``max_bytes`` beyond
        it, below ``max_offset`` (exclusive, e.g. the high watermark; default the LEO)."""
        limit = self._read_limit(start_offset, max_offset)
        segments = self._segments_from(start_offset)
        return self._guard(
            lambda: read_key(self.keys, segments, key, start_offset, max_bytes, limit))

    def last_offset_of_key(self, key: bytes) -> int:
        """The offset of the newest record with exactly ``key`` (up to the log end offset), -1
        when no record at or above the log start offset has it; control batches and batches of
        aborted transactions are skipped (records of an open transaction count: they are in
        the log). Newest segment first, through the key indexes (``storage.log_keys``)."""
        self.health.check()
        segments, log_start_offset = self._segments_from(self.log_start_offset), self.log_start_offset
        return self._guard(lambda: last_offset_of_key(
            self.keys, segments, key, log_start_offset,
            aborted=lambda: self.aborted_transactions(log_start_offset, self.log_end_offset)))

    def prepare_key_reads(self, start_offset: int = 0) -> None:
        """Load or build the key indexes a key read from ``start_offset`` will use (may run
        on a worker thread: the broker does so before reading on the event loop)."""
        self.health.check()
        segments = self._segments_from(max(start_offset, self.log_start_offset))
        self._guard(lambda: self.keys.prepare(segments))

    def key_reads_prepared(self, start_offset: int = 0) -> bool:
        """Whether a key read from ``start_offset`` finds every key index loaded (else
        ``prepare_key_reads`` first, off the event loop)."""
        segments = self._segments_from(max(start_offset, self.log_start_offset))
        return self.keys.prepared(segments)

    def write_key_indexes(self) -> int:
        """Write the key index of segments rolled since the last call, if the log is read by
        key (maintenance, off the event loop); returns how many were written."""
        self.health.check()
        return self._guard(self.keys.write_pending)

    def _segments_from(self, offset: int) -> list[LogSegment]:
        with self._lock:  # the cleaner and retention change the list from worker threads
            segments = self._segment_list.segments
            return list(segments[self._segment_index_for(offset) :])

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose record timestamp is >= ``timestamp``.

        Special values: -2/-4 earliest, -1 latest (the LEO; the caller caps it at the high
        watermark), -3 the record with the largest timestamp (KIP-734).
        """
        self.health.check()
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return TimestampAndOffset(-1, self.log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, self.log_end_offset)
        if timestamp == MAX_TIMESTAMP:
            return self._guard(self._segment_list.max_timestamp_offset)
        log_start_offset = self.log_start_offset
        return self._guard(
            lambda: self._segment_list.search_timestamp(timestamp, log_start_offset)
        )

    # -- flushing -----------------------------------------------------------------------------

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync every segment holding offsets below ``up_to_offset`` (default: the LEO)."""
        self.health.check()
        # Never past the LEO: a truncation since the caller chose ``up_to_offset`` took those
        # offsets away (what was appended in their place is synced by this flush).
        target = self.log_end_offset if up_to_offset is None else min(up_to_offset,
                                                                       self.log_end_offset)
        if target <= self.recovery_point:
            return
        recovery_point, truncations = self.recovery_point, self._truncations
        first = self._segment_index_for(recovery_point)
        segments = [s for s in self._segment_list.segments[first:] if s.base_offset < target]

        def flush_segments() -> None:
            for segment in segments:
                segment.flush()
            # A segment created since the last flush is durable only with its directory entry
            # (Kafka's LocalLog.flush does the same).
            if any(segment.base_offset >= recovery_point for segment in segments):
                fsync_directory(self.directory)

        self._guard(flush_segments)
        with self._lock:
            if self._truncations == truncations:
                self.recovery_point = max(self.recovery_point, target)
        self.last_flush_ms = self.clock.monotonic_ms()

    def flush_is_due(self) -> bool:
        """``flush.ms`` elapsed with unflushed data (the log manager's periodic check)."""
        elapsed = self.clock.monotonic_ms() - self.last_flush_ms
        return self.unflushed_messages > 0 and elapsed >= self.config.flush_ms

    # -- truncation and deletion --------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and above ``offset`` (a batch boundary); True if anything went."""
        self.health.check()
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            # Nothing to cut, but an epoch a leader assigned at its log end and never wrote a
            # batch of goes (Kafka's truncateTo): else a follower keeps sending it as its last
            # fetched epoch and the leader answers the same diverging epoch for ever.
            self._guard(lambda: self.leader_epoch_cache.truncate_from_end(self.log_end_offset))
            return False
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self._guard(lambda: self._truncate_segments(offset))
        self._guard(lambda: self.leader_epoch_cache.truncate_from_end(self.log_end_offset))
        logger.warning("truncated %s to offset %d", self.directory.name, self.log_end_offset)
        # Snapshots above the new end go; the state is reloaded and replayed up to it. A log no
        # producer uses has nothing to replay (Kafka's isEmptyBeforeTruncation).
        self._rebuild_producer_state(replay=len(self.producer_state) > 0)
        return True

    def _truncate_segments(self, offset: int) -> None:
        with self._lock, self.keys.lock:
            self.keys.invalidate()
            index = self._segment_index_for(offset)
            self._remove_segments(self._segment_list.segments[index + 1 :])
            segment = self.active_segment
            segment.truncate_to(offset)
            segment.resize_indexes(self.config.segment_index_bytes)
            self.log_end_offset = segment.next_offset()
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self._truncations += 1

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Drop every segment and restart the log, empty, at ``new_offset``."""

        def restart() -> None:
            with self._lock, self.keys.lock:
                self.keys.invalidate()
                self._remove_segments(list(self._segment_list.segments))
                self._segment_list.add(self._new_segment(new_offset))
            self.producers.reset(new_offset)
            self.leader_epoch_cache.clear()

        self._guard(restart)
        with self._lock:
            self.log_start_offset = self.log_end_offset = self.recovery_point = new_offset
            self._truncations += 1
        logger.warning("truncated %s fully; it restarts at offset %d", self.directory.name, new_offset)

    def _remove_segments(self, segments: list[LogSegment]) -> None:
        """Take segments out of the log now; their files go after ``file.delete.delay.ms``."""
        due = self.clock.monotonic_ms() + self.config.file_delete_delay_ms
        self._segment_list.remove(segments, due)

    def purge_deleted_segments(self, *, force: bool = False) -> int:
        """Unlink removed segments whose delay has passed (all of them with ``force``)."""
        due = self._segment_list.purge_due(self.clock.monotonic_ms(), force=force)
        for segment in due:
            self._guard(segment.delete_files)
        return len(due)

    def increment_log_start_offset(self, new_offset: int) -> bool:
        """DeleteRecords: raise the log start offset (segments below it go at next retention)."""
        self.health.check()
        if new_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records up to {new_offset}: log end offset is {self.log_end_offset}"
            )
        if new_offset <= self.log_start_offset:
            return False
        self.log_start_offset = new_offset
        self._guard(lambda: self.leader_epoch_cache.truncate_from_start(new_offset))
        return True

    def delete_old_segments(self, *, high_watermark: int | None = None) -> int:
        """Retention: drop segments past the log start offset, retention.ms and retention.bytes.

        Never the active segment, never a segment holding offsets at or above the high watermark.
        """
        self.health.check()
        upper = self.log_end_offset if high_watermark is None else high_watermark
        deletable = deletable_segments(
            self._segment_list.segments, self.config, log_start_offset=self.log_start_offset,
            upper_offset=upper, now_ms=self.clock.milliseconds(),
        )
        if not deletable:
            return 0
        self._guard(lambda: self._remove_segments(deletable))
        self.log_start_offset = max(self.log_start_offset, self._segment_list.segments[0].base_offset)
        log_start_offset = self.log_start_offset
        self._guard(lambda: self.leader_epoch_cache.truncate_from_start(log_start_offset))
        for segment in deletable:
            logger.info("retention removed %s", segment.log_path)
        # Snapshot files only: the producer state in memory is kept (Kafka, since KIP-360).
        bases = [segment.base_offset for segment in deletable]
        self._guard(lambda: self.producers.delete_snapshots(bases))
        return len(deletable)

    def replace_segments(self, new_segment: LogSegment, old_segments: list[LogSegment]) -> None:
        """The cleaner's swap: ``new_segment`` (suffix ``.swap``) replaces ``old_segments``.

        Order (see ``storage.recovery``): old segments renamed ``.deleted`` first, then the new
        segment's indexes and finally its ``.log`` take their regular names.
        """

        def swap() -> None:
            with self._lock:
                self._remove_segments(old_segments)
                new_segment.change_file_suffix("")
                self._segment_list.insert(new_segment)

        self._guard(swap)

    def close(self) -> None:
        """Clean close: flush, final time-index entry, indexes trimmed, deleted files unlinked."""

        def close_all() -> None:
            self.producers.take_snapshot(self.log_end_offset)
            self.flush()
            self.active_segment.on_become_inactive()
            for segment in self._segment_list.segments:
                segment.close()

        self._guard(close_all)
        self.purge_deleted_segments(force=True)
