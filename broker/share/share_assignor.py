"""The share-group partition assignor (KIP-932; the role of Kafka's ``SimpleAssignor``, the
``simple`` assignor, written from its documented rules, not its code): which members of a
share group fetch from which partitions.

Unlike a consumer group, a share group may give one partition to several members (records
are handed out one by one under acquisition locks, see ``SharePartition``), so when there are
more members than partitions, members share partitions. The rules, as Kafka 4.1 states them:

- Balance: partitions are spread evenly; each partition is shared by
  ``sharing = ceil(members / partitions)`` members, and the ``sharing * partitions``
  assignments are split among the members so that any two differ by at most one partition.
- Stickiness: a member keeps as much of its current assignment as balance allows.
- Balance comes before stickiness.

Pools. When every member subscribes to the same topics (Kafka's HOMOGENEOUS subscription
type) all their partitions form one pool; otherwise each topic is its own pool, shared by its
subscribers, and balance holds per topic (as Kafka documents for its heterogeneous builder: a
member subscribed to two topics gets its share of each).

Samsa's own choices, where Kafka's code is not a specification:
- Order: members are taken in member-id order and partitions in (topic id, partition) order,
  so the result is a function of the inputs alone (Kafka iterates hash maps).
- Which members get the extra assignment when the split is uneven: those keeping the most of
  their current assignment (then member-id order), so fewer partitions move.
- Filling: each partition short of ``sharing`` members goes to the member, not already
  holding it, with the most room left. If no member with room can take it (all of them hold
  it already) Kafka accepts "a slight imbalance"; Samsa instead rebuilds that pool from
  scratch (a cyclic deal that always balances), preferring balance as the rules say. So the
  balance above is exact in every pool.

Invariants of ``assign_share_partitions``' result, for each pool: every partition is held by
exactly ``sharing`` members (so by at least one when there are subscribers); member counts
differ by at most one; no member holds a partition of a topic it does not subscribe to, or of
a topic that is not in ``partition_counts``. Topics subscribed to but absent from
``partition_counts`` are ignored (Kafka's subscription metadata only holds existing topics).

Pure functions; no state.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

__all__ = ["Assignment", "assign_share_partitions", "assignment_pools"]

# topic id -> partitions
Assignment = Mapping[UUID, frozenset[int]]
_TopicPartition = tuple[UUID, int]


def assignment_pools(
    subscriptions: Mapping[str, frozenset[UUID]], partition_counts: Mapping[UUID, int]
) -> list[tuple[list[_TopicPartition], list[str]]]:
    """The pools the assignor balances within: (partitions, members), both in order."""
    effective = {
        member_id: frozenset(topic_id for topic_id in topic_ids if topic_id in partition_counts)
        for member_id, topic_ids in subscriptions.items()
    }
    subscribed = {member_id: topics for member_id, topics in effective.items() if topics}
    if not subscribed:
        return []
    if len(set(subscribed.values())) == 1:
        topics = next(iter(subscribed.values()))
        return [(_partitions_of(topics, partition_counts), sorted(subscribed))]
    all_topics = sorted(set().union(*subscribed.values()))
    return [
        (_partitions_of({topic_id}, partition_counts),
         sorted(member_id for member_id, topics in subscribed.items() if topic_id in topics))
        for topic_id in all_topics
    ]


def assign_share_partitions(
    subscriptions: Mapping[str, frozenset[UUID]],
    partition_counts: Mapping[UUID, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The target assignment of every member in ``subscriptions`` (subscribed topic ids), given
    the topics' partition counts and the current target assignment (for stickiness)."""
    held: dict[str, set[_TopicPartition]] = {member_id: set() for member_id in subscriptions}
    for partitions, members in assignment_pools(subscriptions, partition_counts):
        pool = set(partitions)
        previous = {
            member_id: sorted(
                (topic_id, partition)
                for topic_id, assigned in current.get(member_id, {}).items()
                for partition in assigned
                if (topic_id, partition) in pool
            )
            for member_id in members
        }
        for member_id, assigned in _assign_pool(partitions, members, previous).items():
            held[member_id].update(assigned)
    return {member_id: _by_topic(topic_partitions) for member_id, topic_partitions in held.items()}


def _partitions_of(topics: frozenset[UUID] | set[UUID], partition_counts: Mapping[UUID, int]) -> list[_TopicPartition]:
    return [(topic_id, partition) for topic_id in sorted(topics) for partition in range(partition_counts[topic_id])]


def _by_topic(topic_partitions: set[_TopicPartition]) -> Assignment:
    by_topic: dict[UUID, set[int]] = {}
    for topic_id, partition in topic_partitions:
        by_topic.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(partitions) for topic_id, partitions in sorted(by_topic.items())}


def _quotas(members: list[str], total: int, previous: Mapping[str, list[_TopicPartition]]) -> dict[str, int]:
    """How many assignments each member gets: ``total // members``, one more for the first
    ``total % members`` members in (most kept, member id) order."""
    base, extra = divmod(total, len(members))
    by_kept = sorted(members, key=lambda member_id: (-len(previous[member_id]), member_id))
    return {member_id: base + (1 if rank < extra else 0) for rank, member_id in enumerate(by_kept)}


def _assign_pool(
    partitions: list[_TopicPartition], members: list[str], previous: Mapping[str, list[_TopicPartition]]
) -> dict[str, set[_TopicPartition]]:
    if not partitions:
        return {member_id: set() for member_id in members}
    sharing = -(-len(members) // len(partitions))  # ceil
    quota = _quotas(members, sharing * len(partitions), previous)
    assigned: dict[str, set[_TopicPartition]] = {member_id: set() for member_id in members}
    holders: dict[_TopicPartition, int] = dict.fromkeys(partitions, 0)
    for member_id in members:  # keep what balance allows
        for topic_partition in previous[member_id]:
            if len(assigned[member_id]) < quota[member_id] and holders[topic_partition] < sharing:
                assigned[member_id].add(topic_partition)
                holders[topic_partition] += 1
    for topic_partition in partitions:  # fill the partitions still short of holders
        while holders[topic_partition] < sharing:
            room = [m for m in members if len(assigned[m]) < quota[m] and topic_partition not in assigned[m]]
            if not room:
                return _deal(partitions, members, quota)
            taker = max(room, key=lambda m: (quota[m] - len(assigned[m]), -members.index(m)))
            assigned[taker].add(topic_partition)
            holders[topic_partition] += 1
    return assigned


def _deal(partitions: list[_TopicPartition], members: list[str], quota: Mapping[str, int]) -> dict[str, set[_TopicPartition]]:
    """The balanced assignment without stickiness: deal the partitions, repeated cyclically,
    in consecutive runs of each member's quota. A run is never longer than the pool (a quota
    is at most ``ceil(partitions / members)`` or 2 when members outnumber partitions), so a
    member never gets one partition twice, and each partition is dealt ``sharing`` times."""
    assigned: dict[str, set[_TopicPartition]] = {}
    position = 0
    for member_id in members:
        assigned[member_id] = {partitions[(position + i) % len(partitions)] for i in range(quota[member_id])}
        position += quota[member_id]
    return assigned
