"""The one way records enter a leader's logs (Kafka's ``ReplicaManager.appendRecords``).

Produce (origin CLIENT) and the coordinators (origin COORDINATOR: ``__consumer_offsets``
offsets and group metadata, ``__transaction_state``, transaction markers) append through
``ReplicaAppender``; followers will append the leader's batches verbatim (REPLICATION) through
their fetchers, not here. Per partition, in Kafka's order:

1. a CLIENT append to an internal topic → INVALID_TOPIC_EXCEPTION (Kafka's
   ``internalTopicsAllowed`` is false for clients);
2. a partition not hosted here → UNKNOWN_TOPIC_OR_PARTITION;
3. no records → INVALID_RECORD; more bytes than ``segment.bytes`` → RECORD_LIST_TOO_LARGE;
4. ``verify`` (the transaction check of Produce, KIP-890) raises its mapped error or says
   whether the coordinator vouched for the partition;
5. the append itself (``Partition.append_as_leader``: validation, offsets, high watermark),
   with the entry's ``AppendCondition`` if it has one (SamsaConditionalProduce: checked by
   the log inside the append, OFFSET_CONFLICT and nothing written when it does not hold).

Once every partition is appended, the fetch purgatory is checked for those that took records
(``check_and_complete``, as Kafka's action queue does after the request): long polls waiting on
them are answered, each read once however many of its partitions moved. Entries are a
sequence, not a mapping: a request that names a partition twice appends twice, as Samsa always
did (Kafka keeps the last).

An error stops that partition only; anything unexpected becomes UNKNOWN_SERVER_ERROR with a
logged traceback. acks: 0, 1 and -1 are valid (else INVALID_REQUIRED_ACKS for every partition).
On a single node the ISR is this node, so the high watermark reaches the log end offset inside
the append and ``acks=-1`` is satisfied at once; with replication, an ``acks=-1`` append whose
partitions' high watermarks are below their ``required_offset`` becomes a ``DelayedProduce``
(``delay_until_replicated``) in the produce purgatory, watched under those partitions: it
completes when every partition's high watermark reaches its offset (each then answers NONE, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below ``min.insync.replicas``;
NOT_LEADER_OR_FOLLOWER when leadership moved), or at the request's timeout
(REQUEST_TIMED_OUT for those still short). Whoever moves a high watermark (a follower's
Fetch, an ISR change, a role change) calls ``try_complete_delayed``. ``acks=-1`` is refused
before the append (NOT_ENOUGH_REPLICAS) while the ISR is smaller than ``min.insync.replicas``.

Owned by the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from protocol.errors import (
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTopicExceptionError,
    KafkaError,
    RecordListTooLargeError,
    RequestTimedOutError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from replication.metadata.controller import is_internal
from replication.partition import Partition
from replication.purgatory import DelayedOperation, DelayedOperationPurgatory
from storage.log import AppendCondition, AppendResult
from storage.producer_state import AppendOrigin, EndMarker

__all__ = ["VALID_REQUIRED_ACKS", "DelayedProduce", "PartitionAppend", "ReplicaAppender",
           "verified"]

logger = logging.getLogger("samsa.replication.append")

VALID_REQUIRED_ACKS = (-1, 0, 1)

TopicPartition = tuple[str, int]
Records = bytes | bytearray | memoryview
# Produce's transaction check: True when the coordinator vouched for the partition, False when
# there is nothing to verify; raises the error to answer.
Verify = Callable[[Partition, Records], bool]


def verified(partition: Partition, records: Records) -> bool:
    """``verify`` for a coordinator's own transactional batches: vouched for by itself."""
    return True


def unverified(partition: Partition, records: Records) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class PartitionAppend:
    """One partition's outcome: the append's result, or the error that stopped it."""

    result: AppendResult | None = None
    error: KafkaError | None = None

    @property
    def required_offset(self) -> int:
        """The high watermark at which ``acks=-1`` is satisfied (Kafka's ``requiredOffset``)."""
        assert self.result is not None
        return self.result.last_offset + 1


ReplicationDone = Callable[[dict[TopicPartition, KafkaError | None]], None]


class DelayedProduce(DelayedOperation):
    """An ``acks=-1`` append waiting for its partitions' high watermarks (Kafka's
    ``DelayedProduce``): ``done`` gets each waiting partition's outcome (None: replicated)."""

    def __init__(self, timeout_ms: int, required: dict[TopicPartition, int],
                 partition: Callable[[str, int], Partition | None], done: ReplicationDone) -> None:
        super().__init__(timeout_ms)
        self.required = dict(required)
        self.outcomes: dict[TopicPartition, KafkaError | None] = {}
        self._partition = partition
        self._done: ReplicationDone | None = done

    def try_complete(self) -> bool:
        for key, offset in list(self.required.items()):
            finished, outcome = self._check(key, offset)
            if finished:
                self.outcomes[key] = outcome
                del self.required[key]
        return not self.required and self.force_complete()

    def _check(self, key: TopicPartition, offset: int) -> tuple[bool, KafkaError | None]:
        try:
            partition = self._partition(*key)
        except KafkaError as error:
            return True, error
        if partition is None:
            return True, UnknownTopicOrPartitionError()
        return partition.enough_replicas(offset)

    def on_complete(self) -> None:
        for key in self.required:  # expired: these never reached their offsets
            self.outcomes[key] = RequestTimedOutError(
                f"{key[0]}-{key[1]} was not replicated to the ISR in time")
        done, self._done = self._done, None
        if done is not None:
            done(self.outcomes)


class ReplicaAppender:
    def __init__(
        self,
        partition: Callable[[str, int], Partition | None],
        *,
        fetch_purgatory: DelayedOperationPurgatory[DelayedOperation],
        produce_purgatory: DelayedOperationPurgatory[DelayedOperation] | None = None,
    ) -> None:
        self._partition = partition
        self.fetch_purgatory = fetch_purgatory
        self.produce_purgatory = produce_purgatory or DelayedOperationPurgatory[DelayedOperation](
            "Produce", clock=fetch_purgatory.clock)

    def append_records(
        self,
        entries: Sequence[tuple[TopicPartition, Records | None]],
        *,
        required_acks: int,
        origin: AppendOrigin,
        verify: Verify = unverified,
        conditions: Sequence[AppendCondition | None] | None = None,
    ) -> list[PartitionAppend]:
        """Append each partition's records (see the module docstring); an outcome per entry,
        in order. ``conditions``: one per entry (None: unconditional), or None for none."""
        if required_acks not in VALID_REQUIRED_ACKS:
            return [PartitionAppend(error=InvalidRequiredAcksError()) for _ in entries]
        if conditions is None:
            conditions = [None] * len(entries)
        outcomes = [self._append(key, records, origin, verify, required_acks, condition)
                    for (key, records), condition in zip(entries, conditions, strict=True)]
        self.try_complete_delayed(*{
            key: None for (key, _), outcome in zip(entries, outcomes, strict=True)
            if outcome.result is not None and not outcome.result.duplicate
        })
        return outcomes

    def append_one(
        self, key: TopicPartition, records: Records, *, origin: AppendOrigin,
        verify: Verify = unverified,
    ) -> AppendResult:
        """A coordinator's single append with acks=-1; raises the partition's KafkaError."""
        outcome = self.append_records([(key, records)], required_acks=-1, origin=origin,
                                      verify=verify)[0]
        if outcome.error is not None:
            raise outcome.error
        assert outcome.result is not None
        return outcome.result

    def append_end_marker(
        self, key: TopicPartition, producer_id: int, producer_epoch: int, marker: EndMarker
    ) -> AppendResult:
        """Write a transaction's COMMIT or ABORT marker (origin COORDINATOR); raises the
        append's KafkaError, UNKNOWN_TOPIC_OR_PARTITION when the partition is not here."""
        partition = self._hosted(key)
        result = partition.append_end_marker(producer_id, producer_epoch, marker)
        self.try_complete_delayed(key)
        return result

    def try_complete_delayed(self, *keys: Hashable) -> None:
        """Partitions' log end, high watermark or last stable offset moved: delayed operations
        watching them may complete."""
        if keys:
            self.fetch_purgatory.check_and_complete(*keys)
            self.produce_purgatory.check_and_complete(*keys)

    def delay_until_replicated(
        self, entries: Sequence[tuple[TopicPartition, PartitionAppend]], *, timeout_ms: int,
        done: ReplicationDone,
    ) -> DelayedProduce | None:
        """The acks=-1 appends of ``entries`` whose partitions' high watermarks are short of
        their offsets, as a DelayedProduce (to watch in ``produce_purgatory`` under its keys
        with the shell's timer); None when every one is already replicated (or failed)."""
        required: dict[TopicPartition, int] = {}
        for key, outcome in entries:
            if outcome.result is None:
                continue
            partition = self._partition(*key)
            if partition is not None and partition.high_watermark < outcome.required_offset:
                required[key] = max(required.get(key, 0), outcome.required_offset)
        if not required:
            return None
        return DelayedProduce(timeout_ms, required, self._partition, done)

    def _append(
        self, key: TopicPartition, records: Records | None, origin: AppendOrigin, verify: Verify,
        required_acks: int, condition: AppendCondition | None = None,
    ) -> PartitionAppend:
        try:
            return PartitionAppend(result=self._append_or_raise(
                key, records, origin, verify, required_acks, condition))
        except KafkaError as error:
            return PartitionAppend(error=error)
        except Exception:
            logger.exception("append to %s-%d failed", *key)
            return PartitionAppend(error=UnknownServerError())

    def _append_or_raise(
        self, key: TopicPartition, records: Records | None, origin: AppendOrigin, verify: Verify,
        required_acks: int, condition: AppendCondition | None,
    ) -> AppendResult:
        if origin is AppendOrigin.CLIENT and is_internal(key[0]):
            raise InvalidTopicExceptionError(f"Cannot append to internal topic {key[0]}")
        partition = self._hosted(key)
        if records is None:
            raise InvalidRecordError("produce request carries no record batches")
        if len(records) > partition.log.config.segment_bytes:
            raise RecordListTooLargeError(
                f"{len(records)} bytes of records exceed segment.bytes "
                f"({partition.log.config.segment_bytes})"
            )
        transaction_verified = verify(partition, records)
        partition.check_leader()  # before the transaction check asks the coordinator
        return partition.append_as_leader(
            records, origin=origin, transaction_verified=transaction_verified,
            required_acks=required_acks, condition=condition)

    def _hosted(self, key: TopicPartition) -> Partition:
        partition = self._partition(*key)
        if partition is None:
            raise UnknownTopicOrPartitionError()
        return partition
