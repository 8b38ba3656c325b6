"""``__cluster_metadata-0``: the metadata log, a Samsa ``Log`` of KRaft-framed records, and its
snapshots.

Layout on disk: ``<first log dir>/__cluster_metadata-0/``, ordinary segments plus snapshot
files (``replication.metadata.snapshot``: ``<end offset>-<epoch>.checkpoint``). Each batch is a
RecordBatch v2 whose records have a null key and a value framed by
``replication.metadata.records`` (frame version 1, record type, version, record). One batch
holds the records of one operation, so an operation is applied whole or not at all, and every
batch boundary is a valid snapshot point.

Listeners: after a batch is applied, each listener gets its ``MetadataDelta``
(``replication.metadata.delta``) and the image; replay at start-up publishes nothing (the
replica manager reads the whole image then).

Durability: ``append`` fsyncs before it returns, as the KRaft controller commits a batch only
once it is flushed; an operation is visible in the image only after that.

Start-up (``replay``, Kafka's ``KafkaMetadataLog`` recovery + ``MetadataLoader``): leftover
``.checkpoint.part`` / ``.checkpoint.deleted`` files and snapshots below the log start offset are
deleted; the newest snapshot that reads back whole (``read_snapshot``) is loaded and the log is
replayed from its end offset. A damaged snapshot is logged with its path and reason and the next
older one is tried (Kafka would stop here); with none left, the log is replayed from offset 0 if
it still starts there, else start-up fails (``MetadataLogError``), never giving a wrong image.

Snapshots (Kafka's ``SnapshotGenerator``): one is due when ``max_record_bytes_between_snapshots``
bytes of batches were applied since the last one, or ``max_snapshot_interval_ms`` passed with
new records. ``append`` calls ``on_snapshot_due`` (set by the broker's scheduler) when one is due;
``prepare_snapshot`` (owner's thread) takes a copy of the image and resets the counters;
``write_snapshot`` (any thread) writes the file, then ``maybe_clean`` applies
``metadata.max.retention.bytes`` / ``.ms`` as Kafka's ``KafkaMetadataLog.maybeClean``: while the
log plus snapshots are too big (or the oldest snapshot too old) and a newer snapshot exists, the
oldest snapshot goes, the log start offset moves to the next snapshot's end offset and segments
wholly below it are removed. The latest snapshot always stays.

Threads: the image, ``append`` and the snapshot counters belong to the broker's event loop;
snapshot writing and cleaning run on the broker's storage worker and share only the snapshot
table (``_lock``) and the ``Log`` (whose segment list has its own lock). On a single node this
class writes the log directly, called only by the controller (``replication.controller.local``);
the Raft work will put the quorum's replication behind the same ``Controller`` interface.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from protocol.codec import Message
from protocol.records import Record, decode_batch, encode_batch
from replication.metadata.delta import MetadataDelta
from replication.metadata.image import MetadataImage
from replication.metadata.image_records import copy_image, image_records
from replication.metadata.records import decode_metadata_record, encode_metadata_record
from replication.metadata.snapshot import (
    Snapshot,
    SnapshotError,
    SnapshotId,
    encode_snapshot,
    parse_snapshot_path,
    read_snapshot,
    read_snapshot_timestamp,
    snapshot_file_name,
    write_snapshot,
)
from storage.clock import Clock
from storage.config import LogConfig
from storage.log import Log

__all__ = [
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "MetadataLog",
    "MetadataLogConfig",
    "MetadataLogError",
    "PendingSnapshot",
]

logger = logging.getLogger("samsa.replication.metadata")

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0


class MetadataLogError(Exception):
    """The metadata log cannot be loaded into a correct image (start-up stops)."""


@dataclass(frozen=True, slots=True)
class MetadataLogConfig:
    """Kafka's ``MetadataLogConfig`` / ``KRaftConfigs`` values (defaults are Kafka's)."""

    max_record_bytes_between_snapshots: int = 20 * 1024 * 1024
    max_snapshot_interval_ms: int = 3_600_000  # 0: no time-based snapshots
    retention_max_bytes: int = 100 * 1024 * 1024  # < 0: no size limit
    retention_ms: int = 7 * 24 * 3600 * 1000  # < 0: no time limit
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000

    def log_config(self) -> LogConfig:
        """The metadata log's segments: Kafka disables retention.ms/.bytes on it."""
        return LogConfig(retention_ms=-1, retention_bytes=-1, segment_bytes=self.segment_bytes,
                         segment_ms=self.segment_ms)


@dataclass(frozen=True, slots=True)
class PendingSnapshot:
    """What a worker needs to write a snapshot: its id and a private copy of the image."""

    snapshot_id: SnapshotId
    image: MetadataImage
    last_contained_log_timestamp: int


@dataclass(frozen=True, slots=True)
class _SnapshotInfo:
    size_in_bytes: int
    last_contained_log_timestamp: int


class MetadataLog:
    def __init__(
        self,
        log: Log,
        *,
        clock: Clock,
        leader_epoch: int = 0,
        config: MetadataLogConfig | None = None,
    ) -> None:
        self.log = log
        self.clock = clock
        self.leader_epoch = leader_epoch
        self.config = config or MetadataLogConfig()
        self.image = MetadataImage()
        self.on_snapshot_due: Callable[[], None] | None = None
        # Called with each appended batch's delta once it is applied (the replica manager).
        self.listeners: list[Callable[[MetadataDelta, MetadataImage], None]] = []
        self._end_offset = 0  # one past the last batch applied to the image
        self._last_epoch = leader_epoch  # leader epoch of that batch
        self._last_timestamp = -1  # its max timestamp (a snapshot's last contained timestamp)
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = clock.monotonic_ms()
        self._lock = threading.Lock()  # guards _snapshots (loop, storage worker)
        self._snapshots: dict[SnapshotId, _SnapshotInfo] = {}

    @property
    def directory(self) -> Path:
        return self.log.directory

    @property
    def snapshot_ids(self) -> list[SnapshotId]:
        with self._lock:
            return sorted(self._snapshots)

    # -- start-up -----------------------------------------------------------------------------

    def replay(self) -> MetadataImage:
        """Rebuild the image: the newest good snapshot, then the log from its end offset."""
        self._remove_leftovers()
        snapshot = self._load_newest_snapshot()
        image = MetadataImage()
        if snapshot is not None:
            for record in snapshot.records:
                image.apply(record)
            image.last_offset = snapshot.snapshot_id.end_offset - 1
            self._end_offset = snapshot.snapshot_id.end_offset
            self._last_epoch = snapshot.snapshot_id.epoch
            self._last_timestamp = snapshot.last_contained_log_timestamp
            if self.log.log_end_offset < self._end_offset:  # Kafka's truncateToLatestSnapshot
                self.log.truncate_fully_and_start_at(self._end_offset)
        elif self.log.log_start_offset > 0:
            raise MetadataLogError(
                f"{self.directory}: the metadata log starts at offset {self.log.log_start_offset} "
                "but no usable snapshot covers the offsets below it; cannot rebuild the image")
        count = self._replay_log(image)
        self.image = image
        logger.info(
            "loaded metadata: %s, then %d records from the log: %d topics",
            "no snapshot" if snapshot is None else snapshot_file_name(snapshot.snapshot_id),
            count, len(image.topics_by_name))
        return image

    def _replay_log(self, image: MetadataImage) -> int:
        count = 0
        for segment, position, header in list(self.log.batches(self._end_offset)):
            batch = decode_batch(segment.read_batch_bytes(position, header))
            for record in batch.records:
                if record.value is None or record.offset < self._end_offset:
                    continue
                message, _ = decode_metadata_record(record.value)
                image.apply(message, record.offset)
                count += 1
            self._end_offset = header.next_offset
            self._last_epoch = max(header.partition_leader_epoch, 0)
            self._last_timestamp = header.max_timestamp
            self._bytes_since_snapshot += header.size_in_bytes
        return count

    def _remove_leftovers(self) -> None:
        """Kafka's ``recoverSnapshots``: partial, deleted and below-log-start snapshots go."""
        for path in sorted(self.directory.iterdir()):
            parsed = parse_snapshot_path(path)
            if parsed is None:
                continue
            if parsed.partial or parsed.deleted or (
                    parsed.snapshot_id.end_offset < self.log.log_start_offset):
                path.unlink(missing_ok=True)
                logger.info("deleted unneeded snapshot file %s", path)

    def _load_newest_snapshot(self) -> Snapshot | None:
        """Read the snapshots newest first; the first good one is loaded, the damaged logged."""
        paths = [parsed for path in self.directory.iterdir()
                 if (parsed := parse_snapshot_path(path)) is not None
                 and not (parsed.partial or parsed.deleted)]
        loaded: Snapshot | None = None
        for parsed in sorted(paths, key=lambda p: p.snapshot_id, reverse=True):
            if loaded is not None:
                self._register(parsed.snapshot_id, parsed.path)
                continue
            try:
                loaded = read_snapshot(parsed.path)
            except SnapshotError as error:
                logger.error("cannot use metadata snapshot %s: %s; trying an older one",
                             error.path, error.reason)
                continue
            with self._lock:
                self._snapshots[parsed.snapshot_id] = _SnapshotInfo(
                    loaded.size_in_bytes, loaded.last_contained_log_timestamp)
        return loaded

    def _register(self, snapshot_id: SnapshotId, path: Path) -> None:
        """An older snapshot, kept for retention: its size and header timestamp only."""
        try:
            timestamp = read_snapshot_timestamp(path)
            size = path.stat().st_size
        except (SnapshotError, OSError) as error:
            logger.error("metadata snapshot %s is damaged (%s); not used", path, error)
            return
        with self._lock:
            self._snapshots[snapshot_id] = _SnapshotInfo(size, timestamp)

    # -- appending ----------------------------------------------------------------------------

    def append(self, messages: Sequence[Message]) -> int:
        """Write ``messages`` as one batch, fsync, then apply them; returns the last offset."""
        now = self.clock.milliseconds()
        records = [
            Record(offset=index, timestamp=now, key=None, value=encode_metadata_record(message))
            for index, message in enumerate(messages)
        ]
        batch = encode_batch(records)
        result = self.log.append_as_leader(batch, leader_epoch=self.leader_epoch)
        self.log.flush()
        delta = MetadataDelta()
        for offset, message in enumerate(messages, start=result.first_offset):
            delta.observe(self.image, message)
            self.image.apply(message, offset)
        self._end_offset = result.last_offset + 1
        self._last_epoch = self.leader_epoch
        self._last_timestamp = now
        self._bytes_since_snapshot += len(batch)
        if self.on_snapshot_due is not None and self.snapshot_due() is not None:
            try:  # the batch is committed: a failure to start a snapshot must not fail it
                self.on_snapshot_due()
            except Exception:
                logger.exception("could not start a metadata snapshot")
        self._publish(delta)
        return result.last_offset

    def _publish(self, delta: MetadataDelta) -> None:
        """Hand the committed batch's delta to each listener (Kafka's ``MetadataPublisher``)."""
        for listener in self.listeners:
            try:  # the batch is committed: a listener's failure must not fail it
                listener(delta, self.image)
            except Exception:
                logger.exception("applying a metadata delta failed in %r", listener)

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot_due(self) -> str | None:
        """Why a snapshot is due now (Kafka's ``SnapshotGenerator.publishLogDelta``), or None."""
        if self._bytes_since_snapshot <= 0:
            return None
        if self._bytes_since_snapshot >= self.config.max_record_bytes_between_snapshots:
            return (f"at least {self.config.max_record_bytes_between_snapshots} bytes were "
                    "appended since the last snapshot")
        interval = self.config.max_snapshot_interval_ms
        if interval > 0 and self.clock.monotonic_ms() - self._last_snapshot_ms >= interval:
            return f"at least {interval} ms passed since the last snapshot"
        return None

    def prepare_snapshot(self) -> PendingSnapshot | None:
        """On the owner's thread: the next snapshot to write (None: nothing new to cover)."""
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = self.clock.monotonic_ms()
        snapshot_id = SnapshotId(self._end_offset, self._last_epoch)
        with self._lock:
            known = snapshot_id in self._snapshots
        if self._end_offset == 0 or known:
            return None
        return PendingSnapshot(snapshot_id, copy_image(self.image), self._last_timestamp)

    def write_snapshot(self, pending: PendingSnapshot) -> Path:
        """On any thread: write the snapshot file, then apply the retention rules."""
        values = (encode_metadata_record(record) for record in image_records(pending.image))
        batches = encode_snapshot(
            values, pending.snapshot_id, timestamp_ms=self.clock.milliseconds(),
            last_contained_log_timestamp=pending.last_contained_log_timestamp)
        path = write_snapshot(self.directory, pending.snapshot_id, batches)
        with self._lock:
            self._snapshots[pending.snapshot_id] = _SnapshotInfo(
                path.stat().st_size, pending.last_contained_log_timestamp)
        logger.info("wrote metadata snapshot %s", path)
        self.maybe_clean()
        return path

    def take_snapshot(self) -> Path | None:
        """Prepare and write a snapshot at once (tests, tools)."""
        pending = self.prepare_snapshot()
        return None if pending is None else self.write_snapshot(pending)

    # -- retention ----------------------------------------------------------------------------

    def maybe_clean(self) -> bool:
        """Kafka's ``KafkaMetadataLog.maybeClean``: size rule, then time rule."""
        with self._lock, self.log.maintenance_lock:
            cleaned = self._clean_by_size()
            return self._clean_by_time() or cleaned

    def _clean_by_size(self) -> bool:
        limit = self.config.retention_max_bytes
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

    def _clean_by_time(self) -> bool:
        limit = self.config.retention_ms
        if limit < 0:
            return False
        now = self.clock.milliseconds()
        cleaned = False
        for oldest, following in self._pairs():
            if now - self._snapshots[oldest].last_contained_log_timestamp <= limit:
                break
            if not self._delete_before(following, f"it is older than "
                                                  f"metadata.max.retention.ms={limit}"):
                break
            cleaned = True
        return cleaned

    def _pairs(self) -> list[tuple[SnapshotId, SnapshotId]]:
        ids = sorted(self._snapshots)
        return list(itertools.pairwise(ids))

    def _delete_before(self, snapshot_id: SnapshotId, reason: str) -> bool:
        """Kafka's ``deleteBeforeSnapshot``: move the log start offset to ``snapshot_id``,
        remove the segments wholly below it and the snapshots older than it."""
        end_offset = snapshot_id.end_offset
        if not self.log.log_start_offset < end_offset <= self.log.log_end_offset:
            return False
        self.log.increment_log_start_offset(end_offset)
        self.log.delete_old_segments()
        for old in [old for old in self._snapshots if old < snapshot_id]:
            del self._snapshots[old]
            (self.directory / snapshot_file_name(old)).unlink(missing_ok=True)
            logger.info("deleted metadata snapshot %s because %s; log start offset now %d",
                        snapshot_file_name(old), reason, end_offset)
        return True
