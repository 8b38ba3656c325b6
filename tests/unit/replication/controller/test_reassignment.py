"""Partition reassignment (KIP-455): start, progress through AlterPartition-like ISR changes,
completion, cancellation, listing, refusals."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from replication.controller.partition_change import build_partition_change
from replication.controller.reassignment import (
    OngoingReassignment,
    list_partition_reassignments,
    plan_alter_partition_reassignments,
)
from replication.metadata.image import TOPIC_RESOURCE_TYPE
from tests.unit.replication.controller.cluster import Cluster


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3, 4])
    cluster.add_topic("t", [[1, 2], [2, 3]])
    return cluster


def reassign(cluster: Cluster, *targets: tuple[int, list[int] | None], topic: str = "t") -> list[int]:
    results, records = plan_alter_partition_reassignments(cluster.image, [(topic, list(targets))])
    cluster.apply(records)
    return [r.error_code for r in results]


def isr_change(cluster: Cluster, isr: list[int], index: int = 0) -> None:
    """What the leader's AlterPartition would write."""
    topic = cluster.image.topics_by_name["t"]
    record = build_partition_change(topic.topic_id, topic.partitions[index], isr=isr,
                                    is_acceptable_leader=cluster.image.brokers.is_active)
    assert record is not None
    cluster.apply([record])


def test_a_reassignment_runs_to_completion(cluster: Cluster) -> None:
    epoch = cluster.partition("t").leader_epoch
    assert reassign(cluster, (0, [3, 4])) == [ErrorCode.NONE]
    part = cluster.partition("t")
    assert (part.replicas, part.adding_replicas, part.removing_replicas) == ((3, 4, 1, 2), (3, 4), (1, 2))
    assert part.leader == 1 and part.leader_epoch == epoch
    assert list_partition_reassignments(cluster.image) == [
        OngoingReassignment("t", 0, (3, 4, 1, 2), (3, 4), (1, 2))]
    isr_change(cluster, [1, 2, 3])
    assert cluster.partition("t").reassigning
    isr_change(cluster, [1, 2, 3, 4])
    part = cluster.partition("t")
    assert (part.replicas, part.isr, part.leader) == ((3, 4), (3, 4), 3)
    assert not part.reassigning and part.leader_epoch > epoch
    assert list_partition_reassignments(cluster.image) == []


def test_a_reorder_completes_at_once(cluster: Cluster) -> None:
    assert reassign(cluster, (0, [2, 1])) == [ErrorCode.NONE]
    part = cluster.partition("t")
    assert part.replicas == (2, 1) and not part.reassigning and part.leader == 1


def test_the_same_replicas_is_no_change(cluster: Cluster) -> None:
    before = cluster.image.last_offset
    assert reassign(cluster, (0, [1, 2])) == [ErrorCode.NONE]
    assert cluster.image.last_offset == before


def test_cancelling_reverts_to_the_original_replicas(cluster: Cluster) -> None:
    reassign(cluster, (0, [1, 3]))
    assert reassign(cluster, (0, None)) == [ErrorCode.NONE]
    part = cluster.partition("t")
    assert (part.replicas, part.isr, part.leader) == ((1, 2), (1, 2), 1)
    assert not part.reassigning
    assert reassign(cluster, (0, None)) == [ErrorCode.NO_REASSIGNMENT_IN_PROGRESS]


def test_a_cancel_needing_an_unclean_election_needs_the_topic_config(cluster: Cluster) -> None:
    topic_id = cluster.image.topics_by_name["t"].topic_id
    # replicas [3, 1] moving from 1 to 3, and only 3 (being added) is in sync
    cluster.apply([PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[3, 1], isr=[3],
                                   adding_replicas=[3], removing_replicas=[1], leader=3,
                                   leader_epoch=4, partition_epoch=4)])
    assert reassign(cluster, (0, None)) == [ErrorCode.INVALID_REPLICA_ASSIGNMENT]
    cluster.apply([ConfigRecord(resource_type=TOPIC_RESOURCE_TYPE, resource_name="t",
                                name="unclean.leader.election.enable", value="true")])
    assert reassign(cluster, (0, None)) == [ErrorCode.NONE]
    part = cluster.partition("t")
    assert (part.replicas, part.isr, part.leader, part.leader_epoch) == ((1,), (1,), 1, 5)
    assert not part.reassigning


@pytest.mark.parametrize(("topic", "target", "code"), [
    ("nope", [1], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("t", [], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ("t", [1, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ("t", [1, 1], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
])
def test_refusals(cluster: Cluster, topic: str, target: list[int], code: int) -> None:
    assert reassign(cluster, (0, target), topic=topic) == [code]


def test_one_bad_partition_does_not_stop_the_others(cluster: Cluster) -> None:
    assert reassign(cluster, (0, [9]), (1, [3, 4]), (5, [1])) == [
        ErrorCode.INVALID_REPLICA_ASSIGNMENT, ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert list_partition_reassignments(cluster.image, [("t", [0, 1]), ("nope", [0])]) == [
        OngoingReassignment("t", 1, (3, 4, 2), (4,), (2,))]
