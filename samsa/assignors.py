"""Partition assignors of the classic consumer protocol: range, roundrobin, cooperative-sticky.

The group leader runs one of them over every member's subscription and sends each member its
assignment in SyncGroup. Names, algorithms and bytes are Kafka's, so Samsa consumers share a
group with Java's and librdkafka's (``"range"``, ``"roundrobin"``, ``"cooperative-sticky"``).

Bytes (JoinGroup protocol metadata and SyncGroup assignment), Kafka's ConsumerProtocol::

    subscription: int16 version | ConsumerProtocolSubscription at that version
                  (topics, user_data, owned_partitions v1+, generation_id v2+, rack_id v3+)
    assignment:   int16 version | ConsumerProtocolAssignment (assigned_partitions, user_data)

A reader takes a version above the highest it knows as that highest one (Kafka's rule: later
versions only append fields). Samsa writes v3 of both.

Cooperative-sticky user data is Java's: int32 generation. librdkafka's sticky assignors send
``[topic [partition]] generation`` (StickyAssignorUserData v1); both are understood.

Rebalance protocols: an assignor is EAGER (a member gives up all its partitions before it
rejoins) or COOPERATIVE (it keeps them; the leader never moves a partition straight from one
member to another: it leaves it unassigned, the owner revokes it, and a second rebalance
hands it out, Kafka's incremental rebalance, KIP-429). A consumer uses COOPERATIVE only when
every assignor it lists supports it, as Java's ConsumerCoordinator does.

Pure functions and frozen values: no I/O, no state owned by any task (an assignor object is
stateless; the member's generation is passed in).
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from protocol.codec import DecodeError
from protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from protocol.messages.consumer_protocol_assignment import TopicPartition as _AssignedTopic
from protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from protocol.messages.consumer_protocol_subscription import TopicPartition as _OwnedTopic
from samsa.types import TopicPartition

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "CooperativeStickyAssignor",
    "PartitionAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "Subscription",
    "assignor_for",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "rebalance_protocol",
]

PROTOCOL_VERSION = 3
_VERSION = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
M = TypeVar("M", ConsumerProtocolSubscription, ConsumerProtocolAssignment)


class RebalanceProtocol(Enum):
    EAGER = "eager"
    COOPERATIVE = "cooperative"


@dataclass(frozen=True, slots=True)
class Subscription:
    """One member's JoinGroup metadata, plus its ``group_instance_id`` (ordering only)."""

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    user_data: bytes | None = None
    rack_id: str | None = None
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


# --- bytes -----------------------------------------------------------------------------


def _group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for tp in sorted(set(partitions)):
        grouped[tp.topic].append(tp.partition)
    return grouped


def encode_subscription(subscription: Subscription, version: int = PROTOCOL_VERSION) -> bytes:
    owned = [_OwnedTopic(topic, partitions)
             for topic, partitions in _group_by_topic(subscription.owned_partitions).items()]
    message = ConsumerProtocolSubscription(
        topics=sorted(set(subscription.topics)), user_data=subscription.user_data,
        owned_partitions=owned, generation_id=subscription.generation_id,
        rack_id=subscription.rack_id)
    out = bytearray(_VERSION.pack(version))
    message.encode_into(out, version)
    return bytes(out)


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    """A member's metadata; the generation from v2's field, else from the user data."""
    message = _decode_versioned(ConsumerProtocolSubscription, data)
    owned = tuple(TopicPartition(t.topic, p) for t in message.owned_partitions
                  for p in t.partitions)
    generation = message.generation_id
    if generation < 0 and message.user_data:
        generation, legacy_owned = _generation_from_user_data(message.user_data)
        owned = owned or legacy_owned
    return Subscription(tuple(message.topics), owned, generation, message.user_data,
                        message.rack_id, group_instance_id)


def _generation_from_user_data(user_data: bytes) -> tuple[int, tuple[TopicPartition, ...]]:
    """Java's cooperative-sticky int32 generation, or librdkafka's sticky user data v1:
    int32 count | count x (int16 length | topic | int32 count | count x int32) | int32 generation."""
    if len(user_data) == 4:
        return _INT32.unpack(user_data)[0], ()
    try:
        owned, position = _read_topic_partitions(user_data)
        if len(user_data) - position != 4:
            return -1, ()
    except (struct.error, UnicodeDecodeError, ValueError):
        return -1, ()
    return _INT32.unpack_from(user_data, position)[0], owned


def _read_topic_partitions(data: bytes) -> tuple[tuple[TopicPartition, ...], int]:
    (topic_count,), position = _INT32.unpack_from(data, 0), 4
    if not 0 <= topic_count <= len(data):
        raise ValueError("bad topic count")
    owned: list[TopicPartition] = []
    for _ in range(topic_count):
        (length,) = _INT16.unpack_from(data, position)
        topic = data[position + 2:position + 2 + length].decode()
        position += 2 + length
        (count,) = _INT32.unpack_from(data, position)
        if not 0 <= count <= len(data):
            raise ValueError("bad partition count")
        partitions = struct.unpack_from(f">{count}i", data, position + 4)
        position += 4 + 4 * count
        owned += (TopicPartition(topic, p) for p in partitions)
    return tuple(owned), position


def encode_assignment(assignment: Assignment, version: int = PROTOCOL_VERSION) -> bytes:
    topics = [_AssignedTopic(topic, partitions)
              for topic, partitions in _group_by_topic(assignment.partitions).items()]
    out = bytearray(_VERSION.pack(version))
    ConsumerProtocolAssignment(topics, assignment.user_data).encode_into(out, version)
    return bytes(out)


def decode_assignment(data: bytes) -> Assignment:
    """A SyncGroup assignment; empty bytes (a member the leader left out) is no partitions."""
    if not data:
        return Assignment(())
    message = _decode_versioned(ConsumerProtocolAssignment, data)
    partitions = tuple(TopicPartition(t.topic, p) for t in message.assigned_partitions
                       for p in t.partitions)
    return Assignment(partitions, message.user_data)


def _decode_versioned(message_type: type[M], data: bytes) -> M:
    if len(data) < 2:
        raise DecodeError(f"{message_type.__name__}: {len(data)} bytes, no version")
    version = _VERSION.unpack_from(data)[0]
    if version < 0:
        raise DecodeError(f"{message_type.__name__}: negative version {version}")
    # Later versions append fields: read the ones this version knows, ignore the rest.
    message, _ = message_type.decode_from(memoryview(data), 2, min(version, PROTOCOL_VERSION))
    return message


# --- assignors ---------------------------------------------------------------------------


def _member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Java's MemberInfo order: static members by instance id first, then by member id."""
    def key(member_id: str) -> tuple[int, str]:
        instance = subscriptions[member_id].group_instance_id
        return (0, instance) if instance else (1, member_id)

    return sorted(subscriptions, key=key)


class PartitionAssignor(ABC):
    """One assignment strategy; ``name`` is what JoinGroup carries."""

    name: str = ""
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: Sequence[str], generation_id: int) -> bytes | None:
        return None

    @abstractmethod
    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        """Each member's assignment; topics missing from ``partitions_per_topic`` are skipped."""


class RangeAssignor(PartitionAssignor):
    """Per topic, consecutive ranges over the members subscribed to it (Java's RangeAssignor)."""

    name = "range"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        ordered = _member_order(subscriptions)
        assigned: dict[str, list[TopicPartition]] = {member: [] for member in ordered}
        for topic in sorted(partitions_per_topic):
            members = [m for m in ordered if topic in subscriptions[m].topics]
            if not members:
                continue
            count = partitions_per_topic[topic]
            per_member, extra = divmod(count, len(members))
            start = 0
            for index, member in enumerate(members):
                length = per_member + (1 if index < extra else 0)
                assigned[member] += [TopicPartition(topic, p) for p in range(start, start + length)]
                start += length
        return {member: Assignment(tuple(tps)) for member, tps in assigned.items()}


class RoundRobinAssignor(PartitionAssignor):
    """All partitions, sorted, dealt one by one to the members subscribed to each one's topic."""

    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        ordered = _member_order(subscriptions)
        assigned: dict[str, list[TopicPartition]] = {member: [] for member in ordered}
        subscribed = {t for s in subscriptions.values() for t in s.topics}
        cursor = 0
        for topic in sorted(subscribed & set(partitions_per_topic)):
            for partition in range(partitions_per_topic[topic]):
                while topic not in subscriptions[ordered[cursor % len(ordered)]].topics:
                    cursor += 1
                assigned[ordered[cursor % len(ordered)]].append(TopicPartition(topic, partition))
                cursor += 1
        return {member: Assignment(tuple(tps)) for member, tps in assigned.items()}


class CooperativeStickyAssignor(PartitionAssignor):
    """Balanced like round robin, keeping as many owned partitions as balance allows, and
    cooperative: a partition moving between members is left out until its owner revoked it.

    Balanced means no member could take a partition from a member holding two more that
    both are subscribed to. Steps: (1) every member keeps the partitions it validly owns (the
    claim of the highest generation wins, claims older than the previous generation are
    dropped); (2) the unowned partitions, those with the fewest candidates first, go each to
    its least-loaded candidate; (3) while a member holds two more than another that can take
    one of its partitions, the last such partition moves; (4) a partition that another member
    still claims is withdrawn from the assignment of a member that does not claim it: the
    claimant revokes it, and the next rebalance hands it out.
    """

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def subscription_user_data(self, topics: Sequence[str], generation_id: int) -> bytes | None:
        return _INT32.pack(generation_id)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        ordered = _member_order(subscriptions)
        candidates = _candidates(partitions_per_topic, subscriptions)
        assigned = _valid_owned(subscriptions, candidates)
        for member in ordered:
            assigned.setdefault(member, [])
        _assign_unowned(assigned, candidates, ordered)
        _balance(assigned, candidates, ordered)
        return _withdraw_moving(assigned, subscriptions)


def _candidates(partitions_per_topic: Mapping[str, int],
                subscriptions: Mapping[str, Subscription]) -> dict[TopicPartition, set[str]]:
    """Each existing, subscribed partition and the members that may own it."""
    result: dict[TopicPartition, set[str]] = {}
    for member, subscription in subscriptions.items():
        for topic in subscription.topics:
            for partition in range(partitions_per_topic.get(topic, 0)):
                result.setdefault(TopicPartition(topic, partition), set()).add(member)
    return result


def _valid_owned(subscriptions: Mapping[str, Subscription],
                 candidates: Mapping[TopicPartition, set[str]]) -> dict[str, list[TopicPartition]]:
    generations = [s.generation_id for s in subscriptions.values() if s.owned_partitions]
    newest = max(generations, default=-1)
    claims: dict[TopicPartition, list[tuple[int, str]]] = defaultdict(list)
    for member, subscription in subscriptions.items():
        if newest >= 0 and subscription.generation_id < newest - 1:
            continue  # a claim older than the previous generation is stale
        for tp in subscription.owned_partitions:
            if member in candidates.get(tp, ()):
                claims[tp].append((subscription.generation_id, member))
    kept: dict[str, list[TopicPartition]] = defaultdict(list)
    for tp, claimants in sorted(claims.items()):
        claimants.sort(reverse=True)
        if len(claimants) > 1 and claimants[0][0] == claimants[1][0]:
            continue  # two owners in one generation: nobody keeps it
        kept[claimants[0][1]].append(tp)
    return dict(kept)


def _assign_unowned(assigned: dict[str, list[TopicPartition]],
                    candidates: Mapping[TopicPartition, set[str]], ordered: list[str]) -> None:
    rank = {member: index for index, member in enumerate(ordered)}
    taken = {tp for tps in assigned.values() for tp in tps}
    unowned = sorted((tp for tp in candidates if tp not in taken),
                     key=lambda tp: (len(candidates[tp]), tp))
    for tp in unowned:
        member = min(candidates[tp], key=lambda m: (len(assigned[m]), rank[m]))
        assigned[member].append(tp)


def _balance(assigned: dict[str, list[TopicPartition]],
             candidates: Mapping[TopicPartition, set[str]], ordered: list[str]) -> None:
    # Each move lowers the sum of squared loads, so this ends.
    rank = {member: index for index, member in enumerate(ordered)}
    while True:
        move = _find_move(assigned, candidates, rank)
        if move is None:
            return
        source, target, tp = move
        assigned[source].remove(tp)
        assigned[target].append(tp)


def _find_move(assigned: Mapping[str, list[TopicPartition]],
               candidates: Mapping[TopicPartition, set[str]],
               rank: Mapping[str, int]) -> tuple[str, str, TopicPartition] | None:
    by_load = sorted(assigned, key=lambda m: (-len(assigned[m]), rank[m]))
    for source in by_load:
        for tp in sorted(assigned[source], reverse=True):
            targets = [m for m in candidates[tp] if len(assigned[m]) + 1 < len(assigned[source])]
            if targets:
                return source, min(targets, key=lambda m: (len(assigned[m]), rank[m])), tp
    return None


def _withdraw_moving(assigned: Mapping[str, list[TopicPartition]],
                     subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
    owner: dict[TopicPartition, set[str]] = defaultdict(set)
    for member, subscription in subscriptions.items():
        for tp in subscription.owned_partitions:
            owner[tp].add(member)
    # A partition another member still claims waits for that member to revoke it, unless
    # this member claims it too (then it stays where it is; the other claim is stale).
    return {member: Assignment(tuple(sorted(tp for tp in tps
                                            if member in owner[tp] or not owner[tp])))
            for member, tps in assigned.items()}


ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


def assignor_for(name: str) -> PartitionAssignor:
    return ASSIGNORS[name]()


def rebalance_protocol(assignors: Sequence[PartitionAssignor]) -> RebalanceProtocol:
    """COOPERATIVE if every assignor supports it, else EAGER (Java's ConsumerCoordinator)."""
    if assignors and all(RebalanceProtocol.COOPERATIVE in a.supported_protocols
                         for a in assignors):
        return RebalanceProtocol.COOPERATIVE
    return RebalanceProtocol.EAGER
