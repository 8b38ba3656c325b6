"""The purgatory of delayed operations on a manual clock: an operation completes exactly once,
by completion (``check_and_complete``) or by expiry at its deadline, never both."""

from __future__ import annotations

from collections.abc import Hashable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from replication.purgatory import PURGE_INTERVAL, DelayedOperation, DelayedOperationPurgatory
from storage.clock import ManualClock


class Waiting(DelayedOperation):
    """Completes when the bytes readable under its keys reach ``min_bytes`` (a DelayedFetch's
    condition), recording what happened to it and in which order."""

    def __init__(self, levels: dict[Hashable, int], keys: list[str], min_bytes: int,
                 delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.levels = levels
        self.keys = keys
        self.min_bytes = min_bytes
        self.events: list[str] = []

    def ready(self) -> bool:
        return sum(self.levels.get(key, 0) for key in self.keys) >= self.min_bytes

    def try_complete(self) -> bool:
        return self.ready() and self.force_complete()

    def on_complete(self) -> None:
        self.events.append("complete")

    def on_expiration(self) -> None:
        self.events.append("expire")


def make() -> tuple[ManualClock, DelayedOperationPurgatory[Waiting], dict[Hashable, int]]:
    clock = ManualClock()
    return clock, DelayedOperationPurgatory[Waiting]("Fetch", clock=clock), {}


def test_an_operation_that_can_complete_is_not_watched() -> None:
    _, purgatory, levels = make()
    levels["a"] = 5
    operation = Waiting(levels, ["a"], 5, 100)
    assert purgatory.try_complete_else_watch(operation, ["a"])
    assert operation.events == ["complete"]
    assert (purgatory.watched("a"), purgatory.delayed(), purgatory.next_deadline_ms()) == (0, 0, None)


def test_completion_by_a_watched_key_unwatches_every_key() -> None:
    clock, purgatory, levels = make()
    operation = Waiting(levels, ["a", "b"], 3, 100)
    assert not purgatory.try_complete_else_watch(operation, ["a", "b"])
    assert purgatory.check_and_complete("a") == 0  # nothing moved enough yet
    levels["b"] = 3
    assert purgatory.check_and_complete("b") == 1
    assert operation.events == ["complete"]
    assert (purgatory.watched("a"), purgatory.watched("b"), purgatory.delayed()) == (0, 0, 0)
    clock.advance(100)
    assert purgatory.expire_due() == 0
    assert operation.events == ["complete"]  # never expired after completing


def test_expiry_happens_at_the_deadline_not_before() -> None:
    clock, purgatory, levels = make()
    clock.advance(7)
    operation = Waiting(levels, ["a"], 1, 100)
    purgatory.try_complete_else_watch(operation, ["a"])
    assert purgatory.next_deadline_ms() == 107
    clock.advance(99)
    assert purgatory.expire_due() == 0 and operation.events == []
    clock.advance(1)
    assert purgatory.expire_due() == 1
    assert operation.events == ["complete", "expire"]  # Kafka's order: onComplete, onExpiration
    levels["a"] = 1
    assert purgatory.check_and_complete("a") == 0
    assert operation.events == ["complete", "expire"]


def test_earliest_deadline_first_and_force_complete_all() -> None:
    _, purgatory, levels = make()
    late = Waiting(levels, ["a"], 1, 500)
    early = Waiting(levels, ["b"], 1, 50)
    purgatory.try_complete_else_watch(late, ["a"])
    purgatory.try_complete_else_watch(early, ["b"])
    assert purgatory.next_deadline_ms() == 50
    assert purgatory.force_complete_all() == 2
    assert late.events == early.events == ["complete"]  # shutdown: answered, not expired
    assert (purgatory.delayed(), purgatory.next_deadline_ms()) == (0, None)


KEYS = ["a", "b", "c"]


class PurgatoryMachine(RuleBasedStateMachine):
    """Operations watched under random keys, random appends, checks, time and force
    completions, against the rule: completed once, by completion xor expiry, expiry exactly
    at the deadline."""

    def __init__(self) -> None:
        super().__init__()
        self.clock, self.purgatory, self.levels = make()
        self.operations: list[tuple[Waiting, int]] = []  # (operation, deadline)
        self.forced: set[int] = set()

    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
          min_bytes=st.integers(0, 20), delay_ms=st.integers(0, 200))
    def watch(self, keys: list[str], min_bytes: int, delay_ms: int) -> None:
        operation = Waiting(self.levels, keys, min_bytes, delay_ms)
        ready = operation.ready()
        completed = self.purgatory.try_complete_else_watch(operation, keys)
        assert completed == ready
        self.operations.append((operation, self.clock.monotonic_ms() + delay_ms))

    @rule(key=st.sampled_from(KEYS), size=st.integers(1, 10))
    def append(self, key: str, size: int) -> None:
        self.levels[key] = self.levels.get(key, 0) + size
        self.purgatory.check_and_complete(key)
        for operation, _ in self.operations:
            if key in operation.keys and operation.ready():
                assert operation.events[:1] == ["complete"]

    @rule(ms=st.integers(0, 120))
    def advance_and_expire(self, ms: int) -> None:
        self.clock.advance(ms)
        self.purgatory.expire_due()
        now = self.clock.monotonic_ms()
        for operation, deadline in self.operations:
            if deadline <= now:
                assert operation.is_completed

    @rule(data=st.data())
    def force_complete(self, data: st.DataObject) -> None:
        if not self.operations:
            return
        index = data.draw(st.integers(0, len(self.operations) - 1))
        if self.operations[index][0].force_complete():
            self.forced.add(index)

    @invariant()
    def completed_once_by_one_path(self) -> None:
        now = self.clock.monotonic_ms()
        for index, (operation, deadline) in enumerate(self.operations):
            assert operation.events in ([], ["complete"], ["complete", "expire"])
            assert operation.is_completed == bool(operation.events)
            if operation.events == ["complete", "expire"]:
                assert deadline <= now and index not in self.forced

    @invariant()
    def only_waiting_operations_are_counted(self) -> None:
        waiting = sum(not operation.is_completed for operation, _ in self.operations)
        assert self.purgatory.delayed() == waiting


TestPurgatoryMachine = PurgatoryMachine.TestCase
TestPurgatoryMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


def test_completed_operations_leave_the_deadline_heap_every_purge_interval() -> None:
    _, purgatory, levels = make()
    for _ in range(PURGE_INTERVAL):
        purgatory.try_complete_else_watch(Waiting(levels, ["a"], 1, 1000), ["a"])
    levels["a"] = 1
    waiting = Waiting(levels, ["b"], 1, 1000)
    purgatory.try_complete_else_watch(waiting, ["b"])
    assert purgatory.check_and_complete("a") == PURGE_INTERVAL
    assert len(purgatory._deadlines) == purgatory.delayed() == 1  # only the one still waiting
