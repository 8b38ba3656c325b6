"""The group API handlers' translation between wire messages and the coordinator, version by
version, against a coordinator on a manual clock (no sockets)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

from broker.apis import (
    RequestContext,
    delete_groups,
    describe_groups,
    find_coordinator,
    join_group,
    leave_group,
    list_groups,
)
from broker.config import Listener
from broker.group import GroupConfig
from broker.group.coordinator import GroupCoordinator
from protocol.errors import ErrorCode
from protocol.messages.delete_groups_request import DeleteGroupsRequest
from protocol.messages.describe_groups_request import DescribeGroupsRequest
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from protocol.messages.list_groups_request import ListGroupsRequest
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock


@dataclass
class FakeOffsetStore:
    deleted: list[str] = field(default_factory=list)

    def delete_group(self, group_id: str) -> None:
        self.deleted.append(group_id)


@dataclass
class FakeBroker:
    group_coordinator: GroupCoordinator
    node_id: int = 7
    advertised: tuple[Listener, ...] = (Listener("PLAINTEXT", "broker.example", 9093),)
    offset_store: FakeOffsetStore | None = None
    authorizer: None = None  # no authorization (broker.auth)


def make_broker(**fields: Any) -> FakeBroker:
    config = GroupConfig(group_initial_rebalance_delay_ms=0)
    # The loop's own timers: with a zero initial delay the join phase ends on the next turn.
    coordinator = GroupCoordinator(config=config, clock=ManualClock())
    return FakeBroker(coordinator, **fields)


def context(broker: FakeBroker, version: int) -> RequestContext:
    return RequestContext(RequestHeader(client_id="client"), version, cast(Any, broker),
                          "10.0.0.1:50000")


def join(broker: FakeBroker, group_id: str = "g", version: int = 3) -> Any:
    request = JoinGroupRequest(group_id=group_id, session_timeout_ms=10_000,
                               rebalance_timeout_ms=10_000, protocol_type="consumer",
                               protocols=[JoinGroupRequestProtocol("range", b"m")])
    return join_group.handle(context(broker, version), request)


def test_find_coordinator_single_key_and_batched() -> None:
    broker = make_broker()
    single = find_coordinator.handle(context(broker, 1), FindCoordinatorRequest(key="g"))
    assert (single.error_code, single.node_id, single.host, single.port) == (0, 7, "broker.example", 9093)
    batched = find_coordinator.handle(context(broker, 4), FindCoordinatorRequest(
        key_type=0, coordinator_keys=["a", "b"]))
    assert [(c.key, c.node_id, c.error_code) for c in batched.coordinators] == [("a", 7, 0), ("b", 7, 0)]
    transaction = find_coordinator.handle(context(broker, 4), FindCoordinatorRequest(
        key_type=1, coordinator_keys=["t"]))
    found = transaction.coordinators[0]  # this node coordinates transactions too
    assert (found.key, found.node_id, found.error_code) == ("t", 7, 0)
    share = find_coordinator.handle(context(broker, 3), FindCoordinatorRequest(key="s", key_type=2))
    assert share.error_code == ErrorCode.INVALID_REQUEST


def test_join_v3_needs_no_member_id_round_trip_and_records_the_client() -> None:
    async def test() -> None:
        broker = make_broker()
        parked = join(broker)
        assert asyncio.isfuture(parked) or asyncio.iscoroutine(parked)
        response = await parked
        assert (response.error_code, response.generation_id) == (0, 1)
        assert response.leader == response.member_id and len(response.members) == 1
        (member,) = broker.group_coordinator.groups["g"].members.values()
        assert (member.client_id, member.client_host) == ("client", "/10.0.0.1")
        assert join(broker, group_id="").error_code == ErrorCode.INVALID_GROUP_ID
        assert join(broker, version=4, group_id="other").error_code == ErrorCode.MEMBER_ID_REQUIRED
    asyncio.run(test())


def test_leave_group_single_member_and_batch() -> None:
    broker = make_broker()
    broker.group_coordinator.get_or_create_group("g")
    old = leave_group.handle(context(broker, 0), LeaveGroupRequest(group_id="g", member_id="m"))
    assert old.error_code == ErrorCode.UNKNOWN_MEMBER_ID and old.members == []
    batch = leave_group.handle(context(broker, 3), LeaveGroupRequest(
        group_id="g", members=[MemberIdentity("m"), MemberIdentity("", "instance")]))
    assert batch.error_code == 0
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in batch.members] == [
        ("m", None, ErrorCode.UNKNOWN_MEMBER_ID), ("", "instance", ErrorCode.UNKNOWN_MEMBER_ID)]


def test_list_describe_and_delete_groups() -> None:
    async def test() -> None:
        broker = make_broker(offset_store=FakeOffsetStore())
        await join(broker, group_id="busy")
        broker.group_coordinator.get_or_create_group("idle")
        listed = list_groups.handle(context(broker, 5), ListGroupsRequest(states_filter=["empty"]))
        assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [
            ("idle", "Empty", "classic")]
        everything = list_groups.handle(context(broker, 5), ListGroupsRequest(types_filter=["Classic"]))
        assert {g.group_id for g in everything.groups} == {"busy", "idle"}
        described = describe_groups.handle(context(broker, 5), DescribeGroupsRequest(
            groups=["busy", "missing"]))
        busy, missing = described.groups
        assert (busy.group_state, busy.protocol_type, len(busy.members)) == (
            "CompletingRebalance", "consumer", 1)
        assert busy.protocol_data == "" and busy.members[0].member_metadata == b""
        assert (missing.error_code, missing.group_state) == (0, "Dead")
        deleted = delete_groups.handle(context(broker, 2), DeleteGroupsRequest(
            groups_names=["busy", "idle", "missing"]))
        assert [r.error_code for r in deleted.results] == [
            ErrorCode.NON_EMPTY_GROUP, 0, ErrorCode.GROUP_ID_NOT_FOUND]
        assert broker.offset_store is not None and broker.offset_store.deleted == ["idle"]
        assert set(broker.group_coordinator.groups) == {"busy"}
    asyncio.run(test())
