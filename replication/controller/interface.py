"""``Controller``: the one interface through which metadata is written.

Each method *plans* records from the current metadata image (the sans-IO planners in
``replication.metadata``: ``controller``, ``config_control``, ``acl_control``, ``scram``) and
*proposes* them, returning ``Proposal``s that resolve when the records are committed and applied
to the image (and so to the partitions this node hosts, ``replication.replica_manager``). A
refusal found while planning resolves the proposal with the Kafka error at once, and nothing is
proposed. As in Kafka's ``QuorumController``, the records of one proposal form one batch, applied
whole or not at all.

Per-item operations (topics, partitions) answer one proposal per item, in the order given, each
its own batch, so one refused topic does not hold the others back. ACL and SCRAM requests answer
one proposal for the whole request, resolved with the per-item results (Kafka writes them as one
batch).

Implementations: ``LocalController`` (one node: append to the local metadata log and fsync;
committed when the call returns). A Raft quorum's active controller (KRaft's
``QuorumController``) will implement the same methods, its proposals resolving when a majority
has the batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from protocol.errors import KafkaError
from replication.controller.elections import ElectionResult
from replication.controller.proposal import Proposal
from replication.controller.reassignment import ReassignmentResult, ReassignmentTarget
from replication.metadata.acl_control import DeleteResult
from replication.metadata.acl_model import AclBindingFilter
from replication.metadata.acls import StandardAcl
from replication.metadata.controller import TopicPlan
from replication.metadata.image import MetadataImage, TopicImage
from replication.metadata.scram import AlterResult, Deletion, Upsertion

__all__ = [
    "Controller",
    "NewPartitions",
    "NewTopic",
    "ProducerIdsBlock",
    "TopicToDelete",
]


@dataclass(frozen=True, slots=True)
class NewTopic:
    """One topic of a CreateTopics request (-1: the broker's default)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str | None] = field(default_factory=dict)
    assignments: Sequence[tuple[int, Sequence[int]]] = ()


@dataclass(frozen=True, slots=True)
class TopicToDelete:
    """A topic named by name or by id (exactly one of them)."""

    name: str | None = None
    topic_id: UUID | None = None


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """Grow ``name`` to ``count`` partitions, optionally with manual replica assignments."""

    name: str
    count: int
    assignments: list[list[int]] | None = None


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    """Kafka's ``ProducerIdsBlock``: ids ``first_producer_id`` .. ``first + size - 1``."""

    first_producer_id: int
    size: int

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


class Controller(Protocol):
    @property
    def image(self) -> MetadataImage:
        """The committed metadata image (what planning reads)."""
        ...

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> list[Proposal[TopicPlan]]: ...

    def delete_topics(self, topics: Sequence[TopicToDelete]) -> list[Proposal[TopicImage]]: ...

    def create_partitions(
        self, topics: Sequence[NewPartitions], *, validate_only: bool = False
    ) -> list[Proposal[None]]: ...

    def alter_configs(
        self, resource_type: int, name: str, changes: Mapping[str, str | None],
        *, validate_only: bool = False,
    ) -> Proposal[None]:
        """Set (a value) or delete (None) dynamic configs of one resource."""
        ...

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Proposal[ProducerIdsBlock]:
        ...

    def elect_leaders(
        self, election_type: int, topic_partitions: Sequence[tuple[str, Sequence[int]]] | None
    ) -> Proposal[list[ElectionResult]]:
        """ElectLeaders (``topic_partitions`` None: every partition)."""
        ...

    def alter_partition_reassignments(
        self, topics: Sequence[ReassignmentTarget]
    ) -> Proposal[list[ReassignmentResult]]: ...

    def create_acls(self, acls: Sequence[StandardAcl]) -> Proposal[list[KafkaError | None]]: ...

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> Proposal[list[DeleteResult]]: ...

    def alter_scram(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> Proposal[list[AlterResult]]: ...
