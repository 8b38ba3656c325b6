"""KIP-211 offset expiry and the deletion of expired groups (``broker.group.expiry``), the
current state timestamp they count from (kept by the coordinator, persisted and reloaded),
and a static member's replacement re-persisted in the GroupMetadata record. A real broker on a
temporary directory; time is a ``ManualClock``; no sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.apis import RequestContext, offset_commit
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.group import (
    ClassicGroup,
    GroupConfig,
    GroupState,
    JoinRequest,
    MemberIdentity,
    Protocol,
    SyncRequest,
)
from broker.group.coordinator import GroupCoordinator
from broker.group.expiry import cleanup_group_metadata
from broker.group.offsets import OffsetAndMetadata
from protocol.errors import ErrorCode, KafkaStorageError
from protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic

MINUTE_MS = 60_000
RETENTION_MS = 10 * MINUTE_MS
PROTOCOLS = (Protocol("range", b"meta"),)


OPEN: list[Broker] = []  # brokers to shut down at the end of the test


def make_broker(log_dir: Path, clock: ManualClock) -> Broker:
    properties = {"log.dirs": str(log_dir), "offsets.topic.num.partitions": "3", "offsets.retention.minutes": "10",
                  "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "0"}
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=clock)
    broker.startup()
    OPEN.append(broker)
    return broker


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock) -> Iterator[Broker]:
    broker = make_broker(tmp_path, clock)
    broker.offsets_loader.load_all()
    create_topic(broker, "t", num_partitions=2)
    yield broker
    while OPEN:
        OPEN.pop().shutdown()


def reopen(broker: Broker, clock: ManualClock, *, load: bool = True) -> Broker:
    OPEN.remove(broker)
    broker.shutdown()
    again = make_broker(broker.config.log_dirs[0], clock)
    if load:
        again.offsets_loader.load_all()
    return again


def cleanup(broker: Broker) -> tuple[int, tuple[str, ...]]:
    result = cleanup_group_metadata(broker.offset_store, broker.group_coordinator, broker.clock.milliseconds())
    return result.expired_offsets, result.deleted_groups


def join_request(member_id: str = "", instance_id: str | None = None) -> JoinRequest:
    return JoinRequest(member_id=member_id, client_id="c", protocol_type="consumer", protocols=PROTOCOLS,
                       session_timeout_ms=10_000, rebalance_timeout_ms=10_000, group_instance_id=instance_id,
                       require_known_member_id=False)


async def stable_member(coordinator: GroupCoordinator, group_id: str, instance_id: str | None = None) -> str:
    """One member joined and synced (generation 1); its member id."""
    joined = coordinator.join(group_id, join_request(instance_id=instance_id))
    assert isinstance(joined, asyncio.Future)
    member_id = (await joined).member_id
    synced = coordinator.sync(group_id, SyncRequest(member_id, 1, ((member_id, b"assigned"),),
                                                    group_instance_id=instance_id))
    assert getattr(synced, "error_code", None) is ErrorCode.NONE
    return member_id


def commit_now(broker: Broker, group_id: str, partition: int = 0, **fields: Any) -> None:
    offset = OffsetAndMetadata(5, commit_timestamp_ms=broker.clock.milliseconds(), **fields)
    broker.offset_store.commit(group_id, {("t", partition): offset})


# ---- groups that use group management: from the time they became Empty ---------------------


def test_offsets_expire_retention_after_the_group_became_empty(broker: Broker, clock: ManualClock) -> None:
    async def test() -> None:
        coordinator = broker.group_coordinator
        member_id = await stable_member(coordinator, "g")
        commit_now(broker, "g")
        clock.advance(2 * RETENTION_MS)
        assert cleanup(broker) == (0, ())  # it has members: never
        coordinator.leave("g", [MemberIdentity(member_id)])
        group = coordinator.groups["g"]
        assert (group.state, group.current_state_timestamp_ms) == (GroupState.EMPTY, clock.now_ms)
        assert cleanup(broker) == (0, ())  # the commit is old, but the group only just emptied
        clock.advance(RETENTION_MS - 1)
        assert cleanup(broker) == (0, ())
        clock.advance(1)
        assert cleanup(broker) == (1, ("g",))
        assert coordinator.get_group("g") is None and not broker.offset_store.has_group("g")
    asyncio.run(test())
    again = reopen(broker, clock)
    assert again.group_coordinator.get_group("g") is None  # tombstones for both, persisted
    assert not again.offset_store.has_group("g")


def test_the_time_a_group_became_empty_survives_a_restart(broker: Broker, clock: ManualClock) -> None:
    async def test() -> int:
        member_id = await stable_member(broker.group_coordinator, "g")
        commit_now(broker, "g")
        broker.group_coordinator.leave("g", [MemberIdentity(member_id)])
        return clock.now_ms
    emptied_at = asyncio.run(test())
    clock.advance(RETENTION_MS // 2)
    again = reopen(broker, clock)
    group = again.group_coordinator.groups["g"]
    assert (group.state, group.protocol_type, group.current_state_timestamp_ms) == (
        GroupState.EMPTY, "consumer", emptied_at)
    clock.advance(RETENTION_MS // 2 - 1)
    assert cleanup(again) == (0, ())
    clock.advance(1)
    assert cleanup(again) == (1, ("g",))


def test_an_empty_group_without_offsets_is_deleted_at_the_next_check(broker: Broker, clock: ManualClock) -> None:
    async def test() -> None:
        member_id = await stable_member(broker.group_coordinator, "g")
        broker.group_coordinator.leave("g", [MemberIdentity(member_id)])
    asyncio.run(test())
    assert cleanup(broker) == (0, ("g",))  # as Kafka: no offsets left to keep it
    assert reopen(broker, clock).group_coordinator.get_group("g") is None


def test_explicit_expire_timestamps_need_an_expirable_group(broker: Broker, clock: ManualClock) -> None:
    async def test() -> None:
        await stable_member(broker.group_coordinator, "busy")
        commit_now(broker, "busy", expire_timestamp_ms=clock.now_ms + MINUTE_MS)
        commit_now(broker, "simple", expire_timestamp_ms=clock.now_ms + MINUTE_MS)
        commit_now(broker, "simple", partition=1)
        clock.advance(MINUTE_MS)
        assert cleanup(broker) == (1, ())  # "simple" t-0 at its expire timestamp; "busy" has members
        assert broker.offset_store.fetch("busy", "t", 0) is not None
        assert list(broker.offset_store.group_offsets("simple")) == [("t", 1)]
    asyncio.run(test())


# ---- standalone groups: from each commit -----------------------------------------------------


def context(broker: Broker) -> RequestContext:
    header = RequestHeader(request_api_key=8, request_api_version=9, correlation_id=1)
    return RequestContext(header=header, api_version=9, broker=broker, connection_id="test")


def commit_standalone(broker: Broker, partition: int) -> None:
    request = OffsetCommitRequest(group_id="standalone", generation_id_or_member_epoch=-1, topics=[
        OffsetCommitRequestTopic(name="t", partitions=[
            OffsetCommitRequestPartition(partition_index=partition, committed_offset=9)])])
    response = offset_commit.handle(context(broker), request)
    assert response.topics[0].partitions[0].error_code == 0  # type: ignore[union-attr]


def test_standalone_offsets_expire_retention_after_their_commit(broker: Broker, clock: ManualClock) -> None:
    commit_standalone(broker, 0)
    clock.advance(RETENTION_MS // 2)
    commit_standalone(broker, 1)
    group = broker.group_coordinator.groups["standalone"]
    assert (group.state, group.protocol_type) == (GroupState.EMPTY, None)
    clock.advance(RETENTION_MS // 2)
    assert cleanup(broker) == (1, ())  # partition 0 only: the group keeps partition 1
    assert broker.group_coordinator.get_group("standalone") is group
    clock.advance(RETENTION_MS // 2)
    assert cleanup(broker) == (1, ("standalone",))
    assert broker.group_coordinator.get_group("standalone") is None


def test_a_reloaded_standalone_group_exists_and_expires(broker: Broker, clock: ManualClock) -> None:
    commit_standalone(broker, 0)
    again = reopen(broker, clock)
    group = again.group_coordinator.groups["standalone"]  # Kafka's simple group, from the offsets
    assert (group.state, group.protocol_type) == (GroupState.EMPTY, None)
    clock.advance(RETENTION_MS)
    assert cleanup(again) == (1, ("standalone",))


def test_groups_of_a_loading_partition_are_skipped(broker: Broker, clock: ManualClock) -> None:
    commit_standalone(broker, 0)
    clock.advance(RETENTION_MS)
    again = reopen(broker, clock, load=False)  # scheduled, not loaded
    assert cleanup(again) == (0, ())
    again.offsets_loader.load_all()
    assert cleanup(again) == (1, ("standalone",))


# ---- the current state timestamp and static members ------------------------------------------


def test_every_state_change_is_flagged_for_the_shell() -> None:
    group = ClassicGroup("g", config=GroupConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=0))
    joined = group.join(join_request(), 0)
    assert joined.effects.state_changed and group.state is GroupState.PREPARING_REBALANCE
    assert group.tick(0).state_changed and group.state is GroupState.COMPLETING_REBALANCE
    assert not group.tick(1).state_changed
    assert group.heartbeat(joined.member_id, 1, 1) is ErrorCode.NONE


def test_a_static_member_replaced_while_stable_is_persisted(broker: Broker, clock: ManualClock) -> None:
    async def test() -> tuple[str, str]:
        coordinator = broker.group_coordinator
        old = await stable_member(coordinator, "g", instance_id="i")
        rejoined = coordinator.join("g", join_request(instance_id="i"))  # a restarted instance
        assert not isinstance(rejoined, asyncio.Future)
        assert (rejoined.error_code, rejoined.generation_id) == (ErrorCode.NONE, 1)  # no rebalance
        assert rejoined.member_id != old
        return old, rejoined.member_id
    old, new = asyncio.run(test())
    again = reopen(broker, clock)
    group = again.group_coordinator.groups["g"]
    assert (group.state, list(group.members), group.static_members) == (GroupState.STABLE, [new], {"i": new})
    assert group.members[new].assignment == b"assigned"

    async def heartbeats() -> None:
        coordinator = again.group_coordinator
        assert coordinator.heartbeat("g", new, 1, group_instance_id="i") is ErrorCode.NONE
        assert coordinator.heartbeat("g", old, 1, group_instance_id="i") is ErrorCode.FENCED_INSTANCE_ID
    asyncio.run(heartbeats())


@dataclass
class FailingStore:
    fail: bool = False
    stored: list[list[str]] = field(default_factory=list)

    def store_group(self, group: ClassicGroup) -> None:
        if self.fail:
            raise KafkaStorageError("log dir offline")
        self.stored.append(list(group.members))


def test_a_static_replacement_that_cannot_be_stored_fails_the_join() -> None:
    async def test() -> None:
        store = FailingStore()
        config = GroupConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=0)
        coordinator = GroupCoordinator(config=config, clock=ManualClock(), store=store)
        old = await stable_member(coordinator, "g", instance_id="i")
        assert store.stored == [[old]]
        store.fail = True
        rejoined = coordinator.join("g", join_request(instance_id="i"))
        assert not isinstance(rejoined, asyncio.Future)
        assert (rejoined.error_code, rejoined.member_id) == (ErrorCode.NOT_COORDINATOR, "")
        store.fail = False
        again = coordinator.join("g", join_request(instance_id="i"))  # the client rejoins
        assert not isinstance(again, asyncio.Future) and again.error_code is ErrorCode.NONE
        assert store.stored[-1] == [again.member_id]
    asyncio.run(test())
