"""The group and transaction coordinators in a real three-node KRaft cluster: each group /
transactional id is coordinated by the leader of its internal partition, which every node names
alike (FindCoordinator), whatever node the client bootstrapped on; the coordinator moves with
the leadership when its node stops (SIGTERM: controlled shutdown).

Clients: confluent-kafka (librdkafka) for groups and transactions; Samsa's node client for
FindCoordinator. Every wait polls the cluster through the protocol with a deadline.
"""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.group.offsets import partition_for
from broker.node_client import NodeClient
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.find_coordinator_response import FindCoordinatorResponse
from tests.integration.cluster_nodes import ClusterNodes, cluster_nodes, wait_until  # noqa: F401

pytestmark = pytest.mark.cluster

GROUP, TRANSACTION = 0, 1
NODES = (1, 2, 3)


def find_coordinator(port: int, key: str, key_type: int) -> tuple[int, int, int]:
    """(error code, node id, port) of FindCoordinator v4 asked of the node at ``port``."""
    async def ask() -> tuple[int, int, int]:
        client = NodeClient("127.0.0.1", port, client_id="test", request_timeout_ms=5000)
        try:
            response = await client.send(
                FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), version=4)
            assert isinstance(response, FindCoordinatorResponse)
            found = response.coordinators[0]
            return found.error_code, found.node_id, found.port
        finally:
            await client.close()

    return asyncio.run(ask())


def coordinator_of(cluster: ClusterNodes, key: str, key_type: int, *, via: int) -> int | None:
    error, node_id, _ = find_coordinator(cluster.client_ports[via], key, key_type)
    return node_id if error == 0 else None


def wait_for_coordinator(cluster: ClusterNodes, key: str, key_type: int, *, via: int) -> int:
    """The coordinator of ``key`` once ``via`` names one (the internal topic is created by
    the first FindCoordinator: COORDINATOR_NOT_AVAILABLE until then)."""
    def found() -> int | None:
        return coordinator_of(cluster, key, key_type, via=via)

    coordinator = wait_until(found, timeout_s=30, what=f"a coordinator for {key} via node {via}")
    assert coordinator is not None
    return coordinator


def formed(cluster: ClusterNodes, node_ids: tuple[int, ...] = NODES) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": ",".join(
        f"127.0.0.1:{cluster.client_ports[n]}" for n in node_ids)})
    wait_until(lambda: set(admin.list_topics(timeout=5).brokers) == set(node_ids), timeout_s=30,
               what=f"brokers {node_ids} registered and unfenced")
    return admin


def key_coordinated_elsewhere(cluster: ClusterNodes, prefix: str, key_type: int, *,
                              not_on: int) -> tuple[str, int]:
    """A key whose coordinator is another node than ``not_on``, and that coordinator."""
    for attempt in range(200):
        key = f"{prefix}-{attempt}"
        coordinator = wait_for_coordinator(cluster, key, key_type, via=not_on)
        if coordinator != not_on:
            return key, coordinator
    raise AssertionError("every key is coordinated by the bootstrap node")


def create_topic(admin: AdminClient, name: str, partitions: int, replication_factor: int = 1) -> None:
    admin.create_topics([NewTopic(name, partitions, replication_factor)],
                        operation_timeout=20)[name].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


def consume(consumer: Consumer, count: int, *, timeout_s: float = 40) -> list[bytes]:
    values: list[bytes] = []

    def more() -> bool:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value() or b"")
        return len(values) >= count

    wait_until(more, timeout_s=timeout_s, what=f"{count} messages")
    return values


def test_find_coordinator_names_the_internal_partition_leader_from_every_node(cluster_nodes) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    cluster = cluster_nodes(3)
    admin = formed(cluster)
    for key, key_type, topic in (("orders-app", GROUP, "__consumer_offsets"),
                                 ("txn-app", TRANSACTION, "__transaction_state")):
        answers = [wait_for_coordinator(cluster, key, key_type, via=n) for n in NODES]
        assert len(set(answers)) == 1, answers
        metadata = admin.list_topics(topic, timeout=5).topics[topic]
        assert len(metadata.partitions) == 50
        assert all(len(p.replicas) == 3 for p in metadata.partitions.values())
        assert metadata.partitions[partition_for(key, 50)].leader == answers[0]
        _, node_id, port = find_coordinator(cluster.client_ports[1], key, key_type)
        assert port == cluster.client_ports[node_id]


def test_a_consumer_group_resumes_from_its_commit_through_a_coordinator_on_another_node(cluster_nodes) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    cluster = cluster_nodes(3)
    admin = formed(cluster)
    create_topic(admin, "orders", partitions=3)
    bootstrap = f"127.0.0.1:{cluster.client_ports[1]}"  # one node only
    group, coordinator = key_coordinated_elsewhere(cluster, "orders-app", GROUP, not_on=1)
    assert coordinator != 1
    produce(bootstrap, "orders", [f"first-{i}".encode() for i in range(10)])

    def consumer() -> Consumer:
        made = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
        made.subscribe(["orders"])
        return made

    first = consumer()
    assert sorted(consume(first, 10)) == sorted(f"first-{i}".encode() for i in range(10))
    first.commit(asynchronous=False)
    committed = first.committed([TopicPartition("orders", p) for p in range(3)], timeout=10)
    # librdkafka commits the partitions it has a position in: one the (sticky) producer left
    # empty may have none yet when the ten records are in, and then has no committed offset
    # (-1001); the second consumer starts it from the earliest offset, which is the same.
    assert sum(tp.offset for tp in committed if tp.offset >= 0) == 10
    assert all(tp.offset >= 0 or tp.offset == OFFSET_INVALID for tp in committed)
    first.close()

    produce(bootstrap, "orders", [f"second-{i}".encode() for i in range(5)])
    second = consumer()
    try:
        assert sorted(consume(second, 5)) == sorted(f"second-{i}".encode() for i in range(5))
        assert second.poll(2) is None  # nothing of the first round again
    finally:
        second.close()


def test_a_transactional_producer_commits_through_a_coordinator_on_another_node(cluster_nodes) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    cluster = cluster_nodes(3)
    admin = formed(cluster)
    create_topic(admin, "payments", partitions=3)  # leaders spread: markers go to every node
    bootstrap = f"127.0.0.1:{cluster.client_ports[1]}"
    transactional_id, coordinator = key_coordinated_elsewhere(
        cluster, "payments-app", TRANSACTION, not_on=1)
    assert coordinator != 1
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    for round_number in range(2):
        producer.begin_transaction()
        for i in range(6):
            producer.produce("payments", f"{round_number}-{i}".encode(), partition=i % 3)
        producer.commit_transaction(30)
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    reader.subscribe(["payments"])
    try:  # read_committed sees them only once every partition's COMMIT marker is written
        assert len(consume(reader, 12)) == 12
    finally:
        reader.close()


def test_after_sigterm_of_the_coordinator_node_the_group_finds_the_new_coordinator(cluster_nodes) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    cluster = cluster_nodes(3)
    admin = formed(cluster)
    create_topic(admin, "events", partitions=1, replication_factor=3)
    group, coordinator = key_coordinated_elsewhere(cluster, "events-app", GROUP, not_on=1)
    others = tuple(n for n in NODES if n != coordinator)
    bootstrap = ",".join(f"127.0.0.1:{cluster.client_ports[n]}" for n in others)
    process = cluster.nodes[coordinator].process
    assert process is not None
    process.send_signal(signal.SIGTERM)  # controlled shutdown: leaderships move first
    assert process.wait(30) == 0
    wait_until(lambda: coordinator_of(cluster, group, GROUP, via=others[0]) in others,
               timeout_s=30, what="a coordinator on a running node")
    moved = wait_for_coordinator(cluster, group, GROUP, via=others[0])
    assert moved in others
    assert all(coordinator_of(cluster, group, GROUP, via=n) == moved for n in others)
    # The group works again with its new coordinator. Its committed offsets are not expected to
    # survive: followers do not copy the leader's data yet, so the new leader's
    # __consumer_offsets partition holds nothing of the old one.
    events_leader = admin.list_topics("events", timeout=5).topics["events"].partitions[0].leader
    assert events_leader in others
    produce(bootstrap, "events", [b"after-handover"])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["events"])
    try:
        assert consume(consumer, 1) == [b"after-handover"]
        consumer.commit(asynchronous=False)
        assert consumer.committed([TopicPartition("events", 0)], timeout=10)[0].offset == 1
    finally:
        consumer.close()
