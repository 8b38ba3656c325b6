"""Failover with replicated data, on three real Samsa node processes (issue: Clusters, part 2),
modelled on Kafka's system test ``replication_test.py`` (3 brokers, RF 3, min.insync 2, clean
and hard bounces, no acknowledged record lost, no duplicate with idempotence):

- kill -9 of a partition leader under a running idempotent acks=all producer: every
  acknowledged record is read back exactly once, at its acknowledged offset;
- a rolling SIGTERM restart of every node under load: the producer sees no error at all
  (controlled shutdown moves leaderships first; clients follow NOT_LEADER_OR_FOLLOWER);
- kill -9 of the group coordinator: every committed offset is still there;
- a transaction whose coordinator is killed before its commit is answered commits or aborts
  as a whole for read_committed consumers;
- after a clean stop, the replicas' segment files hold identical batches.

Clients: confluent-kafka (librdkafka). Every wait polls the cluster with a deadline.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.cluster_nodes import ClusterNodes, wait_until
from tests.integration.test_cluster import admin_for, formed
from tests.integration.test_cluster_coordinators import TRANSACTION, coordinator_of
from tests.integration.test_replication import create_topic, log_batches, partition_state

pytestmark = pytest.mark.cluster

NODES = (1, 2, 3)


class Writer:
    """An idempotent acks=all producer writing ``p-<n>`` values to ``topic``-0 from a thread
    until stopped; what was acknowledged (value -> offset) and every delivery error."""

    def __init__(self, bootstrap: str, topic: str, **config: object) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 2,
                                  "message.timeout.ms": 120000, **config})
        self.acked: dict[bytes, int] = {}
        self.errors: list[KafkaError] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: KafkaError | None, message: object) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.acked[message.value()] = message.offset()  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.produce(self.topic, f"p-{self.sent}".encode(), partition=0,
                                  on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0.002)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        assert self.producer.flush(120) == 0

    def wait_for(self, count: int) -> None:
        start = len(self.acked)
        wait_until(lambda: len(self.acked) >= start + count, timeout_s=60,
                   what=f"{count} more acknowledged writes")


def read_all(bootstrap: str, topic: str, *, read_committed: bool = False) -> list[tuple[int, bytes]]:
    """Every record of ``topic``-0 up to the end as of now, in order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed" if read_committed
                         else "read_uncommitted"})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen: list[tuple[int, bytes]] = []

        def done() -> bool:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error() is None:
                    seen.append((message.offset(), message.value()))
            position = consumer.position([TopicPartition(topic, 0)])[0].offset
            return position >= end
        wait_until(done, timeout_s=60, what=f"{topic} read to offset {end}")
        return seen
    finally:
        consumer.close()


def assert_exactly_once(writer: Writer, records: list[tuple[int, bytes]]) -> None:
    values = [value for _, value in records]
    assert len(values) == len(set(values)), "a value was written twice"
    at = dict((value, offset) for offset, value in records)
    missing = [value for value in writer.acked if value not in at]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    moved = [(value, offset, at[value]) for value, offset in writer.acked.items()
             if at[value] != offset]
    assert not moved, f"acknowledged records at other offsets: {moved[:3]}"


def survivors_bootstrap(cluster: ClusterNodes, *down: int) -> str:
    return ",".join(f"127.0.0.1:{cluster.client_ports[n]}" for n in NODES if n not in down)


def full_isr(admin: AdminClient, topic: str) -> None:
    wait_until(lambda: partition_state(admin, topic)[1] == list(NODES), timeout_s=60,
               what=f"{topic}'s ISR back to {list(NODES)}")


def test_kill_9_of_the_leader_under_an_idempotent_producer_loses_and_duplicates_nothing(
        cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3, broker_session_timeout_ms="3000")
    formed(cluster)
    admin = admin_for(cluster, *NODES)
    create_topic(admin, "bounce", **{"min.insync.replicas": "2"})
    with Writer(cluster.bootstrap, "bounce") as writer:
        writer.wait_for(500)
        leader, _ = partition_state(admin, "bounce")
        cluster.kill(leader)
        writer.wait_for(500)
        cluster.start(leader)
        full_isr(admin_for(cluster, *NODES), "bounce")
        writer.wait_for(200)
    assert not writer.errors, writer.errors[:3]
    assert_exactly_once(writer, read_all(cluster.bootstrap, "bounce"))


def test_a_rolling_sigterm_restart_under_load_gives_the_producer_no_error(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    admin = admin_for(cluster, *NODES)
    create_topic(admin, "rolling", **{"min.insync.replicas": "2"})
    with Writer(cluster.bootstrap, "rolling", **{"message.timeout.ms": 60000}) as writer:
        writer.wait_for(300)
        for node_id in NODES:
            node = cluster.nodes[node_id]
            assert node.stop() == 0, node.log()
            writer.wait_for(200)  # the two others carry on
            cluster.start(node_id)
            full_isr(admin_for(cluster, *NODES), "rolling")
            writer.wait_for(100)
    assert not writer.errors, writer.errors[:3]
    assert_exactly_once(writer, read_all(cluster.bootstrap, "rolling"))


def test_kill_9_of_the_group_coordinator_keeps_every_committed_offset(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3, broker_session_timeout_ms="3000")
    formed(cluster)
    admin = admin_for(cluster, *NODES)
    create_topic(admin, "tracked", partitions=6)
    group = "survivors"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    committed = [TopicPartition("tracked", index, 100 + index) for index in range(6)]

    def commit() -> bool:
        consumer.commit(offsets=committed, asynchronous=False)
        return True

    try:  # the coordinator may still be loading (COORDINATOR_LOAD_IN_PROGRESS, as Kafka's), and
        # librdkafka hands that to a synchronous commit of explicit offsets: commit again
        wait_until(commit, what="the group's first commit")
    finally:
        consumer.close()
    description = admin.describe_consumer_groups([group])[group].result(timeout=30)
    coordinator = description.coordinator.id
    cluster.kill(coordinator)
    survivors = admin_for(cluster, *(n for n in NODES if n != coordinator))

    def offsets() -> list[tuple[int, int]] | None:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = survivors.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition("tracked", i) for i in range(6)])])
        result = futures[group].result(timeout=10)
        return sorted((tp.partition, tp.offset) for tp in result.topic_partitions)

    found = wait_until(offsets, timeout_s=60, what="the group's offsets from a new coordinator")
    assert found == [(index, 100 + index) for index in range(6)]
    cluster.start(coordinator)


def test_a_transaction_whose_coordinator_dies_commits_or_aborts_as_a_whole(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3, broker_session_timeout_ms="3000")
    formed(cluster)
    admin = admin_for(cluster, *NODES)
    create_topic(admin, "atomic", **{"min.insync.replicas": "2"})
    transactional_id = "spanning"
    producer = Producer({"bootstrap.servers": cluster.bootstrap,
                         "transactional.id": transactional_id, "transaction.timeout.ms": 10000})
    producer.init_transactions(30)
    producer.begin_transaction()
    values = [f"t-{i}".encode() for i in range(50)]
    for value in values:
        producer.produce("atomic", value, partition=0)
    assert producer.flush(30) == 0
    coordinator = wait_until(lambda: coordinator_of(cluster, transactional_id, TRANSACTION, via=1),
                             what="the transaction coordinator")
    cluster.kill(coordinator)
    try:
        producer.commit_transaction(60)
        outcome = "committed"
    except KafkaException as error:
        outcome = f"failed: {error}"
        if error.args[0].txn_requires_abort():
            producer.abort_transaction(60)
    down = (coordinator,)
    wait_until(lambda: read_lso_settled(cluster, down), timeout_s=60,
               what="the transaction's outcome settled")
    seen = [value for _, value in read_all(survivors_bootstrap(cluster, *down), "atomic",
                                           read_committed=True)]
    assert seen in ([], values), f"{outcome}: a partial transaction is visible ({len(seen)})"
    if outcome == "committed":
        assert seen == values
    cluster.start(coordinator)


def read_lso_settled(cluster: ClusterNodes, down: tuple[int, ...]) -> bool:
    """The last stable offset of atomic-0 reached its high watermark (no open transaction)."""
    consumer = Consumer({"bootstrap.servers": survivors_bootstrap(cluster, *down),
                         "group.id": f"lso-{uuid.uuid4()}", "isolation.level": "read_committed"})
    try:
        _, stable = consumer.get_watermark_offsets(TopicPartition("atomic", 0), timeout=5)
    finally:
        consumer.close()
    unstable = Consumer({"bootstrap.servers": survivors_bootstrap(cluster, *down),
                         "group.id": f"hw-{uuid.uuid4()}"})
    try:
        _, high = unstable.get_watermark_offsets(TopicPartition("atomic", 0), timeout=5)
    finally:
        unstable.close()
    return stable == high


def test_after_a_clean_stop_the_replicas_hold_identical_batches(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    admin = admin_for(cluster, *NODES)
    create_topic(admin, "same", **{"min.insync.replicas": "2", "segment.bytes": "65536"})
    with Writer(cluster.bootstrap, "same") as writer:
        writer.wait_for(3000)
    assert not writer.errors
    codes = cluster.stop_all()
    assert all(code == 0 for code in codes.values()), codes
    first = log_batches(cluster, 1, "same")
    assert len(first) > 10
    assert log_batches(cluster, 2, "same") == first
    assert log_batches(cluster, 3, "same") == first
    for node_id in NODES:  # more than one segment each, rolled at the same offsets
        names = sorted(p.name for p in (cluster.root / f"node-{node_id}" / "same-0").glob("*.log"))
        assert len(names) > 1
        if node_id > 1:
            assert names == sorted(p.name for p in (cluster.root / "node-1" / "same-0").glob("*.log"))
    for node_id in NODES:  # started again for the fixture's clean stop
        cluster.start(node_id)

