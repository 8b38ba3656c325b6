"""The transaction coordinator wired into the broker: its ``__transaction_state`` log, its
marker writer and the scheduled work (the thin shell around the sans-IO coordinator).

- ``load`` (in ``Broker.startup``, before the listeners open): replay ``__transaction_state``
  into the coordinator. Transactions found Ongoing stay open (their producer may go on, or
  they time out); those found in PrepareCommit/PrepareAbort get their markers written by the
  first ``abort_timed_out`` run.
- ``abort_timed_out``, every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``
  (on the event loop, ``broker.scheduler``): abort the transactions open past their timeout
  and retry the markers left to write.
- ``expire_transactional_ids``, every
  ``transaction.remove.expired.transaction.cleanup.interval.ms``: tombstone the ids idle for
  ``transactional.id.expiration.ms``.
- In a cluster, instead of ``load``: ``elect`` / ``resign`` (from the replica manager's deltas,
  ``broker.coordinator_partitions``). An elected partition is read in the background (an
  executor thread; its ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile) and handed to the
  coordinator on the loop unless it was resigned or elected again meanwhile; a resigned one's
  ids are forgotten at once (NOT_COORDINATOR: the producer finds the new coordinator).

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.group.offsets import OffsetStore
from broker.node_client import NodeClients
from broker.transaction.coordinator import TransactionConfig, TransactionCoordinator
from broker.transaction.markers import PartitionMarkerWriter
from broker.transaction.producer_ids import ProducerIdManager
from broker.transaction.remote_markers import RemoteMarkerSender
from broker.transaction.state_log import TRANSACTION_STATE_TOPIC, TransactionStateLog
from replication.append import ReplicaAppender
from replication.controller.interface import Controller
from replication.replica_manager import ReplicaManager
from storage.clock import Clock

__all__ = ["TransactionService"]

logger = logging.getLogger("samsa.broker.transaction.service")


@dataclass
class TransactionService:
    coordinator: TransactionCoordinator
    state_log: TransactionStateLog
    markers: PartitionMarkerWriter
    config: TransactionConfig
    producer_ids: ProducerIdManager
    _pending: list[tuple[int, int]] = field(default_factory=list)  # (partition, leader epoch)
    _task: asyncio.Task[None] | None = None
    _started: bool = False

    @classmethod
    def create(
        cls,
        config: TransactionConfig,
        *,
        clock: Clock,
        replica_manager: ReplicaManager,
        controller: Controller,
        offset_store: OffsetStore,
        offsets_partition_loading: Callable[[int], bool] | None = None,
        appender: ReplicaAppender,
        replication_factor: int = 1,
        min_insync_replicas: int | None = None,
        owns_all: bool = True,
    ) -> TransactionService:
        state_log = TransactionStateLog(
            replica_manager,
            controller,
            num_partitions=config.transaction_state_log_num_partitions,
            segment_bytes=config.transaction_state_log_segment_bytes,
            clock=clock, appender=appender, replication_factor=replication_factor,
            min_insync_replicas=min_insync_replicas,
        )
        markers = PartitionMarkerWriter(
            replica_manager, appender,
            on_offsets_marker=offset_store.complete_transaction,
            offsets_partition_loading=offsets_partition_loading,
        )
        producer_ids = ProducerIdManager(controller, broker_id=replica_manager.node_id)
        coordinator = TransactionCoordinator(
            config=config, clock=clock, log=state_log, markers=markers,
            allocate_producer_id=producer_ids.generate_producer_id,
            partition_for=state_log.partition_for, owns_all=owns_all,
        )
        return cls(coordinator, state_log, markers, config, producer_ids)

    def load(self) -> None:
        self.coordinator.load(self.state_log.load())

    # -- a cluster: leadership of the __transaction_state partitions --------------------------

    def elect(self, index: int, leader_epoch: int) -> None:
        if not self.coordinator.partitions.elect(index, leader_epoch):
            return
        logger.info("elected transaction coordinator of %s-%d at leader epoch %d: loading",
                    TRANSACTION_STATE_TOPIC, index, leader_epoch)
        self._pending.append((index, leader_epoch))
        if self._started and (self._task is None or self._task.done()):
            self.start()

    def resign(self, index: int, leader_epoch: int | None) -> None:
        if not self.coordinator.partitions.resign(index, leader_epoch):
            return
        self._pending = [(i, epoch) for i, epoch in self._pending if i != index]
        count = self.coordinator.unload_partition(index)
        logger.info("resigned as transaction coordinator of %s-%d: %d id(s) unloaded",
                    TRANSACTION_STATE_TOPIC, index, count)

    def send_remote_markers(self, clients: NodeClients) -> None:
        """A cluster: markers for partitions led by other brokers go to them through
        ``clients`` (``broker.transaction.remote_markers``)."""
        self.markers.remote = RemoteMarkerSender(clients, on_written=self.coordinator.markers_written)

    def start(self) -> None:
        """Load the elected partitions in the background (on the event loop, once serving)."""
        self._started = True
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._started = False
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.markers.remote is not None:
            await self.markers.remote.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            index, epoch = self._pending.pop(0)
            try:
                loaded = await loop.run_in_executor(None, self.state_log.load_partition, index)
            except Exception:
                logger.exception("loading %s-%d failed: its ids are answered NOT_COORDINATOR",
                                 TRANSACTION_STATE_TOPIC, index)
                self.coordinator.partitions.fail_loading(index, epoch)
                continue
            if self.coordinator.load_partition(index, loaded, epoch):
                logger.info("loaded %s-%d: %d transactional id(s)", TRANSACTION_STATE_TOPIC,
                            index, len(loaded))

    def abort_timed_out(self) -> int:
        return self.coordinator.abort_timed_out_transactions()

    def expire_transactional_ids(self) -> int:
        return self.coordinator.expire_transactional_ids()
