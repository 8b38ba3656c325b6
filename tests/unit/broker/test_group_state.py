"""The classic group state machine, driven by calls and a fake clock (no sockets, no sleeps)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.group import (
    NO_MEMBER_ID,
    ClassicGroup,
    Effects,
    GroupConfig,
    GroupState,
    JoinOutcome,
    JoinRequest,
    MemberIdentity,
    Protocol,
    SyncRequest,
    SyncResponse,
)
from protocol.errors import ErrorCode

RANGE = Protocol("range", b"range-metadata")
ROUND_ROBIN = Protocol("roundrobin", b"rr-metadata")
SESSION_MS = 10_000
REBALANCE_MS = 30_000


def make_group(**config: int) -> ClassicGroup:
    counter = itertools.count(1)
    settings_ = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 0, **config}
    return ClassicGroup(
        "g", config=GroupConfig(**settings_), new_member_id=lambda prefix: f"{prefix}-{next(counter)}"
    )


def request(
    member_id: str = NO_MEMBER_ID,
    *,
    client_id: str = "client",
    protocols: tuple[Protocol, ...] = (RANGE,),
    protocol_type: str = "consumer",
    instance: str | None = None,
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
    require_known: bool = False,
    skip_assignment: bool = True,
) -> JoinRequest:
    return JoinRequest(
        member_id=member_id, client_id=client_id, protocol_type=protocol_type, protocols=protocols,
        session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms, group_instance_id=instance,
        require_known_member_id=require_known, support_skipping_assignment=skip_assignment,
    )


def joins_of(effects: Effects) -> dict[str, object]:
    return {each.member_id: each.response for each in effects.joins}


def syncs_of(effects: Effects) -> dict[str, object]:
    return {each.member_id: each.response for each in effects.syncs}


def stable_group(*clients: str, now_ms: int = 0, **config: int) -> tuple[ClassicGroup, list[str]]:
    """A Stable generation-1 group; the first client is the leader; each gets b"<id>"."""
    group = make_group(**config)
    ids = [group.join(request(client_id=client), now_ms).member_id for client in clients]
    group.tick(now_ms)
    assert group.state is GroupState.COMPLETING_REBALANCE
    assignments = tuple((member_id, member_id.encode()) for member_id in ids)
    for member_id in ids[1:]:
        assert group.sync(SyncRequest(member_id, 1), now_ms).response is None
    outcome = group.sync(SyncRequest(ids[0], 1, assignments), now_ms)
    assert outcome.response is not None and outcome.response.error_code is ErrorCode.NONE
    assert group.state is GroupState.STABLE
    return group, ids


# ---- joins ----------------------------------------------------------------------------------


def test_one_member_joins_after_member_id_required() -> None:
    group = make_group()
    first = group.join(request(require_known=True), 0)
    assert first.response is not None
    assert first.response.error_code is ErrorCode.MEMBER_ID_REQUIRED
    assert first.response.member_id == first.member_id == "client-1"
    assert group.pending_members == {"client-1"}
    assert group.state is GroupState.EMPTY

    second = group.join(request("client-1", require_known=True), 0)
    assert second.response is None  # parked: even a 0 ms initial delay fires from tick
    assert group.state is GroupState.PREPARING_REBALANCE and group.next_deadline() == 0
    response = joins_of(group.tick(0))["client-1"]
    assert response.error_code is ErrorCode.NONE
    assert response.generation_id == 1 and response.leader == "client-1"
    assert response.protocol_type == "consumer" and response.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in response.members] == [("client-1", RANGE.metadata)]
    assert group.pending_members == frozenset()


def test_three_members_share_a_generation_and_only_the_leader_gets_members() -> None:
    group = make_group()
    ids = [group.join(request(client_id=c), 0).member_id for c in ("a", "b", "c")]
    responses = joins_of(group.tick(0))
    assert set(responses) == set(ids)
    assert {r.generation_id for r in responses.values()} == {1}
    assert {r.leader for r in responses.values()} == {ids[0]}
    assert [m.member_id for m in responses[ids[0]].members] == ids
    assert responses[ids[1]].members == () and responses[ids[2]].members == ()


def test_sync_delivers_the_leaders_assignments() -> None:
    group = make_group()
    ids = [group.join(request(client_id=c), 0).member_id for c in ("a", "b", "c")]
    group.tick(0)
    assert group.sync(SyncRequest(ids[1], 1), 5).response is None
    leader = group.sync(SyncRequest(ids[0], 1, ((ids[0], b"A"), (ids[1], b"B"))), 6)
    assert leader.response is not None and leader.response.assignment == b"A"
    assert leader.response.protocol_name == "range"
    assert syncs_of(leader.effects)[ids[1]].assignment == b"B"
    assert group.state is GroupState.STABLE
    late = group.sync(SyncRequest(ids[2], 1), 7).response
    assert late is not None and late.error_code is ErrorCode.NONE and late.assignment == b""


def test_unknown_member_id_rejoin_of_empty_group_is_refused() -> None:
    group = make_group()
    response = group.join(request("nobody"), 0).response
    assert response is not None and response.error_code is ErrorCode.UNKNOWN_MEMBER_ID


def test_session_timeout_outside_the_configured_range() -> None:
    group = make_group(group_min_session_timeout_ms=6_000)
    response = group.join(request(session_ms=5_999), 0).response
    assert response is not None and response.error_code is ErrorCode.INVALID_SESSION_TIMEOUT


def test_pending_member_holds_the_join_phase_until_it_expires() -> None:
    group, (a, b) = stable_group("a", "b")
    group.join(request(a), 100)  # leader rejoin: rebalance
    pending = group.join(request(client_id="c", require_known=True), 100)
    assert pending.response is not None and pending.response.error_code is ErrorCode.MEMBER_ID_REQUIRED
    group.join(request(b), 200)
    assert group.state is GroupState.PREPARING_REBALANCE  # waits for the pending member
    assert group.next_deadline() == 100 + SESSION_MS
    responses = joins_of(group.tick(100 + SESSION_MS))
    assert set(responses) == {a, b} and group.pending_members == frozenset()
    assert group.generation_id == 2


# ---- initial rebalance delay ----------------------------------------------------------------


def test_initial_delay_waits_then_completes() -> None:
    group = make_group(group_initial_rebalance_delay_ms=3_000)
    a = group.join(request(client_id="a", rebalance_ms=10_000), 0).member_id
    assert group.next_deadline() == 3_000
    assert group.tick(2_999) == Effects()
    assert set(joins_of(group.tick(3_000))) == {a}


def test_initial_delay_is_extended_by_new_members_up_to_the_rebalance_timeout() -> None:
    group = make_group(group_initial_rebalance_delay_ms=3_000)
    ids = [group.join(request(client_id="a", rebalance_ms=10_000), 0).member_id]
    for now_ms, deadline in ((1_000, 6_000), (4_000, 9_000), (7_000, 10_000), (9_500, None)):
        ids.append(group.join(request(client_id="x", rebalance_ms=10_000), now_ms).member_id)
        effects = group.tick(group.next_deadline() or 0)
        if deadline is not None:
            assert effects == Effects() and group.next_deadline() == deadline
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert group.generation_id == 1 and len(group.members) == 5


def test_any_second_member_in_generation_0_extends_the_delay_once() -> None:
    group = make_group(group_initial_rebalance_delay_ms=3_000)
    group.join(request(client_id="a"), 0)
    group.join(request(client_id="b"), 0)  # newcomer while preparing: one more delay
    assert group.tick(3_000) == Effects() and group.next_deadline() == 6_000
    assert len(group.tick(6_000).joins) == 2 and group.generation_id == 1


# ---- rebalances, heartbeats, expiry ---------------------------------------------------------


def test_new_member_triggers_a_rebalance_signalled_by_heartbeats() -> None:
    group, (a, b) = stable_group("a", "b")
    c = group.join(request(client_id="c"), 1_000).member_id
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.heartbeat(a, 1, 1_100) is ErrorCode.REBALANCE_IN_PROGRESS
    assert group.join(request(a), 1_200).response is None
    outcome = group.join(request(b), 1_300)
    assert outcome.response is not None and outcome.response.generation_id == 2
    assert set(joins_of(outcome.effects)) == {a, c}
    assert group.state is GroupState.COMPLETING_REBALANCE


def test_heartbeats_keep_a_member_alive_and_silence_expires_it() -> None:
    group, (a, b) = stable_group("a", "b")
    for now_ms in (5_000, 9_999):
        assert group.heartbeat(a, 1, now_ms) is ErrorCode.NONE
        assert group.tick(now_ms) == Effects()
    group.tick(10_000)
    assert set(group.members) == {a}  # b expired at 10 s
    assert group.heartbeat(a, 1, 15_000) is ErrorCode.REBALANCE_IN_PROGRESS
    group.tick(24_999)
    assert set(group.members) == {a}
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.heartbeat(b, 1, 40_000) is ErrorCode.UNKNOWN_MEMBER_ID
    outcome = group.join(request(a), 40_000)
    assert outcome.response is not None and outcome.response.generation_id == 2


def test_rebalance_timeout_removes_members_that_did_not_rejoin() -> None:
    group, (a, b) = stable_group("a", "b")
    group.join(request(client_id="c", rebalance_ms=5_000), 1_000)  # rebalance timeout: 30 s
    group.join(request(a), 1_000)
    group.heartbeat(b, 1, 9_000)  # alive, but never rejoins
    group.heartbeat(b, 1, 18_000)
    group.heartbeat(b, 1, 27_000)
    assert group.tick(30_999) == Effects()
    responses = joins_of(group.tick(31_000))
    assert b not in group.members and set(responses) == set(group.members)
    assert responses[a].leader == a and group.generation_id == 2


def test_follower_that_never_syncs_is_removed_at_the_sync_deadline() -> None:
    group = make_group()
    a = group.join(request(client_id="a"), 0).member_id
    b = group.join(request(client_id="b"), 0).member_id
    group.tick(0)
    group.sync(SyncRequest(a, 1, ((a, b"A"), (b, b"B"))), 10)
    for now_ms in (9_000, 18_000, 27_000):
        group.heartbeat(a, 1, now_ms)
        group.heartbeat(b, 1, now_ms)
        group.tick(now_ms)
    assert set(group.members) == {a, b}
    group.tick(REBALANCE_MS)
    assert b not in group.members and group.state is GroupState.PREPARING_REBALANCE


def test_leader_rejoining_a_stable_group_forces_a_rebalance() -> None:
    group, (a, b) = stable_group("a", "b")
    follower = group.join(request(b), 100).response
    assert follower is not None and follower.generation_id == 1 and follower.members == ()
    assert group.state is GroupState.STABLE
    assert group.join(request(a), 200).response is None
    assert group.state is GroupState.PREPARING_REBALANCE


def test_join_during_completing_rebalance_cancels_parked_syncs() -> None:
    group = make_group()
    a = group.join(request(client_id="a"), 0).member_id
    b = group.join(request(client_id="b"), 0).member_id
    group.tick(0)
    group.sync(SyncRequest(b, 1), 1)
    outcome = group.join(request(client_id="c"), 2)
    assert syncs_of(outcome.effects)[b].error_code is ErrorCode.REBALANCE_IN_PROGRESS
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.sync(SyncRequest(a, 1), 3).response.error_code is ErrorCode.REBALANCE_IN_PROGRESS


def test_stale_generation_is_fenced() -> None:
    group, (a, b) = stable_group("a", "b")
    group.join(request(a), 10)
    group.join(request(b), 10)  # generation 2
    assert group.heartbeat(b, 1, 20) is ErrorCode.ILLEGAL_GENERATION
    response = group.sync(SyncRequest(b, 1), 20).response
    assert response is not None and response.error_code is ErrorCode.ILLEGAL_GENERATION
    response = group.sync(SyncRequest(b, 2, protocol_name="roundrobin"), 20).response
    assert response is not None and response.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


# ---- leave ----------------------------------------------------------------------------------


def test_single_leave_triggers_a_rebalance() -> None:
    group, (a, b) = stable_group("a", "b")
    outcome = group.leave([MemberIdentity(b)], 100)
    assert outcome.error_code is ErrorCode.NONE
    assert [r.error_code for r in outcome.members] == [ErrorCode.NONE]
    assert group.state is GroupState.PREPARING_REBALANCE and set(group.members) == {a}


def test_batch_leave_by_member_id_and_instance_id() -> None:
    group = make_group()
    a = group.join(request(client_id="a"), 0).member_id
    s = group.join(request(client_id="s", instance="i-1"), 0).member_id
    group.tick(0)
    outcome = group.leave(
        [MemberIdentity(a), MemberIdentity(NO_MEMBER_ID, "i-1"), MemberIdentity("ghost"),
         MemberIdentity(NO_MEMBER_ID, "i-2")],
        10,
    )
    codes = [r.error_code for r in outcome.members]
    assert codes == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID,
                     ErrorCode.UNKNOWN_MEMBER_ID]
    assert s not in group.members and group.state is GroupState.EMPTY
    assert group.generation_id == 2 and group.leader_id is None


def test_leaving_with_a_parked_join_answers_it() -> None:
    group, (a, _) = stable_group("a", "b")
    group.join(request(a), 10)
    outcome = group.leave([MemberIdentity(a)], 20)
    assert joins_of(outcome.effects)[a].error_code is ErrorCode.UNKNOWN_MEMBER_ID


# ---- static membership ----------------------------------------------------------------------


def test_static_member_replacement_fences_the_old_member_id_without_rebalance() -> None:
    group = make_group()
    old = group.join(request(client_id="s", instance="i-1"), 0).member_id
    d = group.join(request(client_id="d"), 0).member_id
    group.tick(0)
    group.sync(SyncRequest(old, 1, ((old, b"S"), (d, b"D"))), 0)
    group.sync(SyncRequest(d, 1), 0)

    outcome = group.join(request(client_id="s", instance="i-1"), 100)
    new = outcome.member_id
    assert new != old and outcome.response is not None
    assert outcome.response.error_code is ErrorCode.NONE and outcome.response.generation_id == 1
    assert outcome.response.skip_assignment  # it is the leader; v9+ skips assigning
    assert group.state is GroupState.STABLE and group.leader_id == new
    assert group.heartbeat(old, 1, 200, group_instance_id="i-1") is ErrorCode.FENCED_INSTANCE_ID
    assert group.heartbeat(old, 1, 200) is ErrorCode.UNKNOWN_MEMBER_ID
    assert group.heartbeat(new, 1, 200, group_instance_id="i-1") is ErrorCode.NONE
    response = group.sync(SyncRequest(new, 1, group_instance_id="i-1"), 300).response
    assert response is not None and response.assignment == b"S"


def test_static_replacement_before_v9_reports_the_old_leader() -> None:
    group = make_group()
    old = group.join(request(client_id="s", instance="i-1"), 0).member_id
    group.tick(0)
    group.sync(SyncRequest(old, 1, ((old, b"S"),)), 0)
    response = group.join(request(client_id="s", instance="i-1", skip_assignment=False), 5).response
    assert response is not None and response.leader == old and response.members == ()


def test_static_replacement_with_other_protocols_rebalances() -> None:
    group = make_group()
    s = group.join(request(client_id="s", instance="i-1"), 0).member_id
    group.tick(0)
    group.sync(SyncRequest(s, 1, ((s, b"S"),)), 0)
    changed = (ROUND_ROBIN, RANGE)  # still supports range, but now votes roundrobin
    outcome = group.join(request(client_id="s", instance="i-1", protocols=changed), 5)
    assert outcome.response is not None and outcome.response.protocol_name == "roundrobin"
    assert outcome.response.generation_id == 2


def test_static_replacement_fences_the_old_parked_join() -> None:
    group, _ = stable_group("a", "b")
    s_old = group.join(request(client_id="s", instance="i-1"), 10).member_id
    outcome = group.join(request(client_id="s", instance="i-1"), 20)
    assert joins_of(outcome.effects)[s_old].error_code is ErrorCode.FENCED_INSTANCE_ID
    assert outcome.response is None and group.static_members == {"i-1": outcome.member_id}


def test_static_member_that_does_not_rejoin_stays_in_the_group() -> None:
    group = make_group()
    d = group.join(request(client_id="d"), 0).member_id
    s = group.join(request(client_id="s", instance="i-1"), 0).member_id
    group.tick(0)
    group.sync(SyncRequest(s, 1, group_instance_id="i-1"), 0)
    group.sync(SyncRequest(d, 1, ((d, b"D"), (s, b"S"))), 0)
    group.join(request(d), 10)  # the leader rejoins: rebalance; s stays silent
    for now_ms in (9_000, 18_000, 27_000):
        assert group.heartbeat(s, 1, now_ms, group_instance_id="i-1") is (
            ErrorCode.REBALANCE_IN_PROGRESS
        )
    assert set(joins_of(group.tick(10 + REBALANCE_MS))) == {d}
    assert set(group.members) == {s, d} and group.generation_id == 2


# ---- offset commits -------------------------------------------------------------------------


def test_validate_offset_commit() -> None:
    group = make_group()
    assert group.validate_offset_commit(NO_MEMBER_ID, -1) is None  # simple consumer, Empty
    a = group.join(request(client_id="a"), 0).member_id
    assert group.validate_offset_commit(NO_MEMBER_ID, -1) is ErrorCode.UNKNOWN_MEMBER_ID
    group.tick(0)
    assert group.validate_offset_commit(a, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    group.sync(SyncRequest(a, 1, ((a, b""),)), 0)
    assert group.validate_offset_commit(a, 1, now_ms=9_000) is None
    assert group.members[a].session_deadline_ms == 9_000 + SESSION_MS
    assert group.validate_offset_commit(a, 0) is ErrorCode.ILLEGAL_GENERATION
    assert group.validate_offset_commit("ghost", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert group.validate_offset_commit(a, 1, "i-9") is ErrorCode.UNKNOWN_MEMBER_ID
    group.join(request(client_id="b"), 10)  # PreparingRebalance: commits still accepted
    assert group.validate_offset_commit(a, 1) is None


def test_fenced_static_member_cannot_commit() -> None:
    group = make_group()
    old = group.join(request(client_id="s", instance="i-1"), 0).member_id
    group.tick(0)
    group.sync(SyncRequest(old, 1, ((old, b""),)), 0)
    group.join(request(client_id="s", instance="i-1"), 1)
    assert group.validate_offset_commit(old, 1, "i-1") is ErrorCode.FENCED_INSTANCE_ID


# ---- group.max.size, protocols --------------------------------------------------------------


def test_group_max_size() -> None:
    group, (a, b) = stable_group("a", "b", group_max_size=2)
    response = group.join(request(client_id="c"), 10).response
    assert response is not None and response.error_code is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert response.member_id == NO_MEMBER_ID and set(group.members) == {a, b}
    assert group.state is GroupState.STABLE


def test_group_max_size_counts_rejoined_members_while_preparing() -> None:
    group, (a, b) = stable_group("a", "b", group_max_size=2)
    group.join(request(a), 10)
    late = group.join(request(client_id="c"), 11).response
    assert late is None  # only a has rejoined: room for one more
    refused = group.join(request(b), 12).response
    assert refused is not None and refused.error_code is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert b not in group.members and group.generation_id == 2


def test_protocol_selection_votes_among_protocols_every_member_supports() -> None:
    group = make_group()
    sticky = Protocol("sticky", b"s")
    group.join(request(client_id="a", protocols=(sticky, RANGE, ROUND_ROBIN)), 0)
    group.join(request(client_id="b", protocols=(ROUND_ROBIN, RANGE)), 0)
    group.join(request(client_id="c", protocols=(RANGE, ROUND_ROBIN)), 0)
    responses = joins_of(group.tick(0))
    assert {r.protocol_name for r in responses.values()} == {"range"}
    leader = responses[group.leader_id or ""]
    assert [m.metadata for m in leader.members] == [RANGE.metadata] * 3


@pytest.mark.parametrize(
    ("protocol_type", "protocols"),
    [("connect", (RANGE,)), ("consumer", (Protocol("sticky", b""),)), ("consumer", ())],
)
def test_inconsistent_group_protocol(protocol_type: str, protocols: tuple[Protocol, ...]) -> None:
    group = make_group()
    group.join(request(client_id="a", protocols=(RANGE, ROUND_ROBIN)), 0)
    response = group.join(request(client_id="b", protocol_type=protocol_type, protocols=protocols), 0)
    assert response.response is not None
    assert response.response.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_empty_protocols_rejected_in_an_empty_group() -> None:
    response = make_group().join(request(protocols=()), 0).response
    assert response is not None and response.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_delete_and_unload() -> None:
    group, (a, _) = stable_group("a", "b")
    assert group.delete() is ErrorCode.NON_EMPTY_GROUP
    group.join(request(a), 5)
    effects = group.unload()
    assert joins_of(effects)[a].error_code is ErrorCode.NOT_COORDINATOR
    assert group.state is GroupState.DEAD
    assert group.heartbeat(a, 1, 6) is ErrorCode.COORDINATOR_NOT_AVAILABLE
    empty = make_group()
    assert empty.delete() is ErrorCode.NONE and empty.delete() is ErrorCode.GROUP_ID_NOT_FOUND


# ---- a random walk with invariants ----------------------------------------------------------


def member_error(group: ClassicGroup, member_id: str, instance: str | None) -> ErrorCode | None:
    """Kafka's ``ClassicGroup.validateMember``: a static member is known by its instance id and
    fenced when that id now belongs to another member; a dynamic one by its member id."""
    if instance is not None:
        current = group.static_members.get(instance)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None if current == member_id else ErrorCode.FENCED_INSTANCE_ID
    return None if member_id in group.members else ErrorCode.UNKNOWN_MEMBER_ID


def expected_error(group: ClassicGroup, member_id: str, generation: int,
                   instance: str | None) -> ErrorCode | None:
    """Kafka's checks of a Heartbeat (``validateClassicGroupHeartbeat``) and a SyncGroup
    (``validateSyncGroup``), then the states that answer an error; the group is never Dead
    here. None: a Heartbeat is answered NONE; a SyncGroup is served (Stable), parked
    (CompletingRebalance) or, from the leader, completes the rebalance."""
    error = member_error(group, member_id, instance)
    if error is not None:
        return error
    if generation != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    if group.state is GroupState.EMPTY:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.state is GroupState.PREPARING_REBALANCE:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return None


class GroupMachine(RuleBasedStateMachine):
    """Random clients against one group; checks Kafka's invariants, that every parked request
    is answered exactly once (parked == members awaiting, at every step), and each Heartbeat
    and SyncGroup answer against Kafka's rules."""

    def __init__(self) -> None:
        super().__init__()
        self.group = make_group(group_initial_rebalance_delay_ms=300)
        self.now_ms = 0
        self.ids: list[str] = []
        self.instances: dict[str, str] = {}  # member id -> instance id
        self.parked_joins: set[str] = set()
        self.parked_syncs: set[str] = set()
        self.last_generation = 0
        # What each member was given by the leader's last SyncGroup; a static member that
        # replaced another while Stable inherits its assignment (no rebalance, as Kafka).
        self.delivered: dict[str, bytes] = {}

    def apply(self, effects: Effects) -> None:
        for join in effects.joins:
            assert join.member_id in self.parked_joins
            self.parked_joins.discard(join.member_id)
        for sync in effects.syncs:
            assert sync.member_id in self.parked_syncs
            self.parked_syncs.discard(sync.member_id)
            if sync.response.error_code is ErrorCode.NONE:
                assert sync.response == self.assigned(sync.member_id)

    def assigned(self, member_id: str) -> SyncResponse:
        """A successful SyncGroup answer: the group's protocol and the member's assignment."""
        return SyncResponse(ErrorCode.NONE, "consumer", self.group.protocol_name,
                            self.delivered[member_id])

    def some_member_id(self, data: st.DataObject) -> str:
        """The leader, a current member or any id seen (left, expired, fenced), a third each:
        drawn from every id seen, the group would seldom complete a rebalance."""
        pick = data.draw(st.sampled_from(["leader", "member", "any"]))
        if pick == "leader" and self.group.leader_id is not None:
            return self.group.leader_id
        current = sorted(self.group.members)
        return data.draw(st.sampled_from(current if current and pick == "member" else self.ids))

    def joined(self, outcome: JoinOutcome) -> None:
        self.apply(outcome.effects)
        if outcome.member_id and outcome.member_id not in self.ids:
            self.ids.append(outcome.member_id)
        if outcome.response is None:
            self.parked_joins.add(outcome.member_id)

    @rule(
        client=st.sampled_from(["a", "b", "c"]),
        static=st.sampled_from([None, "i-1", "i-2"]),
        protocols=st.sampled_from([(RANGE,), (ROUND_ROBIN, RANGE), (ROUND_ROBIN,)]),
        require_known=st.booleans(),
        rebalance_ms=st.sampled_from([500, 2_000]),
    )
    def join_new(self, client: str, static: str | None, protocols: tuple[Protocol, ...],
                 require_known: bool, rebalance_ms: int) -> None:
        join = request(client_id=client, instance=static, protocols=protocols,
                       require_known=require_known, session_ms=1_000, rebalance_ms=rebalance_ms)
        replaced = self.group.static_members.get(static) if static is not None else None
        outcome = self.group.join(join, self.now_ms)
        if static is not None:
            self.instances[outcome.member_id] = static
            if replaced is not None and replaced in self.delivered:
                self.delivered[outcome.member_id] = self.delivered[replaced]
        self.joined(outcome)

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), protocols=st.sampled_from([(RANGE,), (ROUND_ROBIN, RANGE)]))
    def rejoin(self, data: st.DataObject, protocols: tuple[Protocol, ...]) -> None:
        member_id = self.some_member_id(data)
        join = request(member_id, instance=self.instances.get(member_id), protocols=protocols,
                       session_ms=1_000, rebalance_ms=1_000)
        self.joined(self.group.join(join, self.now_ms))

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), stale=st.booleans())
    def sync(self, data: st.DataObject, stale: bool) -> None:
        self.sync_as(self.some_member_id(data), self.group.generation_id - stale)

    @precondition(lambda self: self.group.state is GroupState.PREPARING_REBALANCE)
    @rule()
    def everyone_rejoins(self) -> None:
        """What clients do when told REBALANCE_IN_PROGRESS or MEMBER_ID_REQUIRED: every member
        joins again, and every pending member joins with the id it was given."""
        for member_id in sorted(self.group.pending_members):
            self.joined(self.group.join(request(member_id, protocols=(ROUND_ROBIN, RANGE),
                                                session_ms=1_000, rebalance_ms=1_000), self.now_ms))
        for member in list(self.group.members.values()):
            if member.member_id in self.group.members:  # not removed by an earlier rejoin
                self.joined(self.group.join(request(
                    member.member_id, instance=member.group_instance_id, protocols=member.protocols,
                    session_ms=1_000, rebalance_ms=1_000), self.now_ms))

    @precondition(lambda self: self.group.state is GroupState.COMPLETING_REBALANCE)
    @rule()
    def everyone_syncs(self) -> None:
        """What clients do after a join phase: followers sync, then the leader."""
        leader = self.group.leader_id
        for member_id in [*sorted(set(self.group.members) - {leader}), leader]:
            assert member_id is not None
            self.sync_as(member_id, self.group.generation_id)

    @precondition(lambda self: self.group.state is GroupState.STABLE)
    @rule(data=st.data(), stale=st.booleans())
    def sync_again_when_stable(self, data: st.DataObject, stale: bool) -> None:
        """A member that lost its SyncGroup answer asks again. A rule of its own: Stable
        seldom lasts long enough for ``sync`` to draw a member of it."""
        member_id = data.draw(st.sampled_from(sorted(self.group.members)))
        self.sync_as(member_id, self.group.generation_id - stale)

    def sync_as(self, member_id: str, generation: int) -> None:
        group = self.group
        instance = self.instances.get(member_id)
        state, leader = group.state, group.leader_id
        assignments = tuple((m, m.encode()) for m in group.members)
        expected = expected_error(group, member_id, generation, instance)
        outcome = group.sync(SyncRequest(member_id, generation, assignments, instance), self.now_ms)
        if expected is not None:
            assert (outcome.response, outcome.effects) == (SyncResponse(expected), Effects())
        elif state is GroupState.STABLE:
            assert (outcome.response, outcome.effects) == (self.assigned(member_id), Effects())
        elif member_id != leader:  # CompletingRebalance: parked until the leader's SyncGroup
            assert (outcome.response, outcome.effects) == (None, Effects())
            self.parked_syncs.add(member_id)
        else:  # the leader's assignments complete the rebalance and every parked SyncGroup
            self.delivered = dict(assignments)
            assert {sync.member_id for sync in outcome.effects.syncs} == self.parked_syncs
            assert outcome.effects.store_group and outcome.response == self.assigned(member_id)
            self.apply(outcome.effects)
        expected_state = GroupState.STABLE if expected is None and member_id == leader else state
        assert group.state is expected_state

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), generation_delta=st.sampled_from([0, 0, -1, 1]),
          instance_choice=st.sampled_from(["own", "own", "none", "other"]))
    def heartbeat(self, data: st.DataObject, generation_delta: int, instance_choice: str) -> None:
        group = self.group
        member_id = self.some_member_id(data)
        own = self.instances.get(member_id)
        instance = {"own": own, "none": None, "other": "i-2" if own == "i-1" else "i-1"}[instance_choice]
        generation = group.generation_id + generation_delta
        error = expected_error(group, member_id, generation, instance)
        expected = ErrorCode.NONE if error is None else error
        deadlines = {m.member_id: m.session_deadline_ms for m in group.members.values()}
        before = (group.state, group.generation_id, group.leader_id)
        assert group.heartbeat(member_id, generation, self.now_ms, group_instance_id=instance) is expected
        if expected in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):  # the session restarts
            deadlines[member_id] = self.now_ms + group.members[member_id].session_timeout_ms
        assert {m.member_id: m.session_deadline_ms for m in group.members.values()} == deadlines
        assert (group.state, group.generation_id, group.leader_id) == before

    @precondition(lambda self: self.ids)
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.sampled_from(self.ids), max_size=3, unique=True))
        outcome = self.group.leave([MemberIdentity(m, self.instances.get(m)) for m in chosen],
                                   self.now_ms)
        self.apply(outcome.effects)
        self.parked_joins -= set(chosen)  # a leaving member's own parked join goes with it
        self.parked_syncs -= set(chosen)

    @rule(advance_ms=st.sampled_from([0, 1, 100, 400, 1_000, 2_500]))
    def tick(self, advance_ms: int) -> None:
        self.now_ms += advance_ms
        self.apply(self.group.tick(self.now_ms))
        for member in self.group.members.values():
            assert not member.session_expired(self.now_ms), member
        assert all(d > self.now_ms for d in self.group._pending_members.values())
        deadline = self.group.next_deadline()
        assert deadline is None or deadline > self.now_ms

    @invariant()
    def generation_never_decreases(self) -> None:
        assert self.group.generation_id >= self.last_generation
        self.last_generation = self.group.generation_id

    @invariant()
    def stable_group_is_assigned_and_led_by_a_member(self) -> None:
        group = self.group
        if group.state is GroupState.STABLE:
            assert all(m.assignment is not None for m in group.members.values())
            assert group.leader_id in group.members
        if group.leader_id is not None:
            assert group.leader_id in group.members
        assert (group.leader_id is None) == (not group.members)

    @invariant()
    def empty_group_is_empty(self) -> None:
        group = self.group
        if not group.members and not group.pending_members:
            assert group.state is GroupState.EMPTY or (
                group.state is GroupState.PREPARING_REBALANCE and group.in_initial_delay
            )

    @invariant()
    def parked_requests_are_exactly_the_awaiting_members(self) -> None:
        members = self.group.members.values()
        assert self.parked_joins == {m.member_id for m in members if m.awaiting_join}
        assert self.parked_syncs == {m.member_id for m in members if m.awaiting_sync}
        assert self.group._awaiting_join_count == len(self.parked_joins)

    @invariant()
    def static_members_map_to_members(self) -> None:
        for instance, member_id in self.group.static_members.items():
            assert self.group.members[member_id].group_instance_id == instance


GroupMachine.TestCase.settings = settings(max_examples=400, stateful_step_count=40, deadline=None)
TestGroupMachine = GroupMachine.TestCase
