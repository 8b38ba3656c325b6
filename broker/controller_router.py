"""``ControllerRouter``: the ``Controller`` a KRaft node's own code talks to.

On the active controller every call goes to the local ``QuorumController``. On any other node
the calls this broker makes for itself — creating an internal topic on first use (Kafka's
``AutoTopicCreationManager``) and taking a block of producer ids (``AllocateProducerIds``,
KIP-730) — are sent as requests to the active controller's listener, and their proposal
resolves with its answer; the other operations come from clients' admin requests, which the
connection forwards whole to the active controller (``broker.forwarding``), so here they answer
NOT_CONTROLLER (retriable).

Reads (``image``) are always this node's committed image.

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from broker.node_client import NodeClients
from protocol.codec import Message
from protocol.errors import KafkaError, NotControllerError, error_for_code
from protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol.messages.allocate_producer_ids_response import AllocateProducerIdsResponse
from protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.messages.create_topics_response import CreateTopicsResponse
from replication.controller.elections import ElectionResult
from replication.controller.interface import (
    NewPartitions,
    NewTopic,
    ProducerIdsBlock,
    TopicToDelete,
)
from replication.controller.proposal import Proposal
from replication.controller.quorum import QuorumController
from replication.controller.reassignment import ReassignmentResult, ReassignmentTarget
from replication.metadata.acl_control import DeleteResult
from replication.metadata.acl_model import AclBindingFilter
from replication.metadata.acls import StandardAcl
from replication.metadata.controller import TopicPlan
from replication.metadata.image import MetadataImage, TopicImage
from replication.metadata.scram import AlterResult, Deletion, Upsertion
from storage.config import LogConfig

__all__ = ["ControllerRouter"]

logger = logging.getLogger("samsa.broker.controller")

T = TypeVar("T")
REMOTE_TIMEOUT_MS = 30_000


class ControllerRouter:
    def __init__(
        self,
        local: QuorumController | None,
        *,
        image: Callable[[], MetadataImage],
        clients: Callable[[], NodeClients | None],
        controller_id: Callable[[], int | None],
    ) -> None:
        self.local = local  # None on a broker-only node
        self._image = image
        self._clients = clients
        self._controller_id = controller_id
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def image(self) -> MetadataImage:
        return self._image()

    @property
    def active_here(self) -> bool:
        return self.local is not None and self.local.active

    # -- the calls this broker makes for itself -----------------------------------------------

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> list[Proposal[TopicPlan]]:
        if self.local is not None and self._controller_id() == self.local.node_id:
            # leading: the local controller queues until it is active
            return self.local.create_topics(topics, validate_only=validate_only)
        return [self._remote(self._create_remotely(topic, validate_only)) for topic in topics]

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Proposal[ProducerIdsBlock]:
        if self.active_here:
            assert self.local is not None
            return self.local.allocate_producer_ids(broker_id, broker_epoch)
        return self._remote(self._allocate_remotely(broker_id, broker_epoch))

    async def _create_remotely(self, topic: NewTopic, validate_only: bool) -> TopicPlan:
        request = CreateTopicsRequest(
            topics=[CreatableTopic(
                name=topic.name, num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                configs=[CreatableTopicConfig(name=key, value=value)
                         for key, value in topic.configs.items()],
            )],
            timeout_ms=REMOTE_TIMEOUT_MS, validate_only=validate_only,
        )
        response = await self._send(request)
        assert isinstance(response, CreateTopicsResponse)
        result = response.topics[0]
        if result.error_code:
            raise error_for_code(result.error_code)(result.error_message or "")
        # The controller's effective configs are not needed by the callers (internal topics).
        return TopicPlan(topic_id=result.topic_id, num_partitions=result.num_partitions,
                         replication_factor=result.replication_factor, config=LogConfig(),
                         records=())

    async def _allocate_remotely(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        response = await self._send(AllocateProducerIdsRequest(broker_id=broker_id,
                                                                broker_epoch=broker_epoch))
        assert isinstance(response, AllocateProducerIdsResponse)
        if response.error_code:
            raise error_for_code(response.error_code)()
        return ProducerIdsBlock(response.producer_id_start, response.producer_id_len)

    async def _send(self, request: Message) -> Message:
        clients, controller_id = self._clients(), self._controller_id()
        if clients is None or controller_id is None:
            raise NotControllerError("no active controller is known yet")
        response = await clients.send_or_none(controller_id, request)
        if response is None:
            raise NotControllerError(f"the controller {controller_id} did not answer")
        return response

    def _remote(self, call: Any) -> Proposal[T]:
        proposal: Proposal[T] = Proposal()
        task = asyncio.get_running_loop().create_task(call)

        def settle(done: asyncio.Task[T]) -> None:
            self._tasks.discard(done)
            error = done.exception() if not done.cancelled() else NotControllerError()
            if error is None:
                proposal.resolve(done.result())
            else:
                proposal.fail(error if isinstance(error, KafkaError) else NotControllerError(str(error)))

        self._tasks.add(task)
        task.add_done_callback(settle)
        return proposal

    # -- the admin operations (forwarded whole by the connection when not active here) -------

    def _local_or_refused(self) -> QuorumController | None:
        return self.local if self.active_here else None

    def delete_topics(self, topics: Sequence[TopicToDelete]) -> list[Proposal[TopicImage]]:
        local = self._local_or_refused()
        return local.delete_topics(topics) if local else [_not_controller() for _ in topics]

    def create_partitions(
        self, topics: Sequence[NewPartitions], *, validate_only: bool = False
    ) -> list[Proposal[None]]:
        local = self._local_or_refused()
        if local is None:
            return [_not_controller() for _ in topics]
        return local.create_partitions(topics, validate_only=validate_only)

    def alter_configs(
        self, resource_type: int, name: str, changes: Mapping[str, str | None],
        *, validate_only: bool = False,
    ) -> Proposal[None]:
        local = self._local_or_refused()
        if local is None:
            return _not_controller()
        return local.alter_configs(resource_type, name, changes, validate_only=validate_only)

    def create_acls(self, acls: Sequence[StandardAcl]) -> Proposal[list[KafkaError | None]]:
        local = self._local_or_refused()
        return local.create_acls(acls) if local else _not_controller()

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> Proposal[list[DeleteResult]]:
        local = self._local_or_refused()
        return local.delete_acls(filters) if local else _not_controller()

    def alter_scram(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> Proposal[list[AlterResult]]:
        local = self._local_or_refused()
        return local.alter_scram(deletions, upsertions) if local else _not_controller()

    def elect_leaders(
        self, election_type: int, topic_partitions: Sequence[tuple[str, Sequence[int]]] | None
    ) -> Proposal[list[ElectionResult]]:
        local = self._local_or_refused()
        return local.elect_leaders(election_type, topic_partitions) if local else _not_controller()

    def alter_partition_reassignments(
        self, topics: Sequence[ReassignmentTarget]
    ) -> Proposal[list[ReassignmentResult]]:
        local = self._local_or_refused()
        return local.alter_partition_reassignments(topics) if local else _not_controller()


def _not_controller() -> Proposal[Any]:
    return Proposal.refused(NotControllerError())
