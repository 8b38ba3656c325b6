"""The asyncio core every client object shares: bootstrap, metadata, routing, retries.

``Cluster`` holds one connection per broker (opened on first use, reopened after a
failure with exponential backoff), the latest metadata (brokers, topics, partition
leaders; refreshed when stale, when a caller asks, and after NOT_LEADER-like errors),
and the coordinator of each group it has looked up. A leader named by a broker's
NOT_LEADER_OR_FOLLOWER answer (KIP-951: ``current_leader`` and ``node_endpoints``) is taken
at once by ``update_leader`` when its leader epoch is newer than the one known.

Routing: ``send(node_id, request)`` sends to one broker; ``send_any(request)`` to the
least-loaded connected broker (or a bootstrap server before any metadata is known);
``leader_for(tp)`` and ``coordinator(group_id)`` say where partition and group requests
go. ``retrying(operation)`` re-runs an operation on retriable errors with Kafka's
backoff (``retry.backoff.ms`` doubling to ``retry.backoff.max.ms``, ±20 % jitter)
until ``default.api.timeout.ms`` is spent.

State: a ``Cluster`` belongs to one event loop (a ``LoopThread``'s); none of its
methods may be called from another thread.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from protocol.codec import Message
from protocol.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
    error_for_code,
)
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.find_coordinator_response import FindCoordinatorResponse
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.metadata_response import MetadataResponse
from samsa._connection import BrokerConnection, connect
from samsa._sasl import sasl_credentials
from samsa.errors import BrokerUnreachableError, KafkaTimeoutError, NoBrokersAvailableError
from samsa.types import BrokerInfo, PartitionInfo, TopicInfo, TopicPartition

__all__ = ["Cluster", "backoff_delays"]

log = logging.getLogger("samsa.cluster")

T = TypeVar("T")

# Errors after which the metadata (leaders) or the coordinator must be looked up again.
METADATA_ERRORS = frozenset({3, 5, 6, 9, 74, 75, 100})  # UNKNOWN_TOPIC_OR_PARTITION, ... fencing
COORDINATOR_ERRORS = frozenset({CoordinatorNotAvailableError.code, NotCoordinatorError.code})


def backoff_delays(initial_ms: int, maximum_ms: int) -> Iterable[float]:
    """Kafka's exponential backoff in seconds: initial, doubling, capped, ±20 % jitter."""
    delay = max(initial_ms, 1)
    while True:
        yield min(delay, maximum_ms) * random.uniform(0.8, 1.2) / 1000
        delay *= 2


class Cluster:
    """Connections, metadata and routing for one client object (see the module docstring)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.client_id: str = config["client.id"]
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self._metadata_time = 0.0
        self._metadata_lock = asyncio.Lock()
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future[BrokerConnection]] = {}
        self._bootstrap: BrokerConnection | None = None
        self._coordinators: dict[tuple[int, str], int] = {}
        self._closed = False

    # --- connections ---------------------------------------------------------------------

    async def _open(self, host: str, port: int, node_id: int) -> BrokerConnection:
        return await connect(
            host, port, node_id=node_id, client_id=self.client_id,
            request_timeout_ms=self.config["request.timeout.ms"],
            setup_timeout_ms=self.config["socket.connection.setup.timeout.ms"],
            max_response_bytes=self.config["receive.message.max.bytes"],
            sasl=sasl_credentials(self.config))

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to broker ``node_id`` (opened if needed)."""
        existing = self._connections.get(node_id)
        if existing is not None and existing.connected:
            return existing
        pending = self._connecting.get(node_id)
        if pending is not None:
            return await asyncio.shield(pending)
        broker = self.brokers.get(node_id)
        if broker is None:
            await self.refresh_metadata()
            broker = self.brokers.get(node_id)
            if broker is None:
                raise BrokerUnreachableError(f"node {node_id}", "not in the cluster metadata")
        future = asyncio.ensure_future(self._open(broker.host, broker.port, node_id))
        self._connecting[node_id] = future
        try:
            connection = await asyncio.shield(future)
        finally:
            self._connecting.pop(node_id, None)
        self._connections[node_id] = connection
        return connection

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: the least loaded open one, else any known or
        bootstrap broker that answers (tried in random order)."""
        open_ones = [c for c in self._connections.values() if c.connected]
        if open_ones:
            return min(open_ones, key=lambda c: c.in_flight)
        if self._bootstrap is not None and self._bootstrap.connected:
            return self._bootstrap
        candidates = [(b.host, b.port, b.node_id) for b in self.brokers.values()]
        for address in self.config["bootstrap.servers"]:
            host, _, port = address.rpartition(":")
            candidates.append((host.strip("[]"), int(port), -1))
        random.shuffle(candidates)
        failures = []
        for host, port, node_id in candidates:
            try:
                connection = await self._open(host, port, node_id)
            except BrokerUnreachableError as exc:
                failures.append(str(exc))
                continue
            if node_id >= 0:
                self._connections[node_id] = connection
            else:
                self._bootstrap = connection
            return connection
        tried = ", ".join(f"{h}:{p}" for h, p, _ in candidates)
        raise NoBrokersAvailableError(f"no broker answered (tried {tried}): {failures[-1]}")

    async def send(self, node_id: int, request: Message, version: int | None = None,
                   **kwargs: Any) -> Any:
        """Send ``request`` to broker ``node_id``; its decoded response."""
        connection = await self.connection(node_id)
        return await connection.request(request, version, **kwargs)

    async def send_any(self, request: Message, version: int | None = None, **kwargs: Any) -> Any:
        connection = await self.any_connection()
        return await connection.request(request, version, **kwargs)

    # --- metadata ----------------------------------------------------------------------------

    @property
    def metadata_is_stale(self) -> bool:
        age_ms = (time.monotonic() - self._metadata_time) * 1000
        return age_ms >= self.config["metadata.max.age.ms"]

    async def refresh_metadata(self, topics: Iterable[str] | None = None, *,
                               allow_auto_topic_creation: bool = False) -> MetadataResponse:
        """Fetch metadata for ``topics`` (all topics when None) and merge it in."""
        async with self._metadata_lock:
            names = None if topics is None else sorted(set(topics))
            request = MetadataRequest(
                topics=None if names is None else [MetadataRequestTopic(name=n) for n in names],
                allow_auto_topic_creation=allow_auto_topic_creation)
            response: MetadataResponse = await self.send_any(request)
            self._merge(response, replace_all=names is None)
            return response

    def _merge(self, response: MetadataResponse, *, replace_all: bool) -> None:
        self.brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack)
                        for b in response.brokers}
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        if replace_all:
            self.topics = {}
        for topic in response.topics:
            if topic.name is None:
                continue
            if topic.error_code and topic.error_code != 5:  # keep LEADER_NOT_AVAILABLE ones
                self.topics.pop(topic.name, None)
                continue
            partitions = {
                p.partition_index: PartitionInfo(
                    topic.name, p.partition_index, p.leader_id, p.leader_epoch,
                    tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.offline_replicas),
                    p.error_code)
                for p in topic.partitions}
            self.topics[topic.name] = TopicInfo(topic.name, partitions, str(topic.topic_id),
                                                topic.is_internal, topic.error_code)
        self._metadata_time = time.monotonic()
        for node_id in list(self._connections):
            if node_id not in self.brokers:
                self._connections.pop(node_id).close_soon()

    def invalidate_metadata(self) -> None:
        """Make the next ``leader_for`` (or a caller checking ``metadata_is_stale``) refresh."""
        self._metadata_time = 0.0

    def partitions_for(self, topic: str) -> list[int] | None:
        """The partition numbers of ``topic`` as last seen, or None if it is unknown."""
        info = self.topics.get(topic)
        return None if info is None else sorted(info.partitions)

    def update_leader(self, tp: TopicPartition, leader_id: int, leader_epoch: int,
                      endpoints: Mapping[int, BrokerInfo]) -> bool:
        """KIP-951: take ``leader_id`` as ``tp``'s leader when ``leader_epoch`` is newer than
        the known one and the leader's endpoint is known (in ``endpoints``, from the same
        response, or already); True when taken (Kafka's ``updatePartitionLeadership``)."""
        info = self.topics.get(tp.topic)
        partition = None if info is None else info.partitions.get(tp.partition)
        if info is None or partition is None or leader_id < 0 \
                or leader_epoch <= partition.leader_epoch:
            return False
        broker = endpoints.get(leader_id) or self.brokers.get(leader_id)
        if broker is None:
            return False
        self.brokers[leader_id] = broker
        info.partitions[tp.partition] = replace(partition, leader=leader_id,
                                                leader_epoch=leader_epoch)
        return True

    async def leader_for(self, tp: TopicPartition) -> int:
        """The leader's node id for ``tp``, refreshing metadata first when it is stale (as
        ``retrying`` marks it after a leadership error or a lost broker) and once more if the
        leader isn't known."""
        if self.metadata_is_stale:
            await self.refresh_metadata([tp.topic])
        for attempt in range(2):
            info = self.topics.get(tp.topic)
            partition = None if info is None else info.partitions.get(tp.partition)
            if partition is not None and partition.leader >= 0:
                return partition.leader
            if attempt == 0:
                await self.refresh_metadata([tp.topic])
        if tp.topic not in self.topics:
            raise error_for_code(3)(f"unknown topic {tp.topic!r}")
        if tp.partition not in self.topics[tp.topic].partitions:
            raise error_for_code(3)(f"topic {tp.topic!r} has no partition {tp.partition}")
        raise error_for_code(5)(f"{tp.topic}-{tp.partition} has no leader")

    # --- coordinators ------------------------------------------------------------------------

    async def coordinator(self, key: str, key_type: int = 0) -> int:
        """The node id of the coordinator for group (``key_type`` 0) or transaction ``key``."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached
        connection = await self.any_connection()
        version = connection.version_for(FindCoordinatorRequest)
        if version >= 4:
            request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        else:
            request = FindCoordinatorRequest(key=key, key_type=key_type)
        response: FindCoordinatorResponse = await connection.request(request, version)
        if version >= 4:
            entry = response.coordinators[0]
            code, node_id, host, port = entry.error_code, entry.node_id, entry.host, entry.port
            message = entry.error_message
        else:
            code, node_id, host, port = (response.error_code, response.node_id, response.host,
                                         response.port)
            message = response.error_message
        if code:
            raise error_for_code(code)(message or None)
        if node_id not in self.brokers:
            self.brokers[node_id] = BrokerInfo(node_id, host, port)
        self._coordinators[(key_type, key)] = node_id
        return node_id

    def forget_coordinator(self, key: str, key_type: int = 0) -> None:
        self._coordinators.pop((key_type, key), None)

    # --- retries -------------------------------------------------------------------------------

    async def retrying(self, operation: Callable[[], Awaitable[T]], *,
                       timeout_ms: int | None = None, what: str = "request") -> T:
        """Run ``operation`` until it succeeds, a non-retriable error, or the timeout.

        Before a retry: metadata is refreshed after a leadership error, and the cached
        coordinators are dropped after a coordinator error.
        """
        limit = self.config["default.api.timeout.ms"] if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + limit / 1000
        delays = iter(backoff_delays(self.config["retry.backoff.ms"],
                                     self.config["retry.backoff.max.ms"]))
        while True:
            try:
                return await operation()
            except KafkaError as exc:
                if not exc.retriable and not isinstance(exc, CoordinatorLoadInProgressError):
                    raise
                delay = next(delays)
                if time.monotonic() + delay > deadline:
                    raise KafkaTimeoutError(f"{what} did not succeed within {limit} ms: "
                                            f"{type(exc).__name__}: {exc}") from exc
                await self._recover_from(exc)
                await asyncio.sleep(delay)

    async def _recover_from(self, error: KafkaError) -> None:
        if error.code in COORDINATOR_ERRORS:
            self._coordinators.clear()
        if error.code in METADATA_ERRORS or isinstance(error, BrokerUnreachableError):
            self._metadata_time = 0.0

    async def close(self) -> None:
        """Close every connection."""
        self._closed = True
        connections = list(self._connections.values())
        if self._bootstrap is not None:
            connections.append(self._bootstrap)
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
