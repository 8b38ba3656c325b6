"""Share-group dead letters in a real three-node KRaft cluster, the dead-letter topic's
partition led by another node than the source partition: the source partition's leader sends
the letter there as a Produce (acks=-1) over the inter-broker listener
(``broker.share.dead_letters``) and confirms the record only once that is acknowledged.

The source topic lives on node 1 only; the dead-letter topic's one partition on nodes 2 and 3
(leader 2). A rejected record reaches the dead-letter topic on node 2; node 2 is then killed
(kill -9) and a second rejected record reaches it on node 3, once node 3 is elected. No
rejected record is ever delivered again, and each is dead-lettered (at least) once.

Every wait polls the cluster through the protocol with a deadline.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.node_client import NodeClient
from protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from protocol.messages.create_topics_response import CreateTopicsResponse
from samsa import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
from samsa.admin import AdminClient, ConfigResource
from samsa.types import ShareConsumerRecord
from tests.integration.cluster_nodes import ClusterNodes, cluster_nodes, wait_until  # noqa: F401

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SOURCE, DEAD_LETTERS, GROUP = "jobs", "jobs.dlq", "dlq-workers"


def create_placed_topics(cluster: ClusterNodes) -> None:
    """``jobs`` on node 1, ``jobs.dlq`` on nodes 2 and 3 (leader 2), by replica assignment."""
    async def create() -> CreateTopicsResponse:
        client = NodeClient("127.0.0.1", cluster.client_ports[1], client_id="dlq-test", request_timeout_ms=20000)
        try:
            response = await client.send(CreateTopicsRequest(timeout_ms=15000, topics=[
                CreatableTopic(name=SOURCE, num_partitions=-1, replication_factor=-1,
                               assignments=[CreatableReplicaAssignment(0, [1])]),
                CreatableTopic(name=DEAD_LETTERS, num_partitions=-1, replication_factor=-1,
                               assignments=[CreatableReplicaAssignment(0, [2, 3])]),
            ]), version=5)
        finally:
            await client.close()
        assert isinstance(response, CreateTopicsResponse)
        return response

    response = asyncio.run(create())
    assert [topic.error_code for topic in response.topics] == [0, 0], response


def leaders(admin: AdminClient) -> dict[str, int]:
    described = admin.describe_topics([SOURCE, DEAD_LETTERS])
    return {name: topic.partitions[0].leader for name, topic in described.items()}


def dead_letters_read(bootstrap: str, count: int) -> list[tuple[bytes | None, dict[str, bytes]]]:
    """The dead-letter topic's first ``count`` records (value, headers), read from the start."""
    got: list[tuple[bytes | None, dict[str, bytes]]] = []
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        consumer.assign([TopicPartition(DEAD_LETTERS, 0)])
        consumer.seek_to_beginning(TopicPartition(DEAD_LETTERS, 0))
        deadline = time.monotonic() + 60
        while len(got) < count:
            assert time.monotonic() < deadline, f"only {len(got)} dead letters: {got}"
            got += [(record.value, dict(record.headers)) for record in consumer.poll(0.5)]
    return got


def reject_until(consumer: ShareConsumer, seen: list[ShareConsumerRecord], value: bytes) -> None:
    """Poll, rejecting everything, until ``value`` was delivered (and rejected)."""
    deadline = time.monotonic() + 60
    while not any(record.value == value for record in seen):
        assert time.monotonic() < deadline, f"{value!r} not delivered; seen {seen}"
        for record in consumer.poll(0.5):
            seen.append(record)
            consumer.acknowledge(record, AcknowledgeType.REJECT)
        consumer.commit_sync()


def test_dead_letters_go_to_a_partition_led_by_another_node(cluster_nodes) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    cluster = cluster_nodes(3, broker_session_timeout_ms="3000",
                            group_share_heartbeat_interval_ms="1000")
    with AdminClient(bootstrap_servers=cluster.bootstrap) as admin:
        wait_until(lambda: len(admin.describe_cluster().brokers) == 3, what="three registered brokers")
        create_placed_topics(cluster)
        wait_until(lambda: leaders(admin) == {SOURCE: 1, DEAD_LETTERS: 2}, what="the topics' leaders")
        admin.alter_configs(ConfigResource("group", GROUP), {
            "share.auto.offset.reset": "earliest", "samsa.share.dead.letter.topic": DEAD_LETTERS})
    seen: list[ShareConsumerRecord] = []
    with Producer(bootstrap_servers=cluster.bootstrap) as producer, \
            ShareConsumer(SOURCE, bootstrap_servers=cluster.bootstrap, group_id=GROUP,
                          share_acknowledgement_mode="explicit", fetch_max_wait_ms=200) as consumer:
        producer.send(SOURCE, key=b"k0", value=b"poison-0").result(30)
        reject_until(consumer, seen, b"poison-0")
        [(value, headers)] = dead_letters_read(cluster.bootstrap, 1)
        assert value == b"poison-0"
        assert (headers["samsa.dlq.topic"], headers["samsa.dlq.partition"], headers["samsa.dlq.offset"],
                headers["samsa.dlq.reason"]) == (SOURCE.encode(), b"0", b"0", b"rejected")

        cluster.kill(2)  # the dead-letter partition's leader
        producer.send(SOURCE, key=b"k1", value=b"poison-1").result(30)
        reject_until(consumer, seen, b"poison-1")
        letters = dead_letters_read(cluster.bootstrap, 2)
        with AdminClient(bootstrap_servers=cluster.bootstrap) as admin:
            assert leaders(admin)[DEAD_LETTERS] == 3
        assert [value for value, _ in letters][:2] == [b"poison-0", b"poison-1"]
        assert {value for value, _ in letters} == {b"poison-0", b"poison-1"}  # at least once
        assert consumer.poll(1.0) == []  # neither rejected record comes back
    assert sorted((record.offset, record.delivery_count) for record in seen) == [(0, 1), (1, 1)]
