"""The leader's view of its followers and its ISR: FollowerReplica's caught-up rule against a
brute-force model over the whole fetch history; IsrState's maximal ISR, one change in flight at
a time, committed answers ordered by partition epoch, and refused changes."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from replication.isr import UNKNOWN_OFFSET, FollowerReplica, IsrChange, IsrState

LAG_MAX_MS = 30_000  # replica.lag.time.max.ms


@dataclass(frozen=True)
class Fetch:
    now_ms: int
    fetch_offset: int
    leader_end_offset: int


# -- FollowerReplica ----------------------------------------------------------------------------


def model_last_caught_up(initial_ms: int, history: list[Fetch]) -> int:
    """Brute force over the history: the follower was caught up at the time of fetch ``j`` when
    fetch ``j`` itself or the one right after it asked from at or above the leader's log end as
    of fetch ``j`` (the next fetch proves it received everything the leader had then)."""
    times = [initial_ms]
    for j, fetch in enumerate(history):
        later = history[j:j + 2]
        if any(f.fetch_offset >= fetch.leader_end_offset for f in later):
            times.append(fetch.now_ms)
    return max(times)


def replay(history: list[Fetch], *, in_isr: bool, start_ms: int = 0) -> FollowerReplica:
    replica = FollowerReplica(1, now_ms=start_ms, in_isr=in_isr)
    for fetch in history:
        replica.fetched(fetch_offset=fetch.fetch_offset, log_start_offset=0,
                        leader_end_offset=fetch.leader_end_offset, now_ms=fetch.now_ms)
    return replica


@st.composite
def fetch_histories(draw: st.DrawFn, *, realistic: bool) -> list[Fetch]:
    """Fetches at non-decreasing times against a leader whose log end never moves back. A
    realistic follower asks from at most what the leader had at its previous fetch (it cannot
    have more than it was sent) and never moves back; otherwise any offset goes."""
    count = draw(st.integers(0, 12))
    now_ms, leader_end, follower_end, previous_end = 0, 0, 0, 0
    history = []
    for _ in range(count):
        now_ms += draw(st.integers(0, 20_000))
        leader_end += draw(st.integers(0, 3))
        if realistic:
            follower_end = draw(st.integers(follower_end, max(follower_end, previous_end)))
        else:
            follower_end = draw(st.integers(0, leader_end + 2))
        history.append(Fetch(now_ms, follower_end, leader_end))
        previous_end = leader_end
    return history


@settings(max_examples=150, deadline=None)
@given(fetch_histories(realistic=False), st.booleans())
def test_last_caught_up_matches_the_brute_force_model(history: list[Fetch], in_isr: bool) -> None:
    replica = replay(history, in_isr=in_isr)
    assert replica.last_caught_up_ms == model_last_caught_up(0, history)
    if history:
        last = history[-1]
        assert (replica.log_end_offset, replica.last_fetch_ms) == (last.fetch_offset, last.now_ms)
        assert replica.last_fetch_leader_end_offset == last.leader_end_offset


@settings(max_examples=150, deadline=None)
@given(fetch_histories(realistic=True), st.integers(0, 60_000), st.integers(0, 4))
def test_a_realistic_follower_is_caught_up_only_when_it_really_was(
    history: list[Fetch], later_ms: int, leader_grew: int,
) -> None:
    """Soundness: ``last_caught_up_ms`` is the time of a fetch whose leader log end the follower
    has since reached (or 0, never); and the lag check agrees with it."""
    replica = replay(history, in_isr=False)
    caught_up = replica.last_caught_up_ms
    follower_end = history[-1].fetch_offset if history else UNKNOWN_OFFSET
    assert caught_up == 0 or any(
        f.now_ms == caught_up and f.leader_end_offset <= follower_end for f in history)
    now_ms = (history[-1].now_ms if history else 0) + later_ms
    leader_end = (history[-1].leader_end_offset if history else 0) + leader_grew
    expected = follower_end == leader_end or now_ms - caught_up <= LAG_MAX_MS
    assert replica.caught_up_within(now_ms, LAG_MAX_MS, leader_end) is expected


def test_an_isr_member_starts_caught_up_and_others_never_were() -> None:
    assert FollowerReplica(1, now_ms=500, in_isr=True).last_caught_up_ms == 500
    outsider = FollowerReplica(2, now_ms=500, in_isr=False)
    assert outsider.last_caught_up_ms == 0
    assert outsider.log_end_offset == UNKNOWN_OFFSET
    assert not outsider.caught_up_within(500 + LAG_MAX_MS + 1, LAG_MAX_MS, 0)


def test_a_fetch_behind_the_end_counts_the_previous_fetch_time() -> None:
    replica = FollowerReplica(1, now_ms=0, in_isr=False)
    replica.fetched(fetch_offset=0, log_start_offset=0, leader_end_offset=10, now_ms=1_000)
    assert replica.last_caught_up_ms == 0  # behind, and no previous fetch
    replica.fetched(fetch_offset=10, log_start_offset=0, leader_end_offset=15, now_ms=2_000)
    assert replica.last_caught_up_ms == 1_000  # has what the leader had at 1000
    replica.fetched(fetch_offset=15, log_start_offset=0, leader_end_offset=15, now_ms=3_000)
    assert replica.last_caught_up_ms == 3_000
    replica.fetched(fetch_offset=14, log_start_offset=0, leader_end_offset=20, now_ms=4_000)
    assert replica.last_caught_up_ms == 3_000  # never moves back


# -- IsrState -----------------------------------------------------------------------------------


def test_the_maximal_isr_adds_a_joiner_in_flight_but_keeps_leavers() -> None:
    expanding = IsrState((0, 1), 4)
    change = expanding.propose((0, 1, 2), leader_epoch=7)
    assert change == IsrChange((0, 1, 2), 7, 4, expanding=True)
    assert (expanding.isr, expanding.maximal_isr) == ((0, 1), (0, 1, 2))
    shrinking = IsrState((0, 1, 2), 4)
    change = shrinking.propose((0,), leader_epoch=7)
    assert change is not None and not change.expanding
    assert (shrinking.isr, shrinking.maximal_isr) == ((0, 1, 2), (0, 1, 2))


def test_one_change_at_a_time_and_none_for_the_same_set() -> None:
    state = IsrState((0, 1), 1)
    assert state.propose((1, 0), leader_epoch=0) is None  # the same set
    first = state.propose((0,), leader_epoch=0)
    assert first is not None and state.pending == first
    assert state.propose((0, 1, 2), leader_epoch=0) is None  # one in flight
    state.failed()
    assert state.pending is None
    assert state.propose((0, 1, 2), leader_epoch=0) is not None


def test_a_refusal_forgets_only_the_change_it_refuses() -> None:
    state = IsrState((0, 1), 0)
    older = IsrChange((0, 1, 2), leader_epoch=1, partition_epoch=0, expanding=True)
    pending = state.propose((0, 1, 2), leader_epoch=2)
    state.failed(older)  # a proposal of an earlier leader epoch: says nothing of this one
    assert state.pending == pending and state.maximal_isr == (0, 1, 2)
    state.failed(pending)
    assert state.pending is None and state.maximal_isr == (0, 1)


def test_committed_answers_are_ordered_by_partition_epoch() -> None:
    state = IsrState((0, 1, 2), 5)
    state.propose((0, 1), leader_epoch=2)
    state.committed((0, 2), 4)  # older than what we have: ignored
    assert (state.isr, state.partition_epoch, state.pending is not None) == ((0, 1, 2), 5, True)
    state.committed((0, 1, 2), 5)  # the same epoch (the image again): the change stays in flight
    assert state.pending is not None
    state.committed((0, 1), 6)
    assert (state.isr, state.partition_epoch, state.pending) == ((0, 1), 6, None)
    assert state.maximal_isr == (0, 1)


def test_a_mixed_change_counts_as_expanding() -> None:
    state = IsrState((0, 1), 0)
    change = state.propose((0, 2), leader_epoch=0)  # 1 leaves, 2 joins
    assert change is not None and change.expanding
    assert set(state.maximal_isr) == {0, 1, 2}  # both: the HW waits for the larger set


class IsrStateMachine(RuleBasedStateMachine):
    """IsrState against a model: proposals, committed answers (in or out of order) and
    failures, with the maximal ISR always covering what the controller may have committed."""

    def __init__(self) -> None:
        super().__init__()
        self.state = IsrState((0, 1, 2), 0)
        self.isr: tuple[int, ...] = (0, 1, 2)
        self.epoch = 0
        self.pending: IsrChange | None = None

    @rule(members=st.sets(st.sampled_from((1, 2, 3))))
    def propose(self, members: set[int]) -> None:
        new_isr = (0, *sorted(members))
        change = self.state.propose(new_isr, leader_epoch=3)
        if self.pending is not None or set(new_isr) == set(self.isr):
            assert change is None
            return
        assert change == IsrChange(new_isr, 3, self.epoch, expanding=bool(set(new_isr) - set(self.isr)))
        self.pending = change

    @rule(members=st.sets(st.sampled_from((1, 2, 3))), step=st.integers(-2, 2))
    def committed(self, members: set[int], step: int) -> None:
        isr, epoch = (0, *sorted(members)), self.epoch + step
        self.state.committed(isr, epoch)
        if epoch >= self.epoch:
            self.isr, self.epoch = isr, epoch
            if self.pending is not None and epoch > self.pending.partition_epoch:
                self.pending = None

    @precondition(lambda self: self.pending is not None)
    @rule()
    def commit_pending(self) -> None:
        assert self.pending is not None
        self.state.committed(self.pending.new_isr, self.pending.partition_epoch + 1)
        self.isr, self.epoch = self.pending.new_isr, self.pending.partition_epoch + 1
        self.pending = None

    @rule()
    def failed(self) -> None:
        self.state.failed()
        self.pending = None

    @invariant()
    def agrees_with_the_model(self) -> None:
        assert (self.state.isr, self.state.partition_epoch) == (self.isr, self.epoch)
        assert self.state.pending == self.pending

    @invariant()
    def maximal_isr_covers_every_isr_the_controller_may_commit(self) -> None:
        maximal = set(self.state.maximal_isr)
        assert set(self.state.isr) <= maximal
        if self.state.pending is not None and self.state.pending.expanding:
            assert set(self.state.pending.new_isr) <= maximal
        assert len(maximal) == len(self.state.maximal_isr)  # no duplicates
        assert 0 in maximal


TestIsrState = IsrStateMachine.TestCase
TestIsrState.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
