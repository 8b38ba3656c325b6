"""One transactional id's state machine (Kafka's ``TransactionMetadata``), sans-IO.

States (their ids are the ``TransactionStatus`` byte of ``__transaction_state`` values) and
the states each may be entered from::

    Empty(0)              <- Empty, CompleteCommit, CompleteAbort   InitProducerId (epoch bump)
    Ongoing(1)            <- Ongoing, Empty, CompleteCommit, CompleteAbort   AddPartitions/Offsets
    PrepareCommit(2)      <- Ongoing                                EndTxn commit
    PrepareAbort(3)       <- Ongoing, PrepareEpochFence             EndTxn abort, fencing, timeout
    CompleteCommit(4)     <- PrepareCommit                          markers written
    CompleteAbort(5)      <- PrepareAbort                           markers written
    Dead(6)               <- Empty, CompleteCommit, CompleteAbort   transactional.id.expiration.ms
    PrepareEpochFence(7)  <- Ongoing                                (never written: becomes PrepareAbort)

A change is two-phase, as in Kafka: ``prepare_*`` checks the move, sets ``pending_state`` and
returns the target as a frozen ``TxnTransit`` (nothing else changes); the caller writes the
transit to the transaction log and then calls ``complete_transition`` (or, when the write
failed, ``abort_transition``). A pending state blocks every other prepare, which callers answer
with CONCURRENT_TRANSACTIONS. Illegal moves raise ``IllegalTransactionStateError`` (a bug:
callers check the state first).

Transactions version 0/1 only (KIP-890 part 1): the epoch is bumped by InitProducerId and by
fencing, not at the end of every transaction (part 2, EndTxn v5 semantics, is not done), so
there is no "next producer id".

Owned by the transaction coordinator (the broker's event loop); times are passed in.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "IllegalTransactionStateError",
    "TopicPartition",
    "TransactionMetadata",
    "TransactionState",
    "TxnTransit",
    "is_epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 2**15 - 1

TopicPartition = tuple[str, int]


class TransactionState(enum.Enum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """Kafka's name (DescribeTransactions, ListTransactions): ``PrepareCommit``, ..."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_display_name(cls, name: str) -> TransactionState | None:
        return next((state for state in cls if state.display_name == name), None)


_S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
EXPIRATION_ALLOWED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
PENDING_TRANSACTION_STATES = frozenset({_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT})


class IllegalTransactionStateError(Exception):
    """A transition the state machine does not allow: a bug in the caller."""


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No client may use epoch Short.MaxValue: the coordinator must always be able to fence."""
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The target of a transition (Kafka's ``TxnTransitMetadata``): what the log records."""

    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_timestamp_ms: int
    last_update_timestamp_ms: int


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    timeout_ms: int
    last_update_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp_ms: int = -1
    pending_state: TransactionState | None = None
    # A fence whose log write failed: the next fence does not bump the epoch again (the bumped
    # epoch was never handed out).
    has_failed_epoch_fence: bool = False

    # -- prepare ------------------------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Bump the epoch to fence the current producer before aborting its transaction."""
        if self.producer_epoch >= SHORT_MAX:
            raise IllegalTransactionStateError("cannot fence a producer at epoch Short.MaxValue")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(_S.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
                             self.timeout_ms, frozenset(self.partitions), self.start_timestamp_ms,
                             self.last_update_timestamp_ms)

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | ErrorCode:
        """InitProducerId: the next epoch, or the same one for a retried call (PRODUCER_FENCED
        when the producer's expected epoch is neither the current nor the last one)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransactionStateError(f"epochs of producer {self.producer_id} exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epochs = (bumped, NO_PRODUCER_EPOCH)
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epochs = (bumped, self.producer_epoch)
        elif expected_epoch == self.last_producer_epoch:
            epochs = (self.producer_epoch, self.last_producer_epoch)  # a retry of a success
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(_S.EMPTY, self.producer_id, *epochs, timeout_ms, frozenset(), -1,
                             now_ms)

    def prepare_producer_id_rotation(
        self, producer_id: int, timeout_ms: int, now_ms: int, *, record_last_epoch: bool
    ) -> TxnTransit:
        """A new producer id at epoch 0, when the current id's epochs are exhausted."""
        if self.state in PENDING_TRANSACTION_STATES:
            raise IllegalTransactionStateError("cannot rotate producer ids during a transaction")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(_S.EMPTY, producer_id, 0, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnTransit:
        starting = self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT)
        start = now_ms if starting else self.start_timestamp_ms
        return self._prepare(_S.ONGOING, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.timeout_ms,
                             frozenset(self.partitions) | added, start, now_ms)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int) -> TxnTransit:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(self.partitions), self.start_timestamp_ms,
                             now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(state, self.producer_id, self.producer_epoch, self.producer_epoch,
                             self.timeout_ms, frozenset(), self.start_timestamp_ms, now_ms)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(_S.DEAD, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.timeout_ms, frozenset(),
                             self.start_timestamp_ms, self.last_update_timestamp_ms)

    def _prepare(
        self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int,
        timeout_ms: int, partitions: frozenset[TopicPartition], start_ms: int, update_ms: int,
    ) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransactionStateError(
                f"{self.transactional_id}: moving to {state.display_name} while "
                f"{self.pending_state.display_name} is pending"
            )
        if state is not _S.DEAD and epoch < 0:
            raise IllegalTransactionStateError(f"illegal producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransactionStateError(
                f"{self.transactional_id}: {state.display_name} cannot follow "
                f"{self.state.display_name}"
            )
        self.pending_state = state
        return TxnTransit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state,
                          partitions, start_ms, update_ms)

    # -- complete -----------------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransit) -> None:
        """The transit is in the log: take it over (Kafka's ``completeTransitionTo``)."""
        if self.pending_state is not transit.state:
            raise IllegalTransactionStateError(
                f"{self.transactional_id}: completing {transit.state.display_name} but "
                f"{self.pending_state} is pending"
            )
        if transit.state in (_S.DEAD, _S.PREPARE_EPOCH_FENCE):
            raise IllegalTransactionStateError(f"{transit.state.display_name} is never completed")
        self._take(transit)
        self.last_update_timestamp_ms = transit.last_update_timestamp_ms
        self.pending_state = None
        self.state = transit.state

    def _take(self, transit: TxnTransit) -> None:
        state = transit.state
        if state is _S.EMPTY:
            self.timeout_ms = transit.timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.previous_producer_id = transit.previous_producer_id
            self.producer_id = transit.producer_id
            self.start_timestamp_ms = -1
            self.partitions = set()
        elif state is _S.ONGOING:
            self.start_timestamp_ms = transit.start_timestamp_ms
            self.partitions |= transit.partitions
        elif state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
            self.start_timestamp_ms = transit.start_timestamp_ms
            self.partitions = set()

    def abort_transition(self) -> None:
        """The log write failed: the transition is dropped (state unchanged)."""
        self.pending_state = None

    def remove_partition(self, partition: TopicPartition) -> None:
        """Its marker is written (or no longer needed)."""
        if self.state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise IllegalTransactionStateError(
                f"{self.transactional_id}: removing a partition in {self.state.display_name}"
            )
        self.partitions.discard(partition)

    # -- queries ------------------------------------------------------------------------------

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    def is_expirable(self, now_ms: int, expiration_ms: int) -> bool:
        """``transactional.id.expiration.ms`` since the last update, in a state that allows it."""
        return (
            self.pending_state is None
            and self.state in EXPIRATION_ALLOWED
            and self.last_update_timestamp_ms <= now_ms - expiration_ms
        )

    def has_timed_out(self, now_ms: int) -> bool:
        """Ongoing for longer than its ``transaction.timeout.ms``."""
        return (
            self.pending_state is None
            and self.state is _S.ONGOING
            and self.start_timestamp_ms + self.timeout_ms < now_ms
        )
