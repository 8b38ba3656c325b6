"""Group coordination, sans-IO: the classic consumer-group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) as one ``ClassicGroup`` state machine per group, stepped by calls that
take the current time and return responses and effects. The asyncio handlers park requests
and answer them from the effects; ``tick``/``next_deadline`` drive the timers.

Committed offsets and the groups' GroupMetadata records live in ``__consumer_offsets``
(``offsets``, ``group_records``); ``validate_offset_commit`` is the group-side check an
OffsetCommit handler needs.
"""

from broker.group.classic import ClassicGroup, IllegalGroupStateError
from broker.group.member import ClassicGroupMember
from broker.group.values import (
    NO_GENERATION,
    NO_LEADER,
    NO_MEMBER_ID,
    CompletedJoin,
    CompletedSync,
    Effects,
    GroupConfig,
    GroupState,
    JoinOutcome,
    JoinRequest,
    JoinResponse,
    JoinResponseMember,
    LeaveMemberResult,
    LeaveOutcome,
    MemberIdentity,
    Protocol,
    SyncOutcome,
    SyncRequest,
    SyncResponse,
)

__all__ = [
    "NO_GENERATION",
    "NO_LEADER",
    "NO_MEMBER_ID",
    "ClassicGroup",
    "ClassicGroupMember",
    "CompletedJoin",
    "CompletedSync",
    "Effects",
    "GroupConfig",
    "GroupState",
    "IllegalGroupStateError",
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
