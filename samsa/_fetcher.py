"""Fetching for the consumer: pipelined Fetch requests, position resets, offsets by time.

Pipelining: at most one Fetch is in flight per broker, covering every assigned partition that
broker leads and that is fetchable (has a position, not paused, not in flight, fewer than
``MAX_BUFFERED`` responses buffered). A fetch goes out as soon as the previous one to that
broker returns, from each partition's ``fetch_offset`` (past what is buffered), so the broker
prepares the next response while the application processes the last one. Each partition's
share of a response is buffered undecoded (``samsa._decoding.CompletedFetch``); ``poll()``
decodes only what it returns.

Errors: OFFSET_OUT_OF_RANGE resets the position per ``auto.offset.reset`` (an error raised by
``poll()`` when that is "none"); leadership errors refresh the metadata and back off; any
other partition error is raised by ``poll()``.

State: a ``Fetcher`` belongs to the consumer's event loop (its fetches are tasks there).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from protocol.errors import KafkaError, OffsetOutOfRangeError
from protocol.errors import error_for_code as _error_for_code
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.fetch_response import FetchResponse, PartitionData
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_offsets_response import ListOffsetsResponse
from samsa._cluster import METADATA_ERRORS, Cluster, backoff_delays
from samsa._decoding import CompletedFetch, Decoders, parse_batches
from samsa._positions import PartitionState, SubscriptionState
from samsa.types import ConsumerRecord, OffsetAndTimestamp, TopicPartition

__all__ = ["Fetcher", "list_offsets"]

log = logging.getLogger("samsa.consumer")

MAX_BUFFERED = 2  # responses buffered per partition: one being returned, one prefetched
FETCH_MAX_VERSION = 12  # topics by name (v13+ names them by id)
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
READ_COMMITTED = 1
_OFFSET_OUT_OF_RANGE = OffsetOutOfRangeError.code


# --- offsets by time -------------------------------------------------------------------------


async def list_offsets(cluster: Cluster, timestamps: Mapping[TopicPartition, int], *,
                       isolation_level: int = 0,
                       timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndTimestamp]:
    """ListOffsets for each partition (timestamp, or -2 earliest / -1 latest), sent to the
    leaders and retried on retriable errors; partitions with no such offset are left out."""
    results: dict[TopicPartition, OffsetAndTimestamp] = {}
    remaining = dict(timestamps)

    async def attempt() -> None:
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, timestamp in remaining.items():
            by_leader.setdefault(await cluster.leader_for(tp), {})[tp] = timestamp
        replies = await asyncio.gather(
            *(_list_offsets_at(cluster, node, batch, isolation_level)
              for node, batch in by_leader.items()), return_exceptions=True)
        failure: BaseException | None = None
        for reply in replies:
            if isinstance(reply, BaseException):
                failure = reply
                continue
            found, error = reply
            failure = error or failure
            for tp, offset in found.items():
                remaining.pop(tp, None)
                if offset is not None:
                    results[tp] = offset
        if failure is not None:
            raise failure

    if remaining:
        await cluster.retrying(attempt, timeout_ms=timeout_ms, what="ListOffsets")
    return results


async def _list_offsets_at(
        cluster: Cluster, node_id: int, timestamps: Mapping[TopicPartition, int],
        isolation_level: int,
) -> tuple[dict[TopicPartition, OffsetAndTimestamp | None], KafkaError | None]:
    topics: dict[str, list[ListOffsetsPartition]] = {}
    for tp, timestamp in timestamps.items():
        topics.setdefault(tp.topic, []).append(
            ListOffsetsPartition(partition_index=tp.partition, timestamp=timestamp))
    request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level,
                                 topics=[ListOffsetsTopic(t, p) for t, p in topics.items()])
    response: ListOffsetsResponse = await cluster.send(node_id, request)
    found: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    error: KafkaError | None = None
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if p.error_code:
                error = _error_for_code(p.error_code)(f"ListOffsets for {tp.topic}-{tp.partition}")
                continue
            found[tp] = (None if p.offset < 0
                         else OffsetAndTimestamp(p.offset, p.timestamp, p.leader_epoch))
    return found, error


# --- the fetcher ---------------------------------------------------------------------------------


class Fetcher:
    """Keeps a fetch in flight to every broker leading a fetchable partition (a task that runs
    until ``close()``), resets positions with ListOffsets, and hands out records."""

    def __init__(self, cluster: Cluster, subscriptions: SubscriptionState,
                 config: Mapping[str, Any], ready: asyncio.Event) -> None:
        self._cluster = cluster
        self._subscriptions = subscriptions
        self._config = config
        self._decoders = Decoders(config)
        self._wakeup = asyncio.Event()
        self._ready = ready  # set when records or a partition error are there for poll()
        self._busy_nodes: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._resetting = False
        self._metadata_refresh: asyncio.Task[Any] | None = None
        self._refresh_delays: Iterator[float] | None = None
        self._next_partition = 0
        self._runner: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._runner is None:
            self._runner = asyncio.get_running_loop().create_task(self._run())

    def wakeup(self) -> None:
        self._wakeup.set()

    async def close(self) -> None:
        tasks = [t for t in (self._runner, self._metadata_refresh, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- handing out records ---

    def take_records(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` buffered records, partitions taken in turn; raises a
        partition's pending error first."""
        out: list[ConsumerRecord] = []
        states = list(self._subscriptions.partitions.values())
        self._raise_partition_errors(states)
        if not states:
            return out
        start = self._next_partition % len(states)
        for state in states[start:] + states[:start]:
            while state.buffered and not state.paused and len(out) < max_records:
                completed = state.buffered[0]
                completed.take(state, max_records - len(out), self._decoders, out)
                if completed.exhausted:
                    state.buffered.popleft()
                    self._wakeup.set()
            if len(out) >= max_records:
                break
        self._next_partition += 1
        return out

    def _raise_partition_errors(self, states: Sequence[PartitionState]) -> None:
        for state in states:
            if state.error is not None and not state.buffered:
                error, state.error = state.error, None
                state.retry_at = time.monotonic() + self._config["retry.backoff.ms"] / 1000
                raise error

    # --- the fetch loop ---

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if self._subscriptions.awaiting_reset() and not self._resetting:
                self._spawn(self._reset_in_background())
            for node_id, items in self._plan().items():
                self._busy_nodes.add(node_id)
                for _, state in items:
                    state.in_flight = True
                self._spawn(self._fetch(node_id, items))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _plan(self) -> dict[int, list[tuple[TopicPartition, PartitionState]]]:
        now = time.monotonic()
        plan: dict[int, list[tuple[TopicPartition, PartitionState]]] = {}
        retry_at = None
        for tp, state in self._subscriptions.partitions.items():
            if not state.fetchable(now, MAX_BUFFERED):
                if state.retry_at > now and state.fetch_offset is not None:
                    retry_at = min(retry_at or state.retry_at, state.retry_at)
                continue
            leader = self._leader(tp)
            if leader < 0:
                self._refresh_metadata()
                continue
            if leader not in self._busy_nodes:
                plan.setdefault(leader, []).append((tp, state))
        if retry_at is not None:
            asyncio.get_running_loop().call_later(retry_at - now, self._wakeup.set)
        return plan

    def _refresh_metadata(self) -> None:
        if self._metadata_refresh is None or self._metadata_refresh.done():
            self._metadata_refresh = asyncio.get_running_loop().create_task(self._do_refresh())

    async def _do_refresh(self) -> None:
        """Refresh the metadata of the assigned topics; back off (doubling) while it fails or
        some partition still has no leader, so an unknown topic is not asked for in a loop."""
        topics = {tp.topic for tp in self._subscriptions.partitions}
        try:
            await self._cluster.refresh_metadata(topics)
            resolved = all(self._leader(tp) >= 0 for tp in self._subscriptions.partitions)
        except KafkaError as exc:
            log.debug("metadata refresh failed: %s", exc)
            resolved = False
        if resolved:
            self._refresh_delays = None
        else:
            if self._refresh_delays is None:
                self._refresh_delays = iter(backoff_delays(
                    self._config["retry.backoff.ms"], self._config["retry.backoff.max.ms"]))
            await asyncio.sleep(next(self._refresh_delays))
        self._wakeup.set()

    def _leader(self, tp: TopicPartition) -> int:
        info = self._cluster.topics.get(tp.topic)
        partition = None if info is None else info.partitions.get(tp.partition)
        return -1 if partition is None else partition.leader

    def _build_request(self, items: Sequence[tuple[TopicPartition, PartitionState]]) -> FetchRequest:
        config = self._config
        topics: dict[str, list[FetchPartition]] = {}
        for tp, state in items:
            assert state.fetch_offset is not None
            topics.setdefault(tp.topic, []).append(FetchPartition(
                partition=tp.partition, fetch_offset=state.fetch_offset,
                partition_max_bytes=config["max.partition.fetch.bytes"]))
        return FetchRequest(
            replica_id=-1, max_wait_ms=config["fetch.max.wait.ms"],
            min_bytes=config["fetch.min.bytes"], max_bytes=config["fetch.max.bytes"],
            isolation_level=READ_COMMITTED if self._decoders.read_committed else 0,
            session_id=0, session_epoch=-1, rack_id=config["client.rack"],
            topics=[FetchTopic(topic=t, partitions=p) for t, p in topics.items()])

    async def _fetch(self, node_id: int, items: list[tuple[TopicPartition, PartitionState]]) -> None:
        epochs = {tp: state.epoch for tp, state in items}
        try:
            connection = await self._cluster.connection(node_id)
            version = connection.version_for(FetchRequest, max_version=FETCH_MAX_VERSION)
            response: FetchResponse = await connection.request(self._build_request(items), version)
        except (KafkaError, OSError) as exc:
            log.debug("fetch from node %d failed: %s", node_id, exc)
            self._back_off(items)
            self._refresh_metadata()
            return
        finally:
            self._busy_nodes.discard(node_id)
            for _, state in items:
                state.in_flight = False
            self._wakeup.set()
        if response.error_code:
            log.debug("fetch from node %d: error code %d", node_id, response.error_code)
            self._back_off(items)
            return
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                self._complete(tp, epochs.get(tp), data)

    def _back_off(self, items: Iterable[tuple[TopicPartition, PartitionState]]) -> None:
        retry_at = time.monotonic() + self._config["retry.backoff.ms"] / 1000
        for _, state in items:
            state.retry_at = retry_at

    def _complete(self, tp: TopicPartition, epoch: int | None, data: PartitionData) -> None:
        state = self._subscriptions.partitions.get(tp)
        if state is None or epoch is None or state.epoch != epoch:
            return  # unassigned or moved (seek, reset) since the request went out
        if data.error_code:
            self._partition_error(tp, state, data.error_code)
            return
        state.high_watermark = data.high_watermark
        state.last_stable_offset = data.last_stable_offset
        state.log_start_offset = data.log_start_offset
        records = data.records
        if not records:
            return
        view = records if isinstance(records, memoryview) else memoryview(records)
        batches = parse_batches(view)
        if not batches:
            return
        aborted = None
        if data.aborted_transactions:
            aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions]
        completed = CompletedFetch(tp, epoch, view, batches, aborted)
        state.fetch_offset = completed.next_fetch_offset
        state.buffered.append(completed)
        self._ready.set()

    def _partition_error(self, tp: TopicPartition, state: PartitionState, code: int) -> None:
        if code == _OFFSET_OUT_OF_RANGE:
            strategy = self._subscriptions.default_reset
            if strategy == "none":
                state.error = OffsetOutOfRangeError(
                    f"offset {state.fetch_offset} is out of range for {tp.topic}-{tp.partition}"
                    " and auto.offset.reset is none")
                self._ready.set()
            else:
                log.info("offset %s out of range for %s-%d: resetting to %s",
                         state.fetch_offset, tp.topic, tp.partition, strategy)
                state.request_reset(strategy)
            return
        error = _error_for_code(code)
        if code in METADATA_ERRORS or error.retriable:
            self._back_off([(tp, state)])
            self._refresh_metadata()
            return
        state.error = error(f"fetching {tp.topic}-{tp.partition}")
        self._ready.set()

    # --- position resets ---

    async def reset_positions(self) -> None:
        """Look up, with ListOffsets, the position of every partition awaiting a reset."""
        wanted = {tp: self._subscriptions.partitions[tp]
                  for tp in self._subscriptions.awaiting_reset()}
        if not wanted:
            return
        epochs = {tp: s.epoch for tp, s in wanted.items()}
        timestamps = {tp: EARLIEST_TIMESTAMP if s.reset_strategy == "earliest"
                      else LATEST_TIMESTAMP for tp, s in wanted.items()}
        found = await list_offsets(
            self._cluster, timestamps,
            isolation_level=READ_COMMITTED if self._decoders.read_committed else 0)
        for tp, result in found.items():
            state = self._subscriptions.partitions.get(tp)
            if state is not None and state.epoch == epochs[tp] and state.reset_strategy:
                state.seek(result.offset, result.leader_epoch)
        self._wakeup.set()

    async def _reset_in_background(self) -> None:
        self._resetting = True
        try:
            await self.reset_positions()
        except KafkaError as exc:
            log.warning("resetting offsets failed: %s", exc)
            await asyncio.sleep(self._config["retry.backoff.ms"] / 1000)
        finally:
            self._resetting = False
            self._wakeup.set()
