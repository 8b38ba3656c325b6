"""``FileRaftLog``: the ``RaftLog`` (``replication.raft.log``) of ``__cluster_metadata-0`` on disk
(Kafka's ``KafkaMetadataLog``).

Layout: the partition directory of an ordinary ``storage.log.Log`` (segments, indexes,
``leader-epoch-checkpoint``) plus KRaft snapshot files ``<end offset>-<epoch>.checkpoint``
(``replication.metadata.snapshot``: written as ``.checkpoint.part``, fsynced, renamed).

Invariants (the contract's rules are in ``replication.raft.log``):
- ``start_offset <= high_watermark <= end_offset``; ``flushed_end_offset`` is the ``Log``'s
  recovery point, below which everything is fsynced, so it survives a crash; above it a crash
  leaves a prefix (the ``Log``'s recovery cuts at the first bad batch; a gap between segments,
  left when a crash emptied a segment after the next one was created, is cut off at open:
  a Raft log is dense, where a compacted ``Log`` may have such gaps);
- the leader appends with the storage leader path (offsets assigned, the epoch stamped, the
  epoch cache assigned before the bytes are written); a follower appends the leader's bytes
  through the storage follower path (CRC checked, offsets and epochs kept) after
  ``follower_batches`` checked them (contiguous from the end offset, epochs in range);
- the snapshot table holds every whole ``.checkpoint`` file whose header reads back, oldest
  first; the log start offset is at or below the latest snapshot's end offset once one exists.

Opening (Kafka's ``KafkaMetadataLog.apply`` / ``recoverSnapshots``): ``.checkpoint.part`` and
``.checkpoint.deleted`` leftovers and snapshots below the log start offset are deleted; a snapshot
whose header cannot be read is logged and left out. ``truncate_to_latest_snapshot`` (Kafka's
``truncateToLatestSnapshot``) is left to the caller, which first drops snapshots it cannot use
(``forget_snapshot``).

Retention (Kafka's ``maybeClean``, ``metadata.max.retention.bytes`` / ``.ms``): while the log plus
snapshots are too big (or the oldest snapshot too old) and a newer snapshot exists, the oldest
snapshot goes, the log start offset moves to the next snapshot's end offset and the segments
wholly below it are removed. The latest snapshot always stays.

Threads: the Raft core (or, on one node, the controller) owns appends, reads, truncation and the
high watermark. Snapshot creation and cleaning may run on a storage worker: the snapshot table is
guarded by ``_lock``; the ``Log`` guards its own segment list.
"""

from __future__ import annotations

import itertools
import logging
import os
import struct
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import OffsetOutOfRangeError, SnapshotNotFoundError
from protocol.records import Record, RecordBatch, decode_batch, encode_batch
from replication.metadata.snapshot import (
    SnapshotError,
    SnapshotId,
    parse_snapshot_path,
    read_snapshot_timestamp,
    snapshot_file_name,
    write_snapshot,
)
from replication.raft.errors import RaftLogError
from replication.raft.log import (
    OffsetAndEpoch,
    OffsetRange,
    follower_batches,
    validate_offset_and_epoch,
)
from storage.clock import Clock
from storage.config import LogConfig
from storage.leader_epoch import UNDEFINED_EPOCH_OFFSET
from storage.log import Log
from storage.producer_state import AppendOrigin

__all__ = ["FileRaftLog", "SnapshotInfo"]

logger = logging.getLogger("samsa.replication.raft.file_log")

_CONTROL_KEY = struct.Struct(">hh")  # Kafka's ControlRecordType key: version 0, type


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    size_in_bytes: int
    last_contained_log_timestamp: int


class FileRaftLog:
    def __init__(self, log: Log) -> None:
        """Over an opened ``log``; use ``open`` to load the snapshot files as well."""
        self.log = log
        _cut_segment_gap(log)
        self._high_watermark = log.log_start_offset
        self._lock = threading.Lock()  # guards _snapshots (owner, storage worker)
        self._snapshots: dict[SnapshotId, SnapshotInfo] = {}

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, clock: Clock) -> FileRaftLog:
        """Open (or create) the log in ``directory`` and load its snapshots."""
        raft_log = cls(Log.open(directory, config, clock=clock))
        raft_log.load_snapshots()
        return raft_log

    @property
    def directory(self) -> Path:
        return self.log.directory

    # -- offsets --------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def flushed_end_offset(self) -> int:
        return self.log.recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> None:
        """Never backwards, never past the end offset (``RaftLogError``)."""
        if not self._high_watermark <= offset <= self.end_offset:
            raise RaftLogError(f"high watermark {offset} outside [high watermark "
                               f"{self._high_watermark}, end offset {self.end_offset}]")
        self._high_watermark = offset

    @property
    def last_fetched_epoch(self) -> int:
        """The latest epoch in the log; the latest snapshot's when the log is empty; else 0."""
        latest = self.log.leader_epoch_cache.latest_epoch
        if latest is not None:
            return latest
        snapshot_id = self.latest_snapshot_id()
        return 0 if snapshot_id is None else snapshot_id.epoch

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's ``KafkaMetadataLog.endOffsetForEpoch``: the epoch cache's answer; an epoch
        below every one in the log answers with the oldest snapshot (at the log start)."""
        found_epoch, found_offset = self.log.leader_epoch_cache.end_offset_for(epoch, self.end_offset)
        if found_offset == UNDEFINED_EPOCH_OFFSET:
            return OffsetAndEpoch(self.end_offset, self.last_fetched_epoch)
        earliest = self.earliest_snapshot_id()
        if earliest is not None and found_offset == earliest.end_offset and found_epoch == epoch:
            return OffsetAndEpoch(earliest.end_offset, earliest.epoch)
        return OffsetAndEpoch(found_offset, found_epoch)

    # -- appending ------------------------------------------------------------------------------

    def append_as_leader(self, records: Sequence[bytes], epoch: int, timestamp_ms: int) -> OffsetRange:
        """One batch of ``records`` (values, null keys) at the end offset, stamped ``epoch``."""
        if not records:
            raise RaftLogError("cannot append an empty batch")
        batch = encode_batch(
            [Record(offset=index, timestamp=timestamp_ms, key=None, value=value)
             for index, value in enumerate(records)],
            base_offset=0, partition_leader_epoch=epoch,
        )
        return self._append_leader_batch(batch, epoch)

    def append_control_as_leader(
        self, record_type: int, value: bytes, epoch: int, timestamp_ms: int
    ) -> OffsetRange:
        """One control batch holding one record of ``record_type`` (e.g. LeaderChangeMessage)."""
        record = Record(offset=0, timestamp=timestamp_ms, key=_CONTROL_KEY.pack(0, record_type),
                        value=value)
        batch = encode_batch([record], base_offset=0, partition_leader_epoch=epoch, is_control=True)
        return self._append_leader_batch(batch, epoch)

    def _append_leader_batch(self, batch: bytes, epoch: int) -> OffsetRange:
        if epoch < self.last_fetched_epoch:
            raise RaftLogError(f"leader append in epoch {epoch}, below the log's epoch "
                               f"{self.last_fetched_epoch}")
        # REPLICATION rules (Kafka's RAFT_LEADER origin): no client checks, control batches allowed.
        result = self.log.append_as_leader(batch, leader_epoch=epoch, origin=AppendOrigin.REPLICATION)
        return OffsetRange(result.first_offset, result.last_offset)

    def append_as_follower(self, batches: bytes, epoch: int) -> OffsetRange | None:
        """The leader's batches as they are; a partial batch at the end (a Fetch cut by its
        byte limit) is left out. None when no whole batch is given."""
        data, headers = follower_batches(batches, epoch, self.end_offset, self.last_fetched_epoch)
        if not headers:
            return None
        result = self.log.append_as_follower(data)
        return OffsetRange(result.first_offset, result.last_offset)

    def flush(self) -> None:
        self.log.flush()

    def truncate_to(self, offset: int) -> None:
        """Drop offsets at and above ``offset``; never committed ones (below the HW)."""
        if offset < self._high_watermark:
            raise RaftLogError(f"cannot truncate to offset {offset}, below the high watermark "
                               f"{self._high_watermark}")
        self.log.truncate_to(offset)

    # -- reading --------------------------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``start_offset``, at least one, up to ``max_bytes``."""
        fetched = self.log.read(start_offset, max_bytes)
        return b"" if fetched is None else fetched.read()

    def batches_from(self, offset: int) -> Iterator[tuple[int, int, list[bytes | None], bool]]:
        """Committed batches (below the high watermark) from the one holding ``offset``."""
        for batch in self.committed_batches(offset):
            values = [record.value for record in batch.records]
            yield batch.base_offset, batch.header.partition_leader_epoch, values, batch.is_control

    def committed_batches(self, offset: int) -> Iterator[RecordBatch]:
        """``batches_from`` with each whole decoded batch (its header: size, max timestamp)."""
        if not self.start_offset <= offset <= self.end_offset:
            raise OffsetOutOfRangeError(f"offset {offset} is outside [{self.start_offset}, "
                                        f"{self.end_offset}] of {self.directory.name}")
        for segment, position, header in self.log.batches(offset):
            if header.last_offset >= self._high_watermark:
                return
            yield decode_batch(segment.read_batch_bytes(position, header))

    # -- snapshots ------------------------------------------------------------------------------

    def load_snapshots(self) -> None:
        """Kafka's ``recoverSnapshots``: leftovers and snapshots below the log start go; the
        others are registered (one with an unreadable header is logged and left out)."""
        for path in sorted(self.directory.iterdir()):
            parsed = parse_snapshot_path(path)
            if parsed is None:
                continue
            if parsed.partial or parsed.deleted or parsed.snapshot_id.end_offset < self.start_offset:
                path.unlink(missing_ok=True)
                logger.info("deleted unneeded snapshot file %s", path)
                continue
            try:
                info = SnapshotInfo(path.stat().st_size, read_snapshot_timestamp(path))
            except (SnapshotError, OSError) as error:
                logger.error("snapshot %s is damaged (%s); not used", path, error)
                continue
            with self._lock:
                self._snapshots[parsed.snapshot_id] = info

    def snapshot_ids(self) -> list[SnapshotId]:
        with self._lock:
            return sorted(self._snapshots)

    def snapshot_path(self, snapshot_id: SnapshotId) -> Path:
        return self.directory / snapshot_file_name(snapshot_id)

    def forget_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Leave a snapshot out of the table (its file found unusable); the file stays."""
        with self._lock:
            self._snapshots.pop(snapshot_id, None)

    def latest_snapshot_id(self) -> SnapshotId | None:
        with self._lock:
            return max(self._snapshots, default=None)

    def earliest_snapshot_id(self) -> SnapshotId | None:
        with self._lock:
            return min(self._snapshots, default=None)

    def create_snapshot(self, snapshot_id: SnapshotId, payload: bytes | Iterable[bytes]) -> bool:
        """Write the snapshot file (any thread) from its bytes or its batches, streamed; the
        contract's rules (False: below the log start or already there). True if written."""
        end = snapshot_id.end_offset
        with self._lock:
            known = snapshot_id in self._snapshots
        if known or end < self.start_offset:
            return False
        if end > self._high_watermark:
            raise RaftLogError(f"snapshot {snapshot_id} is above the high watermark "
                               f"{self._high_watermark}")
        kind, _ = validate_offset_and_epoch(self, end, snapshot_id.epoch)
        if kind != "valid":
            raise RaftLogError(f"snapshot {snapshot_id} is not valid for the log ({kind})")
        if not self._is_batch_boundary(end):
            raise RaftLogError(f"snapshot {snapshot_id} ends inside a batch")
        self._store_snapshot(snapshot_id, payload)
        return True

    def _is_batch_boundary(self, offset: int) -> bool:
        for _, _, header in self.log.batches(offset):
            return header.base_offset == offset or header.last_offset < offset
        return True

    def _store_snapshot(self, snapshot_id: SnapshotId, payload: bytes | Iterable[bytes]) -> Path:
        chunks = [payload] if isinstance(payload, bytes) else payload
        path = write_snapshot(self.directory, snapshot_id, chunks)
        try:
            timestamp = read_snapshot_timestamp(path)
        except SnapshotError:
            timestamp = -1  # not a metadata snapshot: kept, and oldest for time retention
        with self._lock:
            self._snapshots[snapshot_id] = SnapshotInfo(path.stat().st_size, timestamp)
        logger.info("wrote snapshot %s", path)
        return path

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int]:
        """Up to ``max_bytes`` of the snapshot file from ``position``, and the file's size."""
        with self._lock:
            if snapshot_id not in self._snapshots:
                raise SnapshotNotFoundError(f"no snapshot {snapshot_id} in {self.directory}")
        with open(self.snapshot_path(snapshot_id), "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if not 0 <= position <= size:
                raise RaftLogError(f"position {position} outside snapshot {snapshot_id} of "
                                   f"{size} bytes")
            return os.pread(file.fileno(), max(0, min(max_bytes, size - position)), position), size

    def install_snapshot(self, snapshot_id: SnapshotId, payload: bytes) -> None:
        """A follower's snapshot from the leader: stored, then the log restarts, empty, at its
        end offset, and older snapshots go (Kafka's ``truncateToLatestSnapshot``)."""
        self._store_snapshot(snapshot_id, payload)
        self.log.truncate_fully_and_start_at(snapshot_id.end_offset)
        self._high_watermark = snapshot_id.end_offset
        self._remove_snapshots_before(snapshot_id, "a newer snapshot was installed")

    def truncate_to_latest_snapshot(self) -> bool:
        """At start-up: the latest snapshot is ahead of the log (newer epoch, or same epoch and
        past its end) -> the log restarts at its end offset. True if it did."""
        snapshot_id = self.latest_snapshot_id()
        latest_epoch = self.log.leader_epoch_cache.latest_epoch or 0
        if snapshot_id is None or not (
            snapshot_id.epoch > latest_epoch
            or (snapshot_id.epoch == latest_epoch and snapshot_id.end_offset > self.end_offset)
        ):
            return False
        self.log.truncate_fully_and_start_at(snapshot_id.end_offset)
        self._high_watermark = self.start_offset  # the log is empty: start = end
        self._remove_snapshots_before(snapshot_id, "the log was truncated to the latest snapshot")
        return True

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        """Kafka's ``deleteBeforeSnapshot``: the log start offset moves to the snapshot's end,
        segments wholly below it and older snapshots go; True if it moved. Nothing happens
        unless the snapshot is known and its end offset is above the start offset;
        ``RaftLogError`` above the high watermark."""
        if snapshot_id.end_offset > self._high_watermark:
            with self._lock:
                known = snapshot_id in self._snapshots
            if known and snapshot_id.end_offset > self.start_offset:
                raise RaftLogError(f"log start {snapshot_id.end_offset} would pass the high "
                                   f"watermark {self._high_watermark}")
        with self._lock, self.log.maintenance_lock:
            return self._delete_before(snapshot_id, "the log start offset moved past it")

    def _delete_before(self, snapshot_id: SnapshotId, reason: str) -> bool:
        """With ``_lock`` and the log's maintenance lock held. Never past the high watermark
        (so retention waits until the core has learned it after a restart)."""
        end_offset = snapshot_id.end_offset
        if snapshot_id not in self._snapshots or not (
                self.start_offset < end_offset <= self._high_watermark):
            return False
        self.log.increment_log_start_offset(end_offset)
        self.log.delete_old_segments()
        for old in [old for old in self._snapshots if old < snapshot_id]:
            del self._snapshots[old]
            self.snapshot_path(old).unlink(missing_ok=True)
            logger.info("deleted snapshot %s because %s; log start offset now %d",
                        snapshot_file_name(old), reason, end_offset)
        return True

    def _remove_snapshots_before(self, snapshot_id: SnapshotId, reason: str) -> None:
        with self._lock:
            old = [old for old in self._snapshots if old < snapshot_id]
            for snapshot in old:
                del self._snapshots[snapshot]
        for snapshot in old:
            self.snapshot_path(snapshot).unlink(missing_ok=True)
            logger.info("deleted snapshot %s because %s", snapshot_file_name(snapshot), reason)

    # -- retention ------------------------------------------------------------------------------

    def maybe_clean(self, *, retention_max_bytes: int, retention_ms: int, now_ms: int) -> bool:
        """Kafka's ``maybeClean``: the size rule, then the time rule (< 0: no limit)."""
        with self._lock, self.log.maintenance_lock:
            cleaned = self._clean_by_size(retention_max_bytes)
            return self._clean_by_time(retention_ms, now_ms) or cleaned

    def _clean_by_size(self, limit: int) -> bool:
        if limit < 0:
            return False
        total = sum(info.size_in_bytes for info in self._snapshots.values())
        cleaned = False
        for oldest, following in self._pairs():
            if self.log.size_in_bytes + total <= limit:
                break
            total -= self._snapshots[oldest].size_in_bytes
            if not self._delete_before(following, f"the metadata log and snapshots exceed "
                                                  f"metadata.max.retention.bytes={limit}"):
                break
            cleaned = True
        return cleaned

    def _clean_by_time(self, limit: int, now_ms: int) -> bool:
        if limit < 0:
            return False
        cleaned = False
        for oldest, following in self._pairs():
            if now_ms - self._snapshots[oldest].last_contained_log_timestamp <= limit:
                break
            if not self._delete_before(following, f"it is older than "
                                                  f"metadata.max.retention.ms={limit}"):
                break
            cleaned = True
        return cleaned

    def _pairs(self) -> list[tuple[SnapshotId, SnapshotId]]:
        return list(itertools.pairwise(sorted(self._snapshots)))

    def close(self) -> None:
        self.log.close()


def _cut_segment_gap(log: Log) -> None:
    """Cut the log at the first gap between segments (a crash emptied a segment, or its tail,
    after the next one was created): offsets of a Raft log are dense, so what follows a gap
    cannot be used."""
    segments = log.segments
    for segment, following in itertools.pairwise(segments):
        end = segment.next_offset()
        if end == following.base_offset:
            continue
        logger.warning("%s: segment %d ends at offset %d but the next starts at %d; cutting the "
                       "log there", log.directory.name, segment.base_offset, end,
                       following.base_offset)
        if end >= log.log_start_offset:
            log.truncate_to(end)
        else:
            log.truncate_fully_and_start_at(log.log_start_offset)
        return
