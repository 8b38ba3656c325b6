"""Values going in and out of the classic group state machine: configuration, requests,
responses and effects. All frozen; none of them is a wire message class, so the state machine
does not depend on the codec (the JoinGroup/SyncGroup/Heartbeat/LeaveGroup handlers translate).

Names and defaults are Kafka's: ``group.min.session.timeout.ms`` (6 s),
``group.max.session.timeout.ms`` (30 min), ``group.max.size`` (Int.MaxValue) and
``group.initial.rebalance.delay.ms`` (3 s). An error response carries Kafka's placeholders:
generation -1, no protocol, leader "" and no members.

Holds no state; pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from protocol.errors import ErrorCode

__all__ = [
    "NO_GENERATION",
    "NO_LEADER",
    "NO_MEMBER_ID",
    "VALID_PREVIOUS_STATES",
    "CompletedJoin",
    "CompletedSync",
    "Effects",
    "GroupConfig",
    "GroupState",
    "JoinOutcome",
    "JoinRequest",
    "JoinResponse",
    "JoinResponseMember",
    "LeaveMemberResult",
    "LeaveOutcome",
    "MemberIdentity",
    "Protocol",
    "SyncOutcome",
    "SyncRequest",
    "SyncResponse",
]

NO_MEMBER_ID = ""  # JoinGroupRequest.UNKNOWN_MEMBER_ID
NO_GENERATION = -1
NO_LEADER = ""
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member's JoinGroup may wait this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class GroupState(Enum):
    """Kafka's ClassicGroupState; the values are the names DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's ClassicGroupState.validPreviousStates: the states each state may be entered from.
VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = MappingProxyType({
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
})


@dataclass(frozen=True, slots=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    group_initial_rebalance_delay_ms: int = 3_000


@dataclass(frozen=True, slots=True)
class Protocol:
    """One entry of JoinGroup's ``protocols``: an assignor name and its member metadata."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinRequest:
    member_id: str
    client_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_host: str = ""
    require_known_member_id: bool = True  # JoinGroup v4+
    support_skipping_assignment: bool = True  # JoinGroup v9+


@dataclass(frozen=True, slots=True)
class JoinResponseMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResponse:
    error_code: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = NO_LEADER
    skip_assignment: bool = False
    members: tuple[JoinResponseMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncRequest:
    member_id: str
    generation_id: int
    assignments: tuple[tuple[str, bytes], ...] = ()  # (member id, assignment); the leader's
    group_instance_id: str | None = None
    protocol_type: str | None = None  # SyncGroup v5+
    protocol_name: str | None = None  # SyncGroup v5+


@dataclass(frozen=True, slots=True)
class SyncResponse:
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class CompletedJoin:
    """A JoinGroup parked earlier under ``member_id`` is now answered with ``response``."""

    member_id: str
    response: JoinResponse


@dataclass(frozen=True, slots=True)
class CompletedSync:
    """A SyncGroup parked earlier under ``member_id`` is now answered with ``response``."""

    member_id: str
    response: SyncResponse


@dataclass(frozen=True, slots=True)
class Effects:
    """Parked requests to answer now, in order. Empty when nothing was completed.
    ``store_group``: the group completed a rebalance (Stable), became Empty, or replaced a
    static member while Stable, and its GroupMetadata record is to be written before the
    requests are answered. ``state_changed``: the group changed state during the call (the
    shell records when: Kafka's current state timestamp)."""

    joins: tuple[CompletedJoin, ...] = ()
    syncs: tuple[CompletedSync, ...] = ()
    store_group: bool = False
    state_changed: bool = False


@dataclass(frozen=True, slots=True)
class JoinOutcome:
    """``response`` None means parked: answer it when ``effects.joins`` of a later call (or
    tick) names ``member_id``. A member has at most one parked JoinGroup; a newer one
    replaces it, and the shell drops the older waiter, as Kafka does."""

    member_id: str
    response: JoinResponse | None
    effects: Effects = Effects()


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    """``response`` None means parked until the leader's SyncGroup (see ``JoinOutcome``)."""

    member_id: str
    response: SyncResponse | None
    effects: Effects = Effects()


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    """One entry of LeaveGroup v3+'s ``members`` (v0–v2 send one, with no instance id)."""

    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveOutcome:
    error_code: ErrorCode
    members: tuple[LeaveMemberResult, ...]
    effects: Effects = Effects()
