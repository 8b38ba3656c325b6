"""``__cluster_metadata-0`` on one node: the files (``FileRaftLog``) and the image
(``MetadataLoader``) wired together, with the commit rule of a quorum of one.

Layout on disk: ``<first log dir>/__cluster_metadata-0/``, ordinary segments,
``leader-epoch-checkpoint`` and snapshot files (``replication.metadata.snapshot``:
``<end offset>-<epoch>.checkpoint``), all owned by ``replication.raft.file_log.FileRaftLog``. Each
batch is a RecordBatch v2 whose records have a null key and a value framed by
``replication.metadata.records``. One batch holds the records of one operation, so an operation is
applied whole or not at all, and every batch boundary is a valid snapshot point.

Commit rule (a single voter, as the KRaft controller with one node): a batch is written as
leader and fsynced (``write``), then committed (``commit``): the high watermark moves past it and
the loader applies it and publishes its delta. ``append`` does both at once. The two halves let
the single-node controller keep the event loop free (issue 18): ``write`` and the staging of the
batch (``replication.metadata.staging``: encoding, the per-partition work) run on the storage
worker, ``commit`` on the loop applies the staged batch (no read-back, no decoding). Between the
two nothing else may append or apply (the controller has one operation in flight). At start-up
(``replay``) everything in the log is committed: the high watermark is the recovered end offset.
With a quorum the Raft core (``replication.raft``) takes this class's place: it appends, and its
``on_high_watermark`` / ``on_snapshot_installed`` drive the same loader.

Snapshot generation, retention and listeners are the loader's (``replication.metadata.loader``);
this class forwards to it so callers (the scheduler, the replica manager, the controller) keep
one object. Threads: as the loader's and the ``FileRaftLog``'s; ``write`` on one thread at a
time (the storage worker), everything else on the owner's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from protocol.codec import Message
from replication.metadata.delta import MetadataDelta
from replication.metadata.image import MetadataImage
from replication.metadata.loader import (
    AppendedBatch,
    MetadataLoader,
    MetadataLogConfig,
    MetadataLogError,
    PendingSnapshot,
)
from replication.metadata.records import encode_metadata_record
from replication.metadata.snapshot import SnapshotId
from replication.metadata.staging import StagedBatch, stage_batch
from replication.raft.file_log import FileRaftLog
from storage.clock import Clock
from storage.log import Log

__all__ = [
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "AppendedBatch",
    "MetadataLog",
    "MetadataLogConfig",
    "MetadataLogError",
    "PendingSnapshot",
]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0


class MetadataLog:
    def __init__(
        self,
        log: Log,
        *,
        clock: Clock,
        leader_epoch: int = 0,
        config: MetadataLogConfig | None = None,
    ) -> None:
        self.raft_log = FileRaftLog(log)
        self.loader = MetadataLoader(self.raft_log, clock=clock, config=config)
        self.clock = clock
        self.leader_epoch = leader_epoch

    # -- the pieces callers reach ---------------------------------------------------------------

    @property
    def log(self) -> Log:
        return self.raft_log.log

    @property
    def directory(self) -> Path:
        return self.raft_log.directory

    @property
    def config(self) -> MetadataLogConfig:
        return self.loader.config

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    @property
    def listeners(self) -> list[Callable[[MetadataDelta, MetadataImage], None]]:
        """Called with each committed batch's delta once it is applied (the replica manager)."""
        return self.loader.listeners

    @property
    def on_snapshot_due(self) -> Callable[[], None] | None:
        return self.loader.on_snapshot_due

    @on_snapshot_due.setter
    def on_snapshot_due(self, callback: Callable[[], None] | None) -> None:
        self.loader.on_snapshot_due = callback

    @property
    def snapshot_ids(self) -> list[SnapshotId]:
        return self.raft_log.snapshot_ids()

    # -- start-up and commits -------------------------------------------------------------------

    def replay(self, *, commit_recovered: bool = True) -> MetadataImage:
        """Load the snapshot files and rebuild the image. One node (``commit_recovered``):
        everything recovered is committed. In a quorum the committed prefix is only known once
        the quorum says (Kafka keeps the metadata high watermark in memory): the image is the
        newest snapshot's, and the rest is applied as the Raft high watermark reaches it."""
        self.raft_log.load_snapshots()
        if commit_recovered:
            self.raft_log.update_high_watermark(self.raft_log.end_offset)
        return self.loader.replay()

    def append(self, messages: Sequence[Message]) -> int:
        """Write ``messages`` as one batch, fsync, commit, apply; returns the last offset."""
        appended = self.write(messages)
        self.commit(appended, stage_batch(self.image, messages))
        return appended.last_offset

    def write(self, messages: Sequence[Message]) -> AppendedBatch:
        """Append ``messages`` as one batch and fsync it (not yet committed); any one thread."""
        values = [encode_metadata_record(message) for message in messages]
        size_before = self.log.size_in_bytes
        timestamp_ms = self.clock.milliseconds()
        appended = self.raft_log.append_as_leader(values, self.leader_epoch, timestamp_ms)
        self.raft_log.flush()
        return AppendedBatch(appended.base_offset, appended.last_offset, self.leader_epoch,
                             timestamp_ms, self.log.size_in_bytes - size_before)

    def commit(self, appended: AppendedBatch, staged: StagedBatch) -> None:
        """The owner's thread: the written batch is committed, applied and published."""
        self.raft_log.update_high_watermark(appended.last_offset + 1)
        self.loader.apply_appended(staged, appended)

    # -- snapshots and retention (the loader's) -------------------------------------------------

    def snapshot_due(self) -> str | None:
        return self.loader.snapshot_due()

    def prepare_snapshot(self) -> PendingSnapshot | None:
        return self.loader.prepare_snapshot()

    def write_snapshot(self, pending: PendingSnapshot) -> Path:
        return self.loader.write_snapshot(pending)

    def take_snapshot(self) -> Path | None:
        return self.loader.take_snapshot()

    def maybe_clean(self) -> bool:
        return self.loader.maybe_clean()
