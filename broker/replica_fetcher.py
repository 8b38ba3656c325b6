"""The follower fetchers (Kafka's ``ReplicaFetcherManager`` and ``ReplicaFetcherThread``): the
asyncio shell around ``replication.follower``.

One fetcher per (source broker, fetcher id): a partition this node follows goes to the
fetcher of its leader numbered ``hash(topic, partition) % num.replica.fetchers`` (default 1:
one fetcher per leader). Each fetcher is one task that loops:

1. the partitions not backing off (``replica.fetch.backoff.ms``, 1 s, after an error); none:
   wait until one is added or its back-off ends;
2. a sessionless Fetch (``session_epoch`` -1) to the leader's ``inter.broker.listener.name``
   endpoint (``Broker.inter_broker_endpoint``), with ``replica_state`` (this node's id and broker
   epoch), ``replica.fetch.wait.max.ms`` (500), ``replica.fetch.min.bytes`` (1),
   ``replica.fetch.response.max.bytes`` (10 MiB), ``replica.fetch.max.bytes`` (1 MiB) per
   partition, and per partition its ``fetch_position`` (log end offset, last fetched epoch,
   current leader epoch, log start offset). The leader long-polls, so a caught-up follower
   costs one request per ``replica.fetch.wait.max.ms`` or per leader append;
3. each partition's answer through ``replication.follower.apply_answer``: appended (the
   broker's delayed operations on it are checked: a consumer reading this follower), truncated,
   backing off, or out of range (ListOffsets earliest / latest to the leader with this node's
   replica id, then ``reset_out_of_range``).

A request that fails (leader unreachable, timed out) backs every partition in it off. A
partition whose role or leader changed while its request was out is answered ``STALE`` and
fetched again from where it now is. Follower appends happen on the event loop: each is at most
``replica.fetch.max.bytes`` per partition, written to the page cache (flushed by the log's
flush policy off the loop). With ``flush.messages`` reached, the fetcher sends its next Fetch
(its position) only once the flush covering its appends is done (``broker.group_commit``).

State: every object belongs to the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.kraft_config import ReplicaFetchSettings
from broker.node_client import NodeClientError, NodeClients
from protocol.codec import DecodeError
from protocol.errors import ErrorCode, KafkaError, UnsupportedVersionError
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from protocol.messages.fetch_response import FetchResponse
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_offsets_response import ListOffsetsResponse
from replication.follower import (
    FetchPosition,
    FollowerOutcome,
    LeaderAnswer,
    apply_answer,
    fetch_position,
    reset_out_of_range,
)
from replication.partition import Partition

if TYPE_CHECKING:
    from broker.broker import Broker

__all__ = ["ReplicaFetcherManager"]

logger = logging.getLogger("samsa.broker.replica_fetcher")

EARLIEST, LATEST = -2, -1
SESSIONLESS_EPOCH = -1  # Kafka's FetchMetadata.FINAL_EPOCH with session id 0: no session
FetcherKey = tuple[int, int]  # (source broker, fetcher id)
PartitionKey = tuple[str, int]


@dataclass(slots=True)
class _Fetched:
    partition: Partition
    backoff_until: float = 0.0


class ReplicaFetcher:
    """One source broker's fetcher (see the module docstring)."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[PartitionKey, _Fetched] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{self.leader_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def add(self, partition: Partition) -> None:
        self.partitions[(partition.topic, partition.partition)] = _Fetched(partition)
        self._wake.set()

    def remove(self, key: PartitionKey) -> None:
        self.partitions.pop(key, None)

    async def _run(self) -> None:
        while True:
            ready = await self._ready()
            try:
                await self._fetch_once(ready)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("replica fetcher for broker %d failed; backing off",
                                 self.leader_id)
                self._back_off(ready)

    async def _ready(self) -> list[tuple[PartitionKey, Partition]]:
        """The partitions to fetch now, waiting while there are none."""
        while True:
            now = time.monotonic()
            ready = [(key, entry.partition) for key, entry in self.partitions.items()
                     if entry.backoff_until <= now]
            if ready:
                return ready
            waits = [entry.backoff_until - now for entry in self.partitions.values()]
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(waits) if waits else None)

    async def _fetch_once(self, ready: list[tuple[PartitionKey, Partition]]) -> None:
        settings = self.manager.settings
        asked: dict[PartitionKey, tuple[Partition, FetchPosition]] = {}
        topics: dict[str, FetchTopic] = {}
        for key, partition in ready:
            position = fetch_position(partition)
            asked[key] = (partition, position)
            topic = topics.setdefault(key[0], FetchTopic(topic_id=partition.topic_id))  # v13+
            topic.partitions.append(FetchPartition(
                partition=key[1], current_leader_epoch=position.current_leader_epoch,
                fetch_offset=position.fetch_offset, last_fetched_epoch=position.last_fetched_epoch,
                log_start_offset=position.log_start_offset,
                partition_max_bytes=settings.replica_fetch_max_bytes))
        request = FetchRequest(
            replica_state=ReplicaState(replica_id=self.manager.node_id,
                                       replica_epoch=self.manager.broker_epoch()),
            max_wait_ms=settings.replica_fetch_wait_max_ms,
            min_bytes=settings.replica_fetch_min_bytes,
            max_bytes=settings.replica_fetch_response_max_bytes,
            isolation_level=0, session_id=0, session_epoch=SESSIONLESS_EPOCH,
            topics=list(topics.values()),
        )
        try:
            response = await self.manager.clients.send(self.leader_id, request)
        except (NodeClientError, UnsupportedVersionError, DecodeError) as error:
            logger.warning("fetch from broker %d failed: %s", self.leader_id, error)
            self._back_off(ready)
            return
        assert isinstance(response, FetchResponse)
        if response.error_code != ErrorCode.NONE:
            logger.info("fetch from broker %d answered %s", self.leader_id,
                        ErrorCode(response.error_code).name)
            self._back_off(ready)
            return
        await self._apply(response, asked)

    async def _apply(self, response: FetchResponse,
                     asked: dict[PartitionKey, tuple[Partition, FetchPosition]]) -> None:
        manager = self.manager
        flushes: list[asyncio.Future[None]] = []
        names = {partition.topic_id: key[0] for key, (partition, _) in asked.items()}
        for topic in response.responses:
            name = topic.topic or names.get(topic.topic_id, "")
            for data in topic.partitions:
                key = (name, data.partition_index)
                entry = asked.get(key)
                if entry is None or self.partitions.get(key) is None:
                    continue
                partition, position = entry
                diverging = data.diverging_epoch
                answer = LeaderAnswer(
                    error_code=data.error_code, high_watermark=data.high_watermark,
                    log_start_offset=data.log_start_offset,
                    diverging_epoch=(None if (diverging.epoch, diverging.end_offset) == (-1, -1)
                                     else (diverging.epoch, diverging.end_offset)),
                    records=data.records)
                try:
                    outcome = apply_answer(partition, position, answer)
                except KafkaError as error:
                    logger.warning("replicating %s-%d from broker %d failed: %s", *key,
                                   self.leader_id, error)
                    self._back_off([(key, partition)])
                    continue
                if outcome is FollowerOutcome.OUT_OF_RANGE:
                    await self._reset(key, partition)
                elif outcome is FollowerOutcome.BACK_OFF:
                    logger.debug("%s-%d: leader %d answered %s", *key, self.leader_id,
                                 ErrorCode(data.error_code).name)
                    self._back_off([(key, partition)])
                elif outcome is not FollowerOutcome.STALE:
                    flushed = manager.appended(partition)
                    if flushed is not None:
                        flushes.append(flushed)
        # flush.messages reached: the next Fetch reports the log end offset as this node's
        # position, so it waits until that is fsynced (acks=-1 then means every ISR member
        # synced). A failed sync took the log dir offline: the next fetch finds it so.
        await asyncio.gather(*flushes, return_exceptions=True)

    async def _reset(self, key: PartitionKey, partition: Partition) -> None:
        """OFFSET_OUT_OF_RANGE: the leader's log start and end, then ``reset_out_of_range``."""
        try:
            start = await self._leader_offset(key, partition, EARLIEST)
            end = await self._leader_offset(key, partition, LATEST)
        except (NodeClientError, UnsupportedVersionError, DecodeError, KafkaError) as error:
            logger.info("%s-%d: cannot ask leader %d for its offsets: %s", *key, self.leader_id,
                        error)
            self._back_off([(key, partition)])
            return
        moved = reset_out_of_range(partition, start, end)
        logger.warning("%s-%d was out of range of leader %d (log %d..%d): now ends at %s", *key,
                       self.leader_id, start, end, moved)

    async def _leader_offset(self, key: PartitionKey, partition: Partition, timestamp: int) -> int:
        request = ListOffsetsRequest(
            replica_id=self.manager.node_id, isolation_level=0,
            topics=[ListOffsetsTopic(name=key[0], partitions=[ListOffsetsPartition(
                partition_index=key[1], current_leader_epoch=partition.leader_epoch,
                timestamp=timestamp)])])
        response = await self.manager.clients.send(self.leader_id, request)
        assert isinstance(response, ListOffsetsResponse)
        answer = response.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NONE:
            raise KafkaError(f"ListOffsets answered {ErrorCode(answer.error_code).name}")
        return answer.offset

    def _back_off(self, partitions: list[tuple[PartitionKey, Partition]]) -> None:
        until = time.monotonic() + self.manager.settings.replica_fetch_backoff_ms / 1000
        for key, _ in partitions:
            entry = self.partitions.get(key)
            if entry is not None:
                entry.backoff_until = until


class ReplicaFetcherManager:
    """The fetchers of this broker, one per (leader, fetcher id), kept in step with the roles
    the metadata image gives the partitions (``role_changed``)."""

    def __init__(self, broker: Broker, settings: ReplicaFetchSettings,
                 broker_epoch: Callable[[], int]) -> None:
        self.broker = broker
        self.settings = settings
        self.node_id = broker.node_id
        self.broker_epoch = broker_epoch
        self.clients = NodeClients(
            broker.inter_broker_endpoint, client_id=f"replica-fetcher-{broker.node_id}",
            request_timeout_ms=settings.replica_socket_timeout_ms,
            ssl_context=broker.config.node_ssl_contexts.get(
                broker.config.kraft.inter_broker_listener_name))
        self.fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        self._fetcher_of: dict[PartitionKey, FetcherKey] = {}
        self.running = False

    def start(self) -> None:
        self.running = True
        for fetcher in self.fetchers.values():
            fetcher.start()

    async def stop(self) -> None:
        self.running = False
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        await self.clients.close()

    def role_changed(self, partition: Partition) -> None:
        """Follow ``partition``'s leader, or stop fetching it (it leads, or has no leader)."""
        key = (partition.topic, partition.partition)
        wanted: FetcherKey | None = None
        if not partition.is_leader and partition.leader_id >= 0:
            wanted = (partition.leader_id,
                      hash(key) % max(1, self.settings.num_replica_fetchers))
        current = self._fetcher_of.get(key)
        if current is not None and current != wanted:
            self.fetchers[current].remove(key)
            del self._fetcher_of[key]
        if wanted is None:
            return
        fetcher = self.fetchers.get(wanted)
        if fetcher is None:
            fetcher = self.fetchers[wanted] = ReplicaFetcher(self, wanted[0])
            if self.running:
                fetcher.start()
        fetcher.add(partition)  # again on an epoch change: fetch at once, no back-off
        self._fetcher_of[key] = wanted

    def removed(self, key: PartitionKey) -> None:
        current = self._fetcher_of.pop(key, None)
        if current is not None:
            self.fetchers[current].remove(key)

    def appended(self, partition: Partition) -> asyncio.Future[None] | None:
        """A follower's log or high watermark moved: delayed fetches on it may answer. A log
        due for a flush (``flush.messages``): the flush of everything appended, to wait for
        before the next Fetch (``broker.group_commit``)."""
        self.broker.high_watermarks_moved([(partition.topic, partition.partition)])
        log = partition.log
        if log.unflushed_messages >= log.config.flush_messages:
            return self.broker.flush_until(log, log.log_end_offset)
        return None
