"""One partition's next state as a PartitionChangeRecord: Kafka's ``PartitionChangeBuilder``.

``build_partition_change`` takes a partition as the image has it and the targets a caller wants
(ISR, replicas, reassignment lists, leader recovery state, an election kind) and returns the
record that gets there, or None when nothing would change. Its rules, in order:
1. a reassignment in progress completes when the target ISR, less the replicas being removed,
   is not empty and holds every replica that stays: replicas and ISR lose the removed ones, the
   adding/removing lists empty (``PartitionReassignmentReplicas.maybeCompleteReassignment``);
2. with KIP-966 eligible leader replicas (``ElrPolicy.enabled``) the target ELR is computed: empty
   when the target ISR has at least ``min_insync_replicas`` members, else the current ELR and
   current ISR less the target ISR and less the replicas that shut down uncleanly (their logs
   may lack what they acknowledged). ELR members are sorted;
3. a leader is elected among the replicas ``is_acceptable_leader`` accepts that are in the
   target ISR or, when the target ISR is empty, in the target ELR: PREFERRED takes the first
   replica if it can, else keeps the current leader if it can, else the first replica in
   assignment order that can; ONLINE and UNCLEAN keep the current leader if it can, else take
   the first replica that can. Then, ELR on, with an empty target ISR and ELR, the last known
   leader (``last_known_elr`` of one member) if it is acceptable: an unclean election (KIP-966's
   balanced recovery, which Kafka applies to every election kind). UNCLEAN then falls back to the
   first acceptable replica outside the ISR. No candidate: leader -1 (NO_LEADER). A leader
   elected from the ELR becomes the whole target ISR and leaves the ELR; an unclean one becomes
   the whole ISR with leader recovery state RECOVERING;
4. the record names a leader when the leader changes, and also (to bump the leader epoch) when
   the new replica list drops a replica of the old one;
5. the ELR is written when it differs; it is emptied by an unclean election and whenever ELR is
   off (clearing what another writer left, as Kafka does);
6. the target ISR is written when it differs and is not empty — or, ELR on, even empty: without
   ELR the last ISR member of a partition whose brokers all failed stays in it, leaderless,
   until it returns or an unclean election; with ELR the ISR empties and the ELR keeps it;
7. ELR on: a partition that loses its leader (the record says -1) with no last known leader
   records the old one in ``last_known_elr``; a record electing a leader clears it;
8. replicas (when not empty), removing, adding and leader recovery state are written when they
   differ.
The image's merge (``replication.metadata.image.merge_partition``) bumps the leader epoch when a
record names a leader and the partition epoch on every record. No leader epoch bump on an ISR
shrink: Kafka needs it only for metadata versions before 3.6 (KAFKA-15021).

ELR is on when the feature ``eligible.leader.replicas.version`` is finalized at level 1 or more
(Kafka's ``FeatureControlManager.isElrFeatureEnabled``): Apache Kafka 4.1+ clusters formatted
with their defaults have it, Samsa's own clusters do not finalize it, so it stays off unless a
metadata log written by Kafka (or a FeatureLevelRecord) turns it on. ``min_insync_replicas`` is
the topic's ``min.insync.replicas`` (else the cluster-wide dynamic default, else 1), at most the
replication factor (partition 0's replica count), as Kafka's ``getTopicEffectiveMinIsr``; like
the unclean lookup it does not read the controller's static broker config.

Also here: which partitions a broker event touches (scans of the image; Kafka keeps
``BrokersToIsrs`` / ``BrokersToElrs`` indexes, a cluster of Samsa's size does not need them yet),
the loop that removes a broker from ISRs (and ELRs) / makes a broker eligible to lead (Kafka's
``generateLeaderAndIsrUpdates``), and the ``unclean.leader.election.enable`` lookup. Pure
functions over the image.
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
    "ELIGIBLE_LEADER_REPLICAS_VERSION",
    "ELR_DISABLED",
    "MIN_INSYNC_REPLICAS",
    "UNCLEAN_LEADER_ELECTION_ENABLE",
    "Election",
    "ElrPolicy",
    "build_partition_change",
    "elr_enabled",
    "elr_policy",
    "has_leaderships",
    "isr_and_leader_updates",
    "partitions_where",
    "unclean_leader_election_enabled",
]

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"  # Kafka's default: false
MIN_INSYNC_REPLICAS = "min.insync.replicas"  # Kafka's default: 1
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"  # KIP-966's feature


class Election(Enum):
    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


@dataclass(frozen=True, slots=True)
class ElrPolicy:
    """Whether KIP-966 eligible leader replicas are kept, and the topic's effective
    ``min.insync.replicas`` (the ISR size below which the ELR holds the replicas that leave)."""

    enabled: bool = False
    min_insync_replicas: int = 1


ELR_DISABLED = ElrPolicy()


@dataclass(slots=True)
class _Targets:
    isr: list[int]
    replicas: list[int]
    removing: list[int]
    adding: list[int]
    elr: list[int]


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
    elr: ElrPolicy = ELR_DISABLED,
    unclean_shutdown_replicas: Sequence[int] = (),
) -> PartitionChangeRecord | None:
    """The record taking ``partition`` to the targets (None: no change); see the module doc."""
    targets = _Targets(
        list(partition.isr if isr is None else isr),
        list(partition.replicas if replicas is None else replicas),
        list(partition.removing_replicas if removing is None else removing),
        list(partition.adding_replicas if adding is None else adding),
        list(partition.eligible_leader_replicas),
    )
    _complete_reassignment(targets)
    if elr.enabled:
        _populate_target_elr(partition, targets, elr.min_insync_replicas, unclean_shutdown_replicas)
    record = PartitionChangeRecord(partition_id=partition.partition_id, topic_id=topic_id)
    _elect(record, partition, targets, election, is_acceptable_leader, elr.enabled)
    if record.leader == NO_LEADER_CHANGE and not set(partition.replicas) <= set(targets.replicas):
        record.leader = partition.leader  # a replica leaves: a new leader epoch fences it
    _elr_change(record, partition, targets, elr.enabled)
    if (record.isr is None and (targets.isr or elr.enabled)
            and targets.isr != list(partition.isr)):
        record.isr = targets.isr
    if elr.enabled:
        _last_known_leader_change(record, partition)
    _assignment_changes(record, partition, targets)
    if leader_recovery_state is not None and leader_recovery_state != partition.leader_recovery_state:
        record.leader_recovery_state = leader_recovery_state
    return None if _is_no_op(record) else record


def _complete_reassignment(targets: _Targets) -> None:
    if not targets.removing and not targets.adding:
        return
    isr = [r for r in targets.isr if r not in targets.removing]
    replicas = [r for r in targets.replicas if r not in targets.removing]
    if not isr or not replicas or not set(replicas) <= set(isr):
        return
    targets.isr, targets.replicas, targets.removing, targets.adding = isr, replicas, [], []


def _populate_target_elr(
    partition: PartitionImage, targets: _Targets, min_insync_replicas: int,
    unclean_shutdown_replicas: Sequence[int],
) -> None:
    """Rule 2: the replicas that were in sync when the ISR fell below ``min.insync.replicas``
    hold every committed record (the high watermark does not move below it), so they stay
    eligible to lead — unless they shut down uncleanly."""
    if len(targets.isr) >= min_insync_replicas:
        targets.elr = []
        return
    candidates = set(targets.elr) | set(partition.isr)
    targets.elr = sorted(r for r in candidates
                         if r not in targets.isr and r not in unclean_shutdown_replicas)


def _elect(
    record: PartitionChangeRecord, partition: PartitionImage, targets: _Targets,
    election: Election, acceptable: Callable[[int], bool], elr_enabled: bool,
) -> None:
    leader, unclean = _choose_leader(partition, targets, election, acceptable, elr_enabled)
    if leader == partition.leader:
        return
    if leader in targets.elr:  # elected from the ELR: it alone is in sync now
        targets.isr = [leader]
        targets.elr = [r for r in targets.elr if r != leader]
    record.leader = leader
    if unclean:  # the new leader's log may lack acknowledged records: it alone is in sync
        record.isr = [leader]
        if partition.leader_recovery_state != RECOVERING:
            record.leader_recovery_state = RECOVERING


def _choose_leader(
    partition: PartitionImage, targets: _Targets, election: Election,
    acceptable: Callable[[int], bool], elr_enabled: bool,
) -> tuple[int, bool]:
    """(leader, whether the election was unclean)."""
    def valid(replica: int) -> bool:
        in_sync = replica in targets.isr or (not targets.isr and replica in targets.elr)
        return in_sync and acceptable(replica)

    if election is Election.PREFERRED and targets.replicas and valid(targets.replicas[0]):
        return targets.replicas[0], False
    if valid(partition.leader):
        return partition.leader, False
    clean = next((r for r in targets.replicas if valid(r)), None)
    if clean is not None:
        return clean, False
    last_known = partition.last_known_elr
    if (elr_enabled and not targets.isr and not targets.elr and len(last_known) == 1
            and acceptable(last_known[0])):
        return last_known[0], True
    if election is Election.UNCLEAN:
        unclean = next((r for r in targets.replicas if acceptable(r)), None)
        if unclean is not None:
            return unclean, True
    return NO_LEADER, False


def _elr_change(
    record: PartitionChangeRecord, partition: PartitionImage, targets: _Targets,
    elr_enabled: bool,
) -> None:
    """Rule 5 (Kafka's ``maybeUpdateRecordElr``)."""
    if record.isr is not None or not elr_enabled:  # an unclean election, or ELR off
        targets.elr = []
    if targets.elr != list(partition.eligible_leader_replicas):
        record.eligible_leader_replicas = targets.elr


def _last_known_leader_change(record: PartitionChangeRecord, partition: PartitionImage) -> None:
    """Rule 7 (Kafka's ``maybeUpdateLastKnownLeader``)."""
    if record.leader == NO_LEADER and not partition.last_known_elr:
        record.last_known_elr = [partition.leader]
    elif record.leader >= 0 and partition.last_known_elr:
        record.last_known_elr = []


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


# -- configs and features ---------------------------------------------------------------------


def elr_enabled(image: MetadataImage) -> bool:
    """KIP-966 is on: ``eligible.leader.replicas.version`` is finalized at 1 or more."""
    return image.features.get(ELIGIBLE_LEADER_REPLICAS_VERSION, 0) >= 1


def _topic_config(image: MetadataImage, topic: str, name: str, default: str) -> str:
    """``name`` of ``topic``: its own config, else the cluster-wide dynamic default, else
    Kafka's ``default``."""
    value = image.topic_configs.get(topic, {}).get(name)
    if value is None:
        value = image.broker_configs.get("", {}).get(name, default)
    return value


def elr_policy(image: MetadataImage, topic: TopicImage) -> ElrPolicy:
    """The ELR policy of ``topic``: ELR on or off, its effective ``min.insync.replicas``."""
    if not elr_enabled(image):
        return ELR_DISABLED
    try:
        min_isr = int(_topic_config(image, topic.name, MIN_INSYNC_REPLICAS, "1"))
    except ValueError:
        min_isr = 1
    first = topic.partitions.get(0)
    if first is not None:
        min_isr = min(min_isr, len(first.replicas))
    return ElrPolicy(enabled=True, min_insync_replicas=min_isr)


def unclean_leader_election_enabled(image: MetadataImage, topic: str) -> bool:
    """``unclean.leader.election.enable`` of ``topic``: its own config, else the cluster-wide
    dynamic default, else Kafka's default (false)."""
    value = _topic_config(image, topic, UNCLEAN_LEADER_ELECTION_ENABLE, "false")
    return value.strip().lower() == "true"


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


def isr_and_leader_updates(
    image: MetadataImage,
    partitions: Iterable[tuple[TopicImage, PartitionImage]],
    *,
    broker_to_remove: int = NO_LEADER,
    broker_to_add: int = NO_LEADER,
    broker_with_unclean_shutdown: int = NO_LEADER,
) -> list[PartitionChangeRecord]:
    """Kafka's ``generateLeaderAndIsrUpdates``: take ``broker_to_remove`` out of each ISR and of
    leadership; count ``broker_to_add`` as able to lead although the image still has it fenced
    (its unfencing is in the same batch); take ``broker_with_unclean_shutdown`` out of each ISR,
    ELR and leadership. Unclean elections where the topic allows them."""
    excluded = {broker_to_remove, broker_with_unclean_shutdown} - {NO_LEADER}

    def acceptable(replica: int) -> bool:
        return replica not in excluded and (
            replica == broker_to_add or image.brokers.is_active(replica))

    unclean_shutdown = [] if broker_with_unclean_shutdown == NO_LEADER else [
        broker_with_unclean_shutdown]
    records = []
    for topic, partition in list(partitions):
        election = (Election.UNCLEAN if unclean_leader_election_enabled(image, topic.name)
                    else Election.ONLINE)
        record = build_partition_change(
            topic.topic_id, partition, is_acceptable_leader=acceptable, election=election,
            isr=[r for r in partition.isr if r not in excluded],
            elr=elr_policy(image, topic), unclean_shutdown_replicas=unclean_shutdown,
        )
        if record is not None:
            records.append(record)
    return records
