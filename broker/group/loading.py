"""Loading ``__consumer_offsets`` into the offset store and the group coordinator, in the
background (Kafka's CoordinatorLoaderImpl and the LOADING state of its CoordinatorRuntime).

At start-up, before the listeners open, ``OffsetsLoader.schedule`` marks every hosted
``__consumer_offsets`` partition that holds records as loading (``GroupCoordinator.begin_loading``;
an empty one has nothing to replay and is served at once). From then
on, every group request for a group whose partition is loading is answered
COORDINATOR_LOAD_IN_PROGRESS, which clients retry; FindCoordinator answers as usual. ``run``
then loads one partition at a time, smallest log first, so most groups are served soonest:

- reading and decoding the log, up to its end offset when the read starts, is blocking work
  done in an executor thread; it fills a ``LoadedPartition`` that nothing else can see yet;
- applying it (its offsets into the store's cache, its groups into the coordinator with
  their timers armed, the partition marked loaded) is one synchronous step on the event
  loop, so no handler ever sees a partition half-applied, and handlers keep making their
  changes before their first ``await``.

Why the read may run off the loop: nothing appends to a loading partition. Every write to it
comes from a request for one of its groups (refused while it loads) or from offset expiry
(which skips groups whose partition is not loaded). The cleaner may swap its segments
meanwhile, which ``Log.read`` allows (the segment list is read under the log's lock and
replaced files are unlinked only after ``file.delete.delay.ms``).

A partition whose read fails ``LOAD_ATTEMPTS`` times (a storage error, a corrupt batch) is
logged and marked failed: its groups are then answered NOT_COORDINATOR, as Kafka answers for a
coordinator in state FAILED. ``stop`` cancels the load at the next chunk (``LOAD_READ_BYTES``)
at shutdown.

Record types replayed (the last record of a key wins, a null value is a tombstone): offset
commits (key types 0 and 1), classic groups' GroupMetadata (type 2) and share groups' epoch
and partitions records (types 11 and 15, ``broker.group.share_records``); the other
consumer-group and share-group records are skipped. A group with offsets but no GroupMetadata record becomes an Empty
group without protocol type, Kafka's "simple consumer group". Transactional offset commits
become pending and are committed or dropped by their transaction's marker, in log order
(``broker.group.transactional_offsets``); those still pending at the end are handed to the store.

In a cluster (``elect`` / ``resign``, from the replica manager's deltas): a partition this node
becomes the leader of is loaded the same way, in the background, its groups answering
COORDINATOR_LOAD_IN_PROGRESS meanwhile; a load is applied only if the partition is still
loading at the leader epoch it began for (a resignation or a newer election in between makes
it stale). A partition that moves to another leader is unloaded at once: its groups and offsets
are forgotten here and its parked requests answered NOT_COORDINATOR.

``OffsetsLoader`` is owned by the event loop; ``read_partition`` runs in a worker thread and
touches only the log it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.coordinator_partitions import NO_EPOCH
from broker.group.group_records import decode_group_metadata_record
from broker.group.offsets import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    TopicPartition,
    decode_offsets_record,
)
from broker.group.share_records import ShareGroupRecord, decode_share_group_record
from broker.group.transactional_offsets import PendingTransactionalOffsets
from protocol.errors import KafkaError
from protocol.messages.group_coordinator.group_metadata_value import GroupMetadataValue
from protocol.records import (
    BATCH_HEADER_SIZE,
    Record,
    RecordBatch,
    decode_batch,
    read_batch_header,
)

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from broker.group.coordinator import GroupCoordinator
    from broker.group.offsets import OffsetStore
    from replication.partition import Partition

__all__ = ["LOAD_READ_BYTES", "LoadCancelledError", "LoadedPartition", "OffsetsLoader", "read_partition"]

logger = logging.getLogger("samsa.broker.group.loading")

LOAD_READ_BYTES = 1 << 20
# A read may meet the cleaner swapping segments under it (a replaced segment's indexes are
# released at once): read the partition again from the start before calling it failed.
LOAD_ATTEMPTS = 3


class LoadCancelledError(Exception):
    """The broker is shutting down: the read stopped between two chunks."""


@dataclass(slots=True)
class LoadedPartition:
    """What one ``__consumer_offsets`` partition holds, replayed in offset order."""

    index: int
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    share_groups: dict[str, ShareGroupRecord] = field(default_factory=dict)  # types 11 and 15
    records: int = 0
    # Offsets of transactions still open at the end (``broker.group.transactional_offsets``).
    transactional: PendingTransactionalOffsets = field(default_factory=PendingTransactionalOffsets)

    def replay_transactional(self, batch: RecordBatch) -> None:
        """A transactional batch (its offsets become pending) or a marker (ends them)."""
        self.transactional.replay_batch(batch, _decode_offset_commit, self.offsets)

    def replay(self, record: Record) -> None:
        if record.key is None:
            return
        if decode_share_group_record(record.key, record.value, self.share_groups):
            self.records += 1
            return
        metadata = decode_group_metadata_record(record.key, record.value)
        if metadata is not None:
            group_id, value = metadata
            if value is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = value
            self.records += 1
            return
        decoded = decode_offsets_record(record.key, record.value)
        if decoded is None:
            return  # a consumer-group (KIP-848) record: not served here
        key, offset = decoded
        group = self.offsets.setdefault(key.group, {})
        if offset is None:
            group.pop((key.topic, key.partition), None)
            self.transactional.forget(key.group, [(key.topic, key.partition)])
            if not group:
                del self.offsets[key.group]
        else:
            group[(key.topic, key.partition)] = offset
        self.records += 1


def read_partition(partition: Partition, *, cancelled: threading.Event | None = None) -> LoadedPartition:
    """Replay the partition's log up to its current end offset (blocking; any thread)."""
    loaded = LoadedPartition(partition.partition)
    for record in _records_of(partition, cancelled, on_transactional=loaded.replay_transactional):
        loaded.replay(record)
    return loaded


def _decode_offset_commit(
    key: bytes, value: bytes | None
) -> tuple[str, TopicPartition, OffsetAndMetadata | None] | None:
    decoded = decode_offsets_record(key, value)
    if decoded is None:
        return None
    commit_key, offset = decoded
    return commit_key.group, (commit_key.topic, commit_key.partition), offset


def _records_of(
    partition: Partition, cancelled: threading.Event | None,
    on_transactional: Callable[[RecordBatch], None] | None = None,
) -> Iterator[Record]:
    """Every record of the partition's log, in offset order; transactional and control
    batches go to ``on_transactional`` instead, in their place in that order."""
    log = partition.log
    offset, end_offset = log.log_start_offset, log.log_end_offset
    while offset < end_offset:
        if cancelled is not None and cancelled.is_set():
            raise LoadCancelledError(log.directory.name)
        fetched = log.read(offset, LOAD_READ_BYTES, max_offset=end_offset)
        if fetched is None:
            return
        data = memoryview(fetched.read())
        position = 0
        while position + BATCH_HEADER_SIZE <= len(data):
            header = read_batch_header(data, position)
            if position + header.size_in_bytes > len(data):
                break
            batch = decode_batch(data, position)
            if batch.is_control or batch.is_transactional:
                if on_transactional is not None:
                    on_transactional(batch)
            else:
                yield from batch.records
            offset = batch.next_offset
            position += header.size_in_bytes
        if position == 0:
            raise KafkaError(f"{log.directory.name}: a batch at offset {offset} exceeds the read size")


class OffsetsLoader:
    def __init__(self, store: OffsetStore, coordinator: GroupCoordinator) -> None:
        self.store = store
        self.coordinator = coordinator
        self._pending: list[int] = []
        self._epochs: dict[int, int] = {}  # partition -> the leader epoch its load is for
        self._cancelled = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._executor: Executor | None = None
        self._started = False

    def schedule(self) -> list[int]:
        """Mark every hosted partition that holds records as loading (before the listeners
        open; an empty one has nothing to replay and is served at once); the order in which
        they will load. A single node's start-up; a cluster's loads follow ``elect``."""
        replica_manager = self.store.replica_manager
        sizes = {}
        for index in self.store.hosted_partitions():
            partition = replica_manager.partition(OFFSETS_TOPIC, index)
            if partition is not None and partition.log.log_end_offset > partition.log.log_start_offset:
                sizes[index] = partition.log.size_in_bytes
        self._pending = sorted(sizes, key=lambda index: (sizes[index], index))
        self.coordinator.begin_loading(self._pending)
        return list(self._pending)

    # -- a cluster: leadership of the partitions (``broker.coordinator_partitions``) ------------

    def elect(self, index: int, leader_epoch: int) -> None:
        """This node leads ``__consumer_offsets-<index>`` at ``leader_epoch``: load it (in the
        background once ``start`` ran; its groups answer COORDINATOR_LOAD_IN_PROGRESS)."""
        if not self.coordinator.partitions.elect(index, leader_epoch):
            return
        self._epochs[index] = leader_epoch
        if index not in self._pending:
            self._pending.append(index)
        logger.info("elected coordinator of %s-%d at leader epoch %d: loading",
                    OFFSETS_TOPIC, index, leader_epoch)
        if self._started and (self._task is None or self._task.done()):
            self.start(executor=self._executor)

    def resign(self, index: int, leader_epoch: int | None) -> None:
        """Another node leads the partition (or it left this node): stop serving its groups."""
        if not self.coordinator.partitions.resign(index, leader_epoch):
            return
        if index in self._pending:
            self._pending.remove(index)
        self._epochs.pop(index, None)
        groups = self.coordinator.unload(index)
        self.store.unload(index)
        logger.info("resigned as coordinator of %s-%d: %d group(s) unloaded", OFFSETS_TOPIC,
                    index, len(groups))

    @property
    def pending(self) -> list[int]:
        return list(self._pending)

    def load_next(self, *, arm_timers: bool = False) -> int | None:
        """Load the next scheduled partition now, synchronously; its index, None when all are
        loaded. For tests and tools: without a running loop the coordinator's timers are armed
        later (``GroupCoordinator.arm_timers``)."""
        if not self._pending:
            return None
        index = self._pending.pop(0)
        epoch = self._epochs.pop(index, NO_EPOCH)
        self._apply(self._read(index), epoch, arm_timers=arm_timers)
        return index

    def load_all(self) -> None:
        while self.load_next() is not None:
            pass

    def start(self, *, executor: Executor | None = None) -> asyncio.Task[None]:
        self._started, self._executor = True, executor
        self._task = asyncio.get_running_loop().create_task(self.run(executor=executor))
        return self._task

    async def run(self, *, executor: Executor | None = None) -> None:
        """Load the scheduled partitions one by one: read in ``executor``, apply on the loop."""
        started = time.monotonic()
        while self._pending:
            index = self._pending.pop(0)
            epoch = self._epochs.pop(index, NO_EPOCH)
            try:
                await self._load(index, epoch, executor)
            except LoadCancelledError:
                return
        logger.info("loaded %s in %.3f s", OFFSETS_TOPIC, time.monotonic() - started)

    async def _load(self, index: int, epoch: int, executor: Executor | None) -> None:
        loop = asyncio.get_running_loop()
        for attempt in range(1, LOAD_ATTEMPTS + 1):
            try:
                loaded = await loop.run_in_executor(executor, self._read, index)
            except LoadCancelledError:
                raise
            except Exception:
                if attempt < LOAD_ATTEMPTS:
                    logger.warning("loading %s-%d failed, reading it again", OFFSETS_TOPIC, index,
                                   exc_info=True)
                    continue
                logger.exception("loading %s-%d failed: its groups are answered NOT_COORDINATOR",
                                 OFFSETS_TOPIC, index)
                self.coordinator.fail_loading(index, epoch)
            else:
                self._apply(loaded, epoch, arm_timers=True)
            return

    async def stop(self) -> None:
        self._cancelled.set()
        self._started = False
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _read(self, index: int) -> LoadedPartition:
        partition = self.store.replica_manager.partition(OFFSETS_TOPIC, index)
        if partition is None:
            return LoadedPartition(index)
        return read_partition(partition, cancelled=self._cancelled)

    def _apply(self, loaded: LoadedPartition, epoch: int, *, arm_timers: bool) -> None:
        """Hand a read partition over, unless it was resigned or elected again meanwhile."""
        if epoch != NO_EPOCH and not self.coordinator.partitions.is_loading_at(loaded.index, epoch):
            logger.info("load of %s-%d at leader epoch %d is stale: dropped", OFFSETS_TOPIC,
                        loaded.index, epoch)
            return
        self.store.add_loaded(loaded.offsets)
        self.store.transactional.merge(loaded.transactional)
        self.coordinator.complete_loading(loaded.index, loaded.groups, simple_groups=loaded.offsets,
                                          arm_timers=arm_timers, leader_epoch=epoch,
                                          share_groups=loaded.share_groups)
        logger.log(logging.INFO if loaded.records else logging.DEBUG,
                   "loaded %s-%d: %d record(s), %d offset(s) of %d group(s), %d group record(s)",
                   OFFSETS_TOPIC, loaded.index, loaded.records, sum(map(len, loaded.offsets.values())),
                   len(loaded.offsets), len(loaded.groups))
