"""The classic consumer-group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) for one
group, as a sans-IO state machine: Kafka's ClassicGroup plus the classic-group parts of its
GroupCoordinator, stepped by method calls that take the current time (``now_ms``) and return
responses and effects instead of doing I/O.

States and transitions (Kafka's ClassicGroupState; anything else is a bug and raises):

    Empty ──join──▶ PreparingRebalance ──join phase done──▶ CompletingRebalance
      ▲                 ▲      │ (no members left)               │  leader's SyncGroup
      └─────────────────┼──────┘                                 ▼
                        └──── member joins/changes/leaves/expires ◀── Stable
    any state ──unload/delete──▶ Dead

- PreparingRebalance waits for every member to (re)join. It ends when all members and no
  pending members (those told MEMBER_ID_REQUIRED) are awaiting a join, or at the join
  deadline: the largest rebalance timeout of the members, or, when the rebalance started
  from Empty, ``group.initial.rebalance.delay.ms``, extended by that delay while new members
  keep arriving in generation 0, never beyond the rebalance timeout (Kafka's
  InitialDelayedJoin). Dynamic members that did not rejoin are then removed; static ones
  stay. If nobody rejoined the phase is re-armed for another rebalance timeout.
- Ending the phase bumps the generation, selects the protocol (each member votes for its
  most preferred protocol that every member supports; most votes wins, a tie going to the
  protocol voted first) and answers every parked join; only the leader gets the members
  with their metadata. The group is then CompletingRebalance, or Empty without members.
- CompletingRebalance waits for the leader's SyncGroup; its assignments (missing members get
  b"") are delivered to every parked SyncGroup and the group is Stable. Members that have
  not sent SyncGroup within the rebalance timeout of the join phase's end are removed and a
  new rebalance starts (Kafka's DelayedSync).
- Static membership: a JoinGroup with a known ``group_instance_id`` and no member id takes
  over the old member under a new member id; the old id is fenced (FENCED_INSTANCE_ID,
  parked requests of the old id answered so). In Stable, with the selected protocol
  unchanged, this happens without a rebalance.

Invariants: the generation never decreases; the leader, when set, is a member; in Stable
every member has an assignment; after ``tick(now_ms)`` no expirable member's session
deadline is ``<= now_ms``; ``_awaiting_join_count`` equals the members awaiting a join.

Persisting: the effects of the leader's SyncGroup (the group is then Stable), of the join
phase that leaves the group Empty, and of a static member replaced while Stable carry
``store_group``; the shell writes the GroupMetadata record before it answers them (a failed
write fails them: ``GroupCoordinator``). ``state_changed`` lets the shell keep
``current_state_timestamp_ms`` (wall clock; this machine's time is monotonic). Deviations:
the group is Stable as soon as the leader syncs (Kafka waits for the write); removing a
member answers its parked SyncGroup (UNKNOWN_MEMBER_ID) instead of leaving it to time out.
Request checks that do not step the group live in ``RequestChecks``.

Owned by the broker's event loop (one task); not thread-safe.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from broker.group.completions import Completions
from broker.group.member import ClassicGroupMember, select_protocol
from broker.group.request_checks import RequestChecks
from broker.group.subscriptions import compute_subscribed_topics
from broker.group.values import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    NO_GENERATION,
    NO_MEMBER_ID,
    VALID_PREVIOUS_STATES,
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
    SyncOutcome,
    SyncRequest,
    SyncResponse,
)
from protocol.errors import ErrorCode

__all__ = ["ClassicGroup", "IllegalGroupStateError"]

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


# A deadline re-armed at ``now_ms`` would fire again in the same tick; bound the rounds.
MAX_TICK_ROUNDS = 64


class IllegalGroupStateError(RuntimeError):
    """A transition Kafka's state table forbids: a bug in this module, never bad input."""


def random_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class ClassicGroup(RequestChecks):
    def __init__(
        self,
        group_id: str,
        *,
        config: GroupConfig | None = None,
        new_member_id: Callable[[str], str] = random_member_id,
    ) -> None:
        self.group_id = group_id
        self.config = config or GroupConfig()
        self._new_member_id = new_member_id
        self.state = EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self._members: dict[str, ClassicGroupMember] = {}
        self._static_members: dict[str, str] = {}  # group instance id -> member id
        self._pending_members: dict[str, int] = {}  # member id -> session deadline
        self._pending_sync: set[str] = set()
        self._awaiting_join_count = 0
        self._join_deadline_ms: int | None = None
        self._sync_deadline_ms: int | None = None
        self._initial_delay: tuple[int, int] | None = None  # (delay_ms, remaining_ms)
        self._new_member_added = False
        self._done = Completions()  # what the current call completed (see ``Effects``)
        # Wall-clock ms of the last state change, Kafka's currentStateTimestamp: set by the
        # shell (this machine's clock is monotonic), persisted in the GroupMetadata record and
        # restored from it; None for a new group. Offsets of an Empty group expire from it.
        self.current_state_timestamp_ms: int | None = None
        # The members' topics (consumer protocol only; None: unknown), as of the last join phase.
        self.subscribed_topics: frozenset[str] | None = None

    @classmethod
    def restore(
        cls,
        group_id: str,
        *,
        config: GroupConfig,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        leader_id: str | None,
        members: Sequence[ClassicGroupMember],
        current_state_timestamp_ms: int | None = None,
    ) -> ClassicGroup:
        """A group loaded from its GroupMetadata record: Stable with ``members`` (each with its
        assignment), or Empty without."""
        group = cls(group_id, config=config)
        group.current_state_timestamp_ms = current_state_timestamp_ms
        for member in members:
            group._add(member)
        group.state = STABLE if members else EMPTY
        group.generation_id = generation_id
        group.protocol_type = protocol_type
        group.protocol_name = protocol_name if members else None
        if leader_id in group._members:
            group.leader_id = leader_id
        group.subscribed_topics = compute_subscribed_topics(protocol_type, group.protocol_name, members)
        return group

    # ---- read-only views -------------------------------------------------------------

    @property
    def members(self) -> Mapping[str, ClassicGroupMember]:
        return MappingProxyType(self._members)

    @property
    def pending_members(self) -> frozenset[str]:
        return frozenset(self._pending_members)

    @property
    def static_members(self) -> Mapping[str, str]:
        return MappingProxyType(self._static_members)

    @property
    def in_initial_delay(self) -> bool:
        return self._initial_delay is not None

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self._members.values()), default=0)

    def next_deadline(self) -> int | None:
        """The earliest time at which ``tick`` has something to do, or None."""
        deadlines = [m.session_deadline_ms for m in self._members.values() if m.expirable]
        deadlines.extend(self._pending_members.values())
        deadlines.extend(d for d in (self._join_deadline_ms, self._sync_deadline_ms) if d is not None)
        return min(deadlines, default=None)

    # ---- JoinGroup -------------------------------------------------------------------

    def join(self, request: JoinRequest, now_ms: int) -> JoinOutcome:
        self._start_call()
        member_id, response = self._join(request, now_ms)
        if self.state is PREPARING:
            self._maybe_complete_join_phase(now_ms)
        return self._join_outcome(member_id, response)

    def _join(self, request: JoinRequest, now_ms: int) -> tuple[str, JoinResponse | None]:
        config = self.config
        if not (config.group_min_session_timeout_ms <= request.session_timeout_ms
                <= config.group_max_session_timeout_ms):
            return request.member_id, error_join(request.member_id, ErrorCode.INVALID_SESSION_TIMEOUT)
        if not self._accept_joining_member(request.member_id):
            self._remove_member(request.member_id, now_ms, rebalance=False)
            return NO_MEMBER_ID, error_join(NO_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED)
        if self.state is DEAD:
            return request.member_id, error_join(request.member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not self._supports_protocols(request):
            return request.member_id, error_join(request.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if request.member_id == NO_MEMBER_ID:
            return self._join_new_member(request, now_ms)
        return request.member_id, self._join_current_member(request, now_ms)

    def _join_new_member(self, request: JoinRequest, now_ms: int) -> tuple[str, JoinResponse | None]:
        instance_id = request.group_instance_id
        new_member_id = self._new_member_id(instance_id or request.client_id)
        if instance_id is not None:
            old_member_id = self._static_members.get(instance_id)
            if old_member_id is not None:
                response = self._replace_static_member(old_member_id, new_member_id, request, now_ms)
                return new_member_id, response
        elif request.require_known_member_id:
            self._pending_members[new_member_id] = now_ms + request.session_timeout_ms
            return new_member_id, error_join(new_member_id, ErrorCode.MEMBER_ID_REQUIRED)
        self._add_member_and_rebalance(new_member_id, request, now_ms)
        return new_member_id, None

    def _join_current_member(self, request: JoinRequest, now_ms: int) -> JoinResponse | None:
        member_id = request.member_id
        if member_id in self._pending_members and request.group_instance_id is None:
            self._add_member_and_rebalance(member_id, request, now_ms)
            return None
        error = self._validate_current_member(member_id, request.group_instance_id)
        if error is not None:
            return error_join(member_id, error)
        member = self._members.get(member_id)
        if member is None or self.state in (EMPTY, DEAD):
            return error_join(member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        if self.state is COMPLETING and member.matches(request.protocols):
            # The member lost the join response: send the current generation again.
            return self._join_response(member)
        if self.state is STABLE and member_id != self.leader_id and member.matches(request.protocols):
            return self._join_response(member, with_members=False)
        # The leader rejoining in Stable forces a rebalance: it may have seen topic changes.
        self._update_member(member, request, awaiting_join=True)
        self._maybe_prepare_rebalance(now_ms)
        return None

    def _add_member_and_rebalance(self, member_id: str, request: JoinRequest, now_ms: int) -> None:
        member = ClassicGroupMember(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_deadline_ms=now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS,
            awaiting_join=True,
            is_new=True,
        )
        if self.state is PREPARING and self.generation_id == 0:
            self._new_member_added = True
        self._add(member)
        self._maybe_prepare_rebalance(now_ms)

    def _add(self, member: ClassicGroupMember) -> None:
        if member.group_instance_id is not None:
            self._static_members[member.group_instance_id] = member.member_id
        if not self._members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self._members[member.member_id] = member
        self._awaiting_join_count += member.awaiting_join
        self._pending_members.pop(member.member_id, None)

    def _update_member(self, member: ClassicGroupMember, request: JoinRequest, *, awaiting_join: bool) -> None:
        member.set_protocols(request.protocols)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        self._awaiting_join_count += awaiting_join - member.awaiting_join
        member.awaiting_join = awaiting_join

    def _replace_static_member(
        self, old_member_id: str, new_member_id: str, request: JoinRequest, now_ms: int
    ) -> JoinResponse | None:
        old_leader = self.leader_id
        member = self._members.pop(old_member_id)
        self._complete_join(member, error_join(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self._complete_sync(member, SyncResponse(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self._members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self._pending_sync:
            self._pending_sync.discard(old_member_id)
            self._pending_sync.add(new_member_id)
        self._static_members[request.group_instance_id or NO_MEMBER_ID] = new_member_id
        self._update_member(member, request, awaiting_join=True)
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is STABLE:
            return self._rejoin_static_member_when_stable(member, request, old_leader, now_ms)
        if self.state is COMPLETING:
            # The leader may be assigning to the old member id: rebalance so ids match.
            self._prepare_rebalance(now_ms)
        return None

    def _rejoin_static_member_when_stable(
        self, member: ClassicGroupMember, request: JoinRequest, old_leader: str | None, now_ms: int
    ) -> JoinResponse | None:
        if select_protocol(self._members.values()) != self.protocol_name:
            self._maybe_prepare_rebalance(now_ms)
            return None
        self._update_member(member, request, awaiting_join=False)
        self._done.store_group = True  # the record must name the new member id
        if not request.support_skipping_assignment:
            # Pre-v9 clients: report the old leader id so the new one does not assign.
            response = self._join_response(member, with_members=False)
            return dataclasses.replace(response, leader=old_leader or "")
        is_leader = member.member_id == self.leader_id
        response = self._join_response(member, with_members=is_leader)
        return dataclasses.replace(response, skip_assignment=is_leader)

    # ---- the join phase ----------------------------------------------------------------

    def _maybe_prepare_rebalance(self, now_ms: int) -> None:
        if self.state in VALID_PREVIOUS_STATES[PREPARING]:
            self._prepare_rebalance(now_ms)

    def _prepare_rebalance(self, now_ms: int) -> None:
        if self.state is COMPLETING:
            self._reset_and_propagate_assignment_error(ErrorCode.REBALANCE_IN_PROGRESS, now_ms)
        self._pending_sync.clear()
        self._sync_deadline_ms = None
        initial = self.state is EMPTY
        if initial:
            delay_ms = self.config.group_initial_rebalance_delay_ms
            self._initial_delay = (delay_ms, max(self.rebalance_timeout_ms - delay_ms, 0))
            self._join_deadline_ms = now_ms + delay_ms
        else:
            self._initial_delay = None
            self._join_deadline_ms = now_ms + self.rebalance_timeout_ms
        self._transition_to(PREPARING)
        if not initial:
            self._maybe_complete_join_phase(now_ms)

    def _maybe_complete_join_phase(self, now_ms: int) -> None:
        """Kafka's DelayedJoin.tryComplete; the initial delay never completes early."""
        if self.state is not PREPARING or self._initial_delay is not None:
            return
        if self._awaiting_join_count == len(self._members) and not self._pending_members:
            self._complete_join_phase(now_ms)

    def _on_join_deadline(self, now_ms: int) -> None:
        if self._initial_delay is not None:
            delay_ms, remaining_ms = self._initial_delay
            if self._new_member_added and remaining_ms != 0:
                self._new_member_added = False
                next_delay_ms = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
                self._initial_delay = (next_delay_ms, max(remaining_ms - delay_ms, 0))
                self._join_deadline_ms = now_ms + next_delay_ms
                return
        self._complete_join_phase(now_ms)

    def _complete_join_phase(self, now_ms: int) -> None:
        self._initial_delay = None
        self._join_deadline_ms = None
        self._new_member_added = False
        for member in list(self._members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                self._remove_member(member.member_id, now_ms, rebalance=False)
        if self._members and not self._elect_joined_leader():
            # Nobody rejoined (only static members remain): wait another rebalance timeout.
            self._join_deadline_ms = now_ms + self.rebalance_timeout_ms
            return
        self._init_next_generation()
        if self.state is EMPTY:
            return
        for member in self._members.values():
            self._complete_join(member, self._join_response(member))
            member.session_deadline_ms = now_ms + member.session_timeout_ms
            member.is_new = False
            self._pending_sync.add(member.member_id)
        self._sync_deadline_ms = now_ms + self.rebalance_timeout_ms

    def _elect_joined_leader(self) -> bool:
        leader = self._members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m.member_id for m in self._members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined
        return True

    def _init_next_generation(self) -> None:
        self.generation_id += 1
        self.protocol_name = select_protocol(self._members.values()) if self._members else None
        self.subscribed_topics = compute_subscribed_topics(
            self.protocol_type, self.protocol_name, self._members.values())
        if self._members:
            self._transition_to(COMPLETING)
        else:
            self._transition_to(EMPTY)
            self._done.store_group = True
        self._pending_sync.clear()

    # ---- SyncGroup -------------------------------------------------------------------

    def sync(self, request: SyncRequest, now_ms: int) -> SyncOutcome:
        self._start_call()
        return self._sync_outcome(request.member_id, self._sync(request, now_ms))

    def _sync(self, request: SyncRequest, now_ms: int) -> SyncResponse | None:
        error = self._validate_sync(request)
        if error is not None:
            return SyncResponse(error)
        if self.state is EMPTY:
            return SyncResponse(ErrorCode.UNKNOWN_MEMBER_ID)
        if self.state is PREPARING:
            return SyncResponse(ErrorCode.REBALANCE_IN_PROGRESS)
        member = self._members[request.member_id]
        self._remove_pending_sync(member.member_id)
        if self.state is STABLE:
            member.session_deadline_ms = now_ms + member.session_timeout_ms
            return SyncResponse(ErrorCode.NONE, self.protocol_type, self.protocol_name,
                                member.assignment or b"")
        member.awaiting_sync = True
        if member.member_id == self.leader_id:
            assignments = dict(request.assignments)
            for each in self._members.values():
                each.assignment = assignments.get(each.member_id, b"")
            self._propagate_assignment(ErrorCode.NONE, now_ms)
            self._transition_to(STABLE)
            self._done.store_group = True
        return None

    def _remove_pending_sync(self, member_id: str) -> None:
        self._pending_sync.discard(member_id)
        if not self._pending_sync:
            self._sync_deadline_ms = None

    def _reset_and_propagate_assignment_error(self, error: ErrorCode, now_ms: int) -> None:
        for member in self._members.values():
            member.assignment = None
        self._propagate_assignment(error, now_ms)

    def _propagate_assignment(self, error: ErrorCode, now_ms: int) -> None:
        ok = error is ErrorCode.NONE
        for member in self._members.values():
            response = SyncResponse(error, self.protocol_type if ok else None,
                                    self.protocol_name if ok else None, member.assignment or b"")
            if self._complete_sync(member, response):
                member.session_deadline_ms = now_ms + member.session_timeout_ms

    def _on_sync_deadline(self, now_ms: int) -> None:
        self._sync_deadline_ms = None
        if self.state not in (COMPLETING, STABLE) or not self._pending_sync:
            return
        for member_id in sorted(self._pending_sync):
            self._remove_member(member_id, now_ms, rebalance=False)
        self._prepare_rebalance(now_ms)

    # ---- LeaveGroup, removal -----------------------------------------------------------

    def leave(self, members: Sequence[MemberIdentity], now_ms: int) -> LeaveOutcome:
        self._start_call()
        if self.state is DEAD:
            return LeaveOutcome(ErrorCode.COORDINATOR_NOT_AVAILABLE, ())
        results = tuple(
            LeaveMemberResult(m.member_id, m.group_instance_id, self._leave_one(m, now_ms))
            for m in members
        )
        return LeaveOutcome(ErrorCode.NONE, results, self._effects())

    def _leave_one(self, identity: MemberIdentity, now_ms: int) -> ErrorCode:
        member_id = identity.member_id
        if member_id == NO_MEMBER_ID:
            # Administrative removal by group instance id alone.
            member_id = self._static_members.get(identity.group_instance_id or "", "")
            if not member_id:
                return ErrorCode.UNKNOWN_MEMBER_ID
        elif member_id in self._pending_members:
            self._remove_member(member_id, now_ms)
            return ErrorCode.NONE
        else:
            error = self._validate_current_member(member_id, identity.group_instance_id)
            if error is not None:
                return error
        self._remove_member(member_id, now_ms)
        return ErrorCode.NONE

    def _remove_member(self, member_id: str, now_ms: int, *, rebalance: bool = True) -> None:
        """Kafka's removeMemberAndUpdateGroup; ``rebalance=False`` is its bare ``remove``."""
        self._pending_members.pop(member_id, None)
        self._pending_sync.discard(member_id)
        member = self._members.pop(member_id, None)
        if member is not None:
            self._complete_join(member, error_join(NO_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
            self._complete_sync(member, SyncResponse(ErrorCode.UNKNOWN_MEMBER_ID))
            if member.group_instance_id is not None:
                self._static_members.pop(member.group_instance_id, None)
            if self.leader_id == member_id:
                self.leader_id = next(iter(self._members), None)
        if not rebalance:
            return
        if self.state in (STABLE, COMPLETING) and member is not None:
            self._maybe_prepare_rebalance(now_ms)
        elif self.state is PREPARING:
            self._maybe_complete_join_phase(now_ms)

    # ---- time --------------------------------------------------------------------------

    def tick(self, now_ms: int) -> Effects:
        """Fire every deadline that is due: session expiry (members and pending members), the
        end of the join phase or initial delay, and the SyncGroup deadline."""
        self._start_call()
        for _ in range(MAX_TICK_ROUNDS):
            deadline = self.next_deadline()
            if deadline is None or deadline > now_ms:
                break
            self._fire_due(now_ms)
        return self._effects()

    def _fire_due(self, now_ms: int) -> None:
        for member_id in [m for m, deadline in self._pending_members.items() if deadline <= now_ms]:
            self._remove_member(member_id, now_ms)
        for member in [m for m in self._members.values() if m.session_expired(now_ms)]:
            if member.member_id in self._members:
                self._remove_member(member.member_id, now_ms)
        if self._join_deadline_ms is not None and self._join_deadline_ms <= now_ms:
            self._on_join_deadline(now_ms)
        if self._sync_deadline_ms is not None and self._sync_deadline_ms <= now_ms:
            self._on_sync_deadline(now_ms)

    # ---- Dead --------------------------------------------------------------------------

    def delete(self) -> ErrorCode:
        """DeleteGroups: only an Empty group may go; it becomes Dead."""
        if self.state is DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if self.state is not EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        self._transition_to(DEAD)
        return ErrorCode.NONE

    def unload(self) -> Effects:
        """The coordinator lost the group's ``__consumer_offsets`` partition: answer every
        parked request NOT_COORDINATOR and go Dead."""
        self._start_call()
        for member in self._members.values():
            self._complete_join(member, error_join(member.member_id, ErrorCode.NOT_COORDINATOR))
            self._complete_sync(member, SyncResponse(ErrorCode.NOT_COORDINATOR))
        self._transition_to(DEAD)
        self._join_deadline_ms = self._sync_deadline_ms = None
        self._initial_delay = None
        return self._effects()

    # ---- helpers -----------------------------------------------------------------------

    def _transition_to(self, state: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalGroupStateError(f"group {self.group_id}: {self.state.value} -> {state.value}")
        self.state = state
        self._done.state_changed = True

    def _join_response(self, member: ClassicGroupMember, *, with_members: bool | None = None) -> JoinResponse:
        """Success for ``member``; the member list goes to the leader (or as ``with_members``)."""
        if with_members is None:
            with_members = member.member_id == self.leader_id
        name = self.protocol_name or ""
        members = tuple(JoinResponseMember(m.member_id, m.group_instance_id, m.metadata(name))
                        for m in self._members.values()) if with_members else ()
        return JoinResponse(ErrorCode.NONE, member.member_id, self.generation_id, self.protocol_type,
                            self.protocol_name, self.leader_id or "", False, members)

    def _complete_join(self, member: ClassicGroupMember, response: JoinResponse) -> bool:
        if not member.awaiting_join:
            return False
        member.awaiting_join = False
        self._awaiting_join_count -= 1
        self._done.joins.append(CompletedJoin(member.member_id, response))
        return True

    def _complete_sync(self, member: ClassicGroupMember, response: SyncResponse) -> bool:
        if not member.awaiting_sync:
            return False
        member.awaiting_sync = False
        self._done.syncs.append(CompletedSync(member.member_id, response))
        return True

    def _start_call(self) -> None:
        self._done.reset()

    def _effects(self) -> Effects:
        return self._done.effects()

    def _join_outcome(self, member_id: str, response: JoinResponse | None) -> JoinOutcome:
        """A join completed within its own call is answered directly, not as an effect."""
        if response is None:
            response = self._done.take_join(member_id)
        return JoinOutcome(member_id, response, self._effects())

    def _sync_outcome(self, member_id: str, response: SyncResponse | None) -> SyncOutcome:
        if response is None:
            response = self._done.take_sync(member_id)
        return SyncOutcome(member_id, response, self._effects())


def error_join(member_id: str, error: ErrorCode) -> JoinResponse:
    return JoinResponse(error, member_id, NO_GENERATION)


