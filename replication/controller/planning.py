"""``PlanningController``: what every ``Controller`` (``replication.controller.interface``) does
the same way — plan records from the committed image with the sans-IO planners of
``replication.metadata`` and hand them to ``_plan_and_propose``, which each implementation
commits its own way: ``LocalController`` appends to the local metadata log at once,
``QuorumController`` proposes to the Raft quorum one operation at a time.

A plan is a callable returning ``(value, records)``; it raises a Kafka error to refuse. It may
run later than the call that asked for it (the quorum controller plans each operation once the
previous one is committed, so every plan sees the records of the operations before it).

Producer ids come in blocks of ``PRODUCER_ID_BLOCK_SIZE`` recorded by ProducerIdsRecords
(Kafka's ``ProducerIdControlManager``); the broker hands them out one by one.

Owned by the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from protocol.codec import Message
from protocol.errors import KafkaError
from protocol.messages.metadata.producer_ids_record import ProducerIdsRecord
from replication.controller.elections import ElectionResult, plan_elect_leaders
from replication.controller.interface import (
    NewPartitions,
    NewTopic,
    ProducerIdsBlock,
    TopicToDelete,
)
from replication.controller.proposal import Proposal
from replication.controller.reassignment import (
    ReassignmentResult,
    ReassignmentTarget,
    plan_alter_partition_reassignments,
)
from replication.metadata.acl_control import DeleteResult, plan_create_acls, plan_delete_acls
from replication.metadata.acl_model import AclBindingFilter
from replication.metadata.acls import StandardAcl
from replication.metadata.config_control import plan_config_records
from replication.metadata.controller import (
    TopicPlan,
    plan_create_partitions,
    plan_create_topic,
    plan_delete_topic,
)
from replication.metadata.image import MetadataImage, TopicImage
from replication.metadata.scram import AlterResult, Deletion, Upsertion, plan_alter_credentials
from storage.config import LogConfig

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "Plan", "PlanningController"]

logger = logging.getLogger("samsa.replication.controller")

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE

T = TypeVar("T")
Plan = Callable[[], tuple[T, Sequence[Message]]]


class PlanningController:
    def __init__(
        self,
        *,
        node_id: int,
        default_num_partitions: int,
        default_replication_factor: int,
        default_config: Callable[[], LogConfig],
    ) -> None:
        self.node_id = node_id
        self.default_num_partitions = default_num_partitions
        self.default_replication_factor = default_replication_factor
        self.default_config = default_config  # the topic defaults, dynamic broker configs applied

    @property
    def image(self) -> MetadataImage:
        raise NotImplementedError

    def _plan_and_propose(
        self, plan: Plan[T], *, validate_only: bool = False, records_hint: int | None = None,
    ) -> Proposal[T]:
        """Run ``plan`` and commit its records (unless validating or refused); the proposal
        resolves with the plan's value once they are committed and applied to the image.
        ``records_hint``: about how many records the plan will write, when the request says
        (partitions to create), so a large operation is planned off the loop."""
        raise NotImplementedError

    # -- topics -------------------------------------------------------------------------------

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> list[Proposal[TopicPlan]]:
        return [self._create_topic(topic, validate_only) for topic in topics]

    def _create_topic(self, topic: NewTopic, validate_only: bool) -> Proposal[TopicPlan]:
        def plan() -> tuple[TopicPlan, Sequence[Message]]:
            planned = plan_create_topic(
                self.image, topic.name,
                num_partitions=topic.num_partitions, replication_factor=topic.replication_factor,
                configs=topic.configs, node_id=self.node_id,
                default_num_partitions=self.default_num_partitions,
                default_replication_factor=self.default_replication_factor,
                default_config=self.default_config(), assignments=topic.assignments,
            )
            return planned, planned.records

        count = topic.num_partitions if topic.num_partitions > 0 else self.default_num_partitions
        proposal = self._plan_and_propose(plan, validate_only=validate_only,
                                          records_hint=max(count, len(topic.assignments)))
        if not validate_only:
            proposal.add_done_callback(lambda planned: logger.info(
                "created topic %s (%s) with %d partition(s)", topic.name, planned.topic_id,
                planned.num_partitions))
        return proposal

    def delete_topics(self, topics: Sequence[TopicToDelete]) -> list[Proposal[TopicImage]]:
        return [self._delete_topic(topic) for topic in topics]

    def _delete_topic(self, target: TopicToDelete) -> Proposal[TopicImage]:
        proposal = self._plan_and_propose(lambda: plan_delete_topic(
            self.image, name=target.name, topic_id=target.topic_id))
        proposal.add_done_callback(
            lambda topic: logger.info("deleted topic %s (%s)", topic.name, topic.topic_id))
        return proposal

    def create_partitions(
        self, topics: Sequence[NewPartitions], *, validate_only: bool = False
    ) -> list[Proposal[None]]:
        return [self._create_partitions(topic, validate_only) for topic in topics]

    def _create_partitions(self, request: NewPartitions, validate_only: bool) -> Proposal[None]:
        def plan() -> tuple[None, Sequence[Message]]:
            _, records = plan_create_partitions(self.image, request.name, request.count,
                                                assignments=request.assignments,
                                                node_id=self.node_id)
            return None, records

        proposal = self._plan_and_propose(plan, validate_only=validate_only,
                                          records_hint=request.count)
        if not validate_only:
            proposal.add_done_callback(lambda _: logger.info(
                "topic %s now has %d partition(s)", request.name, request.count))
        return proposal

    # -- leaders and replicas (ElectLeaders, AlterPartitionReassignments) ----------------------

    def elect_leaders(
        self, election_type: int, topic_partitions: Sequence[tuple[str, Sequence[int]]] | None
    ) -> Proposal[list[ElectionResult]]:
        """Per-partition results (``elections.plan_elect_leaders``), the elections one batch;
        refused with INVALID_REQUEST for an unknown election type."""
        return self._plan_and_propose(
            lambda: plan_elect_leaders(self.image, election_type, topic_partitions))

    def alter_partition_reassignments(
        self, topics: Sequence[ReassignmentTarget]
    ) -> Proposal[list[ReassignmentResult]]:
        """Per-partition results (``reassignment``), every partition's change in one batch."""
        return self._plan_and_propose(lambda: plan_alter_partition_reassignments(
            self.image, topics, node_id=self.node_id))

    # -- configs, producer ids ----------------------------------------------------------------

    def alter_configs(
        self, resource_type: int, name: str, changes: Mapping[str, str | None],
        *, validate_only: bool = False,
    ) -> Proposal[None]:
        return self._plan_and_propose(lambda: (None, plan_config_records(
            self.image, resource_type, name, changes, default_config=self.default_config(),
        )), validate_only=validate_only)

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Proposal[ProducerIdsBlock]:
        def plan() -> tuple[ProducerIdsBlock, Sequence[Message]]:
            block = ProducerIdsBlock(self.image.next_producer_id, PRODUCER_ID_BLOCK_SIZE)
            return block, [ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                             next_producer_id=block.next_block_first_id)]

        return self._plan_and_propose(plan)

    # -- ACLs, SCRAM credentials --------------------------------------------------------------

    def create_acls(self, acls: Sequence[StandardAcl]) -> Proposal[list[KafkaError | None]]:
        return self._plan_and_propose(lambda: plan_create_acls(self.image.acls, acls))

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> Proposal[list[DeleteResult]]:
        return self._plan_and_propose(lambda: plan_delete_acls(self.image.acls, filters))

    def alter_scram(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> Proposal[list[AlterResult]]:
        def plan() -> tuple[list[AlterResult], Sequence[Message]]:
            records, results = plan_alter_credentials(self.image.scram, deletions, upsertions)
            return results, records

        return self._plan_and_propose(plan)
