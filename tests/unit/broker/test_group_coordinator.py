"""The group coordinator shell: parked requests answered from effects, one timer per group
re-armed from ``next_deadline``. Time is a ``ManualClock`` and timers a fake ``call_later``
stepped by hand; one test uses the real event loop's timers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from broker.group import GroupConfig, GroupState, JoinRequest, MemberIdentity, Protocol, SyncRequest
from broker.group.coordinator import GroupCoordinator
from protocol.errors import ErrorCode
from storage.clock import SYSTEM_CLOCK, ManualClock

RANGE = (Protocol("range", b"metadata"),)
SESSION_MS = 10_000
DELAY_MS = 3_000


@dataclass
class FakeHandle:
    due_ms: int
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeTimers:
    clock: ManualClock
    handles: list[FakeHandle] = field(default_factory=list)

    def call_later(self, delay_seconds: float, callback: Callable[[], None]) -> FakeHandle:
        handle = FakeHandle(self.clock.monotonic_ms() + round(delay_seconds * 1000), callback)
        self.handles.append(handle)
        return handle

    @property
    def armed(self) -> list[FakeHandle]:
        return [h for h in self.handles if not h.cancelled]

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms``, firing each due timer at its own time, in order."""
        target = self.clock.monotonic_ms() + ms
        while due := [h for h in self.armed if h.due_ms <= target]:
            first = min(due, key=lambda h: h.due_ms)
            self.clock.advance(max(first.due_ms - self.clock.monotonic_ms(), 0))
            self.handles.remove(first)
            first.callback()
        self.clock.advance(target - self.clock.monotonic_ms())


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def make(delay_ms: int = DELAY_MS) -> tuple[GroupCoordinator, FakeTimers]:
    timers = FakeTimers(ManualClock())
    config = GroupConfig(group_initial_rebalance_delay_ms=delay_ms, group_min_session_timeout_ms=0)
    return GroupCoordinator(config=config, clock=timers.clock, call_later=timers.call_later), timers


def join_request(member_id: str = "", *, require_known: bool = False) -> JoinRequest:
    return JoinRequest(member_id=member_id, client_id="client", protocol_type="consumer",
                       protocols=RANGE, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=30_000,
                       require_known_member_id=require_known)


async def stable(coordinator: GroupCoordinator, timers: FakeTimers, count: int) -> list[str]:
    """``count`` members joined and synced in generation 1; the first is the leader."""
    futures = [coordinator.join("g", join_request()) for _ in range(count)]
    assert all(isinstance(f, asyncio.Future) for f in futures)
    while not all(isinstance(f, asyncio.Future) and f.done() for f in futures):
        timers.advance(DELAY_MS)  # the initial delay grows while members keep arriving
    responses = [f.result() for f in futures if isinstance(f, asyncio.Future)]
    ids = [r.member_id for r in responses]
    leader = responses[0].leader
    ids.sort(key=lambda member_id: member_id != leader)
    syncs = [coordinator.sync("g", SyncRequest(m, 1)) for m in ids[1:]]
    coordinator.sync("g", SyncRequest(leader, 1, tuple((m, m.encode()) for m in ids)))
    assert all(isinstance(s, asyncio.Future) and s.result().assignment for s in syncs)
    return ids


def test_get_or_create_group_creates_once() -> None:
    coordinator, _ = make()
    assert coordinator.get_group("g") is None
    group = coordinator.get_or_create_group("g")
    assert coordinator.get_or_create_group("g") is group
    assert coordinator.get_group("g") is group and coordinator.groups == {"g": group}


def test_join_is_parked_until_the_initial_delay_fires() -> None:
    async def test() -> None:
        coordinator, timers = make()
        required = coordinator.join("g", join_request(require_known=True))
        assert not isinstance(required, asyncio.Future)
        assert required.error_code is ErrorCode.MEMBER_ID_REQUIRED
        parked = coordinator.join("g", join_request(required.member_id, require_known=True))
        assert isinstance(parked, asyncio.Future)
        timers.advance(DELAY_MS - 1)
        assert not parked.done()
        timers.advance(1)
        response = parked.result()
        assert (response.error_code, response.generation_id) == (ErrorCode.NONE, 1)
        assert response.leader == required.member_id
        assert coordinator.groups["g"].state is GroupState.COMPLETING_REBALANCE
    run(test)


def test_leader_sync_answers_the_parked_syncs() -> None:
    async def test() -> None:
        coordinator, timers = make()
        ids = await stable(coordinator, timers, 3)
        assert coordinator.groups["g"].state is GroupState.STABLE
        assert {m.member_id: m.assignment for m in coordinator.groups["g"].members.values()} == {
            m: m.encode() for m in ids}
    run(test)


def test_expired_member_triggers_a_rebalance_from_the_timer() -> None:
    async def test() -> None:
        coordinator, timers = make()
        alive, dead = await stable(coordinator, timers, 2)
        for _ in range(3):
            timers.advance(SESSION_MS // 3)
            assert coordinator.heartbeat("g", alive, 1) is ErrorCode.NONE
        assert dead in coordinator.groups["g"].members
        timers.advance(SESSION_MS - 3 * (SESSION_MS // 3))
        assert coordinator.heartbeat("g", alive, 1) is ErrorCode.REBALANCE_IN_PROGRESS
        assert dead not in coordinator.groups["g"].members
        rejoined = coordinator.join("g", join_request(alive))
        assert not isinstance(rejoined, asyncio.Future)
        assert (rejoined.generation_id, rejoined.leader) == (2, alive)
    run(test)


def test_a_heartbeat_does_not_rearm_the_timer() -> None:
    async def test() -> None:
        coordinator, timers = make()
        member, _ = await stable(coordinator, timers, 2)
        created = len(timers.handles)
        assert coordinator.heartbeat("g", member, 1) is ErrorCode.NONE
        assert len(timers.handles) == created and len(timers.armed) == 1
    run(test)


def test_leave_completes_the_join_phase_for_the_others() -> None:
    async def test() -> None:
        coordinator, timers = make()
        leaver, stayer = await stable(coordinator, timers, 2)
        outcome = coordinator.leave("g", [MemberIdentity(leaver)])
        assert [m.error_code for m in outcome.members] == [ErrorCode.NONE]
        rejoined = coordinator.join("g", join_request(stayer))
        assert not isinstance(rejoined, asyncio.Future) and rejoined.generation_id == 2
        coordinator.leave("g", [MemberIdentity(stayer)])
        assert coordinator.groups["g"].state is GroupState.EMPTY
        assert not timers.armed
    run(test)


def test_coordinator_level_errors() -> None:
    async def test() -> None:
        coordinator, _ = make()
        join = coordinator.join("", join_request())
        assert not isinstance(join, asyncio.Future) and join.error_code is ErrorCode.INVALID_GROUP_ID
        join = coordinator.join("missing", join_request("someone"))
        assert not isinstance(join, asyncio.Future)
        assert join.error_code is ErrorCode.UNKNOWN_MEMBER_ID and "missing" not in coordinator.groups
        sync = coordinator.sync("missing", SyncRequest("someone", 1))
        assert not isinstance(sync, asyncio.Future) and sync.error_code is ErrorCode.UNKNOWN_MEMBER_ID
        sync = coordinator.sync("", SyncRequest("someone", 1))
        assert not isinstance(sync, asyncio.Future) and sync.error_code is ErrorCode.INVALID_GROUP_ID
        assert coordinator.heartbeat("missing", "someone", 1) is ErrorCode.UNKNOWN_MEMBER_ID
        assert coordinator.heartbeat("", "someone", 1) is ErrorCode.INVALID_GROUP_ID
        leave = coordinator.leave("missing", [MemberIdentity("someone")])
        assert leave.error_code is ErrorCode.UNKNOWN_MEMBER_ID
        assert coordinator.leave("", []).error_code is ErrorCode.INVALID_GROUP_ID
    run(test)


def test_delete_only_an_empty_group() -> None:
    async def test() -> None:
        coordinator, timers = make()
        assert coordinator.delete("g") is ErrorCode.GROUP_ID_NOT_FOUND
        (member,) = await stable(coordinator, timers, 1)
        assert coordinator.delete("g") is ErrorCode.NON_EMPTY_GROUP
        coordinator.leave("g", [MemberIdentity(member)])
        assert coordinator.delete("g") is ErrorCode.NONE
        assert coordinator.get_group("g") is None and not timers.armed
    run(test)


def test_real_loop_timers_complete_a_parked_join() -> None:
    async def test() -> None:
        config = GroupConfig(group_initial_rebalance_delay_ms=10, group_min_session_timeout_ms=0)
        coordinator = GroupCoordinator(config=config, clock=SYSTEM_CLOCK)
        parked = coordinator.join("g", join_request())
        assert isinstance(parked, asyncio.Future)
        response = await asyncio.wait_for(parked, timeout=10)
        assert (response.error_code, response.generation_id) == (ErrorCode.NONE, 1)
    run(test)
