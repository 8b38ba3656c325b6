"""Idempotent producer bookkeeping: producer id and epoch, per-partition sequence numbers.

The idempotent half of Kafka's ``TransactionManager``:

- The producer id and epoch come from InitProducerId (no transactional id). Every batch
  gets, when it is first drained, the next sequence of its partition (``gate``), and keeps it
  through retries, so the broker can drop a batch it already has and refuse a gap.
- Ordering with up to 5 requests in flight: a batch being retried is drained only when it is
  the partition's first unfinished batch; the ones behind it wait (Kafka's
  ``shouldStopDrainBatchesForPartition``), so retries go out one at a time, in order.
- OUT_OF_ORDER_SEQUENCE_NUMBER (or UNKNOWN_PRODUCER_ID) for a batch that is not the next one
  after the last acknowledged means an earlier batch failed: retry it. For the very next
  batch it means the broker lost track: bump the epoch (client side, KIP-360; at epoch 32767
  a new producer id is fetched instead) and rewrite the partition's unfinished batches to
  sequences from 0 under the new epoch.
- A batch that fails for good after getting a sequence leaves a gap: bump the epoch the same
  way. (Kafka first waits to learn whether a batch that timed out in flight was written; this
  simplification bumps at once, which can duplicate such a batch if the broker did write it.)
- Other partitions keep their old epoch until their in-flight batches are done, then start
  again at sequence 0 under the new one (Kafka's ``maybeUpdateProducerIdAndEpoch``).

State: used by the sender only, on the producer's event loop (``gate`` runs under the
accumulator's lock, called by ``drain``).
"""

from __future__ import annotations

import logging

from samsa._accumulator import ProducerBatch
from samsa._encoding import set_producer_state
from samsa.types import TopicPartition

__all__ = ["IdempotenceState"]

log = logging.getLogger("samsa.producer")

_INT32_MAX = 2**31 - 1
_MAX_EPOCH = 32767


def _add_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from 2**31-1 to 0, as Kafka's do."""
    return (sequence + increment) % (_INT32_MAX + 1)


class _Partition:
    __slots__ = ("epoch", "in_flight", "last_acked", "next_sequence", "producer_id")

    def __init__(self, producer_id: int, epoch: int) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.next_sequence = 0
        self.last_acked = -1
        self.in_flight: list[ProducerBatch] = []  # batches with a sequence, not done, by sequence


class IdempotenceState:
    """Sequence numbers and producer id/epoch for an idempotent producer (see the module
    docstring)."""

    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._rewrite: set[TopicPartition] = set()
        self.epoch_bump_required = False
        self.producer_id_required = True

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        """A new producer id from InitProducerId: every partition starts again at 0."""
        self.producer_id, self.epoch = producer_id, epoch
        self.producer_id_required = False
        self._rewrite_partitions()
        log.info("idempotent producer id %d, epoch %d", producer_id, epoch)

    # --- draining --------------------------------------------------------------------------

    def gate(self, batch: ProducerBatch) -> bool:
        """May ``batch`` be drained now? Gives a fresh batch its producer id, epoch and
        sequence."""
        if not self.has_producer_id or self.epoch_bump_required:
            return False
        state = self._state(batch.topic_partition)
        if batch.has_sequence:  # a retry: only as the partition's first unfinished batch
            return not state.in_flight or state.in_flight[0] is batch
        if (state.producer_id, state.epoch) != (self.producer_id, self.epoch):
            if state.in_flight:
                return False  # batches of the old epoch must finish first
            self._start_over(state)
        batch.producer_id, batch.producer_epoch = self.producer_id, self.epoch
        batch.base_sequence = state.next_sequence
        state.next_sequence = _add_sequence(state.next_sequence, batch.record_count)
        state.in_flight.append(batch)
        return True

    def _state(self, tp: TopicPartition) -> _Partition:
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = _Partition(self.producer_id, self.epoch)
        return state

    def _start_over(self, state: _Partition) -> None:
        state.producer_id, state.epoch = self.producer_id, self.epoch
        state.next_sequence = 0
        state.last_acked = -1

    # --- outcomes --------------------------------------------------------------------------

    def on_success(self, batch: ProducerBatch) -> None:
        state = self._partitions.get(batch.topic_partition)
        if state is None or not batch.has_sequence:
            return
        self._remove(state, batch)
        if (batch.producer_id, batch.producer_epoch) == (state.producer_id, state.epoch):
            state.last_acked = _add_sequence(batch.base_sequence, batch.record_count - 1)

    def on_failure(self, batch: ProducerBatch) -> None:
        """``batch`` failed for good: if it had a sequence, the partition has a gap."""
        state = self._partitions.get(batch.topic_partition)
        if state is None or not batch.has_sequence:
            return
        self._remove(state, batch)
        if (batch.producer_id, batch.producer_epoch) == (state.producer_id, state.epoch):
            self.request_epoch_bump(batch.topic_partition)

    def should_retry_sequence_error(self, batch: ProducerBatch) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID for ``batch``: always retried;
        an epoch bump first when the broker lost track (``batch`` is the very next one)."""
        state = self._partitions.get(batch.topic_partition)
        if state is None:
            return True
        is_next = _add_sequence(state.last_acked, 1) == batch.base_sequence
        if is_next and not batch.sequence_reset:
            self.request_epoch_bump(batch.topic_partition)
        return True

    def split(self, batch: ProducerBatch, parts: list[ProducerBatch]) -> None:
        """``batch`` was split into ``parts`` (its records, in order): they take its place,
        with sequences from its base sequence on (Kafka's ``splitAndReenqueue``)."""
        state = self._partitions.get(batch.topic_partition)
        if state is None or not batch.has_sequence:
            return
        sequence = batch.base_sequence
        for part in parts:
            part.producer_id, part.producer_epoch = batch.producer_id, batch.producer_epoch
            part.base_sequence = sequence
            part.sequence_reset = batch.sequence_reset
            sequence = _add_sequence(sequence, part.record_count)
        for index, candidate in enumerate(state.in_flight):
            if candidate is batch:
                state.in_flight[index:index + 1] = parts
                return

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        self.epoch_bump_required = True
        self._rewrite.add(tp)

    def bump_epoch(self) -> None:
        """Apply a requested bump: the next epoch (or ask for a new producer id at the
        last one), and the partitions that asked start their unfinished batches again at 0."""
        if self.epoch >= _MAX_EPOCH:
            self.producer_id, self.epoch = -1, -1
            self.producer_id_required = True
            self.epoch_bump_required = False
            return
        self.epoch += 1
        self.epoch_bump_required = False
        log.info("idempotent producer %d bumped its epoch to %d", self.producer_id, self.epoch)
        self._rewrite_partitions()

    def _rewrite_partitions(self) -> None:
        for tp in self._rewrite:
            state = self._state(tp)
            self._start_over(state)
            for batch in state.in_flight:
                batch.producer_id, batch.producer_epoch = self.producer_id, self.epoch
                batch.base_sequence = state.next_sequence
                batch.sequence_reset = True
                if batch.payload is not None:
                    set_producer_state(batch.payload, self.producer_id, self.epoch,
                                       batch.base_sequence)
                state.next_sequence = _add_sequence(state.next_sequence, batch.record_count)
        self._rewrite.clear()

    def has_in_flight(self, tp: TopicPartition) -> bool:
        state = self._partitions.get(tp)
        return state is not None and bool(state.in_flight)

    @staticmethod
    def _remove(state: _Partition, batch: ProducerBatch) -> None:
        for index, candidate in enumerate(state.in_flight):
            if candidate is batch:
                del state.in_flight[index]
                return
