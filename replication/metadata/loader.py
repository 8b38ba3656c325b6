"""``MetadataLoader``: committed metadata batches applied to the image, deltas published, and
snapshots of the image generated (Kafka's ``MetadataLoader`` + ``SnapshotGenerator``).

The files belong to the ``FileRaftLog`` (``replication.raft.file_log``): segments and snapshot
files. The loader only reads what is committed (below the log's high watermark,
``FileRaftLog.committed_batches``) and hands snapshots to the log to write.

Invariants: ``image`` holds exactly the records below ``end_offset`` (one past the last batch
applied), which is never above the high watermark; a batch is applied whole (one batch = one
operation); control batches (LeaderChangeMessage, ...) move ``end_offset`` but change nothing.

Start-up (``replay``, publishes nothing: the replica manager reads the whole image then): the
newest snapshot that reads back whole (``read_snapshot``) is loaded; a damaged one is logged with
its path and reason, left out (``forget_snapshot``) and the next older one tried (Kafka would stop
here); then the log is truncated to the snapshot if it is behind it (Kafka's
``truncateToLatestSnapshot``) and the committed batches after it are applied. With no usable
snapshot the log must still start at offset 0, else start-up fails (``MetadataLogError``), never
giving a wrong image.

Commits (``apply_committed``, the Raft listener's ``on_high_watermark``): each new committed batch
is applied and its ``MetadataDelta`` published to each listener with the image. A batch this node
wrote itself and staged (``apply_appended``, the single-node controller: ``AppendedBatch`` +
``replication.metadata.staging``) is applied from the records it already holds, not read back
and decoded; it must be the next batch (``end_offset`` is its base offset). A snapshot
installed from the leader (``install_snapshot``) replaces the image and publishes it whole.

Snapshots (Kafka's ``SnapshotGenerator``): one is due when ``max_record_bytes_between_snapshots``
bytes of batches were applied since the last one, or ``max_snapshot_interval_ms`` passed with new
records; ``on_snapshot_due`` (set by the broker's scheduler) is then called after a commit.
``prepare_snapshot`` (owner's thread) copies the image and resets the counters;
``write_snapshot`` (any thread) has the log write the file, then applies retention
(``maybe_clean``: ``metadata.max.retention.bytes`` / ``.ms``, see ``FileRaftLog.maybe_clean``).

Threads: the image, the counters and the listeners belong to the owner (the broker's event
loop); ``write_snapshot`` and ``maybe_clean`` may run on a storage worker and touch only the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.records import RecordBatch
from replication.metadata.delta import MetadataDelta
from replication.metadata.image import MetadataImage
from replication.metadata.image_records import copy_image, image_records
from replication.metadata.records import decode_metadata_record, encode_metadata_record
from replication.metadata.snapshot import (
    Snapshot,
    SnapshotError,
    SnapshotId,
    encode_snapshot,
    read_snapshot,
    snapshot_file_name,
)
from replication.metadata.staging import StagedBatch, apply_staged
from replication.raft.file_log import FileRaftLog
from storage.clock import Clock
from storage.config import LogConfig

__all__ = [
    "AppendedBatch",
    "MetadataLoader",
    "MetadataLogConfig",
    "MetadataLogError",
    "PendingSnapshot",
]

logger = logging.getLogger("samsa.replication.metadata")

Listener = Callable[[MetadataDelta, MetadataImage], None]


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
class AppendedBatch:
    """One batch this node appended to the metadata log (what the loader would read back)."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    max_timestamp: int
    size_in_bytes: int


class MetadataLoader:
    def __init__(
        self,
        raft_log: FileRaftLog,
        *,
        clock: Clock,
        config: MetadataLogConfig | None = None,
    ) -> None:
        self.raft_log = raft_log
        self.clock = clock
        self.config = config or MetadataLogConfig()
        self.image = MetadataImage()
        self.on_snapshot_due: Callable[[], None] | None = None
        self.listeners: list[Listener] = []
        self.end_offset = 0  # one past the last batch applied to the image
        self._last_epoch = 0  # leader epoch of that batch
        self._last_timestamp = -1  # its max timestamp (a snapshot's last contained timestamp)
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = clock.monotonic_ms()

    @property
    def directory(self) -> Path:
        return self.raft_log.directory

    # -- start-up -------------------------------------------------------------------------------

    def replay(self) -> MetadataImage:
        """Rebuild the image: the newest good snapshot, then the committed log after it."""
        snapshot = self._load_newest_snapshot()
        image = MetadataImage()
        if snapshot is not None:
            self._reset_to(image, snapshot)
            self.raft_log.truncate_to_latest_snapshot()
        elif self.raft_log.start_offset > 0:
            raise MetadataLogError(
                f"{self.directory}: the metadata log starts at offset {self.raft_log.start_offset} "
                "but no usable snapshot covers the offsets below it; cannot rebuild the image")
        count = 0
        for batch in self.raft_log.committed_batches(self.end_offset):
            count += self._apply_batch(image, batch, None)
        self.image = image
        logger.info(
            "loaded metadata: %s, then %d records from the log: %d topics",
            "no snapshot" if snapshot is None else snapshot_file_name(snapshot.snapshot_id),
            count, len(image.topics_by_name))
        return image

    def _load_newest_snapshot(self) -> Snapshot | None:
        """Newest first; the first that reads back whole is used, the damaged are left out."""
        for snapshot_id in reversed(self.raft_log.snapshot_ids()):
            try:
                return read_snapshot(self.raft_log.snapshot_path(snapshot_id))
            except SnapshotError as error:
                logger.error("cannot use metadata snapshot %s: %s; trying an older one",
                             error.path, error.reason)
                self.raft_log.forget_snapshot(snapshot_id)
        return None

    def _reset_to(self, image: MetadataImage, snapshot: Snapshot) -> None:
        for record in snapshot.records:
            image.apply(record)
        image.last_offset = snapshot.snapshot_id.end_offset - 1
        self.end_offset = snapshot.snapshot_id.end_offset
        self._last_epoch = snapshot.snapshot_id.epoch
        self._last_timestamp = snapshot.last_contained_log_timestamp

    # -- commits --------------------------------------------------------------------------------

    def apply_committed(self) -> int:
        """Apply each batch committed since the last call, publishing its delta; the number of
        batches applied."""
        applied = 0
        for batch in self.raft_log.committed_batches(self.end_offset):
            delta = MetadataDelta()
            self._apply_batch(self.image, batch, delta)
            applied += 1
            self._after_batch(delta)
        return applied

    def apply_appended(self, staged: StagedBatch, appended: AppendedBatch) -> None:
        """Apply the committed batch ``appended``, staged from the records this node wrote."""
        if appended.base_offset != self.end_offset:
            raise MetadataLogError(f"batch at offset {appended.base_offset} applied with the "
                                   f"image at {self.end_offset}")
        apply_staged(self.image, staged, appended.base_offset)
        self.end_offset = appended.last_offset + 1
        self._last_epoch = max(appended.leader_epoch, 0)
        self._last_timestamp = appended.max_timestamp
        self._bytes_since_snapshot += appended.size_in_bytes
        self._after_batch(staged.delta)

    def _after_batch(self, delta: MetadataDelta) -> None:
        """A batch was applied: start a snapshot if one is due, then publish its delta."""
        if self.on_snapshot_due is not None and self.snapshot_due() is not None:
            try:  # the batch is committed: a failure to start a snapshot must not fail it
                self.on_snapshot_due()
            except Exception:
                logger.exception("could not start a metadata snapshot")
        self._publish(delta)

    def _apply_batch(self, image: MetadataImage, batch: RecordBatch, delta: MetadataDelta | None) -> int:
        count = 0
        if not batch.is_control:
            for record in batch.records:
                if record.value is None or record.offset < self.end_offset:
                    continue
                message, _ = decode_metadata_record(record.value)
                if delta is not None:
                    delta.observe(image, message)
                image.apply(message, record.offset)
                count += 1
        self.end_offset = batch.next_offset
        self._last_epoch = max(batch.header.partition_leader_epoch, 0)
        self._last_timestamp = batch.header.max_timestamp
        self._bytes_since_snapshot += batch.size_in_bytes
        return count

    def install_snapshot(self, snapshot_id: SnapshotId) -> None:
        """The Raft listener's ``on_snapshot_installed``: the image becomes the snapshot's and
        is published whole. SnapshotError if the file does not read back."""
        snapshot = read_snapshot(self.raft_log.snapshot_path(snapshot_id))
        image = MetadataImage()
        self._reset_to(image, snapshot)
        delta = _snapshot_delta(self.image, image)
        self.image = image
        self._publish(delta)

    def _publish(self, delta: MetadataDelta) -> None:
        """Hand a committed batch's delta to each listener (Kafka's ``MetadataPublisher``)."""
        for listener in self.listeners:
            try:  # the batch is committed: a listener's failure must not fail it
                listener(delta, self.image)
            except Exception:
                logger.exception("applying a metadata delta failed in %r", listener)

    # -- snapshots ------------------------------------------------------------------------------

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
        snapshot_id = SnapshotId(self.end_offset, self._last_epoch)
        if self.end_offset == 0 or snapshot_id in self.raft_log.snapshot_ids():
            return None
        return PendingSnapshot(snapshot_id, copy_image(self.image), self._last_timestamp)

    def write_snapshot(self, pending: PendingSnapshot) -> Path:
        """On any thread: the log writes the snapshot file, then retention is applied."""
        values = (encode_metadata_record(record) for record in image_records(pending.image))
        batches = encode_snapshot(
            values, pending.snapshot_id, timestamp_ms=self.clock.milliseconds(),
            last_contained_log_timestamp=pending.last_contained_log_timestamp)
        self.raft_log.create_snapshot(pending.snapshot_id, batches)
        path = self.raft_log.snapshot_path(pending.snapshot_id)
        logger.info("wrote metadata snapshot %s", path)
        self.maybe_clean()
        return path

    def take_snapshot(self) -> Path | None:
        """Prepare and write a snapshot at once (tests, tools)."""
        pending = self.prepare_snapshot()
        return None if pending is None else self.write_snapshot(pending)

    def maybe_clean(self) -> bool:
        """Kafka's ``KafkaMetadataLog.maybeClean`` with this loader's retention settings."""
        return self.raft_log.maybe_clean(
            retention_max_bytes=self.config.retention_max_bytes,
            retention_ms=self.config.retention_ms, now_ms=self.clock.milliseconds())


def _snapshot_delta(before: MetadataImage, after: MetadataImage) -> MetadataDelta:
    """What replacing ``before`` by ``after`` changes (Kafka's delta of a loaded snapshot):
    every partition of ``after`` touched with its state in ``before``, topics gone removed, all
    configs changed."""
    delta = MetadataDelta(broker_configs_changed=True)
    for topic in after.topics_by_id.values():
        old = before.topics_by_id.get(topic.topic_id)
        for index in topic.partitions:
            delta.partitions_before[(topic.topic_id, index)] = (
                None if old is None else old.partitions.get(index))
        delta.topic_configs_changed.add(topic.name)
    delta.removed_topics.extend(
        topic for topic_id, topic in before.topics_by_id.items() if topic_id not in after.topics_by_id)
    return delta
