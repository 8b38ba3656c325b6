"""The member's side of the classic group protocol, sans-IO: ``MemberState`` stepped by the
error codes of JoinGroup / SyncGroup / Heartbeat / OffsetCommit responses."""

from __future__ import annotations

import copy

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.errors import ErrorCode, FencedInstanceIdError, InconsistentGroupProtocolError
from samsa._membership import Action, MemberState, Phase

E = ErrorCode


def joined(state: MemberState, member_id: str = "m-1", generation: int = 1) -> None:
    state.join_sent()
    assert state.on_join(E.NONE, member_id=member_id, generation_id=generation,
                         protocol_name="range", leader_id=member_id) is Action.SYNC
    assert state.on_sync(E.NONE) is Action.DONE


def test_member_id_required_then_join_then_sync_is_stable() -> None:
    state = MemberState("g")
    assert state.rejoin_needed and state.phase is Phase.UNJOINED
    state.join_sent()
    assert state.on_join(E.MEMBER_ID_REQUIRED, member_id="m-1") is Action.RETRY
    assert state.member_id == "m-1" and not state.has_generation
    state.join_sent()
    assert state.on_join(E.NONE, member_id="m-1", generation_id=3, protocol_name="range",
                         leader_id="m-2") is Action.SYNC
    assert state.phase is Phase.SYNCING and not state.is_leader
    assert state.on_sync(E.NONE) is Action.DONE
    assert state.phase is Phase.STABLE and not state.rejoin_needed
    assert (state.generation_id, state.protocol_name) == (3, "range")


def test_heartbeat_rebalance_in_progress_keeps_the_generation_for_commits() -> None:
    state = MemberState("g")
    joined(state)
    assert state.on_heartbeat(E.REBALANCE_IN_PROGRESS) is Action.REJOIN
    assert state.rejoin_needed and state.generation_id == 1 and state.member_id == "m-1"


@pytest.mark.parametrize(("code", "keeps_member_id"), [(E.UNKNOWN_MEMBER_ID, False),
                                                       (E.ILLEGAL_GENERATION, True)])
def test_heartbeat_membership_errors_reset_the_generation(code: int, keeps_member_id: bool) -> None:
    state = MemberState("g")
    joined(state)
    assert state.on_heartbeat(code) is Action.REJOIN
    assert not state.has_generation and state.rejoin_needed
    assert (state.member_id == "m-1") is keeps_member_id


def test_a_heartbeat_answered_during_a_rejoin_changes_nothing() -> None:
    state = MemberState("g")
    joined(state)
    state.request_rejoin("test")
    state.join_sent()
    before = copy.copy(state.__dict__)
    assert state.on_heartbeat(E.ILLEGAL_GENERATION) is Action.DONE
    assert state.__dict__ == before


def test_fenced_static_member_is_fatal_and_stays_so() -> None:
    state = MemberState("g", group_instance_id="instance-1")
    joined(state)
    assert state.on_heartbeat(E.FENCED_INSTANCE_ID) is Action.FATAL
    assert isinstance(state.fatal, FencedInstanceIdError)
    state.join_sent()
    assert state.phase is Phase.FATAL
    assert state.on_join(E.NONE, member_id="m-9", generation_id=9) is Action.FATAL
    assert state.member_id == "m-1"


def test_sync_errors() -> None:
    state = MemberState("g")
    state.join_sent()
    state.on_join(E.NONE, member_id="m-1", generation_id=2, protocol_name="range", leader_id="x")
    assert state.on_sync(E.REBALANCE_IN_PROGRESS) is Action.REJOIN
    assert state.generation_id == 2  # still usable for a commit until the rejoin ends
    state.join_sent()
    state.on_join(E.NONE, member_id="m-1", generation_id=3, protocol_name="range", leader_id="x")
    assert state.on_sync(E.NOT_COORDINATOR) is Action.FIND_COORDINATOR
    state.join_sent()
    state.on_join(E.NONE, member_id="m-1", generation_id=4, protocol_name="range", leader_id="x")
    assert state.on_sync(E.UNKNOWN_MEMBER_ID) is Action.REJOIN
    assert state.member_id == "" and not state.has_generation


def test_join_errors() -> None:
    state = MemberState("g")
    state.join_sent()
    assert state.on_join(E.COORDINATOR_LOAD_IN_PROGRESS) is Action.BACKOFF
    state.join_sent()
    assert state.on_join(E.NOT_COORDINATOR) is Action.FIND_COORDINATOR
    state.join_sent()
    assert state.on_join(E.INCONSISTENT_GROUP_PROTOCOL) is Action.FATAL
    assert isinstance(state.fatal, InconsistentGroupProtocolError)
    assert "'g'" in str(state.fatal)


def test_commit_errors() -> None:
    state = MemberState("g")
    joined(state)
    assert state.on_commit_error(E.COORDINATOR_LOAD_IN_PROGRESS) is Action.BACKOFF
    assert state.on_commit_error(E.NOT_COORDINATOR) is Action.FIND_COORDINATOR
    assert state.phase is Phase.STABLE
    assert state.on_commit_error(E.REBALANCE_IN_PROGRESS) is Action.REJOIN
    assert state.rejoin_needed and state.has_generation
    assert state.on_commit_error(E.ILLEGAL_GENERATION) is Action.REJOIN
    assert not state.has_generation
    assert state.on_commit_error(E.OFFSET_METADATA_TOO_LARGE) is Action.FATAL
    assert state.fatal is None  # a bad commit fails the commit, not the member


JOIN_CODES = [E.NONE, E.MEMBER_ID_REQUIRED, E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION,
              E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.REBALANCE_IN_PROGRESS,
              E.COORDINATOR_LOAD_IN_PROGRESS, E.FENCED_INSTANCE_ID, E.GROUP_MAX_SIZE_REACHED]
SYNC_CODES = [E.NONE, E.REBALANCE_IN_PROGRESS, E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION,
              E.NOT_COORDINATOR, E.FENCED_INSTANCE_ID]
HEARTBEAT_CODES = [E.NONE, E.REBALANCE_IN_PROGRESS, E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION,
                   E.NOT_COORDINATOR, E.FENCED_INSTANCE_ID, E.UNKNOWN_SERVER_ERROR]
COMMIT_CODES = [E.REBALANCE_IN_PROGRESS, E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION,
                E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.FENCED_INSTANCE_ID,
                E.OFFSET_METADATA_TOO_LARGE]


class MemberMachine(RuleBasedStateMachine):
    """Responses in any order the shell can see them; the model checks what each one does."""

    def __init__(self) -> None:
        super().__init__()
        self.state = MemberState("g", group_instance_id=None)
        self.frozen: dict[str, object] | None = None
        self.generations = 0

    @precondition(lambda self: self.state.phase in (Phase.UNJOINED, Phase.STABLE))
    @rule()
    def send_join(self) -> None:
        self.state.join_sent()

    @precondition(lambda self: self.state.phase is Phase.JOINING)
    @rule(code=st.sampled_from(JOIN_CODES), member=st.sampled_from(["m-1", "m-2"]))
    def join_answered(self, code: int, member: str) -> None:
        before_member = self.state.member_id
        self.generations += code == E.NONE
        action = self.state.on_join(code, member_id=member, generation_id=self.generations,
                                    protocol_name="range", leader_id=member)
        if code == E.NONE:
            assert action is Action.SYNC and self.state.phase is Phase.SYNCING
        elif code == E.MEMBER_ID_REQUIRED:
            assert action is Action.RETRY and self.state.member_id == member
        elif code == E.UNKNOWN_MEMBER_ID:
            assert self.state.member_id == ""
        else:
            assert self.state.member_id == before_member

    @precondition(lambda self: self.state.phase is Phase.SYNCING)
    @rule(code=st.sampled_from(SYNC_CODES))
    def sync_answered(self, code: int) -> None:
        action = self.state.on_sync(code)
        assert (self.state.phase is Phase.STABLE) is (code == E.NONE)
        assert (action is Action.FATAL) is (code == E.FENCED_INSTANCE_ID)

    @rule(code=st.sampled_from(HEARTBEAT_CODES))
    def heartbeat_answered(self, code: int) -> None:
        was_stable = self.state.phase is Phase.STABLE
        self.state.on_heartbeat(code)
        if not was_stable and code != E.FENCED_INSTANCE_ID:
            assert self.state.phase is not Phase.STABLE
        if was_stable and code in (E.NONE, E.NOT_COORDINATOR, E.UNKNOWN_SERVER_ERROR):
            assert self.state.phase is Phase.STABLE

    @rule(code=st.sampled_from(COMMIT_CODES))
    def commit_failed(self, code: int) -> None:
        self.state.on_commit_error(code)

    @rule(forget=st.booleans())
    def reset(self, forget: bool) -> None:
        self.state.reset(forget_member_id=forget, reason="test")

    @invariant()
    def consistent(self) -> None:
        state = self.state
        assert state.rejoin_needed is (state.phase is not Phase.STABLE)
        assert (state.fatal is not None) is (state.phase is Phase.FATAL)
        if state.has_generation:
            assert state.member_id
        if state.phase is Phase.STABLE:
            assert state.has_generation

    @invariant()
    def fatal_is_final(self) -> None:
        if self.state.phase is Phase.FATAL:
            snapshot = dict(self.state.__dict__)
            if self.frozen is not None:
                assert snapshot == self.frozen
            self.frozen = snapshot


TestMemberMachine = MemberMachine.TestCase
TestMemberMachine.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
