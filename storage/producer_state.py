"""Idempotent and transactional producer state of one partition (Kafka's ``ProducerStateManager``).

Per producer id the manager keeps the epoch and the metadata of the producer's last
``NUM_BATCHES_TO_RETAIN`` (5) batches: last sequence, last offset, offset delta (so first
sequence and first offset follow) and max timestamp, as Kafka's ``ProducerStateEntry``.

Checks of a client's batch (Kafka 4's ``ProducerAppendInfo`` and ``UnifiedLog.
analyzeAndValidateProducerState``, origin CLIENT):

- duplicate: same epoch and the same first *and* last sequence as one of the 5 retained batches
  → the original batch's metadata is returned and nothing is appended (Kafka answers such a
  retry with error NONE and the original offsets);
- epoch older than the producer's → INVALID_PRODUCER_EPOCH;
- a newer epoch must start at sequence 0 → else OUT_OF_ORDER_SEQUENCE_NUMBER, unless the
  producer is unknown here;
- same epoch: the first sequence must follow the last one, wrapping from 2**31-1 to 0 → else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
- unknown producer (never seen, expired, or its state lost with its snapshots): any epoch and
  any sequence is accepted. Since KIP-360 (Kafka 2.5) the broker never answers
  UNKNOWN_PRODUCER_ID for this; the producer's state simply starts again;
- a transactional batch needs an ongoing transaction of the producer at the batch's epoch in
  this partition, or else the caller's word that the transaction coordinator has this
  partition in the producer's transaction (``transaction_verified``, KIP-890 part 1) → else
  INVALID_TXN_STATE; a non-transactional batch while the producer's transaction is open →
  INVALID_TXN_STATE.

Origin COORDINATOR (the group coordinator's transactional offset commits) checks the epoch
only: such batches carry no sequence. End-transaction markers (``check_marker``) check the
epoch and the coordinator epoch (TRANSACTION_COORDINATOR_FENCED for an older one), end the
producer's transaction and report it as a ``CompletedTxn`` when it had data here. Replicated
and replayed batches (origin REPLICATION) are not checked.

Transactions (Kafka's ``ongoingTxns``): ``ongoing`` maps each producer with an open
transaction to the transaction's first offset; ``first_unstable_offset`` is the smallest of
them (None: no open transaction), and the partition's last stable offset is
min(first_unstable_offset, high watermark). On one node a marker is replicated as soon as it is
written, so Kafka's "unreplicated" completed transactions never hold the LSO back here.

Producers expire ``producer.id.expiration.ms`` (Kafka 4: 86400000) after their last batch's
max timestamp, unless they have a transaction open.

``ProducerStateManager`` does no I/O; its snapshot files are ``storage.producer_snapshot``'s.
The state is owned by the ``Log`` holding it (the broker's event loop).
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, BatchHeader

logger = logging.getLogger("samsa.storage.producer_state")

NUM_BATCHES_TO_RETAIN = 5
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms, Kafka 4's default
PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000  # producer.id.expiration.check.interval.ms
NO_COORDINATOR_EPOCH = -1
NO_TXN_OFFSET = -1

_INT32_MAX = 2**31 - 1


class BatchMetadata(NamedTuple):
    """One retained batch (Kafka's ``BatchMetadata``); a NamedTuple: one is built per append."""

    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_sequence(self) -> int:
        return decrement_sequence(self.last_sequence, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """One producer's epoch, its last batches (oldest first) and transaction state."""

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        *,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = NO_COORDINATOR_EPOCH,
        last_timestamp: int = NO_TIMESTAMP,
        current_txn_first_offset: int = NO_TXN_OFFSET,
        batches: Iterable[BatchMetadata] = (),
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
            f"last_timestamp={self.last_timestamp}, batches={list(self.batches)})"
        )

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def pending_copy(self) -> ProducerStateEntry:
        """What an append starts from (Kafka's ``withProducerIdAndBatchMetadata``): no batches."""
        return ProducerStateEntry(
            self.producer_id,
            producer_epoch=self.producer_epoch,
            coordinator_epoch=self.coordinator_epoch,
            last_timestamp=self.last_timestamp,
            current_txn_first_offset=self.current_txn_first_offset,
        )

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The retained batch with the exact sequence range of ``header`` (same epoch only)."""
        if header.producer_epoch != self.producer_epoch:
            return None
        last_sequence = header.last_sequence
        for batch in self.batches:
            if batch.last_sequence == last_sequence and batch.first_sequence == header.base_sequence:
                return batch
        return None

    def update_epoch(self, producer_epoch: int) -> None:
        """A new epoch forgets the batches of the old one."""
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch

    def add_batch(self, producer_epoch: int, batch: BatchMetadata) -> None:
        self.update_epoch(producer_epoch)
        self.batches.append(batch)  # the deque drops the oldest beyond 5
        self.last_timestamp = batch.timestamp

    def update(self, pending: ProducerStateEntry) -> None:
        """Take over what one append produced (Kafka's ``ProducerStateEntry.update``)."""
        self.update_epoch(pending.producer_epoch)
        self.batches.extend(pending.batches)
        self.coordinator_epoch = pending.coordinator_epoch
        self.current_txn_first_offset = pending.current_txn_first_offset
        self.last_timestamp = pending.last_timestamp


class AppendOrigin(enum.Enum):
    """Who wrote a batch, which decides what is checked (Kafka's ``AppendOrigin``)."""

    CLIENT = "client"  # epoch, sequence, transaction
    COORDINATOR = "coordinator"  # epoch and transaction only (transactional offset commits)
    REPLICATION = "replication"  # nothing: replicated, or replayed from the log


class EndMarker(NamedTuple):
    """What an end-transaction marker's record says (the control batch's single record)."""

    is_abort: bool
    coordinator_epoch: int


class CompletedTxn(NamedTuple):
    """A transaction a marker ended (Kafka's ``CompletedTxn``): its first offset here and the
    marker's offset; an aborted one goes into the segment's ``.txnindex``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerAppend(NamedTuple):
    """The outcome of checking one append: a duplicate, or the entries to apply after writing
    (and the transactions its markers end)."""

    entries: dict[int, ProducerStateEntry]
    duplicate: BatchMetadata | None = None
    completed: tuple[CompletedTxn, ...] = ()


class ProducerStateManager:
    """Producer id → ``ProducerStateEntry`` for one partition; sans-IO, time passed in."""

    def __init__(self, *, producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.first_unstable_offset: int | None = None  # min(ongoing.values()); None if none

    def __len__(self) -> int:
        return len(self.producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def clear(self) -> None:
        self.producers.clear()
        self._set_ongoing({})

    # -- appends ------------------------------------------------------------------------------

    def check_client_append(
        self,
        headers: Sequence[BatchHeader],
        first_offset: int,
        *,
        log_append_time: int = -1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_verified: bool = False,
    ) -> ProducerAppend:
        """Check a client's (or the coordinator's) batches, which will get offsets from
        ``first_offset`` on.

        Returns the first duplicate batch found (then nothing may be appended), or the updated
        entries for ``apply``. Raises the Kafka error of the first batch that fails.
        """
        pending: dict[int, ProducerStateEntry] = {}
        base_offset = first_offset
        for header in headers:
            if header.producer_id >= 0:
                current = self.producers.get(header.producer_id)
                duplicate = None if current is None else current.find_duplicate(header)
                if duplicate is not None and origin is AppendOrigin.CLIENT:
                    return ProducerAppend({}, duplicate)
                updated = _pending_entry(pending, current, header.producer_id)
                _check_transaction(updated, header, transaction_verified)
                _check_epoch(updated, header, base_offset)
                if origin is AppendOrigin.CLIENT:
                    _check_sequence(current, updated, header, base_offset)
                _add_data_batch(updated, header, base_offset, log_append_time, strict=True)
            base_offset += header.last_offset_delta + 1
        return ProducerAppend(pending)

    def check_marker(
        self, header: BatchHeader, marker: EndMarker, offset: int, *, timestamp: int
    ) -> ProducerAppend:
        """Check an end-transaction marker the coordinator writes at ``offset`` (Kafka's
        ``appendEndTxnMarker``): the epoch, then the coordinator epoch."""
        current = self.producers.get(header.producer_id)
        updated = (current or ProducerStateEntry(header.producer_id)).pending_copy()
        _check_epoch(updated, header, offset)
        if updated.coordinator_epoch > marker.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker of producer {header.producer_id} at offset {offset} has coordinator "
                f"epoch {marker.coordinator_epoch}, older than {updated.coordinator_epoch}"
            )
        completed = _end_transaction(updated, header.producer_epoch, marker, offset, timestamp)
        return ProducerAppend({header.producer_id: updated}, completed=completed)

    def prepare_replica_append(
        self, headers: Iterable[BatchHeader], markers: Mapping[int, EndMarker] | None = None
    ) -> ProducerAppend:
        """Batches that already carry offsets (replication, log replay): nothing is checked.
        ``markers`` holds what the control batches say, by base offset (a control batch
        missing there ends its producer's transaction without reporting it)."""
        pending: dict[int, ProducerStateEntry] = {}
        completed: list[CompletedTxn] = []
        for header in headers:
            if header.producer_id >= 0:
                current = self.producers.get(header.producer_id)
                updated = _pending_entry(pending, current, header.producer_id)
                if header.is_control:
                    marker = None if markers is None else markers.get(header.base_offset)
                    completed += _add_control_batch(updated, header, marker)
                else:
                    _add_data_batch(updated, header, header.base_offset, -1, strict=False)
        return ProducerAppend(pending, completed=tuple(completed))

    def apply(self, append: ProducerAppend) -> None:
        ongoing_changed = False
        for producer_id, pending in append.entries.items():
            current = self.producers.get(producer_id)
            if current is None:
                self.producers[producer_id] = current = pending
            else:
                current.update(pending)
            first = current.current_txn_first_offset
            if first != NO_TXN_OFFSET:
                ongoing_changed |= self.ongoing.get(producer_id) != first
                self.ongoing[producer_id] = first
            elif self.ongoing.pop(producer_id, None) is not None:
                ongoing_changed = True
        if ongoing_changed:
            self._set_ongoing(self.ongoing)

    def replay(self, header: BatchHeader, marker: EndMarker | None = None) -> tuple[CompletedTxn, ...]:
        """Rebuild: apply one batch read back from the log; the transaction it ended, if any."""
        if header.producer_id < 0:
            return ()
        markers = None if marker is None else {header.base_offset: marker}
        append = self.prepare_replica_append((header,), markers)
        self.apply(append)
        return append.completed

    # -- transactions -------------------------------------------------------------------------

    def _set_ongoing(self, ongoing: dict[int, int]) -> None:
        self.ongoing = ongoing
        self.first_unstable_offset = min(ongoing.values(), default=None)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        entry = self.producers.get(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset != NO_TXN_OFFSET
            and entry.producer_epoch == producer_epoch
        )

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is over (Kafka's ``lastStableOffset(CompletedTxn)``): the
        first offset of the oldest open transaction of another producer, else the offset after
        the marker. Call after ``apply``."""
        others = (first for pid, first in self.ongoing.items() if pid != completed.producer_id)
        return min(others, default=completed.last_offset + 1)

    # -- expiry and snapshots -----------------------------------------------------------------

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset == NO_TXN_OFFSET
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many went."""
        expired = [pid for pid, entry in self.producers.items() if self.is_expired(entry, now_ms)]
        for producer_id in expired:
            del self.producers[producer_id]
        return len(expired)

    def load(self, entries: Iterable[ProducerStateEntry], now_ms: int) -> None:
        """Replace the state with a snapshot's entries, dropping those already expired."""
        self.producers = {
            entry.producer_id: entry for entry in entries if not self.is_expired(entry, now_ms)
        }
        self._set_ongoing({
            pid: entry.current_txn_first_offset
            for pid, entry in self.producers.items()
            if entry.current_txn_first_offset != NO_TXN_OFFSET
        })


def _pending_entry(
    pending: dict[int, ProducerStateEntry], current: ProducerStateEntry | None, producer_id: int
) -> ProducerStateEntry:
    updated = pending.get(producer_id)
    if updated is None:
        base = current if current is not None else ProducerStateEntry(producer_id)
        updated = pending[producer_id] = base.pending_copy()
    return updated


def _check_epoch(updated: ProducerStateEntry, header: BatchHeader, offset: int) -> None:
    if header.producer_epoch < updated.producer_epoch:
        raise InvalidProducerEpochError(
            f"epoch {header.producer_epoch} of producer {header.producer_id} at offset {offset} "
            f"is smaller than the last seen epoch {updated.producer_epoch}"
        )


def _check_sequence(
    current: ProducerStateEntry | None, updated: ProducerStateEntry, header: BatchHeader, offset: int
) -> None:
    """Kafka's ``ProducerAppendInfo.checkSequence``; ``updated`` holds this append's batches."""
    first_sequence = header.base_sequence
    if header.producer_epoch != updated.producer_epoch:
        if first_sequence != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceNumberError(
                f"producer {header.producer_id} at offset {offset}: new epoch "
                f"{header.producer_epoch} starts at sequence {first_sequence}, not 0 "
                f"(current epoch {updated.producer_epoch})"
            )
        return
    if updated.batches:
        last_sequence = updated.last_sequence
    elif current is not None and header.producer_epoch == current.producer_epoch:
        last_sequence = current.last_sequence
    else:
        last_sequence = NO_SEQUENCE
    # A producer whose state is gone (no epoch known) may continue at any sequence.
    current_epoch = NO_PRODUCER_EPOCH if current is None else current.producer_epoch
    if current_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_sequence, first_sequence):
        raise OutOfOrderSequenceNumberError(
            f"producer {header.producer_id} at offset {offset}: sequence {first_sequence} does "
            f"not follow {last_sequence}"
        )


def _check_transaction(updated: ProducerStateEntry, header: BatchHeader, verified: bool) -> None:
    """A transactional batch needs an open transaction at its epoch or a verified one (Kafka's
    ``hasOngoingTransaction || !batchMissingRequiredVerification``)."""
    if not header.is_transactional or verified:
        return
    if updated.current_txn_first_offset == NO_TXN_OFFSET or (
        updated.producer_epoch != header.producer_epoch
    ):
        raise InvalidTxnStateError(
            f"transactional batch of producer {header.producer_id} (epoch "
            f"{header.producer_epoch}) was not part of an ongoing transaction"
        )


def _add_data_batch(
    updated: ProducerStateEntry,
    header: BatchHeader,
    base_offset: int,
    log_append_time: int,
    *,
    strict: bool,
) -> None:
    """Kafka's ``appendDataBatch``; ``strict`` (not for replicas): no plain batch inside an open
    transaction."""
    delta = header.last_offset_delta
    timestamp = log_append_time if log_append_time >= 0 else header.max_timestamp
    metadata = BatchMetadata(header.last_sequence, base_offset + delta, delta, timestamp)
    if strict and not header.is_transactional and (
        updated.current_txn_first_offset != NO_TXN_OFFSET
    ):
        raise InvalidTxnStateError(
            f"expected a transactional batch from producer {header.producer_id} at offset "
            f"{base_offset}: its transaction is open"
        )
    updated.add_batch(header.producer_epoch, metadata)
    if header.is_transactional and updated.current_txn_first_offset == NO_TXN_OFFSET:
        updated.current_txn_first_offset = base_offset


def _add_control_batch(
    updated: ProducerStateEntry, header: BatchHeader, marker: EndMarker | None
) -> tuple[CompletedTxn, ...]:
    """An end-transaction marker read back (Kafka's ``appendEndTxnMarker``, not checked); an
    emptied one (its record cleaned away) is ignored."""
    if header.records_count == 0:
        return ()
    if marker is None:  # what the record says is unknown: end the transaction, report nothing
        marker = EndMarker(is_abort=False, coordinator_epoch=updated.coordinator_epoch)
        _end_transaction(updated, header.producer_epoch, marker, header.base_offset, header.max_timestamp)
        return ()
    return _end_transaction(
        updated, header.producer_epoch, marker, header.base_offset, header.max_timestamp
    )


def _end_transaction(
    updated: ProducerStateEntry, epoch: int, marker: EndMarker, offset: int, timestamp: int
) -> tuple[CompletedTxn, ...]:
    """Close the producer's transaction at the marker's ``offset``; the completed transaction
    when it had data in this partition (a marker alone changes no LSO and no index)."""
    first = updated.current_txn_first_offset
    completed: tuple[CompletedTxn, ...] = ()
    if first != NO_TXN_OFFSET:
        completed = (CompletedTxn(updated.producer_id, first, offset, marker.is_abort),)
    updated.update_epoch(epoch)
    updated.coordinator_epoch = marker.coordinator_epoch
    updated.current_txn_first_offset = NO_TXN_OFFSET
    updated.last_timestamp = timestamp
    return completed


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == _INT32_MAX)


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement``, wrapping below 0 to 2**31-1 (Kafka's ``decrementSequence``)."""
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement
