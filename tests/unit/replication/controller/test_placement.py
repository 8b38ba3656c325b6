"""Replica placement: Kafka's StripedReplicaPlacer goals as properties over random clusters, its
refusals, and placement inside topic creation when brokers are registered."""

from __future__ import annotations

from collections import Counter
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import InvalidReplicaAssignmentError, InvalidReplicationFactorError
from protocol.messages.metadata.partition_record import PartitionRecord
from replication.controller.placement import UsableBroker, place_replicas, usable_brokers
from replication.metadata.controller import plan_create_partitions, plan_create_topic
from storage.config import LogConfig
from tests.unit.replication.controller.cluster import Cluster


@st.composite
def clusters(draw: st.DrawFn, *, fenced: bool = True) -> list[UsableBroker]:
    count = draw(st.integers(1, 9))
    rack_sets: list[list[str | None]] = [[None], ["a", "b"], ["a", "b", "c"], ["a", "b", "c", "d"]]
    racks = draw(st.sampled_from(rack_sets))
    brokers = [UsableBroker(broker_id, draw(st.sampled_from(racks)),
                            draw(st.booleans()) if fenced else False)
               for broker_id in draw(st.lists(st.integers(0, 50), min_size=count, max_size=count,
                                              unique=True))]
    if all(broker.fenced for broker in brokers):
        brokers[0] = UsableBroker(brokers[0].broker_id, brokers[0].rack, False)
    return brokers


@settings(max_examples=150, deadline=None)
@given(brokers=clusters(), data=st.data(), seed=st.integers(0, 2**32))
def test_every_partition_gets_distinct_usable_brokers_led_by_an_unfenced_one(
    brokers: list[UsableBroker], data: st.DataObject, seed: int
) -> None:
    factor = data.draw(st.integers(1, len(brokers)))
    partitions = data.draw(st.integers(1, 30))
    by_id = {broker.broker_id: broker for broker in brokers}
    racks = {broker.rack for broker in brokers}
    unfenced = [broker for broker in brokers if not broker.fenced]
    for replicas in place_replicas(brokers, partitions, factor, Random(seed)):
        assert len(replicas) == factor == len(set(replicas))
        assert set(replicas) <= set(by_id)
        assert not by_id[replicas[0]].fenced
        assert len({by_id[r].rack for r in replicas}) == min(factor, len(racks))
        if racks == {None}:  # no rack to spread over: fenced brokers only when needed
            fenced_count = sum(by_id[r].fenced for r in replicas)
            assert fenced_count == max(0, factor - len(unfenced))


@settings(max_examples=100, deadline=None)
@given(brokers=clusters(fenced=True), data=st.data(), seed=st.integers(0, 2**32))
def test_leaders_are_balanced_within_one(
    brokers: list[UsableBroker], data: st.DataObject, seed: int
) -> None:
    factor = data.draw(st.integers(1, len(brokers)))
    partitions = data.draw(st.integers(1, 60))
    leaders = Counter(replicas[0]
                      for replicas in place_replicas(brokers, partitions, factor, Random(seed)))
    unfenced = [broker.broker_id for broker in brokers if not broker.fenced]
    counts = [leaders[broker_id] for broker_id in unfenced]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=50, deadline=None)
@given(brokers=clusters(fenced=False), seed=st.integers(0, 2**32))
def test_replicas_are_balanced_without_racks_or_fencing(brokers: list[UsableBroker], seed: int) -> None:
    brokers = [UsableBroker(b.broker_id) for b in brokers]
    factor = min(3, len(brokers))
    counts = Counter(r for replicas in place_replicas(brokers, 10 * len(brokers), factor,
                                                      Random(seed)) for r in replicas)
    # greedy, with the leader fixed by the leader cycle: near-even, not exact
    assert max(counts.values()) - min(counts.values()) <= 2


def test_the_same_seed_gives_the_same_placement() -> None:
    brokers = [UsableBroker(n, f"r{n % 3}") for n in range(6)]
    assert place_replicas(brokers, 12, 3, Random(7)) == place_replicas(brokers, 12, 3, Random(7))


@pytest.mark.parametrize(("brokers", "factor", "message"), [
    ([UsableBroker(1)], 0, "must be positive"),
    ([UsableBroker(1, fenced=True)], 1, "All brokers are currently fenced."),
    ([UsableBroker(1), UsableBroker(2)], 3, "only 2 broker(s) are registered"),
])
def test_refusals(brokers: list[UsableBroker], factor: int, message: str) -> None:
    with pytest.raises(InvalidReplicationFactorError, match=message.replace("(", r"\(").replace(")", r"\)")):
        place_replicas(brokers, 1, factor, Random(0))


# -- in topic creation --------------------------------------------------------------------------


def create(cluster: Cluster, name: str, partitions: int, factor: int, **kwargs: object):  # type: ignore[no-untyped-def]
    return plan_create_topic(
        cluster.image, name, num_partitions=partitions, replication_factor=factor, configs={},
        node_id=1, default_num_partitions=1, default_replication_factor=1,
        default_config=LogConfig(), rng=Random(3), **kwargs)  # type: ignore[arg-type]


def test_a_cluster_topic_is_placed_over_registered_brokers() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3, 4])
    plan = create(cluster, "t", 8, 3)
    cluster.apply(plan.records)
    parts = cluster.image.topics_by_name["t"].partitions.values()
    assert plan.replication_factor == 3 and len(parts) == 8
    assert all(p.isr == p.replicas and p.leader == p.replicas[0] for p in parts)
    assert Counter(p.leader for p in parts) == {1: 2, 2: 2, 3: 2, 4: 2}


def test_fenced_and_shutting_down_brokers_are_left_out_of_the_isr() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3])
    cluster.heartbeat(3, want_fence=True)
    plan = create(cluster, "t", 4, 3)
    for record in plan.records:
        if isinstance(record, PartitionRecord):
            assert sorted(record.replicas) == [1, 2, 3]
            assert 3 not in record.isr and record.leader == record.isr[0] != 3


def test_usable_brokers_leave_out_controlled_shutdown() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2])
    cluster.add_topic("led", [[2]])
    cluster.heartbeat(2, want_shut_down=True)
    assert [b.broker_id for b in usable_brokers(cluster.image)] == [1]
    with pytest.raises(InvalidReplicationFactorError):
        create(cluster, "t", 1, 2)


def test_every_broker_fenced_refuses_creation() -> None:
    cluster = Cluster()
    cluster.register(1)
    with pytest.raises(InvalidReplicationFactorError, match="fenced"):
        create(cluster, "t", 1, 1)


def test_manual_assignments_in_a_cluster() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3])
    cluster.heartbeat(3, want_fence=True)
    plan = create(cluster, "t", -1, -1, assignments=[(0, [3, 1]), (1, [2, 3])])
    records = [r for r in plan.records if isinstance(r, PartitionRecord)]
    assert [(r.replicas, r.isr, r.leader) for r in records] == [([3, 1], [1], 1), ([2, 3], [2], 2)]
    for assignments, match in (
        ([(0, [3])], "are fenced or in controlled shutdown"),
        ([(0, [1, 9])], "broker 9, but no such broker is registered"),
        ([(0, [1, 2]), (1, [1])], "not consistent with previous partitions"),
    ):
        with pytest.raises(InvalidReplicaAssignmentError, match=match):
            create(cluster, "u", -1, -1, assignments=assignments)


def test_new_partitions_take_partition_zeros_replication_factor() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3])
    cluster.apply(create(cluster, "t", 1, 2).records)
    _, records = plan_create_partitions(cluster.image, "t", 4, assignments=None, node_id=1,
                                        rng=Random(1))
    assert [len(r.replicas) for r in records if isinstance(r, PartitionRecord)] == [2, 2, 2]
    with pytest.raises(InvalidReplicaAssignmentError, match="not consistent"):
        plan_create_partitions(cluster.image, "t", 2, assignments=[[1, 2, 3]], node_id=1)
