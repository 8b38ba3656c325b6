"""Partition reassignment, leader elections and the auto leader rebalance on three real Samsa
node processes (KRaft, combined mode): kafka-python's admin client sends
AlterPartitionReassignments / ListPartitionReassignments / ElectLeaders to any node (forwarded to
the active controller), and the metadata every node serves follows.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import InvalidReplicationAssignmentError

from protocol.errors import ErrorCode
from tests.integration.cluster_nodes import ClusterNodes, cluster_nodes, wait_until  # noqa: F401
from tests.integration.test_cluster import admin_for, formed, live_brokers, quorum_leader

pytestmark = [pytest.mark.cluster, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def kafka_admin(cluster: ClusterNodes, *node_ids: int) -> KafkaAdminClient:
    """kafka-python's admin client, bootstrapped from ``node_ids`` (default: every node)."""
    servers = (",".join(f"127.0.0.1:{cluster.client_ports[n]}" for n in node_ids) if node_ids
               else cluster.bootstrap)
    return KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=30_000)


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


def election_code(client: KafkaAdminClient, topic: str) -> int:
    """The error code ElectLeaders (preferred) answers for ``topic``-0."""
    response = client.elect_leaders(0, {topic: [0]}, raise_errors=False)
    [(_, partitions, *_)] = response.replica_election_results
    return int(partitions[0][1])


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
    # the preferred replica is fenced and out of the ISR: nothing to elect
    fenced_time = kafka_admin(cluster, *others)
    assert election_code(fenced_time, "pref") == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    fenced_time.close()

    cluster.nodes[victim].start()
    formed(cluster)
    # the returning broker catches up and its leader adds it back to the ISR (AlterPartition)
    everywhere(cluster, "pref", (others[0], layout, layout))

    client = kafka_admin(cluster)
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

