"""``ShareSessionCache``: Kafka's share-session rules request by request, then a hypothesis
state machine against a dict model (epochs, partitions added and forgotten, the cap, sessions
closed with their connection)."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from broker.share.share_session import FINAL_EPOCH, INITIAL_EPOCH, ShareSessionCache, next_epoch
from protocol.errors import (
    InvalidRequestError,
    InvalidShareSessionEpochError,
    KafkaError,
    ShareSessionLimitReachedError,
    ShareSessionNotFoundError,
)

A, B, C = (UUID(int=1), 0), (UUID(int=1), 1), (UUID(int=2), 0)


def open_session(cache: ShareSessionCache, member: str = "m1", partitions=(A,), connection: str = "c1"):  # type: ignore[no-untyped-def]
    return cache.fetch("g", member, INITIAL_EPOCH, added=partitions, forgotten=(), acknowledging=False,
                       connection_id=connection)


def test_a_session_opens_at_0_and_then_needs_each_next_epoch() -> None:
    cache = ShareSessionCache()
    assert open_session(cache, partitions=(A, B)).partitions == (A, B)
    update = cache.fetch("g", "m1", 1, added=(C,), forgotten=(A,), acknowledging=True, connection_id="c1")
    assert update.partitions == (B, C) and not update.closing
    with pytest.raises(InvalidShareSessionEpochError):
        cache.fetch("g", "m1", 1, added=(), forgotten=(), acknowledging=False, connection_id="c1")
    assert cache.acknowledge("g", "m1", 2) is False
    assert cache.fetch("g", "m1", 3, added=(), forgotten=(), acknowledging=False,
                       connection_id="c1").partitions == (B, C)


def test_no_session_and_bad_opens() -> None:
    cache = ShareSessionCache()
    with pytest.raises(ShareSessionNotFoundError):
        cache.fetch("g", "m1", 1, added=(), forgotten=(), acknowledging=False, connection_id="c1")
    with pytest.raises(ShareSessionNotFoundError):
        cache.fetch("g", "m1", FINAL_EPOCH, added=(), forgotten=(), acknowledging=False, connection_id="c1")
    with pytest.raises(ShareSessionNotFoundError):
        cache.acknowledge("g", "m1", FINAL_EPOCH)
    with pytest.raises(InvalidRequestError):
        cache.fetch("g", "m1", INITIAL_EPOCH, added=(A,), forgotten=(), acknowledging=True, connection_id="c1")
    open_session(cache)
    with pytest.raises(InvalidShareSessionEpochError):
        cache.acknowledge("g", "m1", INITIAL_EPOCH)


def test_closing_with_minus_one_then_removing() -> None:
    cache = ShareSessionCache()
    open_session(cache)
    update = cache.fetch("g", "m1", FINAL_EPOCH, added=(), forgotten=(), acknowledging=True, connection_id="c1")
    assert update.closing and update.partitions == (A,)
    assert cache.close("g", "m1") is not None
    assert cache.get("g", "m1") is None


def test_reopening_replaces_and_reports_the_old_session() -> None:
    cache = ShareSessionCache()
    open_session(cache, partitions=(A,))
    update = open_session(cache, partitions=(B,), connection="c2")
    assert update.replaced is not None and update.replaced.partitions == {A: None}
    assert cache.connection_closed("c1") == []  # the session is c2's now
    assert [session.member_id for session in cache.connection_closed("c2")] == ["m1"]
    assert len(cache) == 0


def test_the_cap_refuses_a_new_session_but_a_reopen_fits() -> None:
    cache = ShareSessionCache(max_sessions=2)
    open_session(cache, "m1")
    open_session(cache, "m2")
    with pytest.raises(ShareSessionLimitReachedError):
        open_session(cache, "m3")
    open_session(cache, "m2")  # replaces its own
    assert len(cache) == 2


def test_epochs_wrap_to_1() -> None:
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(0) == 1
    assert next_epoch(-1) == -1


members = st.sampled_from(["m1", "m2", "m3"])
partitions = st.lists(st.sampled_from([A, B, C]), max_size=3)
connections = st.sampled_from(["c1", "c2"])


class SessionMachine(RuleBasedStateMachine):
    """The model: member -> (epoch, partitions, connection)."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = ShareSessionCache(max_sessions=2)
        self.model: dict[str, tuple[int, list[tuple[UUID, int]], str]] = {}

    @rule(member=members, added=partitions, connection=connections)
    def open(self, member: str, added: list[tuple[UUID, int]], connection: str) -> None:
        replaced = member in self.model
        if not replaced and len(self.model) >= 2:
            with pytest.raises(ShareSessionLimitReachedError):
                open_session(self.cache, member, added, connection)
            return
        update = open_session(self.cache, member, added, connection)
        assert (update.replaced is not None) == replaced
        self.model[member] = (1, list(dict.fromkeys(added)), connection)

    @rule(member=members, added=partitions, forgotten=partitions, epoch_offset=st.integers(-1, 1))
    def fetch(self, member: str, added: list[tuple[UUID, int]], forgotten: list[tuple[UUID, int]],
              epoch_offset: int) -> None:
        if member not in self.model:
            with pytest.raises(ShareSessionNotFoundError):
                self.cache.fetch("g", member, 5, added=added, forgotten=forgotten, acknowledging=False,
                                 connection_id="c1")
            return
        epoch, current, connection = self.model[member]
        sent = epoch + epoch_offset if epoch + epoch_offset > 0 else epoch + 1
        if sent != epoch:
            with pytest.raises(InvalidShareSessionEpochError):
                self.cache.fetch("g", member, sent, added=added, forgotten=forgotten, acknowledging=False,
                                 connection_id="c1")
            return
        update = self.cache.fetch("g", member, sent, added=added, forgotten=forgotten, acknowledging=True,
                                  connection_id="c1")
        merged = [p for p in dict.fromkeys(current + added) if p not in forgotten]
        assert list(update.partitions) == merged
        self.model[member] = (epoch + 1, merged, connection)

    @rule(member=members)
    def close(self, member: str) -> None:
        try:
            update = self.cache.fetch("g", member, FINAL_EPOCH, added=(), forgotten=(), acknowledging=True,
                                      connection_id="c1")
        except ShareSessionNotFoundError:
            assert member not in self.model
            return
        assert update.closing
        self.cache.close("g", member)
        del self.model[member]

    @rule(connection=connections)
    def disconnect(self, connection: str) -> None:
        closed = {session.member_id for session in self.cache.connection_closed(connection)}
        expected = {member for member, (_, _, owner) in self.model.items() if owner == connection}
        assert closed == expected
        for member in expected:
            del self.model[member]

    @invariant()
    def agrees(self) -> None:
        assert len(self.cache) == len(self.model)
        for member, (epoch, current, _) in self.model.items():
            session = self.cache.get("g", member)
            assert session is not None and session.epoch == epoch and list(session.partitions) == current


def test_the_session_cache_against_a_model() -> None:
    run_state_machine_as_test(SessionMachine, settings=settings(max_examples=150, deadline=None))


def test_the_checker_catches_an_epoch_that_does_not_move() -> None:
    class Broken(ShareSessionCache):
        def acknowledge(self, group_id: str, member_id: str, epoch: int) -> bool:
            return False

    class BrokenMachine(SessionMachine):
        def __init__(self) -> None:
            super().__init__()
            self.cache = Broken(max_sessions=2)

        @rule(member=members)
        def acknowledge(self, member: str) -> None:
            if member in self.model:
                epoch, current, connection = self.model[member]
                self.cache.acknowledge("g", member, epoch)
                self.model[member] = (epoch + 1, current, connection)

    with pytest.raises((AssertionError, KafkaError)):
        run_state_machine_as_test(BrokenMachine, settings=settings(max_examples=150, deadline=None))
