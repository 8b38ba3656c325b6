"""The producer's I/O: the sender that ships batches to partition leaders.

``Sender`` is Kafka's ``Sender`` thread as one asyncio task. Each round it: applies a pending
epoch bump and fetches a producer id (idempotence), expires batches past
``delivery.timeout.ms``, asks the accumulator which brokers have batches worth sending,
opens connections that are missing, and sends each ready broker one ProduceRequest carrying
the first batch of each of its partitions (up to ``max.request.size``), with at most
``max.in.flight.requests.per.connection`` requests outstanding per broker. Conditional
records (``samsa._accumulator.Condition``, each alone in its batch) go beside it in a
SamsaConditionalProduceRequest; OFFSET_CONFLICT fails such a record at once. Responses are
handled as they arrive: success completes a batch's records; a retriable error re-queues it
(refreshing metadata for leadership errors and lost connections) until ``retries`` or
``delivery.timeout.ms`` runs out; anything else fails its records. A NOT_LEADER_OR_FOLLOWER
answer naming a newer leader (KIP-951, Produce v10+) moves the partition there at once and
its batch is retried without backoff or a Metadata request. It sleeps until the next linger deadline or a
``wakeup()``.

State: everything here lives on the producer's event loop. The only entry point from other
threads is ``wakeup_threadsafe()``. Record delivery (futures, ``on_delivery`` callbacks) is
done through the ``Delivery`` given, on this loop; leaders come from ``ProducerMetadata``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from protocol.compression import CompressionType
from protocol.errors import (
    ErrorCode,
    KafkaError,
    MessageTooLargeError,
    OffsetConflictError,
    UnknownServerError,
    error_for_code,
)
from protocol.messages.init_producer_id_request import InitProducerIdRequest
from protocol.messages.init_producer_id_response import InitProducerIdResponse
from protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from protocol.messages.produce_response import ProduceResponse
from protocol.messages.samsa_conditional_produce_request import (
    ConditionalProducePartitionData,
    ConditionalProduceTopicData,
    SamsaConditionalProduceRequest,
)
from protocol.messages.samsa_conditional_produce_response import SamsaConditionalProduceResponse
from protocol.records import decode_batch
from samsa._accumulator import ProducerBatch, RecordAccumulator, now_ms
from samsa._cluster import METADATA_ERRORS, Cluster, backoff_delays
from samsa._connection import BrokerConnection
from samsa._encoding import BatchBuilder, encode_headers
from samsa._idempotence import IdempotenceState
from samsa._producer_metadata import ProducerMetadata
from samsa.errors import (
    ClientClosedError,
    ClientError,
    KafkaTimeoutError,
)
from samsa.types import BrokerInfo, TopicPartition

__all__ = ["Delivery", "Sender"]

log = logging.getLogger("samsa.producer")

_DUPLICATE_SEQUENCE_NUMBER = 46
_NOT_LEADER_OR_FOLLOWER = 6
_UNWRITABLE_POLL_MS = 5
_SEQUENCE_ERRORS = frozenset({45, 59})  # OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID


ResponseHandler = Callable[[list[ProducerBatch], Any, float], None]


class Delivery(Protocol):
    """Completes the records of a batch: their futures and ``on_delivery`` callbacks."""

    def complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None: ...

    def fail(self, batch: ProducerBatch, error: Exception) -> None: ...


class Sender:
    """Ships batches from the accumulator to partition leaders (see the module docstring)."""

    def __init__(self, config: dict[str, Any], cluster: Cluster, accumulator: RecordAccumulator,
                 metadata: ProducerMetadata, delivery: Delivery,
                 idempotence: IdempotenceState | None) -> None:
        self._cluster = cluster
        self._accumulator = accumulator
        self._metadata = metadata
        self._delivery = delivery
        self._idempotence = idempotence
        self._acks = -1 if config["acks"] == "all" else int(config["acks"])
        self._request_timeout_ms = config["request.timeout.ms"]
        self._max_request_size = config["max.request.size"]
        self._max_in_flight = config["max.in.flight.requests.per.connection"]
        self._retries = config["retries"]
        self._delivery_timeout_ms = config["delivery.timeout.ms"]
        self._retry_backoff_ms = config["retry.backoff.ms"]
        self._retry_backoff_max_ms = config["retry.backoff.max.ms"]
        self._reconnect_backoff = (config["reconnect.backoff.ms"],
                                   config["reconnect.backoff.max.ms"])
        self._compression = CompressionType[config["compression.type"].upper()]
        self._compression_level = _compression_level(config)
        self._guarantee_order = self._max_in_flight == 1 and idempotence is None
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._wake_pending = False
        self._in_flight: dict[int, int] = {}
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[None]] = {}
        self._connect_failures: dict[int, int] = {}
        self._reconnect_after: dict[int, float] = {}
        self._muted: set[TopicPartition] = set()
        self._flush_waiters: list[asyncio.Future[None]] = []
        self._init_task: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._forced = False
        self.fatal_error: Exception | None = None
        metadata.on_change = self.wakeup

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    def wakeup(self) -> None:
        self._wake.set()

    def wakeup_threadsafe(self) -> None:
        """Wake the sender from another thread (coalesced: one loop call until it ran).

        If the previous wakeup has not run yet while batches wait, the producing thread
        yields the GIL (``time.sleep(0)``): a thread that keeps appending would otherwise
        hold it for whole switch intervals (5 ms) while the loop thread, woken by its
        socket or by us, waits to send. Measured: average latency under full load falls
        from ~200 ms of queued batches to a few ms, and throughput rises.
        """
        if not self._wake_pending:
            self._wake_pending = True
            self._loop.call_soon_threadsafe(self._woken)
        elif self._accumulator.incomplete_count > 1:
            time.sleep(0)

    def _woken(self) -> None:
        self._wake_pending = False
        self._wake.set()

    async def flush(self) -> None:
        """Send everything appended so far without lingering; wait until it completed (a
        batch split into smaller ones completes with its parts)."""
        pending = self._accumulator.incomplete()
        pending.reverse()  # oldest last: popped first
        self._accumulator.flushes_in_progress += 1
        try:
            while pending:
                batch = pending.pop()
                while not batch.done:
                    waiter = self._loop.create_future()
                    self._flush_waiters.append(waiter)
                    self.wakeup()
                    await waiter
                pending.extend(reversed(batch.split_into))
        finally:
            self._accumulator.flushes_in_progress -= 1

    async def close(self, timeout: float | None) -> None:
        """Send what is left (for up to ``timeout`` seconds), then fail whatever remains."""
        self._closing = True
        self._accumulator.begin_close()
        self.wakeup()
        if self._task is not None:
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(self._task)
            except TimeoutError:
                pass
        self._forced = True
        self.wakeup()
        error = ClientClosedError("the producer was closed before the record was delivered")
        for batch in self._accumulator.abort_undrained():
            self._fail(batch, error)
        for batch in self._accumulator.incomplete():
            self._fail(batch, error)
        tasks = [t for t in (self._task, self._init_task, *self._connecting.values()) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self) -> None:
        while not self._forced:
            self._wake.clear()
            try:
                delay = self._run_once(now_ms())
            except Exception:  # a bug must not silently stop all delivery
                log.exception("producer sender round failed")
                delay = self._retry_backoff_ms
            if self._closing and not self._accumulator.has_incomplete:
                return
            await self._sleep(delay)

    async def _sleep(self, delay_ms: float | None) -> None:
        if self._wake.is_set():
            return
        timer = None
        if delay_ms is not None:
            timer = self._loop.call_later(max(delay_ms, 0) / 1000, self._wake.set)
        try:
            await self._wake.wait()
        finally:
            if timer is not None:
                timer.cancel()

    # --- one round ----------------------------------------------------------------------------

    def _run_once(self, now: float) -> float | None:
        self._maybe_init_producer_id()
        for batch in self._accumulator.expire(now):
            self._fail(batch, KafkaTimeoutError(
                f"expiring {batch.record_count} record(s) for {_name(batch)}: "
                f"{now - batch.created_ms:.0f} ms passed since the batch was created "
                f"(delivery.timeout.ms {self._delivery_timeout_ms})"))
        delay = self._metadata.maybe_refresh(now)
        # A request takes one batch per partition; up to max.in.flight of them go to the same
        # broker back to back while it still has batches worth sending (Kafka's Sender loops).
        for _ in range(self._max_in_flight):
            wait, sent = self._send_ready(now)
            if not sent:
                break
        delay = _earliest(delay, wait)
        if delay is None and self._accumulator.has_undrained:
            delay = self._retry_backoff_max_ms  # look again: expiry, reconnects
        return delay

    def _send_ready(self, now: float) -> tuple[float | None, bool]:
        """One request to each broker with batches worth sending and room in flight; (ms
        until the next batch is worth sending, whether anything was sent)."""
        ready, delay, unknown = self._accumulator.ready(self._metadata.leaders, now, self._muted)
        if unknown:
            self._metadata.request_update()
        gate = self._idempotence.gate if self._idempotence is not None else None
        sent = False
        for node, partitions in ready.items():
            connection, wait = self._ready_connection(node, now)
            delay = _earliest(delay, wait)
            if connection is None:
                continue
            batches = self._accumulator.drain(node, partitions, self._max_request_size, now, gate)
            if batches:
                self._send(node, connection, batches, now)
                sent = True
        return delay, sent

    def _maybe_init_producer_id(self) -> None:
        state = self._idempotence
        if state is None:
            return
        if state.epoch_bump_required:
            state.bump_epoch()
        if state.producer_id_required and self._init_task is None and not self._forced:
            self._init_task = asyncio.ensure_future(self._init_producer_id(state))

    async def _init_producer_id(self, state: IdempotenceState) -> None:
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=2**31 - 1,
                                        producer_id=-1, producer_epoch=-1)
        delays = iter(backoff_delays(self._retry_backoff_ms, self._retry_backoff_max_ms))
        try:
            while True:
                try:
                    response: InitProducerIdResponse = await self._cluster.send_any(request)
                    if response.error_code:
                        raise error_for_code(response.error_code)()
                    state.set_producer_id(response.producer_id, response.producer_epoch)
                    return
                except KafkaError as exc:
                    if not exc.retriable:
                        self._fail_fatally(exc)
                        return
                    log.debug("InitProducerId failed, retrying: %s", exc)
                    await asyncio.sleep(next(delays))
        finally:
            self._init_task = None
            self.wakeup()

    def _fail_fatally(self, error: Exception) -> None:
        log.error("idempotent producer cannot get a producer id: %s", error)
        self.fatal_error = error
        for batch in self._accumulator.abort_undrained():
            self._fail(batch, error)

    def _ready_connection(self, node: int, now: float) -> tuple[BrokerConnection | None,
                                                                 float | None]:
        connection = self._connections.get(node)
        if connection is not None and connection.connected:
            if self._in_flight.get(node, 0) >= self._max_in_flight:
                return None, None  # a response will wake us
            if not connection.writable:  # the socket's buffer is full (acks=0 can get there)
                return None, _UNWRITABLE_POLL_MS
            return connection, None
        if node in self._connecting:
            return None, None
        wait = self._reconnect_after.get(node, 0.0) - now
        if wait > 0:
            return None, wait
        self._connecting[node] = asyncio.ensure_future(self._connect(node))
        return None, None

    async def _connect(self, node: int) -> None:
        try:
            connection = await self._cluster.connection(node)
            connection.version_for(ProduceRequest)
        except Exception as exc:
            failures = self._connect_failures.get(node, 0) + 1
            self._connect_failures[node] = failures
            initial, maximum = self._reconnect_backoff
            self._reconnect_after[node] = now_ms() + min(initial * 2 ** (failures - 1), maximum)
            self._metadata.last_error = exc
            self._metadata.request_update()
            log.log(logging.WARNING if failures == 1 else logging.DEBUG,
                    "cannot connect to broker %d: %s", node, exc)
        else:
            self._connections[node] = connection
            self._connect_failures.pop(node, None)
        finally:
            self._connecting.pop(node, None)
            self.wakeup()

    def _send(self, node: int, connection: BrokerConnection, batches: list[ProducerBatch],
              now: float) -> None:
        """One ProduceRequest for the plain batches and, beside it, one
        SamsaConditionalProduceRequest for the conditional ones (each alone in its batch)."""
        for batch in batches:
            if batch.payload is None:
                batch.payload = batch.builder.close(
                    compression=self._compression, level=self._compression_level,
                    producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                    base_sequence=batch.base_sequence)
        plain = [batch for batch in batches if batch.condition is None]
        conditional = [batch for batch in batches if batch.condition is not None]
        if plain:
            self._dispatch(node, connection, plain, _produce_request(plain, self._acks,
                           self._request_timeout_ms), self._handle_response, now)
        if conditional:
            self._dispatch(node, connection, conditional, _conditional_request(
                conditional, self._acks, self._request_timeout_ms),
                self._handle_conditional_response, now)

    def _dispatch(self, node: int, connection: BrokerConnection, batches: list[ProducerBatch],
                  request: ProduceRequest | SamsaConditionalProduceRequest,
                  handle: ResponseHandler, now: float) -> None:
        try:
            future = connection.send(request, expect_response=self._acks != 0)
        except Exception as exc:
            self._handle_error(batches, exc, now)
            return
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        if self._guarantee_order:
            self._muted.update(batch.topic_partition for batch in batches)
        future.add_done_callback(functools.partial(self._on_response, node, batches, handle))

    # --- responses -----------------------------------------------------------------------------

    def _on_response(self, node: int, batches: list[ProducerBatch], handle: ResponseHandler,
                     future: asyncio.Future[Any]) -> None:
        self._in_flight[node] -= 1
        if self._guarantee_order:
            self._muted.difference_update(batch.topic_partition for batch in batches)
        now = now_ms()
        error = (ClientClosedError("the producer was closed") if future.cancelled()
                 else future.exception())
        if error is not None:
            self._handle_error(batches, error, now)
        else:
            handle(batches, future.result(), now)
        self.wakeup()

    def _handle_error(self, batches: list[ProducerBatch], error: BaseException,
                      now: float) -> None:
        if isinstance(error, ClientError):
            self._metadata.request_update()
        for batch in batches:
            self._retry_or_fail(batch, error, now)

    def _handle_response(self, batches: list[ProducerBatch], response: ProduceResponse | None,
                         now: float) -> None:
        if response is None:  # acks=0: no offsets, as in Kafka
            for batch in batches:
                self._complete(batch, -1, -1)
            return
        answers = {(topic.name, partition.index): partition
                   for topic in response.responses for partition in topic.partition_responses}
        self._settle(batches, answers, now, self._apply_leader_hints(response))

    def _handle_conditional_response(self, batches: list[ProducerBatch],
                                     response: SamsaConditionalProduceResponse, now: float) -> None:
        """As ``_handle_response``; OFFSET_CONFLICT fails the record with
        ``OffsetConflictError`` (not retried: the caller re-reads and decides)."""
        answers = {(topic.name, partition.index): partition
                   for topic in response.responses for partition in topic.partition_responses}
        self._settle(batches, answers, now, set())

    def _settle(self, batches: list[ProducerBatch], answers: dict[tuple[str, int], Any],
                now: float, moved: set[TopicPartition]) -> None:
        """Each batch by its partition's answer (a Produce or SamsaConditionalProduce one):
        completed, failed on OFFSET_CONFLICT, else retried or failed as its error says."""
        for batch in batches:
            answer = answers.get(batch.topic_partition)
            if answer is None:
                self._retry_or_fail(batch, UnknownServerError(
                    f"the broker did not answer for {_name(batch)}"), now)
            elif answer.error_code in (0, _DUPLICATE_SEQUENCE_NUMBER):
                self._complete(batch, answer.base_offset, answer.log_append_time_ms)
            elif answer.error_code == ErrorCode.OFFSET_CONFLICT:
                self._fail(batch, OffsetConflictError(  # the broker's message names the partition
                    answer.error_message or f"{_name(batch)}: OFFSET_CONFLICT",
                    current_offset=answer.current_offset))
            else:
                self._retry_or_fail(batch, _produce_error(answer, batch), now,
                                    leader_moved=batch.topic_partition in moved)

    def _apply_leader_hints(self, response: ProduceResponse) -> set[TopicPartition]:
        """KIP-951 (Produce v10+): the leaders named by NOT_LEADER_OR_FOLLOWER answers; the
        partitions whose new leader was taken (their batches retry there at once)."""
        hints = {TopicPartition(topic.name, answer.index):
                 (answer.current_leader.leader_id, answer.current_leader.leader_epoch)
                 for topic in response.responses for answer in topic.partition_responses
                 if answer.error_code == _NOT_LEADER_OR_FOLLOWER
                 and answer.current_leader.leader_id >= 0}
        if not hints:
            return set()
        endpoints = {node.node_id: BrokerInfo(node.node_id, node.host, node.port, node.rack)
                     for node in response.node_endpoints}
        return self._metadata.apply_leader_hints(hints, endpoints)

    def _retry_or_fail(self, batch: ProducerBatch, error: BaseException, now: float, *,
                       leader_moved: bool = False) -> None:
        if batch.done:
            return
        if isinstance(error, MessageTooLargeError) and batch.record_count > 1 \
                and not self._forced:
            self._split(batch, now)  # Kafka splits a refused batch and retries the halves
            return
        retriable = isinstance(error, KafkaError) and error.retriable
        code = error.code if isinstance(error, KafkaError) else None
        if code in _SEQUENCE_ERRORS and self._idempotence is not None:
            retriable = self._idempotence.should_retry_sequence_error(batch)
        if retriable and not self._forced:
            elapsed = now - batch.created_ms
            if batch.attempts < self._retries and elapsed < self._delivery_timeout_ms:
                if code in METADATA_ERRORS and not leader_moved:
                    self._metadata.request_update()
                log.debug("retrying %r after %s", batch, error)
                self._accumulator.reenqueue(batch, now, leader_moved=leader_moved)
                return
            error = KafkaTimeoutError(
                f"{batch.record_count} record(s) for {_name(batch)} not delivered after "
                f"{batch.attempts + 1} attempt(s) in {elapsed:.0f} ms: {error}")
        self._fail(batch, error if isinstance(error, Exception) else Exception(str(error)))

    def _split(self, batch: ProducerBatch, now: float) -> None:
        assert batch.payload is not None
        records = decode_batch(batch.payload).records
        half = len(records) // 2
        parts = []
        for chunk, entries in ((records[:half], batch.records[:half]),
                               (records[half:], batch.records[half:])):
            builder = BatchBuilder(batch.size)
            for record in chunk:
                builder.append(record.timestamp, record.key, record.value,
                               encode_headers(record.headers) if record.headers else None)
            part = ProducerBatch(batch.topic_partition, builder, batch.created_ms, 0)
            part.records = entries
            part.full = True
            parts.append(part)
        log.info("%s: splitting a batch of %d records the broker found too large",
                 _name(batch), batch.record_count)
        if self._idempotence is not None:
            self._idempotence.split(batch, parts)
        batch.done = True  # its records live on in the parts
        batch.split_into = parts
        self._accumulator.split(batch, parts, now)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if batch.done:
            return
        if self._idempotence is not None:
            self._idempotence.on_success(batch)
        self._finish(batch)
        self._delivery.complete(batch, base_offset, log_append_time)

    def _fail(self, batch: ProducerBatch, error: Exception) -> None:
        if batch.done:
            return
        if self._idempotence is not None:
            self._idempotence.on_failure(batch)
        self._finish(batch)
        self._delivery.fail(batch, error)

    def _finish(self, batch: ProducerBatch) -> None:
        batch.done = True
        self._accumulator.deallocate(batch)
        if self._flush_waiters:
            waiters, self._flush_waiters = self._flush_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)


def _produce_request(batches: list[ProducerBatch], acks: int, timeout_ms: int) -> ProduceRequest:
    topics: dict[str, list[PartitionProduceData]] = {}
    for batch in batches:
        tp = batch.topic_partition
        topics.setdefault(tp.topic, []).append(
            PartitionProduceData(index=tp.partition, records=batch.payload))
    return ProduceRequest(
        transactional_id=None, acks=acks, timeout_ms=timeout_ms,
        topic_data=[TopicProduceData(name=name, partition_data=partitions)
                    for name, partitions in topics.items()])


def _conditional_request(batches: list[ProducerBatch], acks: int,
                         timeout_ms: int) -> SamsaConditionalProduceRequest:
    topics: dict[str, list[ConditionalProducePartitionData]] = {}
    for batch in batches:
        tp, condition = batch.topic_partition, batch.condition
        assert condition is not None
        topics.setdefault(tp.topic, []).append(ConditionalProducePartitionData(
            index=tp.partition, records=batch.payload,
            expected_end_offset=condition.expected_end_offset, condition_key=condition.key,
            expected_key_offset=condition.expected_key_offset))
    return SamsaConditionalProduceRequest(
        transactional_id=None, acks=acks, timeout_ms=timeout_ms,
        topic_data=[ConditionalProduceTopicData(name=name, partition_data=partitions)
                    for name, partitions in topics.items()])


def _produce_error(answer: Any, batch: ProducerBatch) -> KafkaError:
    error_type = error_for_code(answer.error_code)
    details = [answer.error_message] if answer.error_message else []
    details += [f"record {entry.batch_index}: {entry.batch_index_error_message}"
                for entry in getattr(answer, "record_errors", ()) if entry.batch_index_error_message]
    text = f"{_name(batch)}: {error_type.name}"
    if details:
        text += f" ({'; '.join(details)})"
    if error_type is MessageTooLargeError:
        text += f"; the batch of {batch.record_count} record(s) is {batch.size} bytes"
    return error_type(text)


def _name(batch: ProducerBatch) -> str:
    return f"{batch.topic_partition.topic}-{batch.topic_partition.partition}"


def _earliest(first: float | None, second: float | None) -> float | None:
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)


def _compression_level(config: dict[str, Any]) -> int | None:
    codec = config["compression.type"]
    if codec in ("gzip", "lz4", "zstd"):
        return int(config[f"compression.{codec}.level"])
    return None
