"""The transaction coordinator (Kafka's ``TransactionCoordinator``), sans-IO.

Every transactional id this node coordinates has a ``TransactionMetadata`` state machine in
``transactions``: on a single node every id (all ``__transaction_state`` partitions are led
here); in a cluster the ids of the partitions this node leads and has loaded (``partitions``,
``load_partition`` / ``unload_partition``). Any other id is answered NOT_COORDINATOR, or
COORDINATOR_LOAD_IN_PROGRESS while its partition loads (``ownership_error``, checked first).
A request steps it in two phases (see ``broker.transaction.metadata``): prepare, write the transit to the transaction log
(``TransactionLogWriter``), then complete. All I/O is behind the injected ``log`` and
``markers`` (``MarkerWriter``) and time comes from ``clock``, so every path is driven by plain
calls in tests; the broker gives it the ``__transaction_state`` log and the replica manager.

Ending a transaction (EndTxn, a timeout, or an InitProducerId fencing an open one): write
PrepareCommit/PrepareAbort; the client's answer is decided there (NONE once it is in the
log); then write the markers to every partition of the transaction and, when none is left
to retry, CompleteCommit/CompleteAbort. The markers of partitions this node leads are written
right away, in the same call (Kafka sends WriteTxnMarkers to the partition leaders and answers
EndTxn before they are written); in a cluster those of partitions led elsewhere are sent to
their leaders and taken off when they answer (``markers_written``). Partitions whose marker
failed with a retriable error stay in the transaction, which stays in PrepareCommit/PrepareAbort until ``complete_pending`` (run by the
scheduled abort task) writes them. A transaction found in PrepareCommit/PrepareAbort when the
log is loaded is completed the same way.

Errors, as Kafka's: an unknown transactional id or another producer id →
INVALID_PRODUCER_ID_MAPPING; another epoch → PRODUCER_FENCED (handlers of old versions turn it
into INVALID_PRODUCER_EPOCH); a pending transition or a transaction being completed →
CONCURRENT_TRANSACTIONS; EndTxn that does not fit the state → INVALID_TXN_STATE (a retried
EndTxn of a completed transaction → NONE); a timeout above ``transaction.max.timeout.ms`` →
INVALID_TRANSACTION_TIMEOUT.

Owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from broker.coordinator_partitions import CoordinatorPartitions
from broker.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
    is_epoch_exhausted,
)
from protocol.errors import ErrorCode, KafkaError
from storage.clock import Clock

__all__ = [
    "EndTxnResult",
    "InitProducerIdResult",
    "MarkerWriter",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionLogWriter",
]

logger = logging.getLogger("samsa.broker.transaction")

_S = TransactionState


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """Kafka's names and defaults (``TransactionStateManagerConfig``, ``TransactionLogConfig``)."""

    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_segment_bytes: int = 104_857_600
    transaction_partition_verification_enable: bool = True


class TransactionLogWriter(Protocol):
    def append(self, transactional_id: str, transit: TxnTransit) -> None:
        """Write the transit (a tombstone for Dead); raises the append's KafkaError."""

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The leader epoch of the transactional id's ``__transaction_state`` partition."""


class MarkerWriter(Protocol):
    def write_markers(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
        partitions: Iterable[TopicPartition],
    ) -> set[TopicPartition]:
        """Write the markers; the partitions to retry later (retriable errors)."""


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    def __init__(
        self,
        *,
        config: TransactionConfig,
        clock: Clock,
        log: TransactionLogWriter,
        markers: MarkerWriter,
        allocate_producer_id: Callable[[], int],
        partition_for: Callable[[str], int] = lambda transactional_id: 0,
        owns_all: bool = True,
    ) -> None:
        self.config = config
        self.transactions: dict[str, TransactionMetadata] = {}
        self._clock = clock
        self._log = log
        self._markers = markers
        self._allocate_producer_id = allocate_producer_id
        self._partition_for = partition_for
        # the __transaction_state partitions served here (``broker.coordinator_partitions``)
        self.partitions = CoordinatorPartitions(owns_all=owns_all)
        # Run the second argument once the id's last state-log write is replicated (set by the
        # broker: ``broker.replicated_answers.call_when_replicated``); at once by default.
        self.after_replication: Callable[[str, Callable[[], None]], None] = (
            lambda _transactional_id, then: then())

    def _now_ms(self) -> int:
        return self._clock.milliseconds()

    def load(self, loaded: Mapping[str, TransactionMetadata]) -> None:
        """The state replayed from ``__transaction_state`` (call ``complete_pending`` after)."""
        self.transactions.update(loaded)

    # -- ownership (a cluster: only the partitions this node leads) ---------------------------

    def ownership_error(self, transactional_id: str) -> ErrorCode | None:
        """None when the id's partition is served here; else COORDINATOR_LOAD_IN_PROGRESS or
        NOT_COORDINATOR (Kafka's ``TransactionStateManager.getTransactionState``)."""
        return self.partitions.error(self._partition_for(transactional_id))

    def load_partition(
        self, partition: int, loaded: Mapping[str, TransactionMetadata], leader_epoch: int
    ) -> bool:
        """A partition elected at ``leader_epoch`` was read: serve its ids; False (nothing
        taken) when the load is stale. Transactions found preparing get their markers at the
        next ``complete_pending``."""
        if not self.partitions.complete_loading(partition, leader_epoch):
            return False
        self.transactions.update(loaded)
        return True

    def unload_partition(self, partition: int) -> int:
        """The partition is led elsewhere: forget its ids; how many."""
        gone = [tid for tid in self.transactions if self._partition_for(tid) == partition]
        for transactional_id in gone:
            del self.transactions[transactional_id]
        return len(gone)

    # -- InitProducerId -----------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None = None
    ) -> InitProducerIdResult:
        """``expected``: the (producer id, epoch) the producer had (v3+, KIP-360), if any."""
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        not_here = self.ownership_error(transactional_id)
        if not_here is not None:
            return InitProducerIdResult(not_here)
        txn = self.transactions.get(transactional_id)
        if txn is None:
            txn = TransactionMetadata(transactional_id, self._allocate_producer_id(), timeout_ms,
                                      self._now_ms())
            self.transactions[transactional_id] = txn
        prepared = self._prepare_init(txn, timeout_ms, expected)
        if isinstance(prepared, ErrorCode):
            return InitProducerIdResult(prepared)
        if prepared.state is _S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction with the bumped epoch; the client retries and gets
            # the next epoch then (Kafka answers CONCURRENT_TRANSACTIONS here too).
            ended = self._end(txn, prepared.producer_id, prepared.producer_epoch, commit=False,
                              from_client=False)
            fenced = ErrorCode.CONCURRENT_TRANSACTIONS if ended.error is ErrorCode.NONE else ended.error
            return InitProducerIdResult(fenced)
        error = self._write(txn, prepared)
        if error is not ErrorCode.NONE:
            return InitProducerIdResult(error)
        logger.info("initialized transactional id %s: producer %d epoch %d", transactional_id,
                    txn.producer_id, txn.producer_epoch)
        return InitProducerIdResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)

    def _prepare_init(
        self, txn: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None
    ) -> TxnTransit | ErrorCode:
        if txn.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None and not _is_valid_producer_id(txn, *expected):
            return ErrorCode.PRODUCER_FENCED
        if txn.state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state is _S.ONGOING:
            return txn.prepare_fence_producer_epoch()
        if txn.is_producer_epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
            return txn.prepare_producer_id_rotation(
                self._allocate_producer_id(), timeout_ms, self._now_ms(),
                record_last_epoch=expected is not None,
            )
        expected_epoch = None if expected is None else expected[1]
        return txn.prepare_increment_producer_epoch(timeout_ms, expected_epoch, self._now_ms())

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------

    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        added = frozenset(partitions)
        txn = self.transactions.get(transactional_id)
        error = self.ownership_error(transactional_id) or _check_producer(
            txn, producer_id, producer_epoch)
        if error is not None:
            return error
        assert txn is not None
        if txn.pending_transition_in_progress or txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state is _S.ONGOING and added <= txn.partitions:
            return ErrorCode.NONE
        return self._write(txn, txn.prepare_add_partitions(added, self._now_ms()))

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ ``verify_only`` (KIP-890): is each partition in the producer's
        open transaction? TRANSACTION_ABORTABLE for one that is not."""
        wanted = list(partitions)
        if not transactional_id:
            return dict.fromkeys(wanted, ErrorCode.INVALID_REQUEST)
        txn = self.transactions.get(transactional_id)
        error = self.ownership_error(transactional_id) or _check_producer(
            txn, producer_id, producer_epoch)
        if error is None and txn is not None and txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error is not None:
            return dict.fromkeys(wanted, error)
        assert txn is not None
        return {tp: ErrorCode.NONE if tp in txn.partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in wanted}

    # -- EndTxn -------------------------------------------------------------------------------

    def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, *, commit: bool
    ) -> EndTxnResult:
        if not transactional_id:
            return EndTxnResult(ErrorCode.INVALID_REQUEST)
        not_here = self.ownership_error(transactional_id)
        if not_here is not None:
            return EndTxnResult(not_here)
        txn = self.transactions.get(transactional_id)
        if txn is None:
            return EndTxnResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        return self._end(txn, producer_id, producer_epoch, commit=commit, from_client=True)

    def _end(
        self, txn: TransactionMetadata, producer_id: int, producer_epoch: int, *, commit: bool,
        from_client: bool,
    ) -> EndTxnResult:
        fencing = txn.pending_state is _S.PREPARE_EPOCH_FENCE
        prepared = self._prepare_end(txn, producer_id, producer_epoch, commit, from_client)
        if isinstance(prepared, ErrorCode):
            if fencing and txn.pending_state is _S.PREPARE_EPOCH_FENCE:
                txn.abort_transition()  # the fence goes nowhere: drop it
            if prepared is ErrorCode.NONE:
                return EndTxnResult(prepared, txn.producer_id, txn.producer_epoch)
            return EndTxnResult(prepared)
        error = self._write(txn, prepared)
        if error is not ErrorCode.NONE:
            txn.has_failed_epoch_fence = txn.has_failed_epoch_fence or fencing
            return EndTxnResult(error)
        # Markers only once PrepareCommit/PrepareAbort is replicated: a coordinator elected
        # after a failover must know the outcome of every transaction whose markers exist.
        self.after_replication(txn.transactional_id, lambda: self._send_markers_if_preparing(txn))
        return EndTxnResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)

    def _send_markers_if_preparing(self, txn: TransactionMetadata) -> None:
        if (txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
                and not txn.pending_transition_in_progress
                and self.transactions.get(txn.transactional_id) is txn):
            self._send_markers(txn)

    def _prepare_end(
        self, txn: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
        from_client: bool,
    ) -> TxnTransit | ErrorCode:
        """Kafka's ``endTransaction`` checks (transactions version 0/1)."""
        fencing = txn.pending_state is _S.PREPARE_EPOCH_FENCE
        valid_epoch = (not from_client or producer_epoch == txn.producer_epoch) and (
            producer_epoch >= txn.producer_epoch
        )
        if txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if not valid_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending_transition_in_progress and not fencing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        wanted = _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT
        preparing = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        if txn.state is _S.ONGOING:
            if fencing:  # take the bumped epoch over; the fence itself is never written
                txn.pending_state = None
                txn.producer_epoch = producer_epoch
                txn.last_producer_epoch = NO_PRODUCER_EPOCH
            return txn.prepare_abort_or_commit(preparing, self._now_ms())
        if txn.state is wanted:
            return ErrorCode.NONE  # a retry of an EndTxn that completed
        if txn.state is preparing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    def _send_markers(self, txn: TransactionMetadata) -> None:
        """Write the markers of a PrepareCommit/PrepareAbort transaction; complete it when none
        is left to retry."""
        commit = txn.state is _S.PREPARE_COMMIT
        coordinator_epoch = self._log.coordinator_epoch(txn.transactional_id)
        retry = self._markers.write_markers(
            txn.producer_id, txn.producer_epoch, coordinator_epoch, commit, sorted(txn.partitions)
        )
        for partition in list(txn.partitions):
            if partition not in retry:
                txn.remove_partition(partition)
        if txn.partitions:
            logger.info("transactional id %s: markers for %s not written yet",
                        txn.transactional_id, sorted(txn.partitions))
            return
        self._write(txn, txn.prepare_complete(self._now_ms()))

    def markers_written(
        self, producer_id: int, producer_epoch: int, commit: bool, written: set[TopicPartition]
    ) -> None:
        """Markers written by other partition leaders (WriteTxnMarkers answered): take them
        off the transaction, and complete it once none is left. Ignored unless the producer's
        transaction is still the one preparing that outcome."""
        preparing = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        txn = next((t for t in self.transactions.values() if t.producer_id == producer_id), None)
        if txn is None or txn.producer_epoch != producer_epoch or txn.state is not preparing \
                or txn.pending_transition_in_progress:
            return
        for partition in written & txn.partitions:
            txn.remove_partition(partition)
        if not txn.partitions:
            self._write(txn, txn.prepare_complete(self._now_ms()))

    def complete_pending(self) -> int:
        """Retry the markers of every transaction left in PrepareCommit/PrepareAbort."""
        pending = [txn for txn in self.transactions.values()
                   if txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
                   and not txn.pending_transition_in_progress]
        for txn in pending:
            self._send_markers(txn)
        return len(pending)

    # -- timeouts and expiry ------------------------------------------------------------------

    def abort_timed_out_transactions(self) -> int:
        """Abort (with a fencing epoch bump) every transaction open past its timeout; the
        scheduled ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` task."""
        now_ms = self._now_ms()
        timed_out = [txn for txn in self.transactions.values() if txn.has_timed_out(now_ms)]
        for txn in timed_out:
            fence = txn.prepare_fence_producer_epoch()
            result = self._end(txn, fence.producer_id, fence.producer_epoch, commit=False,
                               from_client=False)
            logger.info("aborted timed-out transaction of %s (producer %d): %s",
                        txn.transactional_id, txn.producer_id, result.error.name)
        self.complete_pending()
        return len(timed_out)

    def expire_transactional_ids(self) -> int:
        """Forget ids idle for ``transactional.id.expiration.ms`` (a tombstone each)."""
        now_ms = self._now_ms()
        expiration_ms = self.config.transactional_id_expiration_ms
        expired = [txn for txn in self.transactions.values()
                   if txn.is_expirable(now_ms, expiration_ms)]
        for txn in expired:
            transit = txn.prepare_dead()
            try:
                self._log.append(txn.transactional_id, transit)
            except KafkaError as error:
                logger.warning("expiring transactional id %s failed: %s", txn.transactional_id, error)
                txn.abort_transition()
                continue
            del self.transactions[txn.transactional_id]
            logger.info("expired transactional id %s", txn.transactional_id)
        return len(expired)

    # -- the log ------------------------------------------------------------------------------

    def _write(self, txn: TransactionMetadata, transit: TxnTransit) -> ErrorCode:
        """Write ``transit`` and complete it; the error a client gets when the write failed."""
        try:
            self._log.append(txn.transactional_id, transit)
        except KafkaError as error:
            logger.warning("transactional id %s: writing %s failed: %s", txn.transactional_id,
                           transit.state.display_name, error)
            txn.abort_transition()
            return _append_error(error)
        txn.complete_transition(transit)
        return ErrorCode.NONE

    # -- DescribeTransactions / ListTransactions ----------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata | ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        not_here = self.ownership_error(transactional_id)
        if not_here is not None:
            return not_here
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.state is _S.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        return txn

    def list_transactions(
        self, *, producer_ids: Iterable[int] = (), states: Iterable[TransactionState] = (),
        duration_filter_ms: int = -1,
    ) -> list[TransactionMetadata]:
        """ListTransactions' filters: any of the producer ids, any of the states, open longer
        than ``duration_filter_ms`` (-1: no filter); Dead ids are never listed."""
        wanted_ids, wanted_states = set(producer_ids), set(states)
        now_ms = self._now_ms()
        return [
            txn for txn in self.transactions.values()
            if txn.state is not _S.DEAD
            and (not wanted_ids or txn.producer_id in wanted_ids)
            and (not wanted_states or txn.state in wanted_states)
            and (duration_filter_ms < 0 or now_ms - txn.start_timestamp_ms > duration_filter_ms)
        ]


def _is_valid_producer_id(txn: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """Kafka's ``isValidProducerId`` for InitProducerId with the producer's last id and epoch."""
    return (
        txn.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == txn.producer_id
        or (producer_id == txn.previous_producer_id and is_epoch_exhausted(producer_epoch))
    )


def _check_producer(
    txn: TransactionMetadata | None, producer_id: int, producer_epoch: int
) -> ErrorCode | None:
    if txn is None or txn.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if txn.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return None


def _append_error(error: KafkaError) -> ErrorCode:
    """Kafka's ``appendTransactionToLog`` error mapping: what the client may retry on."""
    code = ErrorCode(error.code)
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code
