"""Coordinator answers that wait for their writes to be replicated (Kafka's coordinators append
to ``__consumer_offsets`` / ``__transaction_state`` with acks=-1 and answer from the append's
callback).

The group and transaction coordinators append synchronously (their state changes in the same
step); what waits is the *answer*: ``answer_when_replicated`` returns the response at once when
the coordinator's partition's high watermark already covers its log end offset (always on a
single node, whose ISR is itself), else an awaitable that answers when it does — a
``DelayedProduce`` (``replication.append``) in the broker's produce purgatory on that partition
— or, at ``offsets.commit.timeout.ms`` (5 s) or when leadership moves, the ``failed`` response
with Kafka's mapping of the append error: NOT_LEADER_OR_FOLLOWER / KAFKA_STORAGE_ERROR ->
NOT_COORDINATOR, anything else -> COORDINATOR_NOT_AVAILABLE (both retried by every client,
which then finds the new coordinator). So a client is told an offset is committed, or a
transaction is prepared, only once every ISR member has it, and a coordinator failover keeps
it.

``call_when_replicated`` is the same wait for the transaction coordinator's own next step: the
markers of a PrepareCommit/PrepareAbort are written only once that state is replicated (else a
new coordinator could abort a transaction whose COMMIT markers were partly written). On a
failed wait it does nothing: the periodic ``complete_pending`` retries the markers.

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from broker.transaction.state_log import TRANSACTION_STATE_TOPIC
from protocol.errors import ErrorCode, KafkaError
from replication.append import DelayedProduce

if TYPE_CHECKING:
    from broker.apis import RequestContext
    from broker.broker import Broker

__all__ = ["COMMIT_TIMEOUT_MS", "answer_when_replicated", "call_when_replicated",
           "coordinator_error", "transaction_partition"]

COMMIT_TIMEOUT_MS = 5000  # Kafka's offsets.commit.timeout.ms default

T = TypeVar("T")
Key = tuple[str, int]


def coordinator_error(error: KafkaError) -> ErrorCode:
    """Kafka's mapping of a coordinator append's error for its client."""
    if error.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


def transaction_partition(context: RequestContext, transactional_id: str) -> Key:
    """The ``__transaction_state`` partition of ``transactional_id``."""
    state_log = context.broker.transactions.state_log
    return TRANSACTION_STATE_TOPIC, state_log.partition_for(transactional_id)


def _pending_offset(broker: Broker, key: Key) -> int | None:
    """The log end offset the high watermark of ``key`` must reach; None when it has."""
    partition = broker.replica_manager.partition(*key)
    if partition is None or not partition.is_leader:
        return None
    end = partition.log_end_offset
    return None if partition.high_watermark >= end else end


def _watch(broker: Broker, key: Key, offset: int,
           done: Callable[[KafkaError | None], None], timeout_ms: int) -> None:
    def finished(outcomes: dict[Key, KafkaError | None]) -> None:
        done(outcomes.get(key))

    operation = DelayedProduce(timeout_ms, {key: offset}, broker.replica_manager.partition_or_error,
                               finished)
    broker.produce_reaper.watch(operation, [key])


def answer_when_replicated(
    broker: Broker, key: Key, response: T, failed: Callable[[ErrorCode], T],
    *, timeout_ms: int = COMMIT_TIMEOUT_MS,
) -> T | asyncio.Future[T]:
    """``response`` once ``key``'s high watermark reaches its log end offset as of now (see
    the module docstring)."""
    offset = _pending_offset(broker, key)
    if offset is None:
        return response
    answer: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def done(error: KafkaError | None) -> None:
        if not answer.done():
            answer.set_result(response if error is None else failed(coordinator_error(error)))

    _watch(broker, key, offset, done, timeout_ms)
    return answer


def call_when_replicated(broker: Broker, key: Key, then: Callable[[], None],
                         *, timeout_ms: int = COMMIT_TIMEOUT_MS) -> None:
    """``then()`` once ``key``'s high watermark reaches its log end offset as of now (at once
    when it has, or before the event loop runs); never on a failed wait."""
    offset = _pending_offset(broker, key)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        offset = None
    if offset is None:
        then()
        return

    def done(error: KafkaError | None) -> None:
        if error is None:
            then()

    _watch(broker, key, offset, done, timeout_ms)
