"""The share coordinator wired into the broker (Kafka's ``ShareCoordinatorService`` over its
``CoordinatorRuntime``): the ``__share_group_state`` topic, one ``ShareStateStore`` per
partition this node leads, and the Initialize/Read/Write/Delete/ReadSummary operations the
handlers (``broker.apis.*_share_group_state``) and the in-process persister
(``broker.share.network_persister``) call.

- The topic: ``__share_group_state``, created through the controller on first use (a
  FindCoordinator SHARE, or the first operation), as ``__transaction_state`` is:
  ``share.coordinator.state.topic.num.partitions`` partitions, ``cleanup.policy=compact``,
  ``segment.bytes`` = ``share.coordinator.state.topic.segment.bytes``; in a cluster the
  replication factor and ``min.insync.replicas`` are ``share.coordinator.state.topic.
  replication.factor`` / ``.min.isr`` (not capped: the controller refuses more replicas than
  brokers and the next use asks again), on a single node 1 and the broker default. (Kafka
  creates it with ``cleanup.policy=delete`` and deletes below its coordinators' redundant
  offset; Samsa compacts, ``broker.share.state_store`` says why that keeps the state whole.)
- A share partition's ``__share_group_state`` partition: ``broker.share.coordinator_key``
  (Kafka's rule; the existing topic's partition count wins over the config).
- Which partitions are served (``broker.coordinator_partitions``): on a single node every
  partition, each replayed at start-up (``load``, before the listeners open); in a cluster
  those this node leads, replayed in the background when elected (``elect``, from the replica
  manager's deltas as the other coordinators) and forgotten when resigned. A partition being
  loaded answers COORDINATOR_LOAD_IN_PROGRESS, one not led here NOT_COORDINATOR, one whose
  topic or log is still being created COORDINATOR_LOAD_IN_PROGRESS.
- A write (Write, Initialize, Delete): the store turns the request into records, they are
  appended as one batch through the broker's appender (origin COORDINATOR, acks=-1, the
  topic's min.insync.replicas applies) and applied to the store at their offsets; the call
  returns only once the partition's high watermark covers them (the ISR has them), within
  ``share.coordinator.write.timeout.ms``, else NOT_COORDINATOR (leadership moved, storage
  error) or COORDINATOR_NOT_AVAILABLE (timeout, anything else), Kafka's mapping of a
  coordinator append's error. So a write the caller was told of survives the coordinator's
  node.
- A deleted topic's share partitions are deleted by their coordinator (tombstones), as Kafka
  does (``topics_deleted``, from the replica manager).
- A read (Read, ReadSummary) answers from the store once everything the store has applied
  is committed (the same wait), so it never reports a write that could still be lost. A Read
  with a new leader epoch also writes that epoch (Kafka 4.3.1's rule): the fence survives a
  failover.

Owned by the broker's event loop (``load`` runs before it serves; a load's replay runs in an
executor thread on a store no request can reach until the loop installs it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from broker.commits import create_internal_topic, internal_partition_pending
from broker.coordinator_partitions import CoordinatorPartitions
from broker.replicated_answers import answer_when_replicated, coordinator_error
from broker.share.coordinator_config import SHARE_GROUP_STATE_TOPIC, ShareCoordinatorConfig
from broker.share.coordinator_key import share_partition_for
from broker.share.persister import ShareStateSummary
from broker.share.state_records import SharePartitionKey
from broker.share.state_store import AppendRecord, ShareStateStore, ShareStateStoreConfig
from broker.share.values import ShareSnapshot, StateBatch
from protocol.errors import ErrorCode, KafkaError, NotLeaderOrFollowerError, error_for_code
from protocol.records import (
    BATCH_HEADER_SIZE,
    Record,
    decode_batch,
    encode_batch,
    read_batch_header,
)
from storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from replication.append import ReplicaAppender
    from replication.controller.interface import Controller
    from replication.metadata.image import TopicImage
    from replication.partition import Partition
    from replication.replica_manager import ReplicaManager
    from storage.clock import Clock

__all__ = ["SHARE_GROUP_STATE_TOPIC", "ShareCoordinatorService"]

logger = logging.getLogger("samsa.broker.share.coordinator_service")

LOAD_READ_BYTES = 1 << 20


class ShareCoordinatorService:
    def __init__(
        self,
        config: ShareCoordinatorConfig,
        *,
        replica_manager: ReplicaManager,
        controller: Controller,
        appender: ReplicaAppender,
        clock: Clock,
        replication_factor: int = 1,
        min_insync_replicas: int | None = None,
        owns_all: bool = True,
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.controller = controller
        self.appender = appender
        self.clock = clock
        self.replication_factor = replication_factor
        self.min_insync_replicas = min_insync_replicas
        self.partitions = CoordinatorPartitions(owns_all=owns_all)
        self.partitions.pending = self.partition_pending
        # The broker (``broker.broker.Broker``), for the replication waits; set by ``attach``.
        self.broker: Any = None
        self._stores: dict[int, ShareStateStore] = {}
        self._pending: list[tuple[int, int]] = []  # (partition, leader epoch) to load
        self._task: asyncio.Task[None] | None = None
        self._cleanups: set[asyncio.Task[None]] = set()
        self._started = False

    def attach(self, broker: Any) -> None:
        self.broker = broker

    # -- the topic ----------------------------------------------------------------------------

    def partition_for(self, key: SharePartitionKey) -> int:
        topic = self.replica_manager.topic_by_name(SHARE_GROUP_STATE_TOPIC)
        count = self.config.state_topic_num_partitions if topic is None else len(topic.partitions)
        return share_partition_for(key, count)

    def ensure_topic(self) -> None:
        """Create ``__share_group_state`` unless it exists (raises the refusal, or
        COORDINATOR_NOT_AVAILABLE until the creation is committed)."""
        create_internal_topic(
            self.controller, SHARE_GROUP_STATE_TOPIC,
            num_partitions=self.config.state_topic_num_partitions,
            segment_bytes=self.config.state_topic_segment_bytes,
            replication_factor=self.replication_factor,
            min_insync_replicas=self.min_insync_replicas,
        )

    def partition_pending(self, index: int) -> bool:
        return internal_partition_pending(self.ensure_topic, self.replica_manager.creating,
                                          SHARE_GROUP_STATE_TOPIC, index)

    # -- loading ------------------------------------------------------------------------------

    def load(self) -> None:
        """A single node, at start-up: replay every partition of the topic (if it exists)."""
        topic = self.replica_manager.topic_by_name(SHARE_GROUP_STATE_TOPIC)
        if topic is None:
            return
        count = 0
        for index in sorted(topic.partitions):
            store = self.load_partition(index)
            self._stores[index] = store
            count += len(store.states())
        logger.info("loaded %d share partition state(s) from %s", count, SHARE_GROUP_STATE_TOPIC)

    def load_partition(self, index: int) -> ShareStateStore:
        """The store of one partition, rebuilt from its log (blocking; any thread: nothing
        appends to a partition while it loads)."""
        store = ShareStateStore(ShareStateStoreConfig(self.config.snapshot_update_records_per_snapshot))
        partition = self.replica_manager.partition(SHARE_GROUP_STATE_TOPIC, index)
        if partition is None:
            return store
        for record in _records_of(partition):
            if record.key is not None:
                store.apply(record.key, record.value, record.offset)
        return store

    def elect(self, index: int, leader_epoch: int) -> None:
        if not self.partitions.elect(index, leader_epoch):
            return
        logger.info("elected share coordinator of %s-%d at leader epoch %d: loading",
                    SHARE_GROUP_STATE_TOPIC, index, leader_epoch)
        self._pending.append((index, leader_epoch))
        if self._started and (self._task is None or self._task.done()):
            self.start()

    def resign(self, index: int, leader_epoch: int | None) -> None:
        if not self.partitions.resign(index, leader_epoch):
            return
        self._pending = [(i, epoch) for i, epoch in self._pending if i != index]
        store = self._stores.pop(index, None)
        logger.info("resigned as share coordinator of %s-%d: %d share partition(s) unloaded",
                    SHARE_GROUP_STATE_TOPIC, index, 0 if store is None else len(store.states()))

    def start(self) -> None:
        """Load the elected partitions in the background (on the event loop, once serving)."""
        self._started = True
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._started = False
        for cleanup in list(self._cleanups):
            cleanup.cancel()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            index, epoch = self._pending.pop(0)
            try:
                store = await loop.run_in_executor(None, self.load_partition, index)
            except Exception:
                logger.exception("loading %s-%d failed: its share partitions are answered "
                                 "NOT_COORDINATOR", SHARE_GROUP_STATE_TOPIC, index)
                self.partitions.fail_loading(index, epoch)
                continue
            if self.partitions.complete_loading(index, epoch):
                self._stores[index] = store
                logger.info("loaded %s-%d: %d share partition(s)", SHARE_GROUP_STATE_TOPIC,
                            index, len(store.states()))

    # -- operations ---------------------------------------------------------------------------

    async def initialize_state(self, key: SharePartitionKey, *, state_epoch: int, start_offset: int) -> None:
        index, store = self._serving(key)
        records = store.initialize_state(key, state_epoch=state_epoch, start_offset=start_offset,
                                         timestamp_ms=self.clock.milliseconds())
        await self._write(index, store, records)

    async def write_state(
        self, key: SharePartitionKey, *, state_epoch: int, leader_epoch: int, start_offset: int,
        state_batches: tuple[StateBatch, ...], delivery_complete_count: int = -1,
    ) -> None:
        index, store = self._serving(key)
        records = store.write_state(
            key, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            state_batches=state_batches, delivery_complete_count=delivery_complete_count,
            timestamp_ms=self.clock.milliseconds())
        await self._write(index, store, records)

    async def delete_state(self, key: SharePartitionKey) -> None:
        index, store = self._serving(key)
        await self._write(index, store, store.delete_state(key))

    async def read_state(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareSnapshot | None:
        """The state, fencing older leaders at ``leader_epoch``. A new leader epoch (not -1) is
        also written, as an update with no state batches, as Kafka 4.3.1's
        ``readStateAndMaybeUpdateLeaderEpoch`` does, so the fence outlives the coordinator."""
        index, store = self._serving(key)
        snapshot = store.read_state(key, leader_epoch=leader_epoch)
        if snapshot is not None and leader_epoch != -1 and leader_epoch != snapshot.leader_epoch:
            state = store.state(key)
            records = store.write_state(
                key, state_epoch=snapshot.state_epoch, leader_epoch=leader_epoch,
                start_offset=snapshot.start_offset, state_batches=(),
                delivery_complete_count=-1 if state is None else state.delivery_complete_count,
                timestamp_ms=self.clock.milliseconds())
            await self._write(index, store, records)
        else:
            await self._committed(index)
        return snapshot

    async def read_summary(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareStateSummary | None:
        """Kafka's ``readStateSummary``: no fence is checked or moved."""
        index, store = self._serving(key)
        state = store.state(key)
        await self._committed(index)
        if state is None:
            return None
        snapshot = state.snapshot
        return ShareStateSummary(snapshot.state_epoch, snapshot.leader_epoch, snapshot.start_offset,
                                 state.delivery_complete_count)

    def topics_deleted(self, topics: list[TopicImage]) -> None:
        """Kafka's ``maybeCleanupShareState``: the share partitions of deleted topics that this
        node coordinates are deleted (tombstones, in the background). Deletions replayed before
        the event loop runs (start-up) are not acted on."""
        topic_ids = {topic.topic_id for topic in topics}
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for index, store in list(self._stores.items()):
            keys = [key for key in store.states() if key.topic_id in topic_ids]
            if keys and self.partitions.error(index) is None:
                task = loop.create_task(self._delete_all(keys))
                self._cleanups.add(task)
                task.add_done_callback(self._cleanups.discard)

    async def _delete_all(self, keys: list[SharePartitionKey]) -> None:
        for key in keys:
            try:
                await self.delete_state(key)
            except KafkaError as error:
                logger.warning("the share state of %s (its topic deleted) is not deleted: %s", key, error)

    def serves(self, key: SharePartitionKey) -> bool:
        """Whether this node is ``key``'s share coordinator now (loaded or not)."""
        return self.partitions.error(self.partition_for(key)) is not ErrorCode.NOT_COORDINATOR

    # -- inside -------------------------------------------------------------------------------

    def _serving(self, key: SharePartitionKey) -> tuple[int, ShareStateStore]:
        index = self.partition_for(key)
        error = self.partitions.error(index)
        if error is not None:
            raise error_for_code(error)(f"{SHARE_GROUP_STATE_TOPIC}-{index}: {error.name}")
        store = self._stores.get(index)
        if store is None:  # a single node's partition created since start-up: nothing to load
            store = self._stores[index] = ShareStateStore(
                ShareStateStoreConfig(self.config.snapshot_update_records_per_snapshot))
        return index, store

    async def _write(self, index: int, store: ShareStateStore, records: list[AppendRecord]) -> None:
        if records:
            self._append(index, store, records)
        await self._committed(index)

    def _append(self, index: int, store: ShareStateStore, records: list[AppendRecord]) -> None:
        """One batch, applied to the store at its offsets; raises NOT_COORDINATOR or
        COORDINATOR_NOT_AVAILABLE (Kafka's mapping) when the append fails."""
        try:
            self.ensure_topic()
            partition = self.replica_manager.partition_or_error(SHARE_GROUP_STATE_TOPIC, index)
            if partition.leader_id != self.replica_manager.node_id:
                raise NotLeaderOrFollowerError(
                    f"{SHARE_GROUP_STATE_TOPIC}-{index} is led by {partition.leader_id}")
            now = self.clock.milliseconds()
            batch = encode_batch([Record(offset=i, timestamp=now, key=key, value=value)
                                  for i, (key, value) in enumerate(records)])
            result = self.appender.append_one((SHARE_GROUP_STATE_TOPIC, index), batch,
                                              origin=AppendOrigin.COORDINATOR)
        except KafkaError as error:
            code = coordinator_error(error)
            raise error_for_code(code)(f"{SHARE_GROUP_STATE_TOPIC}-{index}: {error}") from error
        for position, (key, value) in enumerate(records):
            store.apply(key, value, result.first_offset + position)

    async def _committed(self, index: int) -> None:
        """Return once the partition's high watermark covers its log end offset as of now."""
        if self.broker is None:
            return
        waited = answer_when_replicated(
            self.broker, (SHARE_GROUP_STATE_TOPIC, index), None, lambda code: code,
            timeout_ms=self.config.write_timeout_ms)
        code = await waited if isinstance(waited, asyncio.Future) else waited
        if code is not None:
            raise error_for_code(code)(
                f"{SHARE_GROUP_STATE_TOPIC}-{index}: the write was not replicated in time")


def _records_of(partition: Partition) -> Iterator[Record]:
    """Every record of the partition's log in offset order (control batches skipped)."""
    log = partition.log
    offset, end_offset = log.log_start_offset, log.log_end_offset
    while offset < end_offset:
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
            if not batch.is_control:
                yield from batch.records
            offset = batch.next_offset
            position += header.size_in_bytes
        if position == 0:
            raise KafkaError(f"{log.directory.name}: a batch at offset {offset} exceeds the read size")
