"""The producer's record accumulator: per-partition queues of batches waiting to be sent.

Kafka's ``RecordAccumulator``. ``append()`` puts a record into the last batch of its
partition's queue, encoding it on the spot (``samsa._encoding.BatchBuilder``), or starts a
new batch when that one is full; ``ready()`` says which brokers have a batch worth sending
(full, or older than ``linger.ms``, or a flush/close/memory shortage that hurries everything);
``drain()`` takes, for one broker, the first batch of each of its partitions up to
``max.request.size`` bytes, rotating the partition it starts from so none starves.
``ready()`` also reports each topic's queue lengths to ``load_listener`` (the partitioner's
adaptive weights).
A conditional record (``append_conditional``: SamsaConditionalProduce) is a batch of its own,
full at once, carrying its ``Condition``: the partition's open batch is closed first, so the
record is never merged with others and keeps its place in the partition's order.
Batches that failed with a retriable error come back with ``reenqueue()`` (to the front,
in sequence order, after ``retry.backoff.ms`` growing exponentially); ``expire()`` removes
batches past ``delivery.timeout.ms``.

Memory (``buffer.memory``): each new batch reserves ``max(batch.size, record size)`` bytes
until it completes (``deallocate()``), as Kafka's ``BufferPool`` hands out batch-sized
buffers; when none is left ``append()`` returns ``NO_MEMORY`` and the caller waits
(``wait_for_memory`` from a thread, ``memory_freed()`` from the event loop), up to
``max.block.ms``.

Threads: the blocking ``Producer`` appends from the caller's threads while the sender drains
on the producer's event loop thread, so every method takes ``lock``. A batch removed by
``drain()`` is no longer reachable by appends; the sender alone touches it afterwards.
Times are milliseconds from ``time.monotonic()``, passed in (``now_ms``), so tests drive
the clock.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from samsa._encoding import BatchBuilder
from samsa.types import TopicPartition

__all__ = [
    "APPENDED",
    "BATCH_FULL",
    "NEW_BATCH",
    "NO_MEMORY",
    "Condition",
    "ProducerBatch",
    "RecordAccumulator",
    "now_ms",
]

# append() results (flags)
APPENDED = 1  # the record is in a batch
NEW_BATCH = 2  # ... in a batch created for it (the sender should look again)
BATCH_FULL = 4  # the partition now has a batch that will take no more records
NO_MEMORY = 8  # not appended: buffer.memory is used up


def now_ms() -> float:
    return time.monotonic() * 1000


class Condition(NamedTuple):
    """What a conditional record's append needs (SamsaConditionalProduce, -1: none):
    the partition's log end offset, and the offset of the last record with ``key``."""

    expected_end_offset: int = -1
    key: bytes | None = None
    expected_key_offset: int = -1


class ProducerBatch:
    """One batch of one partition: its builder while open, its bytes once drained, and per
    record, in offset order, what its delivery needs (``records``: whatever the producer
    facade appended, interpreted by its ``Delivery``)."""

    __slots__ = (
        "attempts",
        "base_sequence",
        "builder",
        "condition",
        "created_ms",
        "done",
        "full",
        "payload",
        "producer_epoch",
        "producer_id",
        "records",
        "reserved",
        "retry_after_ms",
        "sequence_reset",
        "split_into",
        "topic_partition",
    )

    def __init__(self, topic_partition: TopicPartition, builder: BatchBuilder, created_ms: float,
                 reserved: int) -> None:
        self.topic_partition = topic_partition
        self.builder = builder
        self.records: list[Any] = []
        self.created_ms = created_ms
        self.reserved = reserved
        self.attempts = 0
        self.retry_after_ms = 0.0
        self.full = False
        self.done = False
        self.payload: bytearray | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.sequence_reset = False  # its sequence was rewritten after an epoch bump
        self.split_into: list[ProducerBatch] = []  # the batches that took its records
        self.condition: Condition | None = None  # a conditional record's batch (alone in it)

    @property
    def record_count(self) -> int:
        return self.builder.count

    @property
    def size(self) -> int:
        return len(self.payload) if self.payload is not None else self.builder.size

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence >= 0

    def __repr__(self) -> str:
        tp = self.topic_partition
        return (f"ProducerBatch({tp.topic}-{tp.partition}, {self.record_count} records, "
                f"sequence {self.base_sequence}, attempt {self.attempts})")


def _before(first: ProducerBatch, second: ProducerBatch) -> bool:
    """Whether ``first`` comes before ``second`` in their partition's sequence order."""
    return first.base_sequence < second.base_sequence


class RecordAccumulator:
    """Per-partition batch queues (see the module docstring)."""

    def __init__(self, *, batch_size: int, linger_ms: int, buffer_memory: int,
                 retry_backoff_ms: int, retry_backoff_max_ms: int,
                 delivery_timeout_ms: int) -> None:
        self.lock = threading.Lock()
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.available_memory = buffer_memory
        self.flushes_in_progress = 0
        self.closing = False
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._open: dict[TopicPartition, ProducerBatch] = {}  # each queue's last batch, if open
        self._incomplete: dict[ProducerBatch, None] = {}  # insertion-ordered set
        self._memory_freed = threading.Condition(self.lock)
        self._memory_waiters = 0
        self._async_waiters: list[asyncio.Future[None]] = []
        self._drain_start: dict[int, int] = {}
        # called by ready() with {topic: {partition: queued batches, -1 if it has no leader}}
        # for every partition that has had a queue
        self.load_listener: Callable[[dict[str, dict[int, int]]], None] | None = None

    # --- appending (any thread) ----------------------------------------------------------

    def append(self, tp: TopicPartition, timestamp: int, key: Any, value: Any,
               headers: bytes | None, record: Any) -> int:
        """Encode one record into ``tp``'s open batch or a new one; flags (see the top)."""
        lock = self.lock
        lock.acquire()  # not "with": this is the hot path, and "with" costs twice as much
        try:
            open_batch = self._open.get(tp)
            if open_batch is not None:
                if open_batch.builder.append(timestamp, key, value, headers):
                    open_batch.records.append(record)
                    return APPENDED
                # Full: found out by the record that does not fit, which is cheaper than
                # measuring the batch after every record.
                open_batch.full = True
                del self._open[tp]
                full = BATCH_FULL
            else:
                full = 0
            return self._append_new_batch(tp, timestamp, key, value, headers, record) | full
        finally:
            lock.release()

    def _append_new_batch(self, tp: TopicPartition, timestamp: int, key: Any, value: Any,
                          headers: bytes | None, record: Any) -> int:
        reserve = max(self.batch_size, 128 + (0 if key is None else len(key))
                      + (0 if value is None else len(value))
                      + (0 if headers is None else len(headers)))
        if reserve > self.available_memory:
            return NO_MEMORY
        self.available_memory -= reserve
        batch = ProducerBatch(tp, BatchBuilder(self.batch_size), now_ms(), reserve)
        batch.builder.append(timestamp, key, value, headers)
        batch.records.append(record)
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        queue.append(batch)
        self._incomplete[batch] = None
        if batch.builder.size >= self.batch_size:
            batch.full = True  # one record filled it
            return APPENDED | NEW_BATCH | BATCH_FULL
        self._open[tp] = batch
        return APPENDED | NEW_BATCH

    def append_conditional(self, tp: TopicPartition, timestamp: int, key: Any, value: Any,
                           headers: bytes | None, record: Any, condition: Condition) -> int:
        """Put one conditional record in a batch of its own (see the module docstring)."""
        with self.lock:
            open_batch = self._open.pop(tp, None)
            if open_batch is not None:
                open_batch.full = True
            flags = self._append_new_batch(tp, timestamp, key, value, headers, record)
            if flags & APPENDED:
                batch = self._queues[tp][-1]
                batch.condition = condition
                batch.full = True
                self._open.pop(tp, None)
                flags |= BATCH_FULL
            return flags

    def batches_complete(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s last batch takes no more records (full or drained), or it has none
        (Kafka's ``allBatchesFull``; read without the lock: a stale answer only shifts when the
        sticky partition moves on by a record)."""
        return tp not in self._open

    def wait_for_memory(self, size: int, timeout: float) -> bool:
        """Block (a producing thread) until ``size`` bytes could be reserved, or ``timeout``."""
        with self.lock:
            self._memory_waiters += 1
            try:
                return self._memory_freed.wait_for(
                    lambda: self.available_memory >= min(size, self.buffer_memory) or self.closing,
                    timeout)
            finally:
                self._memory_waiters -= 1

    def memory_freed(self) -> asyncio.Future[None]:
        """A future (of the running loop) resolved the next time memory is freed."""
        future = asyncio.get_running_loop().create_future()
        with self.lock:
            self._async_waiters.append(future)
        return future

    # --- the sender's side (event loop thread) ----------------------------------------------

    @property
    def memory_exhausted(self) -> bool:
        return self._memory_waiters > 0 or bool(self._async_waiters)

    def ready(self, leaders: Mapping[TopicPartition, int], now: float,
              muted: Iterable[TopicPartition] = ()) -> tuple[dict[int, list[TopicPartition]],
                                                             float | None, set[str]]:
        """({node: partitions it leads that have batches} for nodes with a batch worth sending,
        ms until the next batch becomes worth sending (None: nothing waits), topics of batches
        whose leader is unknown)."""
        ready: dict[int, list[TopicPartition]] = {}
        waiting: dict[int, list[TopicPartition]] = {}
        next_delay: float | None = None
        unknown: set[str] = set()
        hurry = self.closing or self.flushes_in_progress > 0 or self.memory_exhausted
        muted_set = set(muted)
        loads: dict[str, dict[int, int]] | None = {} if self.load_listener is not None else None
        with self.lock:
            for tp, queue in self._queues.items():
                leader = leaders.get(tp, -1)
                if loads is not None:
                    load = loads.get(tp.topic)
                    if load is None:
                        load = loads[tp.topic] = {}
                    load[tp.partition] = len(queue) if leader >= 0 else -1
                if not queue:
                    continue
                if leader < 0:
                    unknown.add(tp.topic)
                    continue
                if tp in muted_set:
                    continue
                first = queue[0]
                backing_off = first.attempts > 0 and first.retry_after_ms > now
                if backing_off:
                    wait = first.retry_after_ms - now
                elif first.full or len(queue) > 1 or hurry:
                    wait = 0.0
                else:
                    wait = first.created_ms + self.linger_ms - now
                if wait <= 0:
                    ready.setdefault(leader, []).append(tp)
                else:
                    waiting.setdefault(leader, []).append(tp)
                    next_delay = wait if next_delay is None else min(next_delay, wait)
        for node, partitions in ready.items():  # a ready node takes its other partitions too
            partitions.extend(waiting.get(node, ()))
        if loads and self.load_listener is not None:
            self.load_listener(loads)
        return ready, next_delay, unknown

    def drain(self, node: int, partitions: list[TopicPartition], max_size: int, now: float,
              gate: Callable[[ProducerBatch], bool] | None = None) -> list[ProducerBatch]:
        """The first batch of each of ``partitions`` (not backing off, allowed by ``gate``),
        while their total stays within ``max_size`` bytes (the first batch always goes)."""
        drained: list[ProducerBatch] = []
        size = 0
        count = len(partitions)
        if not count:
            return drained
        with self.lock:
            start = self._drain_start.get(node, 0) % count
            for step in range(count):
                queue = self._queues.get(partitions[(start + step) % count])
                if not queue:
                    continue
                first = queue[0]
                if first.attempts > 0 and first.retry_after_ms > now:
                    continue
                if drained and size + first.size > max_size:
                    break
                if gate is not None and not gate(first):
                    continue
                queue.popleft()
                self._close(first)
                drained.append(first)
                size += first.size
            self._drain_start[node] = start + 1
        return drained

    def reenqueue(self, batch: ProducerBatch, now: float, *, leader_moved: bool = False) -> None:
        """Put a batch that failed with a retriable error back at the front of its queue
        (among other retried batches, in sequence order), to be retried after the backoff;
        at once when the broker named a new leader (KIP-951: nothing to wait for)."""
        batch.attempts += 1
        backoff = min(self.retry_backoff_ms * 2 ** (batch.attempts - 1), self.retry_backoff_max_ms)
        batch.retry_after_ms = now if leader_moved else now + backoff
        with self.lock:
            queue = self._queues.setdefault(batch.topic_partition, deque())
            index = 0
            if batch.has_sequence:
                while (index < len(queue) and queue[index].has_sequence
                       and _before(queue[index], batch)):
                    index += 1
            queue.insert(index, batch)

    def split(self, batch: ProducerBatch, parts: list[ProducerBatch], now: float) -> None:
        """Replace ``batch`` (drained, refused as too large) by ``parts`` holding its records
        in order, queued at the front for a retry; its memory goes with the first part."""
        parts[0].reserved, batch.reserved = batch.reserved, 0
        with self.lock:
            self._incomplete.pop(batch, None)
            for part in parts:
                self._incomplete[part] = None
        for part in reversed(parts):
            part.attempts = batch.attempts
            self.reenqueue(part, now)

    def expire(self, now: float) -> list[ProducerBatch]:
        """Remove and return the queued batches older than ``delivery.timeout.ms``."""
        expired: list[ProducerBatch] = []
        limit = self.delivery_timeout_ms
        with self.lock:
            for queue in self._queues.values():
                while queue and now - queue[0].created_ms >= limit:
                    batch = queue.popleft()
                    self._close(batch)
                    expired.append(batch)
        return expired

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch completed: release its memory and wake whoever waits for memory."""
        with self.lock:
            self._incomplete.pop(batch, None)
            self.available_memory += batch.reserved
            batch.reserved = 0
            if self._memory_waiters:
                self._memory_freed.notify_all()
            waiters, self._async_waiters = self._async_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def abort_undrained(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (a forced close)."""
        with self.lock:
            batches = [batch for queue in self._queues.values() for batch in queue]
            for queue in self._queues.values():
                queue.clear()
            for batch in batches:
                self._close(batch)
            return batches

    def _close(self, batch: ProducerBatch) -> None:
        """No more appends to ``batch`` (the lock is held)."""
        batch.full = True
        if self._open.get(batch.topic_partition) is batch:
            del self._open[batch.topic_partition]

    def begin_close(self) -> None:
        with self.lock:
            self.closing = True
            self._memory_freed.notify_all()

    def incomplete(self) -> list[ProducerBatch]:
        """Batches appended and not yet completed, oldest first."""
        with self.lock:
            return list(self._incomplete)

    @property
    def incomplete_count(self) -> int:
        return len(self._incomplete)

    @property
    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    @property
    def has_undrained(self) -> bool:
        with self.lock:
            return any(self._queues.values())

    def queued_partitions(self) -> list[TopicPartition]:
        with self.lock:
            return [tp for tp, queue in self._queues.items() if queue]
