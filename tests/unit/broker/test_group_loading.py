"""Loading ``__consumer_offsets`` after a restart: the coordinator's per-partition loading
state (COORDINATOR_LOAD_IN_PROGRESS per group, NOT_COORDINATOR after a failed load), the
loader's order and its background run, and every group API's answer while a group's partition
loads. Time is a ``ManualClock``; no sockets."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from broker.apis import (
    RequestContext,
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.group import GroupConfig, GroupState, JoinRequest, MemberIdentity, Protocol, SyncRequest
from broker.group import loading as loading_module
from broker.group.coordinator import GroupCoordinator
from broker.group.offsets import OffsetAndMetadata, partition_for
from protocol.errors import ErrorCode, KafkaStorageError
from protocol.messages.delete_groups_request import DeleteGroupsRequest
from protocol.messages.describe_groups_request import DescribeGroupsRequest
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.group_coordinator.group_metadata_value import (
    GroupMetadataValue,
    MemberMetadata,
)
from protocol.messages.heartbeat_request import HeartbeatRequest
from protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.leave_group_request import LeaveGroupRequest
from protocol.messages.list_groups_request import ListGroupsRequest
from protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_delete_request import OffsetDeleteRequest
from protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
)
from protocol.messages.request_header import RequestHeader
from protocol.messages.sync_group_request import SyncGroupRequest
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic
from tests.unit.broker.test_group_coordinator import FakeTimers

LOAD = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
PARTITIONS = {"loading": 0, "loaded": 1, "failed": 2}
CONFIG = GroupConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=0)


def stable_value(member_id: str = "m1", session_ms: int = 10_000) -> GroupMetadataValue:
    return GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range", leader=member_id,
                              current_state_timestamp=1, members=[MemberMetadata(
                                  member_id=member_id, client_id="c", client_host="/h", rebalance_timeout=30_000,
                                  session_timeout=session_ms, subscription=b"s", assignment=b"a")])


def join_request() -> JoinRequest:
    return JoinRequest(member_id="", client_id="c", protocol_type="consumer", protocols=(Protocol("range", b""),),
                       session_timeout_ms=10_000, rebalance_timeout_ms=10_000, require_known_member_id=False)


# ---- the coordinator's loading state -------------------------------------------------------


def loading_coordinator() -> tuple[GroupCoordinator, FakeTimers]:
    timers = FakeTimers(ManualClock())
    coordinator = GroupCoordinator(config=CONFIG, clock=timers.clock, call_later=timers.call_later,
                                   partition_for=PARTITIONS.__getitem__)
    coordinator.begin_loading(PARTITIONS.values())
    return coordinator, timers


def test_every_group_call_answers_load_in_progress_while_its_partition_loads() -> None:
    async def test() -> None:
        coordinator, timers = loading_coordinator()
        assert coordinator.loading and coordinator.partition_error("loading") is LOAD
        join = coordinator.join("loading", join_request())
        assert not isinstance(join, asyncio.Future) and join.error_code is LOAD
        sync = coordinator.sync("loading", SyncRequest("m1", 3))
        assert not isinstance(sync, asyncio.Future) and sync.error_code is LOAD
        assert coordinator.heartbeat("loading", "m1", 3) is LOAD
        assert coordinator.leave("loading", [MemberIdentity("m1")]).error_code is LOAD
        assert coordinator.delete("loading") is LOAD
        empty = coordinator.join("", join_request())  # INVALID_GROUP_ID comes first, as in Kafka
        assert not isinstance(empty, asyncio.Future) and empty.error_code is ErrorCode.INVALID_GROUP_ID
        assert coordinator.groups == {} and not timers.armed
    asyncio.run(test())


def test_a_loaded_partition_serves_its_groups_while_others_load() -> None:
    async def test() -> None:
        coordinator, timers = loading_coordinator()
        coordinator.complete_loading(1, {"loaded": stable_value()}, simple_groups=["loaded", "simple"])
        assert coordinator.partition_error("loaded") is None and coordinator.partition_error("loading") is LOAD
        loaded = coordinator.groups["loaded"]
        assert (loaded.state, loaded.generation_id, list(loaded.members)) == (GroupState.STABLE, 3, ["m1"])
        assert coordinator.groups["simple"].protocol_type is None  # offsets only: a simple group
        assert coordinator.heartbeat("loaded", "m1", 3) is ErrorCode.NONE
        assert [h.due_ms for h in timers.armed] == [10_000]  # the loaded member's session timer
        timers.advance(10_000)
        assert coordinator.groups["loaded"].state is GroupState.EMPTY  # it expired
        coordinator.complete_loading(0, {})
        coordinator.fail_loading(2)
        assert not coordinator.loading
        assert coordinator.partition_error("loading") is None
        assert coordinator.heartbeat("failed", "m1", 3) is ErrorCode.NOT_COORDINATOR
    asyncio.run(test())


# ---- the loader on a real log ---------------------------------------------------------------


def make_broker(log_dir: Path, clock: ManualClock) -> Broker:
    properties = {"log.dirs": str(log_dir), "offsets.topic.num.partitions": "4",
                  "group.initial.rebalance.delay.ms": "0"}
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=clock)
    broker.startup()
    return broker


@pytest.fixture
def restarted(tmp_path: Path) -> Any:
    """A broker restarted over a log with offsets of "big" (many) and "small", and the Stable
    group "big"; nothing loaded yet."""
    assert partition_for("big", 4) != partition_for("small", 4)
    clock = ManualClock()
    broker = make_broker(tmp_path, clock)
    broker.offsets_loader.load_all()
    create_topic(broker, "t", num_partitions=2)
    store = broker.offset_store
    for offset in range(50):
        store.commit("big", {("t", 0): OffsetAndMetadata(offset, metadata="m"), ("t", 1): OffsetAndMetadata(7)})
    store.commit("small", {("t", 0): OffsetAndMetadata(3)})
    broker.shutdown()
    reopened = make_broker(tmp_path, clock)
    yield reopened
    reopened.shutdown()


def test_schedule_marks_the_partitions_with_records_loading_smallest_log_first(restarted: Broker) -> None:
    assert restarted.offsets_loader.pending == [partition_for("small", 4), partition_for("big", 4)]
    assert all(restarted.group_coordinator.partition_error(g) is LOAD for g in ("big", "small"))
    empty = next(g for g in ("a", "b", "c", "d", "e") if partition_for(g, 4) not in
                 (partition_for("small", 4), partition_for("big", 4)))
    assert restarted.group_coordinator.partition_error(empty) is None  # nothing to replay


def test_load_next_serves_one_partition_at_a_time(restarted: Broker) -> None:
    loader, coordinator = restarted.offsets_loader, restarted.group_coordinator
    assert loader.load_next() == partition_for("small", 4)
    assert restarted.offset_store.fetch("small", "t", 0) == OffsetAndMetadata(3, commit_timestamp_ms=0)
    assert coordinator.partition_error("small") is None and coordinator.partition_error("big") is LOAD
    assert restarted.offset_store.group_offsets("big") == {}  # not loaded: nothing half-applied
    assert loader.load_next() == partition_for("big", 4) and loader.load_next() is None
    assert restarted.offset_store.fetch("big", "t", 0).committed_offset == 49  # type: ignore[union-attr]
    assert coordinator.get_group("big") is not None and not coordinator.loading


def test_background_run_reads_off_the_loop_and_applies_on_it(restarted: Broker) -> None:
    async def test() -> None:
        await restarted.offsets_loader.start()
        assert not restarted.group_coordinator.loading
        assert restarted.offset_store.fetch("big", "t", 1).committed_offset == 7  # type: ignore[union-attr]
    asyncio.run(test())


def test_a_failed_read_answers_not_coordinator_and_the_rest_loads(
    restarted: Broker, monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = loading_module.read_partition

    reads: list[int] = []

    def failing(partition: Any, **kwargs: Any) -> Any:
        if partition.partition == partition_for("big", 4):
            reads.append(partition.partition)
            raise KafkaStorageError("disk gone")
        return real(partition, **kwargs)

    monkeypatch.setattr(loading_module, "read_partition", failing)

    async def test() -> None:
        await restarted.offsets_loader.start()
    asyncio.run(test())
    assert len(reads) == loading_module.LOAD_ATTEMPTS  # read again, then given up
    assert restarted.group_coordinator.partition_error("big") is ErrorCode.NOT_COORDINATOR
    assert restarted.group_coordinator.partition_error("small") is None


def test_a_read_that_fails_once_is_retried(restarted: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    real = loading_module.read_partition
    failures = [ValueError("index closed: the cleaner swapped a segment")]

    def flaky(partition: Any, **kwargs: Any) -> Any:
        if partition.partition == partition_for("big", 4) and failures:
            raise failures.pop()
        return real(partition, **kwargs)

    monkeypatch.setattr(loading_module, "read_partition", flaky)

    async def test() -> None:
        await restarted.offsets_loader.start()
    asyncio.run(test())
    assert not failures and restarted.group_coordinator.partition_error("big") is None
    assert restarted.offset_store.fetch("big", "t", 0).committed_offset == 49  # type: ignore[union-attr]


def test_stop_cancels_the_load(restarted: Broker) -> None:
    async def test() -> None:
        loader = restarted.offsets_loader
        loader.start()
        await loader.stop()
        assert restarted.group_coordinator.loading  # what was not loaded stays loading
    asyncio.run(test())


# ---- every group API while the group's partition loads -----------------------------------------


def context(broker: Broker, api_key: int, version: int) -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1,
                           client_id="c")
    return RequestContext(header=header, api_version=version, broker=broker, connection_id="10.0.0.1:1")


def test_group_apis_answer_load_in_progress_and_find_coordinator_answers(restarted: Broker) -> None:
    async def test() -> None:
        def call(module: Any, api_key: int, version: int, request: Any) -> Any:
            return module.handle(context(restarted, api_key, version), request)

        found = call(find_coordinator, 10, 4, FindCoordinatorRequest(coordinator_keys=["big"]))
        assert found.coordinators[0].error_code == 0
        join = call(join_group, 11, 9, JoinGroupRequest(
            group_id="big", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol("range", b"")]))
        assert join.error_code == LOAD
        assert call(sync_group, 14, 5, SyncGroupRequest(group_id="big", member_id="m")).error_code == LOAD
        assert call(heartbeat, 12, 4, HeartbeatRequest(group_id="big", member_id="m")).error_code == LOAD
        assert call(leave_group, 13, 5, LeaveGroupRequest(group_id="big")).error_code == LOAD
        assert call(leave_group, 13, 2, LeaveGroupRequest(group_id="big", member_id="m")).error_code == LOAD
        assert [g.error_code for g in call(describe_groups, 15, 5, DescribeGroupsRequest(groups=["big"])).groups] == [LOAD]
        assert call(list_groups, 16, 5, ListGroupsRequest()).error_code == LOAD
        assert [r.error_code for r in call(delete_groups, 42, 2, DeleteGroupsRequest(groups_names=["big"])).results] == [LOAD]
        commit = call(offset_commit, 8, 9, OffsetCommitRequest(group_id="big", topics=[OffsetCommitRequestTopic(
            name="t", partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]))
        assert commit.topics[0].partitions[0].error_code == LOAD
        batched = call(offset_fetch, 9, 9, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id="big")]))
        assert [g.error_code for g in batched.groups] == [LOAD]
        single = call(offset_fetch, 9, 7, OffsetFetchRequest(group_id="big", topics=[
            OffsetFetchRequestTopic(name="t", partition_indexes=[0])]))
        assert single.error_code == LOAD
        assert call(offset_delete, 47, 0, OffsetDeleteRequest(group_id="big")).error_code == LOAD
    asyncio.run(test())
