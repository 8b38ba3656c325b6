"""The broker's ``SharePersister`` (``broker.share.persister``; Kafka's ``DefaultStatePersister``):
a share partition's state, kept by its share coordinator, reached in process or over the
network.

For each call, with a deadline of ``share.coordinator.write.timeout.ms`` from its start:

1. This node is the share partition's coordinator (``ShareCoordinatorService.serves``: it
   leads the share partition's ``__share_group_state`` partition; a single node always is):
   the service is called in process.
2. Otherwise the leader of that partition in this node's metadata image is sent the request
   (Initialize/Read/Write/DeleteShareGroupState v0/v0/v1/v0, ReadShareGroupStateSummary v1)
   over the inter-broker listener (``broker.node_client.NodeClients``). The topic missing:
   its creation is asked for (``ensure_topic``) and the call retried; no leader yet: retried.
3. Retriable outcomes — NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
   COORDINATOR_LOAD_IN_PROGRESS, NOT_LEADER_OR_FOLLOWER, and no answer (connection lost,
   request timed out, node unknown) — are retried after a backoff (100 ms doubling to 1 s)
   while the deadline allows, the coordinator looked up afresh each time; then the last
   error is raised (COORDINATOR_NOT_AVAILABLE for a missing answer). Every other error is
   raised at once.

A ReadShareGroupState of a share partition with no state is answered INVALID_REQUEST with
``UNINITIALIZED_READ_MESSAGE`` (Kafka's answer); this persister returns None for it, as the
in-process call does.

A write that timed out may still have been committed (as with any acks=all write); the caller
retries with the same content, which the coordinator's merge makes idempotent.

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from broker.node_client import NodeClientError, NodeClients
from broker.share.coordinator_config import SHARE_GROUP_STATE_TOPIC
from broker.share.coordinator_service import ShareCoordinatorService
from broker.share.persister import ShareStateSummary
from broker.share.state_records import SharePartitionKey
from broker.share.state_requests import UNINITIALIZED_READ_MESSAGE
from broker.share.values import ShareSnapshot, StateBatch
from protocol.errors import (
    CoordinatorNotAvailableError,
    ErrorCode,
    KafkaError,
    error_for_code,
)
from protocol.messages import (
    delete_share_group_state_request as delete_request,
)
from protocol.messages import (
    initialize_share_group_state_request as initialize_request,
)
from protocol.messages import (
    read_share_group_state_request as read_request,
)
from protocol.messages import (
    read_share_group_state_summary_request as summary_request,
)
from protocol.messages import (
    write_share_group_state_request as write_request,
)
from protocol.messages.delete_share_group_state_response import DeleteShareGroupStateResponse
from protocol.messages.initialize_share_group_state_response import (
    InitializeShareGroupStateResponse,
)
from protocol.messages.read_share_group_state_response import ReadShareGroupStateResponse
from protocol.messages.read_share_group_state_summary_response import (
    ReadShareGroupStateSummaryResponse,
)
from protocol.messages.write_share_group_state_response import WriteShareGroupStateResponse

__all__ = ["RETRIABLE_ERRORS", "NetworkSharePersister"]

logger = logging.getLogger("samsa.broker.share.network_persister")

T = TypeVar("T")

RETRIABLE_ERRORS = frozenset({
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
})
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1000


class NetworkSharePersister:
    """``local``: this node's share coordinator (None: every call goes over the network);
    ``coordinator_id``: the node to ask for a key (None: not known yet, retried); ``clients``:
    the inter-broker connections. ``for_broker`` builds it for a broker."""

    def __init__(self, *, local: ShareCoordinatorService | None,
                 coordinator_id: Callable[[SharePartitionKey], Awaitable[int | None]],
                 clients: Callable[[], NodeClients], timeout_ms: int,
                 retry_backoff_ms: int = RETRY_BACKOFF_MS,
                 retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS) -> None:
        self.local = local
        self.coordinator_id = coordinator_id
        self.timeout_ms = timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._new_clients = clients
        self._clients: NodeClients | None = None

    @classmethod
    def for_broker(cls, service: ShareCoordinatorService, broker: Any) -> NetworkSharePersister:
        """The persister of ``broker`` (``broker.broker.Broker``): its share coordinator in
        process, the leader of the key's partition in its metadata image otherwise."""
        async def coordinator_id(key: SharePartitionKey) -> int | None:
            return _leader_in_image(service, broker, key)

        def clients() -> NodeClients:
            config = broker.config
            return NodeClients(
                broker.inter_broker_endpoint, client_id=f"broker-{broker.node_id}-share-persister",
                request_timeout_ms=service.config.write_timeout_ms,
                ssl_context=config.node_ssl_contexts.get(config.kraft.inter_broker_listener_name))

        return cls(local=service, coordinator_id=coordinator_id, clients=clients,
                   timeout_ms=service.config.write_timeout_ms)

    # -- SharePersister -----------------------------------------------------------------------

    async def initialize_state(self, key: SharePartitionKey, *, state_epoch: int, start_offset: int) -> None:
        async def remote(node_id: int) -> None:
            request = initialize_request.InitializeShareGroupStateRequest(
                group_id=key.group_id, topics=[initialize_request.InitializeStateData(
                    topic_id=key.topic_id, partitions=[initialize_request.PartitionData(
                        partition=key.partition, state_epoch=state_epoch, start_offset=start_offset)])])
            response = await self._send(node_id, request, 0)
            assert isinstance(response, InitializeShareGroupStateResponse)
            _raise_for(response.results[0].partitions[0].error_code, response.results[0].partitions[0].error_message)

        await self._call(key, lambda: self._local().initialize_state(
            key, state_epoch=state_epoch, start_offset=start_offset), remote)

    async def read_state(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareSnapshot | None:
        async def remote(node_id: int) -> ShareSnapshot | None:
            request = read_request.ReadShareGroupStateRequest(
                group_id=key.group_id, topics=[read_request.ReadStateData(
                    topic_id=key.topic_id, partitions=[read_request.PartitionData(
                        partition=key.partition, leader_epoch=leader_epoch)])])
            response = await self._send(node_id, request, 0)
            assert isinstance(response, ReadShareGroupStateResponse)
            found = response.results[0].partitions[0]
            if found.error_code == ErrorCode.INVALID_REQUEST and found.error_message == UNINITIALIZED_READ_MESSAGE:
                return None
            _raise_for(found.error_code, found.error_message)
            return ShareSnapshot(
                state_epoch=found.state_epoch, leader_epoch=leader_epoch, start_offset=found.start_offset,
                state_batches=tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                    for b in found.state_batches))

        return await self._call(key, lambda: self._local().read_state(key, leader_epoch=leader_epoch), remote)

    async def write_state(
        self, key: SharePartitionKey, *, state_epoch: int, leader_epoch: int, start_offset: int,
        state_batches: tuple[StateBatch, ...], delivery_complete_count: int = -1,
    ) -> None:
        async def remote(node_id: int) -> None:
            request = write_request.WriteShareGroupStateRequest(
                group_id=key.group_id, topics=[write_request.WriteStateData(
                    topic_id=key.topic_id, partitions=[write_request.PartitionData(
                        partition=key.partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                        start_offset=start_offset, delivery_complete_count=delivery_complete_count,
                        state_batches=[write_request.StateBatch(
                            first_offset=b.first_offset, last_offset=b.last_offset,
                            delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                            for b in state_batches])])])
            response = await self._send(node_id, request, 1)
            assert isinstance(response, WriteShareGroupStateResponse)
            _raise_for(response.results[0].partitions[0].error_code, response.results[0].partitions[0].error_message)

        await self._call(key, lambda: self._local().write_state(
            key, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            state_batches=state_batches, delivery_complete_count=delivery_complete_count), remote)

    async def delete_state(self, key: SharePartitionKey) -> None:
        async def remote(node_id: int) -> None:
            request = delete_request.DeleteShareGroupStateRequest(
                group_id=key.group_id, topics=[delete_request.DeleteStateData(
                    topic_id=key.topic_id, partitions=[delete_request.PartitionData(partition=key.partition)])])
            response = await self._send(node_id, request, 0)
            assert isinstance(response, DeleteShareGroupStateResponse)
            _raise_for(response.results[0].partitions[0].error_code, response.results[0].partitions[0].error_message)

        await self._call(key, lambda: self._local().delete_state(key), remote)

    async def read_summary(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareStateSummary | None:
        async def remote(node_id: int) -> ShareStateSummary | None:
            request = summary_request.ReadShareGroupStateSummaryRequest(
                group_id=key.group_id, topics=[summary_request.ReadStateSummaryData(
                    topic_id=key.topic_id, partitions=[summary_request.PartitionData(
                        partition=key.partition, leader_epoch=leader_epoch)])])
            response = await self._send(node_id, request, 1)
            assert isinstance(response, ReadShareGroupStateSummaryResponse)
            found = response.results[0].partitions[0]
            _raise_for(found.error_code, found.error_message)
            if found.start_offset == -1 and found.state_epoch == 0 and found.leader_epoch == 0:
                return None  # Kafka's answer for a share partition with no state
            return ShareStateSummary(found.state_epoch, found.leader_epoch, found.start_offset,
                                     found.delivery_complete_count)

        return await self._call(key, lambda: self._local().read_summary(key, leader_epoch=leader_epoch), remote)

    async def close(self) -> None:
        if self._clients is not None:
            await self._clients.close()

    # -- inside -------------------------------------------------------------------------------

    async def _call(self, key: SharePartitionKey, local: Callable[[], Awaitable[T]],
                    remote: Callable[[int], Awaitable[T]]) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        backoff_ms = self.retry_backoff_ms
        while True:
            try:
                if self.local is not None and self.local.serves(key):
                    return await local()
                node_id = await self.coordinator_id(key)
                if node_id is None:
                    raise CoordinatorNotAvailableError(f"{key}: no share coordinator known yet")
                return await remote(node_id)
            except KafkaError as error:
                if error.code not in RETRIABLE_ERRORS:
                    raise
                last: KafkaError = error
            except NodeClientError as error:
                last = CoordinatorNotAvailableError(f"{key}: the share coordinator did not answer: {error}")
            remaining_ms = (deadline - loop.time()) * 1000
            if remaining_ms <= 0:
                raise last
            logger.debug("%s: %s; retrying in %d ms", key, last, min(backoff_ms, remaining_ms))
            await asyncio.sleep(min(backoff_ms, remaining_ms) / 1000)
            backoff_ms = min(backoff_ms * 2, self.retry_backoff_max_ms)

    def _local(self) -> ShareCoordinatorService:
        assert self.local is not None
        return self.local

    async def _send(self, node_id: int, request: Any, version: int) -> Any:
        if self._clients is None:
            self._clients = self._new_clients()
        return await self._clients.send(node_id, request, version=version)


def _leader_in_image(service: ShareCoordinatorService, broker: Any, key: SharePartitionKey) -> int | None:
    """The leader of ``key``'s ``__share_group_state`` partition in ``broker``'s image; None
    when there is none yet, or it is this node (not yet elected here: retried). The topic
    missing: its creation is asked for."""
    topic = broker.replica_manager.image.topics_by_name.get(SHARE_GROUP_STATE_TOPIC)
    if topic is None:
        try:
            service.ensure_topic()
        except KafkaError as error:
            logger.debug("creating %s: %s", SHARE_GROUP_STATE_TOPIC, error)
        return None
    partition = topic.partitions.get(service.partition_for(key))
    if partition is None or partition.leader < 0 or partition.leader == broker.node_id:
        return None
    leader: int = partition.leader
    return leader


def _raise_for(code: int, message: str | None) -> None:
    if code != ErrorCode.NONE:
        raise error_for_code(code)(message)
