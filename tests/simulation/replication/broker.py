"""One simulated broker's process state: real ``Partition`` objects over real ``storage.log.Log``
files, its copy of the metadata image, and what dies with the process.

Files outlive the process; memory does not. A *crash* (kill -9) abandons every log (no flush,
no trim: ``LogSegment.abandon``) and bumps ``incarnation``; what reached the page cache stays
on disk. A *lossy crash* (power loss) also cuts every segment file back to what ``Log.flush``
made durable: the log's ``recovery_point`` (everything below it was fsynced); segments past it
lose their files, the one holding it is cut at that batch, producer snapshots above it go.
The ``leader-epoch-checkpoint`` and the high-watermark checkpoint (``hw_checkpoint``, Kafka's
``replication-offset-checkpoint``, written every ``replica.high.watermark.checkpoint.interval.ms``)
are fsynced files in Kafka and survive. A restart reopens each log with recovery
(``Log.open(had_clean_shutdown=False, recovery_point=0)``) when the image names it.

Metadata: the broker applies the controller's records to its own ``MetadataImage`` as they
arrive, and acts on them (``make_leader`` / ``make_follower`` for every hosted partition whose
registration changed) only once its image has reached its own registration record (its broker
epoch): a restarted broker must not act on the leadership its previous incarnation held
(Kafka's broker publishes metadata only after its initial catch-up past its registration).

State: owned by the one ``Simulation`` (single-threaded).
"""

from __future__ import annotations

import os
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.codec import Message
from replication.metadata.image import MetadataImage, PartitionImage
from replication.partition import Partition
from storage.config import LogConfig
from storage.log import Log
from tests.simulation.replication.controller import TOPIC
from tests.simulation.replication.options import MIN_INSYNC_REPLICAS, SEGMENT_BYTES

LOG_CONFIG = LogConfig(segment_bytes=SEGMENT_BYTES, segment_index_bytes=4096,
                       min_insync_replicas=MIN_INSYNC_REPLICAS, file_delete_delay_ms=0)
_BATCH_START = struct.Struct(">qi")  # base offset, batch length
_LOG_OVERHEAD = 12


class SimClock:
    """The simulated clock, shared by every log (``storage.clock.Clock``)."""

    EPOCH_MS = 1_700_000_000_000

    def __init__(self) -> None:
        self.now_ms = 0

    def milliseconds(self) -> int:
        return self.EPOCH_MS + self.now_ms

    def monotonic_ms(self) -> int:
        return self.now_ms


@dataclass
class DelayedProduce:
    """An acks=all append waiting for the high watermark (Kafka's ``DelayedProduce``)."""

    index: int
    required_offset: int
    first_offset: int
    deadline_ms: int
    reply: Callable[[Any], None]


@dataclass
class ParkedFetch:
    """A follower's Fetch that found nothing new, held until an append or the wait ends."""

    payload: Any
    deadline_ms: int
    reply: Callable[[Any], None]


@dataclass
class Incarnation:
    """What one process holds in memory (gone at a crash)."""

    number: int
    incarnation_id: uuid.UUID
    broker_epoch: int = -1
    image: MetadataImage = field(default_factory=MetadataImage)
    metadata_offset: int = -1  # the last record applied to ``image``
    partitions: dict[int, Partition] = field(default_factory=dict)
    applied: dict[int, PartitionImage] = field(default_factory=dict)
    fetch_tokens: dict[int, int] = field(default_factory=dict)
    synced_epochs: dict[int, int] = field(default_factory=dict)  # a follower's answered epoch
    isr_refused_until: dict[int, int] = field(default_factory=dict)
    parked_fetches: dict[int, list[ParkedFetch]] = field(default_factory=dict)
    delayed_produces: dict[int, list[DelayedProduce]] = field(default_factory=dict)
    metadata_fetching: bool = False
    heartbeat_out: bool = False

    @property
    def acting(self) -> bool:
        """Registered, and caught up with its own registration record."""
        return self.broker_epoch >= 0 and self.metadata_offset >= self.broker_epoch


class SimBroker:
    def __init__(self, broker_id: int, root: Path, clock: SimClock,
                 partition_class: Callable[..., Partition]) -> None:
        self.broker_id = broker_id
        self.directory = root / f"broker-{broker_id}"
        self.clock = clock
        self.partition_class = partition_class
        self.hw_checkpoint: dict[int, int] = {}
        self.process: Incarnation | None = None
        self.incarnation = 0
        self.paused_until = 0
        self.lossy_crashes = 0

    @property
    def running(self) -> bool:
        return self.process is not None

    def start(self, incarnation_id: uuid.UUID) -> Incarnation:
        self.incarnation += 1
        self.process = Incarnation(self.incarnation, incarnation_id)
        return self.process

    def crash(self, *, lossy: bool) -> None:
        process = self.process
        assert process is not None
        for partition in process.partitions.values():
            log = partition.log
            recovery_point = log.recovery_point
            for segment in log.segments:
                segment.abandon()
            for pending in log._pending_deletes:
                pending.segment.abandon()
            if lossy:
                cut_unflushed_tail(log.directory, recovery_point)
        if lossy:
            self.lossy_crashes += 1
        self.process = None

    def checkpoint_high_watermarks(self) -> None:
        if self.process is not None:
            for index, partition in self.process.partitions.items():
                self.hw_checkpoint[index] = partition.high_watermark

    # -- metadata -------------------------------------------------------------------------------

    def apply_metadata(self, records: list[tuple[int, Message]]) -> list[tuple[Partition, bool]]:
        """Apply committed records; then, if acting, each hosted partition whose registration
        changed takes its role: (partition, role or leader changed)."""
        process = self.process
        assert process is not None
        for offset, record in records:
            if offset == process.metadata_offset + 1:
                process.image.apply(record, offset)
                process.metadata_offset = offset
        if not process.acting:
            return []
        topic = process.image.topics_by_name.get(TOPIC)
        if topic is None:
            return []
        changed = []
        for index, registration in sorted(topic.partitions.items()):
            if self.broker_id not in registration.replicas:
                continue
            if process.applied.get(index) == registration:
                continue
            process.applied[index] = registration
            partition = process.partitions.get(index) or self._host(index, topic.topic_id,
                                                                    registration)
            changed.append((partition, self._take_role(partition, registration)))
        return changed

    def _host(self, index: int, topic_id: uuid.UUID, registration: PartitionImage) -> Partition:
        assert self.process is not None
        log = Log.open(self.directory / f"{TOPIC}-{index}", LOG_CONFIG, clock=self.clock,
                       recovery_point=0, had_clean_shutdown=False)
        partition = self.partition_class(
            log, topic_id=topic_id, leader_epoch=registration.leader_epoch,
            node_id=self.broker_id, high_watermark_checkpoint=self.hw_checkpoint.get(index, 0),
            role_pending=True)
        self.process.partitions[index] = partition
        return partition

    def _take_role(self, partition: Partition, registration: PartitionImage) -> bool:
        before = (partition.leader_id, partition.leader_epoch)
        arguments = dict(leader_id=registration.leader, leader_epoch=registration.leader_epoch,
                         replicas=registration.replicas, isr=registration.isr,
                         partition_epoch=registration.partition_epoch, now_ms=self.clock.now_ms)
        if registration.leader == self.broker_id:
            partition.make_leader(**arguments)  # type: ignore[arg-type]
        else:
            partition.make_follower(**arguments)  # type: ignore[arg-type]
        return before != (partition.leader_id, partition.leader_epoch)

    def close(self) -> None:
        """The end of a run: let go of every file (the directory is removed next)."""
        if self.process is not None:
            self.crash(lossy=False)


def cut_unflushed_tail(directory: Path, recovery_point: int) -> None:
    """Power loss: each segment file keeps only what was fsynced (below ``recovery_point``)."""
    bases = sorted(int(name[:-4]) for name in os.listdir(directory) if name.endswith(".log"))
    if not bases:
        return
    holding = max([base for base in bases if base <= recovery_point], default=bases[0])
    for name in os.listdir(directory):
        stem, _, suffix = name.partition(".")
        if not stem.isdigit():
            continue
        base = int(stem)
        beyond = base > recovery_point if suffix == "snapshot" else base > holding
        if beyond:
            os.unlink(directory / name)
    path = directory / f"{holding:020d}.log"
    with open(path, "r+b") as file:
        data = file.read()
        file.truncate(_position_of(data, recovery_point))


def _position_of(data: bytes, offset: int) -> int:
    """The byte position of the first batch at or above ``offset`` (the end if none)."""
    position = 0
    while position + _LOG_OVERHEAD <= len(data):
        base_offset, length = _BATCH_START.unpack_from(data, position)
        if base_offset >= offset or length <= 0:
            return position
        position += _LOG_OVERHEAD + length
    return position
