"""Samsa's producer: ``Producer`` (blocking) and ``AsyncProducer`` (asyncio).

    with Producer({"bootstrap.servers": "localhost:9092"}) as producer:
        future = producer.send("events", b"payload", key=b"user-1")
        print(future.result())          # RecordMetadata(topic, partition, offset, timestamp)

Kafka's Java producer, configured with its names (``samsa.config``): records are encoded
into per-partition batches as they are sent (``samsa._accumulator``), partitioned with the
Java client's murmur2 for keys and the sticky partitioner otherwise (``samsa.partitioner``),
and shipped by a sender on an event loop, one ProduceRequest per broker with the ready
batches of all its partitions (``samsa._sender``). Idempotence is on by default
(``enable.idempotence``): a producer id, per-partition sequence numbers, and retries that
keep order and never duplicate.

Values and keys: ``bytes``, ``bytearray`` and ``memoryview`` go as they are, ``str`` is
encoded as UTF-8, ``None`` stays null; ``key.serializer`` / ``value.serializer`` (callables
taking the object and returning bytes) take over when configured.

Errors: ``send()`` raises for mistakes by the caller (a bad type, an unknown partition, a
closed producer) and ``KafkaTimeoutError`` when it waited ``max.block.ms`` for the topic's
metadata or for buffer memory. Everything about the delivery itself — a record over
``max.request.size`` (``MessageTooLargeError``), a broker error, ``delivery.timeout.ms``
running out — fails the record's future and is passed to its ``on_delivery`` callback.

Threads: the blocking ``Producer`` runs the sender on its own event loop thread
(``samsa._loop.LoopThread``). ``send()`` may be called from any thread; it encodes the
record in the caller's thread, wakes the sender only when a batch fills or starts, and
yields the GIL to it when it lags (``Sender.wakeup_threadsafe``).
``on_delivery(metadata, error)`` callbacks, and callbacks added to the returned futures, run
on the producer's loop thread, in offset order per partition: keep them short, and don't
call ``flush()`` or ``close()`` from them. ``AsyncProducer`` runs everything on the loop
that called ``start()``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from protocol.errors import MessageTooLargeError
from samsa._accumulator import (
    APPENDED,
    BATCH_FULL,
    NEW_BATCH,
    NO_MEMORY,
    Condition,
    RecordAccumulator,
)
from samsa._cluster import Cluster
from samsa._delivery import (
    AsyncDelivery,
    DeliveryCallback,
    DeliveryFuture,
    ThreadDelivery,
    call_callback,
)
from samsa._encoding import encode_headers, record_size_upper_bound
from samsa._idempotence import IdempotenceState
from samsa._loop import LoopThread
from samsa._producer_metadata import ProducerMetadata, TopicPartitions
from samsa._sender import Sender
from samsa.config import parse_config
from samsa.errors import ClientClosedError, KafkaTimeoutError
from samsa.partitioner import BuiltInPartitioner, partition_for_key
from samsa.types import RecordMetadata

__all__ = ["AsyncProducer", "Producer"]

log = logging.getLogger("samsa.producer")

Headers = Sequence[tuple[str, bytes | None]]
_WAKE = NEW_BATCH | BATCH_FULL
_time_ns = time.time_ns


# --- the shared core ----------------------------------------------------------------------


def _to_bytes(value: Any, what: str) -> Any:
    if value is None or isinstance(value, bytes | bytearray):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, memoryview):
        return value if value.contiguous and value.itemsize == 1 else value.tobytes()
    raise TypeError(f"a record {what} must be bytes, str or None (or configure "
                    f"{what}.serializer), not {type(value).__name__}")


class _Core:
    """Accumulator, metadata, sender: built on (and owned by) the loop it runs on."""

    def __init__(self, config: dict[str, Any], delivery: Any) -> None:
        self.config = config
        self.cluster = Cluster(config)
        self.accumulator = RecordAccumulator(
            batch_size=config["batch.size"], linger_ms=config["linger.ms"],
            buffer_memory=config["buffer.memory"], retry_backoff_ms=config["retry.backoff.ms"],
            retry_backoff_max_ms=config["retry.backoff.max.ms"],
            delivery_timeout_ms=config["delivery.timeout.ms"])
        self.metadata = ProducerMetadata(self.cluster, config)
        idempotence = IdempotenceState() if config["enable.idempotence"] else None
        self.sender = Sender(config, self.cluster, self.accumulator, self.metadata, delivery,
                             idempotence)
        self.partitioner = BuiltInPartitioner(
            config["batch.size"], adaptive=config["partitioner.adaptive.partitioning.enable"])
        if self.partitioner.adaptive:
            self.accumulator.load_listener = self._update_loads
        self.acks: str = config["acks"]
        self.max_block_ms: int = config["max.block.ms"]
        self.max_request_size: int = config["max.request.size"]
        self.buffer_memory: int = config["buffer.memory"]
        # key + value sizes under this need no size check (headers always get one)
        self.unchecked_size = min(self.max_request_size, self.buffer_memory) - 128
        self.ignore_keys: bool = config["partitioner.ignore.keys"]
        self.key_serializer: Callable[[Any], Any] | None = config["key.serializer"]
        self.value_serializer: Callable[[Any], Any] | None = config["value.serializer"]
        self.loop = asyncio.get_running_loop()
        self.sender.start()

    async def wait_for_topic(self, topic: str, *, wait: bool = True) -> TopicPartitions:
        return await self.metadata.wait_for(topic, self.max_block_ms, wait=wait)

    async def close(self, timeout: float | None) -> None:
        try:
            await self.sender.close(timeout)
        finally:
            await self.metadata.close()
            await self.cluster.close()

    def serialize(self, key: Any, value: Any) -> tuple[Any, Any]:
        if self.key_serializer is not None:
            key = self.key_serializer(key)
        if self.value_serializer is not None:
            value = self.value_serializer(value)
        return _to_bytes(key, "key"), _to_bytes(value, "value")

    def route(self, info: TopicPartitions, topic: str, key: Any, partition: int | None) -> int:
        """The partition for a record (see ``samsa.partitioner``); -1: the sticky one."""
        count = len(info.partitions)
        if partition is not None:
            if not 0 <= partition < count:
                raise ValueError(f"topic {topic!r} has partitions 0..{count - 1}, "
                                 f"not {partition}")
            return partition
        if key is not None and not self.ignore_keys:
            return partition_for_key(key, count)
        return -1

    def conditional(self, info: TopicPartitions, topic: str, key: Any, partition: int | None,
                    expected_offset: int | None, expected_key_offset: int | None,
                    ) -> tuple[int, Condition]:
        """The partition and ``Condition`` of a conditional record (see ``Producer.send``);
        ValueError for a mistake by the caller."""
        if self.acks == "0":
            raise ValueError("a conditional record needs acks 1 or all, not 0: a conflict "
                             "must be answered")
        if expected_offset is not None and expected_offset < 0:
            raise ValueError(f"expected_offset must be >= 0, not {expected_offset}")
        if expected_key_offset is not None and (key is None or expected_key_offset < -1):
            raise ValueError("expected_key_offset needs a key and an offset >= -1 "
                             "(-1: no record has the key yet)")
        if partition is None:
            if key is None:
                raise ValueError("a conditional record needs a partition or a key")
            partition = partition_for_key(key, len(info.partitions))
        chosen = self.route(info, topic, key, partition)
        return chosen, Condition(
            -1 if expected_offset is None else expected_offset,
            None if expected_key_offset is None else bytes(key),
            -1 if expected_key_offset is None else expected_key_offset)

    def too_large(self, key: Any, value: Any, headers: bytes | None) -> Exception | None:
        size = record_size_upper_bound(-1 if key is None else len(key),
                                       -1 if value is None else len(value),
                                       0 if headers is None else len(headers))
        if size > self.max_request_size:
            return MessageTooLargeError(
                f"the record is {size} bytes when serialized, more than max.request.size "
                f"({self.max_request_size})")
        if size > self.buffer_memory:
            return MessageTooLargeError(
                f"the record is {size} bytes when serialized, more than buffer.memory "
                f"({self.buffer_memory})")
        return None

    def append(self, info: TopicPartitions, topic: str, partition: int, timestamp: int,
               key: Any, value: Any, headers: bytes | None, record: Any,
               condition: Condition | None = None) -> tuple[int, int]:
        """Append to ``partition`` (-1: the sticky one); (flags, partition used)."""
        if condition is not None:
            return self.accumulator.append_conditional(
                info.partitions[partition], timestamp, key, value, headers, record,
                condition), partition
        if partition >= 0:
            return self.accumulator.append(info.partitions[partition], timestamp, key, value,
                                           headers, record), partition
        count = len(info.partitions)
        sticky = self.partitioner.partition(topic, info.available, count)
        tp = info.partitions[sticky]
        flags = self.accumulator.append(tp, timestamp, key, value, headers, record)
        if flags & APPENDED:
            size = (0 if key is None else len(key)) + (0 if value is None else len(value)) \
                + (0 if headers is None else len(headers)) + RECORD_OVERHEAD
            self.partitioner.record_appended(topic, sticky, size,
                                             self.accumulator.batches_complete(tp),
                                             info.available, count)
        return flags, sticky

    def _update_loads(self, loads: dict[str, dict[int, int]]) -> None:
        """The accumulator's queue lengths -> the partitioner's weights (sender's thread).
        As Kafka's, only once every partition of the topic has had a queue."""
        for topic, load in loads.items():
            info = self.metadata.topics.get(topic)
            if info is None:
                continue
            complete = len(load) >= len(info.partitions)
            self.partitioner.update_load(topic, {partition: size for partition, size
                                                 in load.items() if size >= 0} if complete else {})


# What a record adds to a batch beyond its key, value and headers (length, attributes and
# delta varints, for small records): the partitioner's count of bytes produced.
RECORD_OVERHEAD = 8


def _check_open(core: _Core | None, closed: bool) -> _Core:
    if closed or core is None:
        raise ClientClosedError("the producer is closed" if closed else
                                "the producer is not started: await start() first")
    if core.sender.fatal_error is not None:
        raise core.sender.fatal_error
    return core


# --- the blocking producer -----------------------------------------------------------------


class Producer:
    """A thread-safe, blocking Kafka producer (see the module docstring)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = parse_config("producer", config, settings)
        self._closed = False
        self._thread = LoopThread("samsa-producer")
        try:
            self._core: _Core = self._thread.run(self._make_core())
        except BaseException:
            self._thread.close()
            raise
        # what send() reads on every call, looked up once
        self._topics = self._core.metadata.topics
        self._wakeup = self._core.sender.wakeup_threadsafe
        self._append = self._core.accumulator.append
        self._sticky = self._core.partitioner.current
        self._produced = self._core.partitioner.produced
        self._sticky_batch_size = self._core.partitioner.sticky_batch_size
        self._sender = self._core.sender
        self._unchecked_size = self._core.unchecked_size
        self._serializing = (self.config["key.serializer"] is not None
                             or self.config["value.serializer"] is not None)

    async def _make_core(self) -> _Core:
        return _Core(self.config, ThreadDelivery())

    def send(self, topic: str, value: Any = None, key: Any = None, *,
             partition: int | None = None, timestamp_ms: int | None = None,
             headers: Headers | None = None, on_delivery: DeliveryCallback | None = None,
             expected_offset: int | None = None, expected_key_offset: int | None = None,
             ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue a record; its future resolves to its ``RecordMetadata`` once the broker has
        it (per ``acks``). Blocks only to wait for the topic's metadata or buffer memory.

        A conditional append (SamsaConditionalProduce, optimistic concurrency): with
        ``expected_offset`` the record is appended only if the partition's log end offset is
        that (so it lands at that offset); with ``expected_key_offset`` only if the last record
        with ``key`` in the partition is at that offset (-1: no record has the key yet). The
        partition is ``partition``, else the key's. The broker decides atomically with the
        append; when a condition does not hold nothing is written and the future fails with
        ``OffsetConflictError``, whose ``current_offset`` is the actual offset. The record
        goes alone in its batch; it needs acks 1 or all (all, the default, survives a
        failover), and with idempotence (the default) a retry never appends it twice."""
        # The hot path of the producer: the common cases are inlined (see _Core for the rest).
        core = self._core
        if self._closed or self._sender.fatal_error is not None:
            _check_open(core, self._closed)
        if self._serializing:
            key, value = core.serialize(key, value)
        else:
            if value is not None and value.__class__ is not bytes:
                value = _to_bytes(value, "value")
            if key is not None and key.__class__ is not bytes:
                key = _to_bytes(key, "key")
        info = self._topics.get(topic)
        if info is None:
            info = self._thread.run(core.wait_for_topic(topic))
        condition = None
        if expected_offset is not None or expected_key_offset is not None:
            partition, condition = core.conditional(info, topic, key, partition,
                                                    expected_offset, expected_key_offset)
        header_bytes = encode_headers(headers) if headers else None
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        future = DeliveryFuture()
        if key_size + value_size > self._unchecked_size or header_bytes is not None:
            error = core.too_large(key, value, header_bytes)
            if error is not None:
                if on_delivery is not None:
                    call_callback(on_delivery, None, error)
                future._fail(error)
                return future
        timestamp = _time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
        # the batch's entry for this record: the future, carrying its data
        future._timestamp = timestamp
        future._value_size = value_size
        if key is not None:
            future._key_size = key_size
        if on_delivery is not None:
            future._callback = on_delivery
        if partition is None and (key is None or core.ignore_keys):
            sticky = self._sticky.get(topic)
            if sticky is None or header_bytes is not None:
                flags, sticky = core.append(info, topic, -1, timestamp, key, value,
                                            header_bytes, future)
            else:  # core.append's sticky case, inlined
                tp = info.partitions[sticky]
                flags = self._append(tp, timestamp, key, value, None, future)
                if flags & APPENDED:
                    size = key_size + value_size + RECORD_OVERHEAD + 2  # sizes are -1 if None
                    produced = self._produced.get(topic, 0) + size
                    if produced < self._sticky_batch_size:
                        self._produced[topic] = produced
                    else:
                        core.partitioner.record_appended(
                            topic, sticky, size, core.accumulator.batches_complete(tp),
                            info.available, len(info.partitions))
            chosen = -1
        elif condition is not None:
            chosen = core.route(info, topic, key, partition)
            flags, _ = core.append(info, topic, chosen, timestamp, key, value, header_bytes,
                                   future, condition)
        else:
            chosen = core.route(info, topic, key, partition)
            flags = self._append(info.partitions[chosen], timestamp, key, value, header_bytes,
                                 future)
        while flags & NO_MEMORY:
            self._wait_for_memory(core, key_size + value_size)
            flags, _ = core.append(info, topic, chosen, timestamp, key, value, header_bytes,
                                   future, condition)
        if flags & _WAKE:
            self._wakeup()
        return future

    def _wait_for_memory(self, core: _Core, size: int) -> None:
        if self._thread.in_loop_thread:
            raise KafkaTimeoutError("buffer.memory is used up and send() was called from a "
                                    "delivery callback, which cannot wait for it")
        self._wakeup()
        if not core.accumulator.wait_for_memory(size, core.max_block_ms / 1000):
            raise KafkaTimeoutError(f"no buffer memory for the record within max.block.ms "
                                    f"({core.max_block_ms} ms)")
        if self._closed:
            raise ClientClosedError("the producer was closed while send() waited for memory")

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now, without waiting for ``linger.ms``, and wait until
        each of those records is delivered or failed (``KafkaTimeoutError`` after
        ``timeout`` seconds)."""
        core = _check_open(self._core, self._closed)
        self._thread.run(core.sender.flush(), timeout)

    def partitions_for(self, topic: str, *, wait: bool = True) -> list[int]:
        """The topic's partition numbers, fetching metadata (auto-creating the topic where
        the broker allows) for up to ``max.block.ms``. ``wait=False`` asks once and raises
        the answer (``UnknownTopicOrPartitionError``, ``NoBrokersAvailableError``)."""
        core = _check_open(self._core, self._closed)
        info = self._thread.run(core.wait_for_topic(topic, wait=wait))
        return [tp.partition for tp in info.partitions]

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (waiting up to ``timeout`` seconds; None: as long as it
        takes, bounded by ``delivery.timeout.ms``), fail the rest, and stop."""
        if self._closed:
            return
        if self._thread.in_loop_thread:
            raise RuntimeError("close() cannot be called from a delivery callback")
        self._closed = True
        try:
            self._thread.run(self._core.close(timeout))
        finally:
            self._core.accumulator.begin_close()
            self._thread.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --- the asyncio producer -------------------------------------------------------------------


class AsyncProducer:
    """The asyncio producer: ``await start()``, then ``await send(...)`` returns a future
    of the record's ``RecordMetadata`` as soon as the record is queued."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = parse_config("producer", config, settings)
        self._core: _Core | None = None
        self._closed = False

    async def start(self) -> None:
        if self._core is None:
            self._core = _Core(self.config, AsyncDelivery())

    async def send(self, topic: str, value: Any = None, key: Any = None, *,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Headers | None = None, on_delivery: DeliveryCallback | None = None,
                   expected_offset: int | None = None, expected_key_offset: int | None = None,
                   ) -> asyncio.Future[RecordMetadata]:
        """Queue a record (waiting for metadata or buffer memory if needed); the returned
        future resolves to its ``RecordMetadata`` once the broker has it. Conditional
        appends (``expected_offset``, ``expected_key_offset``): as ``Producer.send``."""
        core = self._core
        if self._closed or core is None or core.sender.fatal_error is not None:
            core = _check_open(core, self._closed)
        if core.key_serializer is not None or core.value_serializer is not None:
            key, value = core.serialize(key, value)
        else:
            if value is not None and value.__class__ is not bytes:
                value = _to_bytes(value, "value")
            if key is not None and key.__class__ is not bytes:
                key = _to_bytes(key, "key")
        info = core.metadata.topics.get(topic)
        if info is None:
            info = await core.wait_for_topic(topic)
        condition = None
        if expected_offset is not None or expected_key_offset is not None:
            partition, condition = core.conditional(info, topic, key, partition,
                                                    expected_offset, expected_key_offset)
        header_bytes = encode_headers(headers) if headers else None
        future: asyncio.Future[RecordMetadata] = core.loop.create_future()
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        if key_size + value_size > core.unchecked_size or header_bytes is not None:
            error = core.too_large(key, value, header_bytes)
            if error is not None:
                if on_delivery is not None:
                    call_callback(on_delivery, None, error)
                future.set_exception(error)
                return future
        timestamp = _time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
        record = (future, timestamp, key_size, value_size, on_delivery)
        chosen = core.route(info, topic, key, partition)
        flags, chosen = core.append(info, topic, chosen, timestamp, key, value, header_bytes,
                                    record, condition)
        while flags & NO_MEMORY:
            await self._wait_for_memory(core)
            flags, chosen = core.append(info, topic, chosen, timestamp, key, value,
                                        header_bytes, record, condition)
        if flags & _WAKE:
            core.sender.wakeup()
            if flags & BATCH_FULL:
                # A loop of sends that never waits would starve the sender until buffer.memory
                # ran out; a filled batch is the moment to let it run.
                await asyncio.sleep(0)
        return future

    async def _wait_for_memory(self, core: _Core) -> None:
        core.sender.wakeup()
        try:
            async with asyncio.timeout(core.max_block_ms / 1000):
                await core.accumulator.memory_freed()
        except TimeoutError:
            raise KafkaTimeoutError(f"no buffer memory for the record within max.block.ms "
                                    f"({core.max_block_ms} ms)") from None
        if self._closed:
            raise ClientClosedError("the producer was closed while send() waited for memory")

    async def flush(self, timeout: float | None = None) -> None:
        core = _check_open(self._core, self._closed)
        try:
            async with asyncio.timeout(timeout):
                await core.sender.flush()
        except TimeoutError:
            raise KafkaTimeoutError(f"flush did not complete within {timeout} s") from None

    async def partitions_for(self, topic: str, *, wait: bool = True) -> list[int]:
        core = _check_open(self._core, self._closed)
        info = await core.wait_for_topic(topic, wait=wait)
        return [tp.partition for tp in info.partitions]

    async def close(self, timeout: float | None = None) -> None:
        if self._closed or self._core is None:
            self._closed = True
            return
        self._closed = True
        await self._core.close(timeout)

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

