"""Partition replication across three real Samsa node processes (issue: Clusters, part 2):
followers copy the leader's batches byte for byte, acks=all is answered once the ISR has the
records, min.insync.replicas refuses writes when too few replicas live, a killed leader's
acknowledged records survive on the new leader, and a restarted broker truncates, catches up
and rejoins the ISR.

Clients: confluent-kafka (librdkafka) and kafka-python. Every wait polls the cluster through
the protocol (or the followers' files) with a deadline.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.node_client import NodeClient
from protocol.errors import ErrorCode
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_offsets_response import ListOffsetsResponse
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.produce_response import ProduceResponse
from protocol.records import Record, encode_batch
from samsa._cluster import Cluster
from samsa._loop import LoopThread
from samsa.config import parse_config
from samsa.segments import replica_high_watermarks
from samsa.types import TopicPartition as SamsaTopicPartition
from tests.integration.cluster_nodes import ClusterNodes, wait_until
from tests.integration.test_cluster import admin_for, formed

pytestmark = pytest.mark.cluster


def create_topic(admin: AdminClient, name: str, *, partitions: int = 1, replication: int = 3,
                 **config: str) -> None:
    futures = admin.create_topics([NewTopic(name, partitions, replication, config=config)])
    futures[name].result(timeout=30)


def partition_state(admin: AdminClient, topic: str, index: int = 0) -> tuple[int, list[int]]:
    """(leader, isr) as Metadata says."""
    metadata = admin.list_topics(topic, timeout=5).topics[topic].partitions[index]
    return metadata.leader, sorted(metadata.isrs)


def produce_all(bootstrap: str, topic: str, values: list[bytes], **config: object) -> list[int]:
    """acks=all, idempotent: every value's acknowledged offset (raises on any failed delivery)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5, **config})
    offsets: list[int] = []
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            offsets.append(message.offset())  # type: ignore[attr-defined]

    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors
    return offsets


def consume_all(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: list[tuple[int, bytes]] = []
    try:
        def more() -> bool:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error() is None:
                    seen.append((message.offset(), message.value()))
            return len(seen) >= count
        wait_until(more, timeout_s=60, what=f"{count} records of {topic}")
    finally:
        consumer.close()
    return seen


def log_batches(cluster: ClusterNodes, node_id: int, topic: str) -> list[bytes]:
    """The raw batches of ``topic``-0 in node ``node_id``'s segment files, in offset order."""
    directory = cluster.root / f"node-{node_id}" / f"{topic}-0"
    batches = []
    for path in sorted(Path(directory).glob("*.log")):
        data = path.read_bytes()
        position = 0
        while position + 12 <= len(data):
            length = int.from_bytes(data[position + 8:position + 12], "big")
            if length == 0:
                break
            batches.append(data[position:position + 12 + length])
            position += 12 + length
    return batches


def test_followers_hold_the_leaders_batches_and_acks_all_waits_for_the_isr(cluster_nodes) -> None:
    cluster = cluster_nodes(3)
    formed(cluster)
    admin = admin_for(cluster, 1, 2, 3)
    create_topic(admin, "replicated", **{"min.insync.replicas": "2"})
    values = [f"value-{i}".encode() for i in range(500)]
    offsets = produce_all(cluster.bootstrap, "replicated", values)
    assert sorted(offsets) == list(range(500))
    leader, isr = partition_state(admin, "replicated")
    assert isr == [1, 2, 3]
    assert [value for _, value in consume_all(cluster.bootstrap, "replicated", 500)] == values
    expected = log_batches(cluster, leader, "replicated")
    for node_id in (1, 2, 3):
        wait_until(lambda n=node_id: log_batches(cluster, n, "replicated") == expected,
                   timeout_s=30, what=f"node {node_id} holding the leader's batches")


def test_min_insync_replicas_refuses_acks_all_when_too_few_replicas_live(cluster_nodes) -> None:
    cluster = cluster_nodes(3, broker_session_timeout_ms="3000")
    formed(cluster)
    admin = admin_for(cluster, 1, 2, 3)
    create_topic(admin, "guarded", **{"min.insync.replicas": "3"})
    assert produce_all(cluster.bootstrap, "guarded", [b"before"]) == [0]
    leader, _ = partition_state(admin, "guarded")
    victim = next(n for n in (1, 2, 3) if n != leader)
    cluster.kill(victim)
    survivors = [n for n in (1, 2, 3) if n != victim]
    survivor_admin = admin_for(cluster, *survivors)
    wait_until(lambda: victim not in partition_state(survivor_admin, "guarded")[1],
               timeout_s=60, what=f"broker {victim} leaving the ISR")
    bootstrap = ",".join(f"127.0.0.1:{cluster.client_ports[n]}" for n in survivors)
    with pytest.raises(AssertionError, match="NOT_ENOUGH_REPLICAS"):
        produce_all(bootstrap, "guarded", [b"refused"], **{"retries": 0,
                                                           "enable.idempotence": False})
    cluster.start(victim)
    wait_until(lambda: partition_state(survivor_admin, "guarded")[1] == [1, 2, 3],
               timeout_s=60, what=f"broker {victim} back in the ISR")
    assert produce_all(bootstrap, "guarded", [b"after"]) == [1]


def test_a_killed_leaders_acknowledged_records_survive(cluster_nodes) -> None:
    cluster = cluster_nodes(3, broker_session_timeout_ms="3000")
    formed(cluster)
    admin = admin_for(cluster, 1, 2, 3)
    create_topic(admin, "durable", **{"min.insync.replicas": "2"})
    first = [f"first-{i}".encode() for i in range(300)]
    produce_all(cluster.bootstrap, "durable", first)
    leader, _ = partition_state(admin, "durable")
    cluster.kill(leader)
    survivors = [n for n in (1, 2, 3) if n != leader]
    survivor_admin = admin_for(cluster, *survivors)
    wait_until(lambda: partition_state(survivor_admin, "durable")[0] in survivors,
               timeout_s=60, what="a new leader")
    bootstrap = ",".join(f"127.0.0.1:{cluster.client_ports[n]}" for n in survivors)
    second = [f"second-{i}".encode() for i in range(300)]
    offsets = produce_all(bootstrap, "durable", second)
    assert sorted(offsets) == list(range(300, 600))
    read = consume_all(bootstrap, "durable", 600)
    assert [value for _, value in read] == first + second
    assert [offset for offset, _ in read] == list(range(600))
    cluster.start(leader)  # the old leader truncates, catches up and rejoins the ISR
    wait_until(lambda: partition_state(survivor_admin, "durable")[1] == [1, 2, 3],
               timeout_s=60, what=f"broker {leader} back in the ISR")
    new_leader, _ = partition_state(survivor_admin, "durable")
    wait_until(lambda: log_batches(cluster, leader, "durable")
               == log_batches(cluster, new_leader, "durable"),
               timeout_s=30, what="the restarted broker holding the new leader's batches")


def raw_produce(port: int, topic: str, *, acks: int) -> int:
    """One Produce v9 of one record to ``topic``-0 at the node on ``port``: its error code."""
    async def ask() -> int:
        client = NodeClient("127.0.0.1", port, client_id="test", request_timeout_ms=10000)
        try:
            batch = encode_batch([Record(offset=0, timestamp=0, key=None, value=b"x")])
            request = ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])])
            response = await client.send(request, version=9)
            assert isinstance(response, ProduceResponse)
            return response.responses[0].partition_responses[0].error_code
        finally:
            await client.close()

    return asyncio.run(ask())


def test_only_the_leader_takes_produce_and_list_offsets(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    admin = admin_for(cluster, 1, 2, 3)
    create_topic(admin, "led")
    leader, _ = partition_state(admin, "led")
    for node_id in (1, 2, 3):
        expected = ErrorCode.NONE if node_id == leader else ErrorCode.NOT_LEADER_OR_FOLLOWER
        for acks in (1, -1):
            assert raw_produce(cluster.client_ports[node_id], "led", acks=acks) == expected
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g"})
    try:  # the client follows Metadata to the leader: both records, nothing else
        assert consumer.get_watermark_offsets(TopicPartition("led", 0), timeout=10) == (0, 2)
    finally:
        consumer.close()


def test_delete_records_answers_once_every_replica_moved_its_log_start(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    admin = admin_for(cluster, 1, 2, 3)
    create_topic(admin, "trimmed", **{"min.insync.replicas": "2"})
    produce_all(cluster.bootstrap, "trimmed", [f"v{i}".encode() for i in range(100)])
    futures = admin.delete_records([TopicPartition("trimmed", 0, 60)])
    deleted = futures[TopicPartition("trimmed", 0, 60)].result(timeout=30)
    assert deleted.low_watermark == 60  # every replica's log start moved before the answer
    for node_id in (1, 2, 3):  # and each replica says so itself (DescribeLogSegments)
        assert log_start_of(cluster, node_id, "trimmed") == 60


def log_start_of(cluster: ClusterNodes, node_id: int, topic: str) -> int:
    async def ask() -> int:
        client = NodeClient("127.0.0.1", cluster.client_ports[node_id], client_id="test",
                            request_timeout_ms=5000)
        try:
            request = ListOffsetsRequest(replica_id=-2, topics=[ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-2)])])
            response = await client.send(request)
            assert isinstance(response, ListOffsetsResponse)
            return response.topics[0].partitions[0].offset
        finally:
            await client.close()

    return asyncio.run(ask())


def replica_marks(bootstrap: str, topic: str) -> tuple[int, int] | None:
    """``samsa.segments.replica_high_watermarks`` of ``topic``-0 (the Spark file mode's cap)."""
    loop = LoopThread("test-replica-marks")
    cluster = Cluster(parse_config("admin", {"bootstrap.servers": bootstrap}))
    try:
        tp = SamsaTopicPartition(topic, 0)
        return loop.run(replica_high_watermarks(cluster, [tp]), timeout=60).get(tp)
    finally:
        loop.run(cluster.close(), timeout=10)
        loop.close()


def test_the_smallest_replica_high_watermark_caps_what_file_readers_plan(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3, broker_session_timeout_ms="3000")
    formed(cluster)
    admin = admin_for(cluster, 1, 2, 3)
    create_topic(admin, "capped", **{"min.insync.replicas": "1"})
    produce_all(cluster.bootstrap, "capped", [f"v{i}".encode() for i in range(50)])
    wait_until(lambda: replica_marks(cluster.bootstrap, "capped") == (50, 50), timeout_s=30,
               what="every replica's high watermark at 50")
    leader, _ = partition_state(admin, "capped")
    frozen = next(n for n in (1, 2, 3) if n != leader)
    cluster.kill(frozen)  # its files stop at 50 while the others go on
    survivors = [n for n in (1, 2, 3) if n != frozen]
    bootstrap = ",".join(f"127.0.0.1:{cluster.client_ports[n]}" for n in survivors)
    wait_until(lambda: frozen not in partition_state(admin_for(cluster, *survivors), "capped")[1],
               timeout_s=60, what=f"broker {frozen} out of the ISR")
    produce_all(bootstrap, "capped", [f"w{i}".encode() for i in range(50)])
    wait_until(lambda: replica_marks(bootstrap, "capped") == (100, 100), timeout_s=30,
               what="the live replicas' high watermarks at 100")  # the dead one left out
    cluster.start(frozen)  # back, behind: capped by its high watermark until it catches up
    wait_until(lambda: replica_marks(cluster.bootstrap, "capped") == (100, 100), timeout_s=60,
               what="the restarted replica caught up")
