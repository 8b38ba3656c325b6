"""Leader elections on request and on schedule: Kafka's ``ReplicationControlManager``
``electLeaders``, ``maybeBalancePartitionLeaders`` and ``maybeElectUncleanLeaders``.

ElectLeaders (``plan_elect_leaders``), per partition:
- unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
- PREFERRED when the first replica already leads, UNCLEAN when there is a leader:
  ELECTION_NOT_NEEDED (left out of the answer when the request named no partitions: all);
- PREFERRED elects the first replica if it is active and in the ISR, else keeps or finds a
  clean leader (``partition_change``); nothing to change: PREFERRED_LEADER_NOT_AVAILABLE;
- UNCLEAN elects from the ISR, else any active replica (ISR reset to it, leader recovering),
  whatever the topic config says (the request asked for it); nothing: ELIGIBLE_LEADERS_NOT_AVAILABLE.

Auto leader rebalance (``imbalanced_partitions`` / ``plan_balance_partition_leaders``), run
every ``leader.imbalance.check.interval.seconds`` (300) when ``auto.leader.rebalance.enable``:
for each broker, of the partitions it is the preferred (first) replica of, the share it does not
lead; above ``leader.imbalance.per.broker.percentage`` (10) its partitions with no reassignment
in progress, where it is active and in the ISR, get a preferred election. This is the ZooKeeper
controller's per-broker selection; KRaft's controller elects every partition without its
preferred leader, which is ``imbalance_percentage=0`` here. At most ``max_elections`` records per
call (Kafka's 1000); ``more`` says to call again at once.

Unclean elections for leaderless partitions (``plan_elect_unclean_leaders``): only for topics with
``unclean.leader.election.enable``. Pure functions over the image.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from protocol.codec import Message
from protocol.errors import ErrorCode, InvalidRequestError
from replication.controller.partition_change import (
    Election,
    build_partition_change,
    elr_policy,
    partitions_where,
    unclean_leader_election_enabled,
)
from replication.metadata.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage

__all__ = [
    "DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE",
    "MAX_ELECTIONS_PER_IMBALANCE",
    "ElectionResult",
    "ElectionType",
    "imbalanced_partitions",
    "plan_balance_partition_leaders",
    "plan_elect_leaders",
    "plan_elect_unclean_leaders",
]

DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = 10  # leader.imbalance.per.broker.percentage
MAX_ELECTIONS_PER_IMBALANCE = 1000  # Kafka's QuorumController default


class ElectionType(IntEnum):
    """ElectLeaders' ``election_type``."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectionResult:
    topic: str
    partition_id: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


def plan_elect_leaders(
    image: MetadataImage,
    election_type: int,
    topic_partitions: Sequence[tuple[str, Sequence[int]]] | None,
) -> tuple[list[ElectionResult], list[Message]]:
    """ElectLeaders: per-partition results and the records (None: every partition)."""
    try:
        kind = ElectionType(election_type)
    except ValueError:
        raise InvalidRequestError(f"Unknown election type {election_type}") from None
    results: list[ElectionResult] = []
    records: list[Message] = []
    if topic_partitions is None:
        for name in sorted(image.topics_by_name):
            for index in sorted(image.topics_by_name[name].partitions):
                result = _elect_one(image, name, index, kind, records)
                if result.error_code != ErrorCode.ELECTION_NOT_NEEDED:
                    results.append(result)
        return results, records
    for name, indexes in topic_partitions:
        results += [_elect_one(image, name, index, kind, records) for index in indexes]
    return results, records


def _elect_one(
    image: MetadataImage, name: str, index: int, kind: ElectionType, records: list[Message]
) -> ElectionResult:
    topic = image.topics_by_name.get(name)
    partition = None if topic is None else topic.partitions.get(index)
    if topic is None or partition is None:
        message = f"No such topic as {name}" if topic is None else f"No such partition as {name}-{index}"
        return ElectionResult(name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message)
    if (partition.leader == partition.preferred_leader if kind is ElectionType.PREFERRED
            else partition.leader != NO_LEADER):
        return ElectionResult(name, index, ErrorCode.ELECTION_NOT_NEEDED,
                              "Leader election not needed for topic partition.")
    election = Election.PREFERRED if kind is ElectionType.PREFERRED else Election.UNCLEAN
    record = build_partition_change(topic.topic_id, partition, election=election,
                                    is_acceptable_leader=image.brokers.is_active,
                                    elr=elr_policy(image, topic))
    if record is None:
        code = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if kind is ElectionType.PREFERRED
                else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        return ElectionResult(name, index, code, None)
    records.append(record)
    return ElectionResult(name, index)


def imbalanced_partitions(
    image: MetadataImage,
    imbalance_percentage: int = DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
) -> list[tuple[TopicImage, PartitionImage]]:
    """The partitions an auto leader rebalance would give back to their preferred leader."""
    by_preferred: dict[int, list[tuple[TopicImage, PartitionImage]]] = {}
    for topic, partition in partitions_where(image, lambda p: bool(p.replicas)):
        by_preferred.setdefault(partition.preferred_leader, []).append((topic, partition))
    selected = []
    for broker_id in sorted(by_preferred):
        preferred = by_preferred[broker_id]
        not_led = [(t, p) for t, p in preferred if p.leader != broker_id]
        if len(not_led) * 100 <= imbalance_percentage * len(preferred):
            continue
        if image.brokers.is_active(broker_id):
            selected += [(t, p) for t, p in not_led if broker_id in p.isr and not p.reassigning]
    return selected


def plan_balance_partition_leaders(
    image: MetadataImage,
    *,
    imbalance_percentage: int = DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
    max_elections: int = MAX_ELECTIONS_PER_IMBALANCE,
) -> tuple[list[Message], bool]:
    """Preferred elections for ``imbalanced_partitions``: (records, whether to call again)."""
    return _bounded(image, imbalanced_partitions(image, imbalance_percentage), Election.PREFERRED,
                    max_elections)


def plan_elect_unclean_leaders(
    image: MetadataImage, *, max_elections: int = MAX_ELECTIONS_PER_IMBALANCE
) -> tuple[list[Message], bool]:
    """Unclean elections for leaderless partitions of topics that allow them."""
    leaderless = [
        (topic, partition)
        for topic, partition in partitions_where(image, lambda p: p.leader == NO_LEADER)
        if unclean_leader_election_enabled(image, topic.name)
    ]
    return _bounded(image, leaderless, Election.UNCLEAN, max_elections)


def _bounded(
    image: MetadataImage, partitions: Iterable[tuple[TopicImage, PartitionImage]],
    election: Election, max_elections: int,
) -> tuple[list[Message], bool]:
    records: list[Message] = []
    for topic, partition in partitions:
        if len(records) >= max_elections:
            break
        record = build_partition_change(topic.topic_id, partition, election=election,
                                        is_acceptable_leader=image.brokers.is_active,
                                        elr=elr_policy(image, topic))
        if record is not None:
            records.append(record)
    return records, len(records) >= max_elections
