"""Partition reassignment, leader elections and the auto leader rebalance on three real Samsa
node processes (KRaft, combined mode): kafka-python's admin client sends
AlterPartitionReassignments / ListPartitionReassignments / ElectLeaders to any node (forwarded to
the active controller), and the metadata every node serves follows.

Until the replica data plane exists, a broker that comes back after being fenced is not put
back in the ISR by its partitions' leaders; the test does what those leaders will do, an
AlterPartition to the active controller's listener, with the broker and partition epochs read
from that node's metadata log files (no client API shows them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import InvalidReplicationAssignmentError

from broker.node_client import NodeClient
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    PartitionData,
    TopicData,
)
from protocol.messages.alter_partition_response import AlterPartitionResponse
from protocol.records import iter_batches
from replication.metadata.image import MetadataImage
from replication.metadata.records import decode_metadata_record
from tests.integration.cluster_nodes import ClusterNodes, cluster_nodes, wait_until  # noqa: F401
from tests.integration.test_cluster import admin_for, formed, live_brokers, quorum_leader

pytestmark = [pytest.mark.cluster, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def kafka_admin(cluster: ClusterNodes) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)


def create_assigned(cluster: ClusterNodes, name: str, layout: list[list[int]]) -> None:
    admin = admin_for(cluster, 1, 2, 3)  # kept alive until the future resolves
    futures = admin.create_topics(
        [NewTopic(name, len(layout), replica_assignment=layout)], operation_timeout=20)
    futures[name].result(30)


def state(admin: AdminClient, topic: str, index: int = 0) -> tuple[int, list[int], list[int]]:
    """(leader, replicas, isr) as the node ``admin`` asks serves them in Metadata."""
    partition = admin.list_topics(topic, timeout=5).topics[topic].partitions[index]
    return partition.leader, list(partition.replicas), list(partition.isrs)


def everywhere(cluster: ClusterNodes, topic: str, expected: tuple[int, list[int], list[int]],
               index: int = 0, nodes: tuple[int, ...] = (1, 2, 3)) -> None:
    """Wait until every node serves ``expected`` (ISR compared as a set)."""
    leader, replicas, isr = expected

    def serves(admin: AdminClient) -> bool:
        now_leader, now_replicas, now_isr = state(admin, topic, index)
        return now_leader == leader and now_replicas == replicas and sorted(now_isr) == sorted(isr)

    for node_id in nodes:
        admin = admin_for(cluster, node_id)
        wait_until(lambda a=admin: serves(a), timeout_s=20,  # type: ignore[misc]
                   what=f"node {node_id} serving {topic}-{index} as {expected}")


def metadata_image(cluster: ClusterNodes, node_id: int) -> MetadataImage:
    """The node's metadata log files replayed (a tail still being written is left out)."""
    image = MetadataImage()
    directory = cluster.root / f"node-{node_id}" / "__cluster_metadata-0"
    for path in sorted(directory.glob("*.log")):
        for batch in iter_batches(path.read_bytes(), allow_partial_tail=True):
            if batch.is_control:
                continue
            for record in batch.records:
                if record.value is not None:
                    image.apply(decode_metadata_record(record.value)[0], record.offset)
    return image


def election_code(client: KafkaAdminClient, topic: str) -> int:
    """The error code ElectLeaders (preferred) answers for ``topic``-0."""
    response = client.elect_leaders(0, {topic: [0]}, raise_errors=False)
    [(_, partitions, *_)] = response.replica_election_results
    return int(partitions[0][1])


def send_alter_partition(cluster: ClusterNodes, controller: int, topic: str, index: int,
                         new_isr: list[int]) -> AlterPartitionResponse:
    """AlterPartition v1 (topic by name) from the partition's leader, as the image has it."""
    image = metadata_image(cluster, controller)
    partition = image.topics_by_name[topic].partitions[index]
    leader = image.brokers.by_id[partition.leader]
    request = AlterPartitionRequest(broker_id=leader.broker_id, broker_epoch=leader.epoch, topics=[
        TopicData(topic_name=topic, partitions=[PartitionData(
            partition_index=index, leader_epoch=partition.leader_epoch,
            partition_epoch=partition.partition_epoch, new_isr=new_isr)])])

    async def ask() -> AlterPartitionResponse:
        client = NodeClient("127.0.0.1", cluster.controller_ports[controller], client_id="test",
                            request_timeout_ms=5000)
        try:
            response = await client.send(request, version=1)
            assert isinstance(response, AlterPartitionResponse)
            return response
        finally:
            await client.close()

    return asyncio.run(ask())


def test_a_reassignment_moves_replicas_and_every_node_serves_the_new_ones(cluster_nodes: Callable[..., ClusterNodes]) -> None:  # noqa: F811
    cluster = cluster_nodes(3, broker_session_timeout_ms="3000")
    formed(cluster)
    create_assigned(cluster, "moving", [[1, 2, 3]])
    client = kafka_admin(cluster)
    moving = TopicPartition("moving", 0)
    assert client.alter_partition_reassignments({moving: [3, 2]}) == {moving: None}
    everywhere(cluster, "moving", (3, [3, 2], [2, 3]))  # 1 dropped: it led, 3 leads now
    assert client.list_partition_reassignments() == {}
    wait_until(lambda: not (cluster.root / "node-1" / "moving-0").exists(),
               what="broker 1 deleting its replica")
    assert (cluster.root / "node-3" / "moving-0").is_dir()

    # An added replica fetches from the leader, joins the ISR once caught up, and that
    # completes the reassignment (the leader's AlterPartition).
    create_assigned(cluster, "growing", [[1, 2]])
    growing = TopicPartition("growing", 0)
    assert client.alter_partition_reassignments({growing: [1, 2, 3]}) == {growing: None}
    everywhere(cluster, "growing", (1, [1, 2, 3], [1, 2, 3]))
    wait_until(lambda: client.list_partition_reassignments() == {},
               what="the reassignment completed by the ISR expansion")

    # One that cannot catch up (its broker is down) stays in progress, and can be cancelled.
    create_assigned(cluster, "stuck", [[1, 2]])
    stuck = TopicPartition("stuck", 0)
    cluster.kill(3)
    live = admin_for(cluster, 1, 2)
    wait_until(lambda: live_brokers(live) == {1, 2}, timeout_s=20, what="broker 3 fenced")
    assert client.alter_partition_reassignments({stuck: [1, 2, 3]}) == {stuck: None}
    assert client.list_partition_reassignments() == {
        stuck: {"replicas": [1, 2, 3], "adding_replicas": [3], "removing_replicas": []}}
    everywhere(cluster, "stuck", (1, [1, 2, 3], [1, 2]), nodes=(1, 2))
    assert client.alter_partition_reassignments({stuck: None}) == {stuck: None}
    assert client.list_partition_reassignments() == {}
    everywhere(cluster, "stuck", (1, [1, 2], [1, 2]), nodes=(1, 2))

    results = client.alter_partition_reassignments({stuck: [1, 9]})
    assert results == {stuck: InvalidReplicationAssignmentError}
    client.close()
    cluster.start(3)  # for the fixture's clean stop


def test_a_preferred_election_gives_the_leadership_back_to_a_returning_broker(cluster_nodes: Callable[..., ClusterNodes]) -> None:  # noqa: F811
    cluster = cluster_nodes(3)
    formed(cluster)
    controller = wait_until(lambda: quorum_leader(cluster, 1), what="a quorum leader")
    assert controller is not None
    victim = next(n for n in (1, 2, 3) if n != controller)
    others = tuple(n for n in (1, 2, 3) if n != victim)
    layout = [victim] + [n for n in others]
    create_assigned(cluster, "pref", [layout])
    everywhere(cluster, "pref", (victim, layout, layout))

    cluster.kill(victim)
    survivors = admin_for(cluster, *others)
    wait_until(lambda: live_brokers(survivors) == set(others), timeout_s=20, what="victim fenced")
    everywhere(cluster, "pref", (others[0], layout, list(others)), nodes=others)
    cluster.nodes[victim].start()
    formed(cluster)

    client = kafka_admin(cluster)
    # back, but not in the ISR yet
    assert election_code(client, "pref") == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE

    answer = send_alter_partition(cluster, controller, "pref", 0, [*others, victim])
    assert answer.error_code == 0 and answer.topics[0].partitions[0].error_code == 0
    assert sorted(answer.topics[0].partitions[0].isr) == [1, 2, 3]
    everywhere(cluster, "pref", (others[0], layout, layout))

    assert election_code(client, "pref") == ErrorCode.NONE
    everywhere(cluster, "pref", (victim, layout, layout))
    assert election_code(client, "pref") == ErrorCode.ELECTION_NOT_NEEDED
    client.close()


def test_the_auto_rebalance_follows_a_reordered_replica_list(cluster_nodes: Callable[..., ClusterNodes]) -> None:  # noqa: F811
    cluster = cluster_nodes(3, leader_imbalance_check_interval_seconds="1")
    formed(cluster)
    create_assigned(cluster, "reordered", [[1, 2, 3]])
    client = kafka_admin(cluster)
    reordered = TopicPartition("reordered", 0)
    assert client.alter_partition_reassignments({reordered: [2, 1, 3]}) == {reordered: None}
    # the reorder completes at once and keeps leader 1; within a check interval broker 2,
    # now the preferred replica, leads
    everywhere(cluster, "reordered", (2, [2, 1, 3], [1, 2, 3]))
    client.close()

