"""Three real Samsa node processes forming one KRaft cluster on 127.0.0.1 (issue: Clusters,
part 1): formation with no format step, forwarding of admin requests from any node, failover
of the active controller after kill -9, a killed node rejoining from its data, another
cluster's node refused, and a controlled shutdown (SIGTERM) handing leaderships over.

Clients: confluent-kafka (librdkafka) for admin, produce and consume; Samsa's own node client
for DescribeQuorum. Every wait polls the cluster through the protocol with a deadline.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.node_client import NodeClient
from protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from protocol.messages.describe_quorum_response import DescribeQuorumResponse
from tests.integration.cluster_nodes import ClusterNodes, free_ports, wait_until
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.cluster


def describe_quorum(port: int) -> DescribeQuorumResponse:
    """DescribeQuorum through a broker listener (forwarded to the active controller)."""
    async def ask() -> DescribeQuorumResponse:
        client = NodeClient("127.0.0.1", port, client_id="test", request_timeout_ms=5000)
        try:
            request = DescribeQuorumRequest(topics=[TopicData(
                topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])])
            response = await client.send(request)
            assert isinstance(response, DescribeQuorumResponse)
            return response
        finally:
            await client.close()

    return asyncio.run(ask())


def quorum_leader(cluster: ClusterNodes, node_id: int) -> int | None:
    partition = describe_quorum(cluster.client_ports[node_id]).topics[0].partitions[0]
    return partition.leader_id if partition.error_code == 0 and partition.leader_id >= 0 else None


def admin_for(cluster: ClusterNodes, *node_ids: int) -> AdminClient:
    servers = ",".join(f"127.0.0.1:{cluster.client_ports[n]}" for n in node_ids)
    return AdminClient({"bootstrap.servers": servers})


def live_brokers(admin: AdminClient) -> set[int]:
    return set(admin.list_topics(timeout=5).brokers)


def formed(cluster: ClusterNodes, node_ids: tuple[int, ...] = (1, 2, 3)) -> None:
    admin = admin_for(cluster, *node_ids)
    wait_until(lambda: live_brokers(admin) == set(node_ids), timeout_s=30,
               what=f"brokers {node_ids} registered and unfenced")


def meta_cluster_id(cluster: ClusterNodes, node_id: int) -> str | None:
    path = cluster.root / f"node-{node_id}" / "meta.properties"
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.split("=", 1)[1]
    return None


def create_topic(admin: AdminClient, name: str, partitions: int, replication_factor: int) -> None:
    futures = admin.create_topics([NewTopic(name, partitions, replication_factor)],
                                  operation_timeout=20)
    futures[name].result(30)


def test_three_nodes_form_one_cluster_with_no_format_step(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    ids = wait_until(lambda: {meta_cluster_id(cluster, n) for n in (1, 2, 3)} if all(
        meta_cluster_id(cluster, n) for n in (1, 2, 3)) else None, what="cluster.id everywhere")
    assert len(ids) == 1
    metadata = admin_for(cluster, 2).list_topics(timeout=5)
    assert metadata.cluster_id == ids.pop()
    partition = describe_quorum(cluster.client_ports[3]).topics[0].partitions[0]
    assert partition.error_code == 0
    assert metadata.controller_id == partition.leader_id in (1, 2, 3)
    assert sorted(voter.replica_id for voter in partition.current_voters) == [1, 2, 3]
    assert partition.high_watermark > 0


def test_admin_requests_on_any_node_reach_the_controller(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    leader = wait_until(lambda: quorum_leader(cluster, 1), what="a quorum leader")
    follower = next(n for n in (1, 2, 3) if n != leader)
    create_topic(admin_for(cluster, follower), "spread", partitions=6, replication_factor=3)
    for node_id in (1, 2, 3):  # every node's image has it, placed over the three brokers
        topic = wait_until(lambda n=node_id: admin_for(cluster, n).list_topics(
            "spread", timeout=5).topics["spread"], what=f"the topic on node {node_id}")
        assert topic.error is None and len(topic.partitions) == 6
        for partition in topic.partitions.values():
            assert sorted(partition.replicas) == [1, 2, 3]
            assert partition.leader == partition.replicas[0]
        leaders = [partition.leader for partition in topic.partitions.values()]
        assert sorted(leaders.count(n) for n in (1, 2, 3)) == [2, 2, 2]
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        create_topic(admin_for(cluster, follower), "spread", partitions=1, replication_factor=3)


def produce_and_consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for index in range(count):
        producer.produce(topic, value=f"v{index}".encode(), partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_kill_9_of_the_active_controller_elects_another_and_work_goes_on(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    create_topic(admin_for(cluster, 1), "before-failover", partitions=6, replication_factor=3)
    old_leader = wait_until(lambda: quorum_leader(cluster, 1), what="a quorum leader")
    survivors = tuple(n for n in (1, 2, 3) if n != old_leader)
    cluster.kill(old_leader)
    killed_at = time.monotonic()
    new_leader = wait_until(
        lambda: (leader := quorum_leader(cluster, survivors[0])) not in (None, old_leader) and leader,
        timeout_s=15, what="a new quorum leader")
    elapsed = time.monotonic() - killed_at
    assert new_leader in survivors
    assert elapsed < 10, f"failover took {elapsed:.1f} s"
    admin = admin_for(cluster, *survivors)
    wait_until(lambda: live_brokers(admin) == set(survivors), timeout_s=20,
               what="the killed broker fenced after its session")
    # its partitions elected new leaders from their ISRs; it left every ISR
    topic = admin.list_topics("before-failover", timeout=5).topics["before-failover"]
    assert all(p.leader in survivors and old_leader not in p.isrs
               for p in topic.partitions.values())
    create_topic(admin, "after-failover", partitions=2, replication_factor=2)
    topic = admin.list_topics("after-failover", timeout=5).topics["after-failover"]
    assert all(set(p.replicas) == set(survivors) for p in topic.partitions.values())
    bootstrap = ",".join(f"127.0.0.1:{cluster.client_ports[n]}" for n in survivors)
    assert produce_and_consume(bootstrap, "after-failover", 20) == [f"v{i}".encode() for i in range(20)]


def test_a_killed_node_restarts_from_its_data_and_rejoins(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    create_topic(admin_for(cluster, 1), "before", partitions=3, replication_factor=3)
    cluster.kill(2)
    admin = admin_for(cluster, 1, 3)
    wait_until(lambda: live_brokers(admin) == {1, 3}, timeout_s=20, what="broker 2 fenced")
    create_topic(admin, "while-down", partitions=1, replication_factor=2)
    cluster.nodes[2].overrides = cluster.overrides(2)
    cluster.nodes[2].start()
    formed(cluster)
    metadata = admin_for(cluster, 2).list_topics(timeout=5)  # node 2's own image caught up
    assert {"before", "while-down"} <= set(metadata.topics)
    assert (cluster.root / "node-2" / "before-0").is_dir()


def test_a_node_of_another_cluster_is_refused_and_keeps_its_data(cluster_nodes, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other = cluster_nodes(1)  # node 1 of a one-node cluster: its own cluster id
    other_id = wait_until(lambda: meta_cluster_id(other, 1), what="the other cluster's id")
    other.stop_all()
    foreign_data = other.root / "node-1"
    foreign_meta = (foreign_data / "meta.properties").read_text().replace("node.id=1", "node.id=3")
    (foreign_data / "meta.properties").write_text(foreign_meta)
    metadata_before = sorted(p.name for p in (foreign_data / "__cluster_metadata-0").iterdir())

    cluster = ClusterNodes(tmp_path / "main", 3)
    cluster.start(1)
    cluster.start(2)
    formed(cluster, (1, 2))
    node3 = cluster.overrides(3)
    node3["log.dirs"] = str(foreign_data)
    cluster.nodes[3] = cluster.nodes[1].__class__(
        log_dir=foreign_data, overrides=node3, stderr_path=tmp_path / "node-3.log").start()
    try:
        wait_until(lambda: "belongs to another cluster" in cluster.nodes[3].log(), timeout_s=20,
                   what="node 3 refused")
        assert live_brokers(admin_for(cluster, 1, 2)) == {1, 2}
        assert meta_cluster_id(cluster, 1) != other_id
    finally:
        codes = cluster.stop_all()
    assert codes[3] == 0
    assert f"cluster.id={other_id}" in (foreign_data / "meta.properties").read_text()
    assert sorted(p.name for p in (foreign_data / "__cluster_metadata-0").iterdir()) == metadata_before


def test_sigterm_moves_leaderships_away_before_the_node_stops(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    admin = admin_for(cluster, 1, 2, 3)
    create_topic(admin, "handover", partitions=6, replication_factor=3)
    controller = wait_until(lambda: quorum_leader(cluster, 1), what="a quorum leader")
    stopping = controller  # the active controller: its quorum leadership moves too
    process = cluster.nodes[stopping].process
    assert process is not None
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    log = cluster.nodes[stopping].log()
    assert "controlled shutdown" not in log or "without moving leaderships" not in log
    others = tuple(n for n in (1, 2, 3) if n != stopping)
    topic = admin_for(cluster, *others).list_topics("handover", timeout=5).topics["handover"]
    assert all(p.leader in others for p in topic.partitions.values())
    assert wait_until(lambda: quorum_leader(cluster, others[0]), what="a new quorum leader") in others


def test_a_broker_only_node_joins_as_an_observer(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    port = free_ports(1)[0]
    overrides = {"process.roles": "broker", "node.id": "4", "controller.quorum.voters": cluster.voters,
                 "controller.listener.names": "CONTROLLER",
                 "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}
    node = BrokerProcess(log_dir=cluster.root / "node-4", overrides=overrides,
                         stderr_path=cluster.root / "node-4.log")
    cluster.nodes[4] = node.start()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    wait_until(lambda: live_brokers(admin) == {1, 2, 3, 4}, what="broker 4 registered")
    partition = describe_quorum(port).topics[0].partitions[0]
    assert sorted(v.replica_id for v in partition.current_voters) == [1, 2, 3]
    assert [o.replica_id for o in partition.observers] == [4]
    create_topic(admin, "four", partitions=4, replication_factor=1)
    topic = admin.list_topics("four", timeout=5).topics["four"]
    assert sorted(p.leader for p in topic.partitions.values()) == [1, 2, 3, 4]


def test_a_node_behind_the_leaders_log_start_catches_up_from_a_snapshot(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    """FetchSnapshot (KIP-630) between real processes: the leader snapshots often and deletes
    the log below its snapshots, so a node that was down restarts behind the log start."""
    cluster = cluster_nodes(3, **{
        "metadata.log.max.record.bytes.between.snapshots": "2048",
        "metadata.max.retention.bytes": "1",  # keep only what the latest snapshot needs
        "metadata.log.segment.min.bytes": "1024",
        "metadata.log.segment.bytes": "4096",
    })
    formed(cluster)
    cluster.kill(3)
    admin = admin_for(cluster, 1, 2)
    wait_until(lambda: live_brokers(admin) == {1, 2}, timeout_s=20, what="broker 3 fenced")
    for index in range(40):
        create_topic(admin, f"while-3-was-down-{index}", partitions=1, replication_factor=2)
    leader = wait_until(lambda: quorum_leader(cluster, 1), what="a quorum leader")
    leader_log = cluster.root / f"node-{leader}" / "__cluster_metadata-0"
    wait_until(lambda: list(leader_log.glob("*.checkpoint")), what="a snapshot on the leader")
    wait_until(lambda: min(int(p.name.split(".")[0]) for p in leader_log.glob("*.log")) > 0,
               what="the leader's metadata log start above 0")
    cluster.nodes[3].start()
    formed(cluster)
    wait_until(lambda: "installing metadata snapshot" in cluster.nodes[3].log(),
               what="node 3 installs the leader's snapshot")
    topics = admin_for(cluster, 3).list_topics(timeout=5).topics
    assert {f"while-3-was-down-{index}" for index in range(40)} <= set(topics)
