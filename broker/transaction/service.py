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

Owned by the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.group.offsets import OffsetStore
from broker.transaction.coordinator import TransactionConfig, TransactionCoordinator
from broker.transaction.markers import PartitionMarkerWriter
from broker.transaction.producer_ids import ProducerIdManager
from broker.transaction.state_log import TransactionStateLog
from replication.append import ReplicaAppender
from replication.controller.interface import Controller
from replication.replica_manager import ReplicaManager
from storage.clock import Clock

__all__ = ["TransactionService"]


@dataclass
class TransactionService:
    coordinator: TransactionCoordinator
    state_log: TransactionStateLog
    markers: PartitionMarkerWriter
    config: TransactionConfig
    producer_ids: ProducerIdManager

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
    ) -> TransactionService:
        state_log = TransactionStateLog(
            replica_manager,
            controller,
            num_partitions=config.transaction_state_log_num_partitions,
            segment_bytes=config.transaction_state_log_segment_bytes,
            clock=clock, appender=appender,
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
        )
        return cls(coordinator, state_log, markers, config, producer_ids)

    def load(self) -> None:
        self.coordinator.load(self.state_log.load())

    def abort_timed_out(self) -> int:
        return self.coordinator.abort_timed_out_transactions()

    def expire_transactional_ids(self) -> int:
        return self.coordinator.expire_transactional_ids()
