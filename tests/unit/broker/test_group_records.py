"""Classic groups in ``__consumer_offsets``: GroupMetadata record bytes, the coordinator storing
a group before it answers the leader's SyncGroup (and when the group becomes Empty), and the
groups rebuilt by ``OffsetStore.load`` (Stable, Empty, tombstoned)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

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
from broker.group.group_records import (
    decode_group_metadata_record,
    group_metadata_key,
    group_metadata_value,
    restore_group,
)
from broker.group.member import ClassicGroupMember
from broker.group.offsets import decode_offsets_record
from protocol.errors import ErrorCode, KafkaStorageError
from storage.clock import ManualClock

CONFIG = GroupConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=0)
PROTOCOLS = (Protocol("range", b"range-meta"), Protocol("roundrobin", b"rr-meta"))


def member(member_id: str, *, instance_id: str | None = None, assignment: bytes = b"a") -> ClassicGroupMember:
    return ClassicGroupMember(
        member_id=member_id, group_instance_id=instance_id, client_id="client", client_host="/10.0.0.1",
        protocol_type="consumer", protocols=PROTOCOLS, session_timeout_ms=10_000,
        rebalance_timeout_ms=30_000, session_deadline_ms=0, assignment=assignment,
    )


def stable_group(group_id: str = "g") -> ClassicGroup:
    return ClassicGroup.restore(
        group_id, config=CONFIG, generation_id=4, protocol_type="consumer", protocol_name="range",
        leader_id="m2", members=[member("m1", assignment=b"one"), member("m2", instance_id="i2", assignment=b"")],
    )


def empty_group(group_id: str = "e", generation_id: int = 2) -> ClassicGroup:
    return ClassicGroup.restore(group_id, config=CONFIG, generation_id=generation_id, protocol_type="consumer",
                                protocol_name=None, leader_id=None, members=[])


# ---- record bytes --------------------------------------------------------------------


def test_key_bytes() -> None:
    assert group_metadata_key("g") == b"\x00\x02" + b"\x00\x01g"


def test_empty_group_value_bytes() -> None:
    expected = (b"\x00\x03" + b"\x00\x08consumer" + b"\x00\x00\x00\x02" + b"\xff\xff" + b"\xff\xff"
                + (1000).to_bytes(8, "big") + b"\x00\x00\x00\x00")
    assert group_metadata_value(empty_group(), current_state_timestamp_ms=1000) == expected


def test_stable_group_round_trips_through_the_record() -> None:
    key, value = group_metadata_key("g"), group_metadata_value(stable_group(), current_state_timestamp_ms=5)
    decoded = decode_group_metadata_record(key, value)
    assert decoded is not None
    group_id, metadata = decoded
    assert metadata is not None and group_id == "g"
    assert (metadata.protocol_type, metadata.generation, metadata.protocol, metadata.leader,
            metadata.current_state_timestamp) == ("consumer", 4, "range", "m2", 5)
    assert [(m.member_id, m.group_instance_id, m.client_host, m.rebalance_timeout, m.session_timeout,
             m.subscription, m.assignment) for m in metadata.members] == [
        ("m1", None, "/10.0.0.1", 30_000, 10_000, b"range-meta", b"one"),
        ("m2", "i2", "/10.0.0.1", 30_000, 10_000, b"range-meta", b""),
    ]
    restored = restore_group("g", metadata, config=CONFIG, now_ms=100)
    assert (restored.state, restored.generation_id, restored.protocol_type, restored.protocol_name,
            restored.leader_id) == (GroupState.STABLE, 4, "consumer", "range", "m2")
    assert {m.member_id: (m.assignment, m.protocols, m.session_deadline_ms, m.expirable)
            for m in restored.members.values()} == {
        "m1": (b"one", (Protocol("range", b"range-meta"),), 10_100, True),
        "m2": (b"", (Protocol("range", b"range-meta"),), 10_100, True),
    }
    assert restored.static_members == {"i2": "m2"}
    assert restored.next_deadline() == 10_100


def test_tombstone_and_other_record_types() -> None:
    assert decode_group_metadata_record(group_metadata_key("g"), None) == ("g", None)
    assert decode_group_metadata_record(b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", None) is None
    assert decode_offsets_record(group_metadata_key("g"), None) is None


def test_restored_group_serves_heartbeats_of_its_generation_and_expires() -> None:
    value = decode_group_metadata_record(group_metadata_key("g"),
                                         group_metadata_value(stable_group(), current_state_timestamp_ms=0))
    assert value is not None and value[1] is not None
    group = restore_group("g", value[1], config=CONFIG, now_ms=0)
    assert group.heartbeat("m1", 4, 5_000) is ErrorCode.NONE
    assert group.heartbeat("m1", 3, 5_000) is ErrorCode.ILLEGAL_GENERATION
    group.tick(10_000)  # m2 never came back: the rebalance starts without it
    assert "m2" not in group.members and group.state is GroupState.PREPARING_REBALANCE


# ---- the coordinator stores before it answers --------------------------------------------


@dataclass
class FakeStore:
    stored: list[tuple[str, GroupState, int]] = field(default_factory=list)
    error: Exception | None = None

    def store_group(self, group: ClassicGroup) -> None:
        if self.error is not None:
            raise self.error
        self.stored.append((group.group_id, group.state, group.generation_id))


def join_request(member_id: str = "") -> JoinRequest:
    return JoinRequest(member_id=member_id, client_id="client", protocol_type="consumer", protocols=PROTOCOLS,
                       session_timeout_ms=10_000, rebalance_timeout_ms=10_000, require_known_member_id=False)


async def join_and_sync(coordinator: GroupCoordinator) -> tuple[str, object]:
    joined = coordinator.join("g", join_request())
    assert isinstance(joined, asyncio.Future)
    response = await joined
    return response.member_id, coordinator.sync("g", SyncRequest(response.member_id, 1, ((response.member_id, b"x"),)))


def test_coordinator_stores_stable_then_empty() -> None:
    async def test() -> None:
        store = FakeStore()
        coordinator = GroupCoordinator(config=CONFIG, clock=ManualClock(), store=store)
        member_id, synced = await join_and_sync(coordinator)
        assert getattr(synced, "error_code", None) is ErrorCode.NONE
        assert store.stored == [("g", GroupState.STABLE, 1)]
        coordinator.leave("g", [MemberIdentity(member_id)])
        assert store.stored[1:] == [("g", GroupState.EMPTY, 2)]
    asyncio.run(test())


def test_a_failed_store_fails_the_leaders_sync() -> None:
    async def test() -> None:
        store = FakeStore(error=KafkaStorageError("log dir offline"))
        coordinator = GroupCoordinator(config=CONFIG, clock=ManualClock(), store=store)
        _, synced = await join_and_sync(coordinator)
        assert getattr(synced, "error_code", None) is ErrorCode.NOT_COORDINATOR
    asyncio.run(test())


# ---- load ----------------------------------------------------------------------------


def make_broker(log_dir: Path, clock: ManualClock) -> Broker:
    properties = {"log.dirs": str(log_dir), "offsets.topic.num.partitions": "3"}
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=clock)
    broker.startup()
    broker.offsets_loader.load_all()  # what the daemon does in the background
    return broker


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def test_load_rebuilds_stable_and_empty_groups_and_drops_deleted_ones(tmp_path: Path, clock: ManualClock) -> None:
    broker = make_broker(tmp_path, clock)
    store = broker.offset_store
    store.store_group(empty_group("s"))  # an older record of "s": the last one wins
    store.store_group(stable_group("s"))
    store.store_group(empty_group("e", generation_id=7))
    store.store_group(empty_group("d"))
    store.delete_group("d")
    broker.shutdown()
    clock.advance(60_000)
    reopened = make_broker(tmp_path, clock)
    try:
        groups = reopened.group_coordinator.groups
        assert sorted(groups) == ["e", "s"]
        stable, empty = groups["s"], groups["e"]
        assert (stable.state, stable.generation_id, stable.protocol_name, stable.leader_id) == (
            GroupState.STABLE, 4, "range", "m2")
        assert {m.member_id: m.assignment for m in stable.members.values()} == {"m1": b"one", "m2": b""}
        assert stable.next_deadline() == clock.monotonic_ms() + 10_000  # sessions start at load
        assert (empty.state, empty.generation_id, empty.protocol_type, empty.members) == (
            GroupState.EMPTY, 7, "consumer", {})
    finally:
        reopened.shutdown()
