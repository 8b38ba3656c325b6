"""Which internal partitions a coordinator serves (``broker.coordinator_partitions``): the rules
one by one, a hypothesis state machine against a model written as Kafka states them (the last
accepted election wins, an older resignation never undoes a newer election, only the load of
the current election is applied), and the elections read from a replica manager delta. Then the
group and transaction coordinators in a cluster: NOT_COORDINATOR for what another node leads,
COORDINATOR_LOAD_IN_PROGRESS while loading, parked requests and ids dropped at resignation. No
sockets: fake timers and a fake transaction log."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker.coordinator_partitions import (
    CoordinatorElections,
    CoordinatorPartitions,
    PartitionState,
    coordinator_elections,
)
from broker.group import GroupConfig, JoinRequest, Protocol, SyncRequest
from broker.group.coordinator import GroupCoordinator
from broker.transaction.coordinator import TransactionConfig, TransactionCoordinator
from broker.transaction.metadata import TransactionState
from protocol.errors import ErrorCode
from replication.metadata.delta import LocalReplicaChanges, ReplicaState
from replication.metadata.image import PartitionImage
from storage.clock import ManualClock
from tests.unit.broker.test_group_coordinator import FakeTimers
from tests.unit.broker.test_transaction_coordinator import FakeLog, FakeMarkers

NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
LOADING = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

# -- the rules ------------------------------------------------------------------------------------


def test_a_cluster_serves_nothing_until_elected_and_loaded() -> None:
    partitions = CoordinatorPartitions()
    assert partitions.error(3) is NOT_COORDINATOR
    assert partitions.elect(3, 5) is True
    assert partitions.error(3) is LOADING and partitions.loading
    assert partitions.complete_loading(3, 5) is True
    assert partitions.error(3) is None and not partitions.loading


def test_a_single_node_serves_every_partition_it_has_not_heard_of() -> None:
    partitions = CoordinatorPartitions(owns_all=True)
    assert partitions.error(7) is None
    partitions.begin_loading(7)
    assert partitions.error(7) is LOADING
    assert partitions.complete_loading(7) is True and partitions.error(7) is None


def test_the_same_or_an_older_election_changes_nothing() -> None:
    partitions = CoordinatorPartitions()
    partitions.elect(0, 4)
    partitions.complete_loading(0, 4)
    assert partitions.elect(0, 4) is False and partitions.elect(0, 2) is False
    assert partitions.elect(0, 6) is False  # still leader with a new epoch: no reload
    assert partitions.state(0) is PartitionState.ACTIVE and partitions.epoch(0) == 6


def test_an_older_resignation_does_not_undo_a_newer_election() -> None:
    partitions = CoordinatorPartitions()
    partitions.elect(1, 8)
    assert partitions.resign(1, 7) is False and partitions.resign(1, 8) is False
    assert partitions.error(1) is LOADING
    assert partitions.resign(1, 9) is True
    assert partitions.error(1) is NOT_COORDINATOR
    assert partitions.resign(1, None) is False  # already gone


def test_a_partition_that_left_this_node_resigns_whatever_its_epoch() -> None:
    partitions = CoordinatorPartitions()
    partitions.elect(2, 3)
    assert partitions.resign(2, None) is True and partitions.state(2) is None


def test_a_load_is_stale_after_a_resignation_or_a_newer_election() -> None:
    partitions = CoordinatorPartitions()
    partitions.elect(0, 1)
    partitions.resign(0, 2)
    partitions.elect(0, 3)
    assert partitions.complete_loading(0, 1) is False  # the first load: stale
    assert partitions.error(0) is LOADING
    assert partitions.complete_loading(0, 3) is True


def test_a_failed_load_answers_not_coordinator_until_elected_again() -> None:
    partitions = CoordinatorPartitions()
    partitions.elect(4, 0)
    assert partitions.fail_loading(4, 0) is True
    assert partitions.error(4) is NOT_COORDINATOR
    assert partitions.elect(4, 0) is False
    assert partitions.elect(4, 1) is True and partitions.error(4) is LOADING


# -- the model ------------------------------------------------------------------------------------


@dataclass
class ModelPartition:
    epoch: int
    state: str  # "loading", "active", "failed"


class PartitionsMachine(RuleBasedStateMachine):
    """Every operation against the model; ``complete`` and ``fail`` may name any epoch."""

    def __init__(self) -> None:
        super().__init__()
        self.partitions = CoordinatorPartitions()
        self.model: dict[int, ModelPartition] = {}

    @rule(index=st.integers(0, 2), epoch=st.integers(0, 6))
    def elect(self, index: int, epoch: int) -> None:
        known = self.model.get(index)
        expected = known is None or (epoch > known.epoch and known.state == "failed")
        if known is None or epoch > known.epoch:
            state = "loading" if expected else known.state if known else "loading"
            self.model[index] = ModelPartition(epoch, state)
        assert self.partitions.elect(index, epoch) is expected

    @rule(index=st.integers(0, 2), epoch=st.none() | st.integers(0, 6))
    def resign(self, index: int, epoch: int | None) -> None:
        known = self.model.get(index)
        expected = known is not None and (epoch is None or epoch > known.epoch)
        if expected:
            del self.model[index]
        assert self.partitions.resign(index, epoch) is expected

    @rule(index=st.integers(0, 2), epoch=st.integers(0, 6), succeeded=st.booleans())
    def finish_load(self, index: int, epoch: int, succeeded: bool) -> None:
        known = self.model.get(index)
        current = known is not None and known.state == "loading" and known.epoch == epoch
        if current:
            assert known is not None
            known.state = "active" if succeeded else "failed"
        finish = self.partitions.complete_loading if succeeded else self.partitions.fail_loading
        assert finish(index, epoch) is current

    @invariant()
    def answers_match(self) -> None:
        errors = {"loading": LOADING, "active": None, "failed": NOT_COORDINATOR}
        for index in range(3):
            known = self.model.get(index)
            assert self.partitions.error(index) is (NOT_COORDINATOR if known is None
                                                    else errors[known.state])
            assert self.partitions.epoch(index) == (None if known is None else known.epoch)
        assert self.partitions.loading == any(p.state == "loading" for p in self.model.values())


PartitionsMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=30,
                                               deadline=None)
TestPartitionsMachine = PartitionsMachine.TestCase


# -- elections from a delta -----------------------------------------------------------------------


def replica(topic: str, index: int, leader: int, epoch: int) -> ReplicaState:
    image = PartitionImage(partition_id=index, replicas=(1, 2, 3), isr=(1, 2, 3), leader=leader,
                           leader_epoch=epoch, partition_epoch=epoch)
    return ReplicaState(topic, uuid.uuid4(), image)


def test_elections_of_one_topic_from_local_changes() -> None:
    changes = LocalReplicaChanges(
        deletes=(("__consumer_offsets", 9), ("orders", 0)),
        leaders=(replica("__consumer_offsets", 1, 1, 4), replica("orders", 1, 1, 2)),
        followers=(replica("__consumer_offsets", 2, 3, 7), replica("__transaction_state", 0, 2, 1)),
    )
    assert coordinator_elections(changes, "__consumer_offsets") == CoordinatorElections(
        elected=((1, 4),), resigned=((2, 7), (9, None)))
    assert coordinator_elections(changes, "__transaction_state") == CoordinatorElections(
        elected=(), resigned=((0, 1),))
    assert coordinator_elections(LocalReplicaChanges(), "__consumer_offsets") == CoordinatorElections()


# -- the group coordinator in a cluster -----------------------------------------------------------


def cluster_group_coordinator() -> tuple[GroupCoordinator, FakeTimers]:
    timers = FakeTimers(ManualClock())
    config = GroupConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=0)
    partition_of = {"a": 0, "b": 1}
    coordinator = GroupCoordinator(config=config, clock=timers.clock, call_later=timers.call_later,
                                   partition_for=partition_of.__getitem__, owns_all=False)
    return coordinator, timers


def join(member_id: str = "") -> JoinRequest:
    return JoinRequest(member_id=member_id, client_id="c", protocol_type="consumer",
                       protocols=(Protocol("range", b""),), session_timeout_ms=10_000,
                       rebalance_timeout_ms=30_000, require_known_member_id=False)


def test_group_requests_for_a_partition_led_elsewhere_answer_not_coordinator() -> None:
    coordinator, _ = cluster_group_coordinator()
    assert coordinator.join("a", join()).error_code is NOT_COORDINATOR  # type: ignore[union-attr]
    assert coordinator.heartbeat("a", "m", 1) is NOT_COORDINATOR
    assert coordinator.sync("a", SyncRequest("m", 1)).error_code is NOT_COORDINATOR  # type: ignore[union-attr]
    assert coordinator.delete("a") is NOT_COORDINATOR
    assert coordinator.partitions.elect(0, 2)
    assert coordinator.partition_error("a") is LOADING
    assert coordinator.partition_error("b") is NOT_COORDINATOR
    assert coordinator.complete_loading(0, {}, simple_groups=["a"], leader_epoch=2)
    assert coordinator.partition_error("a") is None and coordinator.get_group("a") is not None


def test_a_stale_load_adds_no_group() -> None:
    coordinator, _ = cluster_group_coordinator()
    coordinator.partitions.elect(0, 1)
    coordinator.partitions.resign(0, 2)
    assert coordinator.complete_loading(0, {}, simple_groups=["a"], leader_epoch=1) is False
    assert coordinator.groups == {} and coordinator.partition_error("a") is NOT_COORDINATOR


def test_resignation_answers_parked_joins_not_coordinator_and_forgets_the_groups() -> None:
    async def test() -> None:
        coordinator, timers = cluster_group_coordinator()
        for index in (0, 1):
            coordinator.partitions.elect(index, 1)
            coordinator.complete_loading(index, {}, leader_epoch=1)
        parked = coordinator.join("a", join())
        other = coordinator.join("b", join())
        assert isinstance(parked, asyncio.Future) and isinstance(other, asyncio.Future)
        assert coordinator.partitions.resign(0, 2)
        assert coordinator.unload(0) == ["a"]
        assert parked.done() and parked.result().error_code is NOT_COORDINATOR
        assert coordinator.get_group("a") is None and coordinator.get_group("b") is not None
        assert coordinator.partition_error("a") is NOT_COORDINATOR
        timers.advance(1)  # the other group's rebalance goes on
        assert other.done() and other.result().error_code is ErrorCode.NONE

    asyncio.run(test())


# -- the transaction coordinator in a cluster -----------------------------------------------------


def cluster_transaction_coordinator(markers: FakeMarkers | None = None) -> TransactionCoordinator:
    ids = itertools.count(100)
    return TransactionCoordinator(
        config=TransactionConfig(), clock=ManualClock(), log=FakeLog(),
        markers=markers or FakeMarkers(), allocate_producer_id=lambda: next(ids),
        partition_for={"x": 0, "y": 1}.__getitem__, owns_all=False)


def test_transactional_ids_of_partitions_led_elsewhere_answer_not_coordinator() -> None:
    coordinator = cluster_transaction_coordinator()
    assert coordinator.init_producer_id("x", 60_000).error is NOT_COORDINATOR
    assert coordinator.add_partitions("x", 1, 0, [("t", 0)]) is NOT_COORDINATOR
    assert coordinator.end_transaction("x", 1, 0, commit=True).error is NOT_COORDINATOR
    assert coordinator.describe("x") is NOT_COORDINATOR
    assert coordinator.verify_partitions("x", 1, 0, [("t", 0)]) == {("t", 0): NOT_COORDINATOR}
    coordinator.partitions.elect(0, 3)
    assert coordinator.init_producer_id("x", 60_000).error is LOADING
    assert coordinator.load_partition(0, {}, 3)
    assert coordinator.init_producer_id("x", 60_000).error is ErrorCode.NONE
    assert coordinator.init_producer_id("y", 60_000).error is NOT_COORDINATOR


def test_resignation_forgets_the_ids_of_the_partition_only() -> None:
    coordinator = cluster_transaction_coordinator()
    for index in (0, 1):
        coordinator.partitions.elect(index, 1)
        coordinator.load_partition(index, {}, 1)
    coordinator.init_producer_id("x", 60_000)
    coordinator.init_producer_id("y", 60_000)
    assert coordinator.partitions.resign(0, None)
    assert coordinator.unload_partition(0) == 1
    assert set(coordinator.transactions) == {"y"}
    assert coordinator.init_producer_id("x", 60_000).error is NOT_COORDINATOR


def test_markers_written_by_other_leaders_complete_the_transaction() -> None:
    markers = FakeMarkers(retry={("t", 0), ("t", 1)})  # as if both were sent to other leaders
    coordinator = cluster_transaction_coordinator(markers)
    coordinator.partitions.elect(0, 1)
    coordinator.load_partition(0, {}, 1)
    started = coordinator.init_producer_id("x", 60_000)
    pid, epoch = started.producer_id, started.producer_epoch
    assert coordinator.add_partitions("x", pid, epoch, [("t", 0), ("t", 1)]) is ErrorCode.NONE
    assert coordinator.end_transaction("x", pid, epoch, commit=True).error is ErrorCode.NONE
    txn = coordinator.transactions["x"]
    assert txn.state is TransactionState.PREPARE_COMMIT
    coordinator.markers_written(pid, epoch, False, {("t", 0)})  # another outcome: ignored
    coordinator.markers_written(pid, epoch + 1, True, {("t", 0)})  # another epoch: ignored
    assert txn.partitions == {("t", 0), ("t", 1)}
    coordinator.markers_written(pid, epoch, True, {("t", 0)})
    assert txn.state is TransactionState.PREPARE_COMMIT and txn.partitions == {("t", 1)}
    coordinator.markers_written(pid, epoch, True, {("t", 1)})
    assert txn.state is TransactionState.COMPLETE_COMMIT
