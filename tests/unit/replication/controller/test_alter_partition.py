"""AlterPartition (KIP-497): Kafka's validation order and answers, table-driven."""

from __future__ import annotations

import uuid

import pytest

from protocol.codec import Message
from protocol.errors import ErrorCode, StaleBrokerEpochError
from protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from replication.controller.alter_partition import AlterPartitionResult, plan_alter_partition
from replication.controller.reassignment import plan_alter_partition_reassignments
from replication.metadata.image import RECOVERING
from tests.unit.replication.controller.cluster import Cluster


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3, 4])
    cluster.add_topic("t", [[1, 2, 3]])
    cluster.heartbeat(4, want_shut_down=True)  # 4: fenced (no leaderships: shut down at once)
    topic_id = cluster.image.topics_by_name["t"].topic_id
    cluster.apply([PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=1)])
    assert (cluster.partition("t").leader_epoch, cluster.partition("t").partition_epoch) == (1, 1)
    return cluster


def alter(cluster: Cluster, *, broker_id: int = 1, version: int = 3, topic: str = "t",
          isr: list[int] | None = None, epochs: dict[int, int] | None = None,
          **data: object) -> tuple[list[AlterPartitionResult], list[Message]]:
    part = cluster.image.topics_by_name["t"].partitions[0]
    data.setdefault("leader_epoch", part.leader_epoch)
    data.setdefault("partition_epoch", part.partition_epoch)
    isr = [1, 2] if isr is None else isr
    topic_id = cluster.image.topics_by_name[topic].topic_id if topic == "t" else uuid.uuid4()
    request = AlterPartitionRequest(
        broker_id=broker_id, broker_epoch=cluster.image.brokers.by_id[broker_id].epoch,
        topics=[TopicData(topic_name=topic, topic_id=topic_id, partitions=[PartitionData(
            partition_index=data.pop("partition_index", 0),  # type: ignore[arg-type]
            new_isr=isr,
            new_isr_with_epochs=[BrokerState(r, (epochs or {}).get(r, -1)) for r in isr],
            **data)])])  # type: ignore[arg-type]
    return plan_alter_partition(cluster.image, request, version=version)


@pytest.mark.parametrize(("changes", "error"), [
    ({"partition_index": 5}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ({"topic": "nope"}, ErrorCode.UNKNOWN_TOPIC_ID),
    ({"topic": "nope", "version": 1}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ({"leader_epoch": 2}, ErrorCode.NOT_CONTROLLER),
    ({"partition_epoch": 2}, ErrorCode.NOT_CONTROLLER),
    ({"leader_epoch": 0}, ErrorCode.FENCED_LEADER_EPOCH),
    ({"broker_id": 2}, ErrorCode.INVALID_REQUEST),
    ({"partition_epoch": 0}, ErrorCode.INVALID_UPDATE_VERSION),
    ({"isr": [1, 9]}, ErrorCode.INVALID_REQUEST),
    ({"isr": [1, 1]}, ErrorCode.INVALID_REQUEST),
    ({"isr": [2, 3]}, ErrorCode.INVALID_REQUEST),
    ({"isr": [1, 2], "leader_recovery_state": RECOVERING}, ErrorCode.INVALID_REQUEST),
    ({"isr": [1], "leader_recovery_state": RECOVERING}, ErrorCode.INVALID_REQUEST),
    ({"isr": [1, 2], "epochs": {2: 12345}}, ErrorCode.INELIGIBLE_REPLICA),
    ({"isr": [1, 2], "epochs": {2: 12345}, "version": 2}, ErrorCode.NONE),  # no epochs before v3
])
def test_refusals(cluster: Cluster, changes: dict[str, object], error: int) -> None:
    results, records = alter(cluster, **changes)  # type: ignore[arg-type]
    assert [r.error_code for r in results] == [error]
    assert (records == []) == (error != ErrorCode.NONE)


def test_fenced_shutting_down_and_unregistered_replicas_are_ineligible() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3])
    cluster.add_topic("t", [[1, 2, 3]], isrs=[[1]])
    cluster.add_topic("led", [[3]])
    cluster.heartbeat(2, want_fence=True)
    cluster.heartbeat(3, want_shut_down=True)  # leads "led": controlled shutdown
    for isr in ([1, 2], [1, 3]):
        results, _ = alter(cluster, isr=isr)
        assert results[0].error_code == ErrorCode.INELIGIBLE_REPLICA
        results, _ = alter(cluster, isr=isr, version=1)
        assert results[0].error_code == ErrorCode.OPERATION_NOT_ATTEMPTED


def test_stale_broker_epoch_fails_the_request(cluster: Cluster) -> None:
    request = AlterPartitionRequest(broker_id=1, broker_epoch=999)
    with pytest.raises(StaleBrokerEpochError):
        plan_alter_partition(cluster.image, request, version=3)


def test_a_valid_shrink_answers_the_new_state(cluster: Cluster) -> None:
    results, records = alter(cluster, isr=[1, 3], epochs={1: cluster.image.brokers.by_id[1].epoch})
    (result,) = results
    assert result.error_code == ErrorCode.NONE and result.partition is not None
    assert result.partition.isr == (1, 3) and result.partition.partition_epoch == 2
    assert result.partition.leader_epoch == 1  # an ISR change alone keeps the leader epoch
    cluster.apply(records)
    assert cluster.partition("t") == result.partition


def test_no_change_answers_the_current_state(cluster: Cluster) -> None:
    results, records = alter(cluster, isr=[1, 2, 3])
    assert records == [] and results[0].partition == cluster.partition("t")


def test_completing_a_reassignment_that_moves_the_leader_answers_new_leader_elected() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3])
    cluster.add_topic("t", [[1, 2]])
    _, records = plan_alter_partition_reassignments(cluster.image, [("t", [(0, [3, 2])])])
    cluster.apply(records)
    assert cluster.partition("t").adding_replicas == (3,)
    for version, code in ((2, ErrorCode.NEW_LEADER_ELECTED), (1, ErrorCode.FENCED_LEADER_EPOCH)):
        results, records = alter(cluster, isr=[1, 2, 3], version=version)
        assert results[0].error_code == code and len(records) == 1
    cluster.apply(records)
    after = cluster.partition("t")
    assert (after.replicas, after.isr, after.leader) == ((3, 2), (2, 3), 3)
    assert not after.reassigning
