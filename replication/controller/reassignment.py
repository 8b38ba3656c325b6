"""Partition reassignment (KIP-455): Kafka's ``ReplicationControlManager``
``alterPartitionReassignments`` / ``listPartitionReassignments`` with
``PartitionReassignmentReplicas`` and ``PartitionReassignmentRevert``.

A reassignment to target replicas T of a partition with replicas R goes in stages:
1. a PartitionChangeRecord sets replicas to T followed by the replicas of R not in T,
   ``adding_replicas`` = T - R and ``removing_replicas`` = R - T (both sorted);
2. the new replicas catch up and the leader adds them to the ISR (AlterPartition);
3. the change that brings every replica of T into the ISR also completes the reassignment
   (``partition_change`` rule 1): replicas = T, the removed replicas leave the ISR, the lists
   empty, and a new leader is elected if the old one was removed.
A target that only reorders the replicas, or whose new replicas are already in the ISR,
completes at once. Dropping a replica always names a leader, bumping the leader epoch.

A target replaces any reassignment in progress: the lists are recomputed against the current
replica list (Kafka leaves a non-empty list of the old reassignment in place when the new one's is
empty; we do not, so a re-target never mixes two reassignments).

Cancelling (replicas null) a partition with no reassignment in progress is
NO_REASSIGNMENT_IN_PROGRESS; otherwise the replicas being added leave the replicas and the ISR.
If that would empty the ISR, the first original replica becomes the ISR, an unclean election:
INVALID_REPLICA_ASSIGNMENT unless the topic allows unclean elections.

Targets are validated as manual assignments (non-empty, registered brokers, each once):
INVALID_REPLICA_ASSIGNMENT. Unknown topics and partitions: UNKNOWN_TOPIC_OR_PARTITION. The
records of all partitions of one request form one atomic batch. Pure functions over the image.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from protocol.codec import Message
from protocol.errors import (
    ErrorCode,
    InvalidReplicaAssignmentError,
    KafkaError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from replication.controller.partition_change import (
    Election,
    build_partition_change,
    elr_policy,
    unclean_leader_election_enabled,
)
from replication.metadata.controller import validate_manual_assignment
from replication.metadata.image import MetadataImage, PartitionImage, TopicImage

__all__ = [
    "OngoingReassignment",
    "ReassignmentResult",
    "ReassignmentTarget",
    "list_partition_reassignments",
    "plan_alter_partition_reassignments",
]


# (topic, [(partition, target replicas, or None to cancel)])
ReassignmentTarget = tuple[str, Sequence[tuple[int, Sequence[int] | None]]]


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    topic: str
    partition_index: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """One partition of ListPartitionReassignments' answer."""

    topic: str
    partition_index: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def plan_alter_partition_reassignments(
    image: MetadataImage,
    topics: Sequence[ReassignmentTarget],
    *,
    node_id: int = -1,
) -> tuple[list[ReassignmentResult], list[Message]]:
    """(topic, [(partition, target replicas or None to cancel)]) -> results and records.
    ``node_id``: the one valid target broker when none is registered (a single node)."""
    results: list[ReassignmentResult] = []
    records: list[Message] = []
    for name, partitions in topics:
        for index, target in partitions:
            try:
                record = _alter_one(image, name, index, target, node_id)
            except KafkaError as error:
                results.append(ReassignmentResult(name, index, error.code, error.message))
                continue
            if record is not None:
                records.append(record)
            results.append(ReassignmentResult(name, index))
    return results, records


def _alter_one(
    image: MetadataImage, name: str, index: int, target: Sequence[int] | None, node_id: int
) -> PartitionChangeRecord | None:
    topic = image.topics_by_name.get(name)
    if topic is None:
        raise UnknownTopicOrPartitionError(f"Unable to find a topic named {name}.")
    partition = topic.partitions.get(index)
    if partition is None:
        raise UnknownTopicOrPartitionError(f"Unable to find partition {name}:{index}.")
    if target is None:
        return _cancel(image, topic, partition, node_id)
    return _change(image, topic, partition, list(target), node_id)


def _change(
    image: MetadataImage, topic: TopicImage, partition: PartitionImage, target: list[int],
    node_id: int,
) -> PartitionChangeRecord | None:
    validate_manual_assignment(image, target, node_id)
    removing = sorted(set(partition.replicas) - set(target))
    adding = sorted(set(target) - set(partition.replicas))
    return build_partition_change(
        topic.topic_id, partition, is_acceptable_leader=_acceptor(image, node_id),
        replicas=target + removing, removing=removing, adding=adding,
        elr=elr_policy(image, topic),
    )


def _acceptor(image: MetadataImage, node_id: int) -> Callable[[int], bool]:
    """Who may lead: the active brokers; this node alone when none is registered."""
    if len(image.brokers):
        return image.brokers.is_active
    return lambda replica: replica == node_id


def _cancel(
    image: MetadataImage, topic: TopicImage, partition: PartitionImage, node_id: int
) -> PartitionChangeRecord | None:
    if not partition.reassigning:
        raise NoReassignmentInProgressError("No partition reassignment is in progress.")
    replicas = [r for r in partition.replicas if r not in partition.adding_replicas]
    isr = [r for r in partition.isr if r not in partition.adding_replicas]
    unclean_allowed = unclean_leader_election_enabled(image, topic.name)
    if not isr:
        if not replicas:
            raise InvalidReplicaAssignmentError(
                "Invalid replica assignment: addingReplicas contains all replicas.")
        if not unclean_allowed:
            raise InvalidReplicaAssignmentError(
                f"Unable to revert partition assignment for {topic.name}:{partition.partition_id} "
                "because it would require an unclean leader election.")
        isr = [replicas[0]]
    return build_partition_change(
        topic.topic_id, partition, is_acceptable_leader=_acceptor(image, node_id),
        election=Election.UNCLEAN if unclean_allowed else Election.ONLINE,
        isr=isr, replicas=replicas, removing=[], adding=[], elr=elr_policy(image, topic),
    )


def list_partition_reassignments(
    image: MetadataImage, topics: Sequence[tuple[str, Sequence[int]]] | None = None
) -> list[OngoingReassignment]:
    """The reassignments in progress: of every topic (None), or of the named partitions
    (unknown topics and partitions, and partitions not reassigning, left out)."""
    if topics is None:
        wanted = [(name, sorted(image.topics_by_name[name].partitions))
                  for name in sorted(image.topics_by_name)]
    else:
        wanted = [(name, list(indexes)) for name, indexes in topics]
    ongoing = []
    for name, indexes in wanted:
        topic = image.topics_by_name.get(name)
        for index in indexes:
            partition = None if topic is None else topic.partitions.get(index)
            if partition is not None and partition.reassigning:
                ongoing.append(OngoingReassignment(
                    name, index, partition.replicas, partition.adding_replicas,
                    partition.removing_replicas))
    return ongoing
