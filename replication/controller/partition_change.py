"""One partition's next state as a PartitionChangeRecord: Kafka's ``PartitionChangeBuilder``.

``build_partition_change`` takes a partition as the image has it and the targets a caller wants
(ISR, replicas, reassignment lists, leader recovery state, an election kind) and returns the
record that gets there, or None when nothing would change. Its rules, in order:
1. a reassignment in progress completes when the target ISR, less the replicas being removed,
   is not empty and holds every replica that stays: replicas and ISR lose the removed ones, the
   adding/removing lists empty (``PartitionReassignmentReplicas.maybeCompleteReassignment``);
2. a leader is elected among the target ISR members ``is_acceptable_leader`` accepts:
   PREFERRED takes the first replica if it can, else keeps the current leader if it can, else
   the first replica in assignment order that can; ONLINE and UNCLEAN keep the current leader if
   it can, else take the first replica that can; UNCLEAN then falls back to the first acceptable
   replica outside the ISR, which becomes the whole ISR with leader recovery state RECOVERING.
   No candidate: leader -1 (NO_LEADER);
3. the record names a leader when the leader changes, and also (to bump the leader epoch) when
   the new replica list drops a replica of the old one;
4. the target ISR is written when it differs and is not empty: the ISR never becomes empty
   (without KIP-966 ELR, which Samsa does not enable), so the last ISR member of a partition
   whose brokers all failed stays in it, leaderless, until it returns or an unclean election;
5. replicas (when not empty), removing, adding and leader recovery state are written when they
   differ; ELR left by another writer is cleared (ELR disabled, as Kafka does).
The image's merge (``replication.metadata.image.merge_partition``) bumps the leader epoch when a
record names a leader and the partition epoch on every record. No leader epoch bump on an ISR
shrink: Kafka needs it only for metadata versions before 3.6 (KAFKA-15021).

Also here: which partitions a broker event touches (scans of the image; Kafka keeps a
``BrokersToIsrs`` index, a cluster of Samsa's size does not need one yet), the loop that removes
a broker from ISRs / makes a broker eligible to lead (Kafka's ``generateLeaderAndIsrUpdates``),
and the ``unclean.leader.election.enable`` lookup. Pure functions over the image.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from uuid import UUID

from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from replication.metadata.image import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    RECOVERING,
    MetadataImage,
    PartitionImage,
    TopicImage,
)

__all__ = [
    "UNCLEAN_LEADER_ELECTION_ENABLE",
    "Election",
    "build_partition_change",
    "has_leaderships",
    "isr_and_leader_updates",
    "partitions_where",
    "unclean_leader_election_enabled",
]

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"  # Kafka's default: false


class Election(Enum):
    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


@dataclass(slots=True)
class _Targets:
    isr: list[int]
    replicas: list[int]
    removing: list[int]
    adding: list[int]


def build_partition_change(
    topic_id: UUID,
    partition: PartitionImage,
    *,
    is_acceptable_leader: Callable[[int], bool],
    election: Election = Election.ONLINE,
    isr: Sequence[int] | None = None,
    replicas: Sequence[int] | None = None,
    removing: Sequence[int] | None = None,
    adding: Sequence[int] | None = None,
    leader_recovery_state: int | None = None,
) -> PartitionChangeRecord | None:
    """The record taking ``partition`` to the targets (None: no change); see the module doc."""
    targets = _Targets(
        list(partition.isr if isr is None else isr),
        list(partition.replicas if replicas is None else replicas),
        list(partition.removing_replicas if removing is None else removing),
        list(partition.adding_replicas if adding is None else adding),
    )
    _complete_reassignment(targets)
    record = PartitionChangeRecord(partition_id=partition.partition_id, topic_id=topic_id)
    _elect(record, partition, targets, election, is_acceptable_leader)
    if record.leader == NO_LEADER_CHANGE and not set(partition.replicas) <= set(targets.replicas):
        record.leader = partition.leader  # a replica leaves: a new leader epoch fences it
    if record.isr is None and targets.isr and targets.isr != list(partition.isr):
        record.isr = targets.isr
    _assignment_changes(record, partition, targets)
    if leader_recovery_state is not None and leader_recovery_state != partition.leader_recovery_state:
        record.leader_recovery_state = leader_recovery_state
    if partition.eligible_leader_replicas:
        record.eligible_leader_replicas = []
    return None if _is_no_op(record) else record


def _complete_reassignment(targets: _Targets) -> None:
    if not targets.removing and not targets.adding:
        return
    isr = [r for r in targets.isr if r not in targets.removing]
    replicas = [r for r in targets.replicas if r not in targets.removing]
    if not isr or not replicas or not set(replicas) <= set(isr):
        return
    targets.isr, targets.replicas, targets.removing, targets.adding = isr, replicas, [], []


def _elect(
    record: PartitionChangeRecord, partition: PartitionImage, targets: _Targets,
    election: Election, acceptable: Callable[[int], bool],
) -> None:
    leader, unclean = _choose_leader(partition.leader, targets, election, acceptable)
    if leader == partition.leader:
        return
    record.leader = leader
    if unclean:  # the new leader's log may lack acknowledged records: it alone is in sync
        record.isr = [leader]
        if partition.leader_recovery_state != RECOVERING:
            record.leader_recovery_state = RECOVERING


def _choose_leader(
    current: int, targets: _Targets, election: Election, acceptable: Callable[[int], bool]
) -> tuple[int, bool]:
    """(leader, whether the election was unclean)."""
    def valid(replica: int) -> bool:
        return replica in targets.isr and acceptable(replica)

    if election is Election.PREFERRED and targets.replicas and valid(targets.replicas[0]):
        return targets.replicas[0], False
    if valid(current):
        return current, False
    clean = next((r for r in targets.replicas if valid(r)), None)
    if clean is not None:
        return clean, False
    if election is Election.UNCLEAN:
        unclean = next((r for r in targets.replicas if acceptable(r)), None)
        if unclean is not None:
            return unclean, True
    return NO_LEADER, False


def _assignment_changes(
    record: PartitionChangeRecord, partition: PartitionImage, targets: _Targets
) -> None:
    if targets.replicas and targets.replicas != list(partition.replicas):
        record.replicas = targets.replicas
    if targets.removing != list(partition.removing_replicas):
        record.removing_replicas = targets.removing
    if targets.adding != list(partition.adding_replicas):
        record.adding_replicas = targets.adding


def _is_no_op(record: PartitionChangeRecord) -> bool:
    return (record.leader == NO_LEADER_CHANGE and record.leader_recovery_state == -1
            and all(value is None for value in (
                record.isr, record.replicas, record.removing_replicas, record.adding_replicas,
                record.eligible_leader_replicas, record.last_known_elr, record.directories)))


# -- broker events over many partitions -------------------------------------------------------


def partitions_where(
    image: MetadataImage, predicate: Callable[[PartitionImage], bool]
) -> Iterator[tuple[TopicImage, PartitionImage]]:
    """The partitions ``predicate`` holds for, by topic name then partition."""
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        for index in sorted(topic.partitions):
            if predicate(topic.partitions[index]):
                yield topic, topic.partitions[index]


def has_leaderships(image: MetadataImage, broker_id: int) -> bool:
    return any(True for _ in partitions_where(image, lambda p: p.leader == broker_id))


def unclean_leader_election_enabled(image: MetadataImage, topic: str) -> bool:
    """``unclean.leader.election.enable`` of ``topic``: its own config, else the cluster-wide
    dynamic default, else Kafka's default (false)."""
    value = image.topic_configs.get(topic, {}).get(UNCLEAN_LEADER_ELECTION_ENABLE)
    if value is None:
        value = image.broker_configs.get("", {}).get(UNCLEAN_LEADER_ELECTION_ENABLE, "false")
    return value.strip().lower() == "true"


def isr_and_leader_updates(
    image: MetadataImage,
    partitions: Iterable[tuple[TopicImage, PartitionImage]],
    *,
    broker_to_remove: int = NO_LEADER,
    broker_to_add: int = NO_LEADER,
) -> list[PartitionChangeRecord]:
    """Kafka's ``generateLeaderAndIsrUpdates``: take ``broker_to_remove`` out of each ISR and of
    leadership; count ``broker_to_add`` as able to lead although the image still has it fenced
    (its unfencing is in the same batch). Unclean elections where the topic allows them."""
    def acceptable(replica: int) -> bool:
        return replica != broker_to_remove and (
            replica == broker_to_add or image.brokers.is_active(replica))

    records = []
    for topic, partition in list(partitions):
        election = (Election.UNCLEAN if unclean_leader_election_enabled(image, topic.name)
                    else Election.ONLINE)
        record = build_partition_change(
            topic.topic_id, partition, is_acceptable_leader=acceptable, election=election,
            isr=[r for r in partition.isr if r != broker_to_remove],
        )
        if record is not None:
            records.append(record)
    return records
