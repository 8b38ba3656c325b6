"""One member of a classic group (Kafka's ClassicGroupMember / MemberMetadata).

A member is mutable and owned by its ``ClassicGroup``; nothing outside the group holds one.
Invariants kept by the group: ``member_id`` is the key it is stored under; ``awaiting_join``
is true exactly while a JoinGroup of this member is parked; ``awaiting_sync`` likewise for
SyncGroup; ``is_new`` is true from the first join until its first join phase completes.

Session expiry follows Kafka's ``hasSatisfiedHeartbeat``: a member that is not new and is
awaiting a join or sync response satisfies its heartbeats automatically (the rebalance and
sync timeouts police it instead); every other member is expired once ``now_ms`` reaches
``session_deadline_ms``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from broker.group.values import Protocol

__all__ = ["ClassicGroupMember", "candidate_protocols", "select_protocol"]


@dataclass(slots=True)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    session_deadline_ms: int
    assignment: bytes | None = None
    awaiting_join: bool = False
    awaiting_sync: bool = False
    is_new: bool = False
    _names: frozenset[str] = field(default=frozenset(), repr=False)

    def __post_init__(self) -> None:
        self._names = frozenset(protocol.name for protocol in self.protocols)

    @property
    def protocol_names(self) -> frozenset[str]:
        return self._names

    def set_protocols(self, protocols: tuple[Protocol, ...]) -> None:
        self.protocols = protocols
        self._names = frozenset(protocol.name for protocol in protocols)

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        """Same protocols, same order, same metadata bytes (Kafka's ``matches``)."""
        return self.protocols == protocols

    def vote(self, candidates: frozenset[str]) -> str:
        """The first of this member's protocols, in its order of preference, that all support."""
        for protocol in self.protocols:
            if protocol.name in candidates:
                return protocol.name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def metadata(self, protocol_name: str) -> bytes:
        for protocol in self.protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        raise ValueError(f"member {self.member_id} does not support {protocol_name}")

    def session_expired(self, now_ms: int) -> bool:
        return self.expirable and now_ms >= self.session_deadline_ms

    @property
    def expirable(self) -> bool:
        return self.is_new or not (self.awaiting_join or self.awaiting_sync)


def candidate_protocols(members: Collection[ClassicGroupMember]) -> frozenset[str]:
    """The protocols every member supports."""
    each = iter(members)
    first = next(each, None)
    if first is None:
        return frozenset()
    return first.protocol_names.intersection(*(m.protocol_names for m in each))


def select_protocol(members: Collection[ClassicGroupMember]) -> str:
    """Kafka's ``selectProtocol``: each member votes for its most preferred candidate; most
    votes wins, a tie going to the protocol voted first."""
    candidates = candidate_protocols(members)
    votes: dict[str, int] = {}
    for member in members:
        name = member.vote(candidates)
        votes[name] = votes.get(name, 0) + 1
    return max(votes, key=lambda name: votes[name])  # max keeps the first of a tie
