"""The checks a classic group makes of a request before (or instead of) stepping: whether a
JoinGroup may enter (``group.max.size``, a protocol every member supports), whether a
SyncGroup comes from a current member of the current generation, a Heartbeat, and whether an
OffsetCommit may be stored (Kafka's ``ClassicGroup.validateOffsetCommit``).

A mixin of ``ClassicGroup``, which owns every attribute read here. Nothing here changes the
group's state; a Heartbeat, or a commit checked with ``now_ms``, pushes the member's session
deadline back.

Owned by the group's event loop (one task); not thread-safe.
"""

from __future__ import annotations

from broker.group.member import ClassicGroupMember, candidate_protocols
from broker.group.values import NO_MEMBER_ID, GroupConfig, GroupState, JoinRequest, SyncRequest
from protocol.errors import ErrorCode

__all__ = ["RequestChecks"]

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
DEAD = GroupState.DEAD


class RequestChecks:
    # Set by ClassicGroup.
    config: GroupConfig
    state: GroupState
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    _members: dict[str, ClassicGroupMember]
    _static_members: dict[str, str]  # group instance id -> member id
    _awaiting_join_count: int

    # ---- JoinGroup, SyncGroup --------------------------------------------------------------

    def _accept_joining_member(self, member_id: str) -> bool:
        """``group.max.size``: in PreparingRebalance only members that rejoined count."""
        member = self._members.get(member_id)
        max_size = self.config.group_max_size
        if self.state in (EMPTY, DEAD):
            return True
        if self.state is PREPARING:
            return (member is not None and member.awaiting_join) or self._awaiting_join_count < max_size
        return member is not None or len(self._members) < max_size

    def _supports_protocols(self, request: JoinRequest) -> bool:
        if self.state is EMPTY:
            return bool(request.protocol_type) and bool(request.protocols)
        if request.protocol_type != self.protocol_type:
            return False
        candidates = candidate_protocols(self._members.values())
        return any(protocol.name in candidates for protocol in request.protocols)

    def _validate_sync(self, request: SyncRequest) -> ErrorCode | None:
        if self.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(request.member_id, request.group_instance_id)
        if error is not None:
            return error
        if request.generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if request.protocol_type is not None and request.protocol_type != self.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if request.protocol_name is not None and request.protocol_name != self.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    # ---- Heartbeat, OffsetCommit -----------------------------------------------------------

    def heartbeat(
        self, member_id: str, generation_id: int, now_ms: int, *, group_instance_id: str | None = None
    ) -> ErrorCode:
        if self.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if self.state is EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = self._members[member_id]
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is PREPARING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def validate_offset_commit(
        self,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
        *,
        now_ms: int | None = None,
    ) -> ErrorCode | None:
        """None when an OffsetCommit may be stored. Generation -1 from an Empty group is a
        simple consumer or the admin client. Given ``now_ms``, an accepted commit from a member
        counts as its heartbeat, as in Kafka. Transactional commits are not covered."""
        if self.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.state is EMPTY:
            return None
        if generation_id < 0 and member_id == NO_MEMBER_ID and group_instance_id is None:
            return ErrorCode.UNKNOWN_MEMBER_ID  # a non-empty group takes commits from members only
        error = self._validate_current_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if self.state is COMPLETING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = self._members[member_id]
        if now_ms is not None:
            member.session_deadline_ms = now_ms + member.session_timeout_ms
        return None

    def _validate_current_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        if group_instance_id is not None:
            current = self._static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if member_id not in self._members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None
