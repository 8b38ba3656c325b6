"""Samsa's ``AdminClient`` against a real broker process: topics, partitions, configs, the
cluster, groups (with a live confluent-kafka member), committed offsets, partition offsets,
deleting records, and the errors people meet."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from samsa.admin import AdminClient, ConfigResource, NewTopic
from samsa.errors import (
    GroupIdNotFoundError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    NoBrokersAvailableError,
    NonEmptyGroupError,
    TopicAlreadyExistsError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from samsa.types import OffsetAndMetadata, TopicPartition

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}
TIMEOUT = 15


@pytest.fixture
def admin(broker) -> Iterator[AdminClient]:  # type: ignore[no-untyped-def]
    with AdminClient(bootstrap_servers=broker.bootstrap, client_id="admin-test") as client:
        yield client


def produce(broker, topic: str, timestamps: list[int], partition: int = 0) -> None:  # type: ignore[no-untyped-def]
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i, timestamp in enumerate(timestamps):
        producer.produce(topic, value=b"%d" % i, partition=partition, timestamp=timestamp)
    assert producer.flush(TIMEOUT) == 0


def group_member(broker, group: str, topic: str) -> Consumer:  # type: ignore[no-untyped-def]
    """A confluent-kafka consumer that has joined ``group`` and got its assignment."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "client.id": "lag-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **QUIET})
    consumer.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer got no assignment"
        consumer.poll(0.1)
    return consumer


# --- topics -----------------------------------------------------------------------------------

def test_create_list_describe_and_delete_topics(admin: AdminClient) -> None:
    admin.create_topics([NewTopic("orders", 3), NewTopic("audit", configs={"retention.ms": "5000"})])
    admin.create_topics([NewTopic("checked", 2)], validate_only=True)
    assert admin.list_topics() == ["audit", "orders"]
    described = admin.describe_topics(["orders", "audit"])
    assert list(described) == ["orders", "audit"]
    orders = described["orders"]
    assert [p.partition for p in orders.partitions] == [0, 1, 2]
    assert all(p.leader == 1 and p.replicas == (1,) and p.isr == (1,) for p in orders.partitions)
    assert len(orders.topic_id) == 36 and not orders.is_internal
    assert len(described["audit"].partitions) == 1  # the broker's num.partitions
    entries = admin.describe_configs([ConfigResource("topic", "audit")])[
        ConfigResource("topic", "audit")]
    assert entries["retention.ms"].value == "5000"
    assert entries["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
    assert entries["segment.bytes"].is_default
    admin.delete_topics(["orders", "audit"])
    assert admin.list_topics() == []


def test_topic_errors_name_the_topics(admin: AdminClient) -> None:
    admin.create_topics([NewTopic("x", 1)])
    with pytest.raises(TopicAlreadyExistsError, match=r"^topic 'x' already exists$"):
        admin.create_topics([NewTopic("x", 1)])
    # Every topic is tried: the new one is created, the error names only the failed ones.
    with pytest.raises(TopicAlreadyExistsError) as caught:
        admin.create_topics([NewTopic("x"), NewTopic("fresh"), NewTopic("bad", 0)])
    assert str(caught.value) == ("topic 'x' already exists; topic 'bad': Number of partitions "
                                 "was set to an invalid non-positive value.")
    assert "fresh" in admin.list_topics()
    with pytest.raises(InvalidPartitionsError, match="topic 'bad'"):
        admin.create_topics([NewTopic("bad", 0)])
    with pytest.raises(InvalidConfigError, match=r"topic 'cfg'.*retention.ms"):
        admin.create_topics([NewTopic("cfg", 1, configs={"retention.ms": "soon"})])
    with pytest.raises(UnknownTopicOrPartitionError, match=r"^unknown topic 'nope'$"):
        admin.delete_topics(["nope"])
    with pytest.raises(UnknownTopicOrPartitionError,
                       match=r"^unknown topic 'nope'; unknown topic 'gone'$"):
        admin.describe_topics(["nope", "x", "gone"])
    with pytest.raises(UnknownTopicOrPartitionError, match="unknown topic 'nope'"):
        admin.describe_configs([ConfigResource("topic", "nope")])


def test_create_partitions(admin: AdminClient) -> None:
    admin.create_topics([NewTopic("grow", 1)])
    admin.create_partitions({"grow": 4}, validate_only=True)
    assert len(admin.describe_topics("grow")["grow"].partitions) == 1
    admin.create_partitions({"grow": 4})
    assert [p.partition for p in admin.describe_topics("grow")["grow"].partitions] == [0, 1, 2, 3]
    with pytest.raises(InvalidPartitionsError, match=r"topic 'grow': .*4 partition"):
        admin.create_partitions({"grow": 2})
    with pytest.raises(UnknownTopicOrPartitionError, match="unknown topic 'nope'"):
        admin.create_partitions({"nope": 2})


# --- configs and cluster ---------------------------------------------------------------------

def test_alter_topic_configs_sets_and_resets(admin: AdminClient) -> None:
    topic = ConfigResource("topic", "cfg")
    admin.create_topics([NewTopic("cfg", 1, configs={"retention.ms": "5000"})])
    admin.alter_configs(topic, {"segment.bytes": "1048576", "retention.ms": None})
    entries = admin.describe_configs([topic])[topic]
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
        "1048576", "DYNAMIC_TOPIC_CONFIG")
    assert entries["retention.ms"].is_default and entries["retention.ms"].value == "604800000"
    admin.alter_configs(topic, {"cleanup.policy": "compact"}, validate_only=True)
    assert admin.describe_configs([topic])[topic]["cleanup.policy"].value == "delete"
    with pytest.raises(InvalidConfigError, match="topic 'cfg'"):
        admin.alter_configs(topic, {"cleanup.policy": "shred"})
    with pytest.raises(UnknownTopicOrPartitionError, match="unknown topic 'nope'"):
        admin.alter_configs(ConfigResource("topic", "nope"), {"retention.ms": "1"})


def test_broker_configs_are_described_and_altered_at_that_broker(admin: AdminClient) -> None:
    broker = ConfigResource("broker", "1")
    entries = admin.describe_configs([broker])[broker]
    assert entries["log.dirs"].source == "STATIC_BROKER_CONFIG" and entries["log.dirs"].read_only
    admin.alter_configs(broker, {"log.retention.ms": "7200000"})
    entries = admin.describe_configs([broker])[broker]
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].source) == (
        "7200000", "DYNAMIC_BROKER_CONFIG")
    with pytest.raises(InvalidRequestError, match="broker '1': Cannot update these configs"):
        admin.alter_configs(broker, {"num.partitions": "3"})
    admin.alter_configs(broker, {"log.retention.ms": None})
    assert admin.describe_configs([broker])[broker]["log.retention.ms"].source != (
        "DYNAMIC_BROKER_CONFIG")
    with pytest.raises(ValueError, match="node id"):
        admin.describe_configs([ConfigResource("broker", "one")])


def test_describe_cluster(broker, admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    cluster = admin.describe_cluster()
    assert cluster.controller_id == 1
    assert [(b.node_id, b.address) for b in cluster.brokers] == [(1, broker.bootstrap)]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", **QUIET})
    try:
        assert cluster.cluster_id == consumer.list_topics(timeout=TIMEOUT).cluster_id
    finally:
        consumer.close()


# --- groups -----------------------------------------------------------------------------------

def test_groups_with_a_live_member(broker, admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    admin.create_topics([NewTopic("events", 3)])
    member = group_member(broker, "readers", "events")
    try:
        listed = {g.group_id: g for g in admin.list_groups()}
        assert (listed["readers"].state, listed["readers"].protocol_type) == ("Stable", "consumer")
        group = admin.describe_groups(["readers", "nobody"])
        readers = group["readers"]
        assert (readers.state, readers.protocol_type, readers.protocol) == (
            "Stable", "consumer", "range")
        [described] = readers.members
        assert described.client_id == "lag-reader"
        assert described.assignment == {TopicPartition("events", p) for p in range(3)}
        assert (group["nobody"].state, group["nobody"].members) == ("Dead", ())
        with pytest.raises(NonEmptyGroupError, match="group 'readers' is not empty"):
            admin.delete_groups(["readers"])
        with pytest.raises(UnknownMemberIdError, match="group 'readers': the group has members"):
            admin.alter_group_offsets("readers", {TopicPartition("events", 0): 1})
    finally:
        member.close()
    assert admin.describe_groups("readers")["readers"].state == "Empty"
    admin.delete_groups(["readers"])
    assert "readers" not in {g.group_id for g in admin.list_groups()}
    with pytest.raises(GroupIdNotFoundError, match=r"^group 'readers' does not exist$"):
        admin.delete_groups("readers")


def test_committed_offsets_listed_altered_and_deleted(broker, admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    admin.create_topics([NewTopic("paid", 2)])
    produce(broker, "paid", [1, 2, 3])
    member = group_member(broker, "billing", "paid")
    member.commit(offsets=[KafkaTopicPartition("paid", 0, 2)], asynchronous=False)
    member.close()
    p0, p1 = TopicPartition("paid", 0), TopicPartition("paid", 1)
    assert admin.list_group_offsets("billing") == {p0: OffsetAndMetadata(2)}
    admin.alter_group_offsets("billing", {p0: 3, p1: OffsetAndMetadata(0, "by admin")})
    assert admin.list_group_offsets("billing") == {
        p0: OffsetAndMetadata(3), p1: OffsetAndMetadata(0, "by admin")}
    assert admin.list_group_offsets("billing", [p1]) == {p1: OffsetAndMetadata(0, "by admin")}
    admin.delete_group_offsets("billing", [p0])
    assert admin.list_group_offsets("billing") == {p1: OffsetAndMetadata(0, "by admin")}
    assert admin.list_group_offsets("never-committed") == {}


# --- partition offsets and records ----------------------------------------------------------

def test_list_offsets_by_spec_and_delete_records(broker, admin: AdminClient) -> None:  # type: ignore[no-untyped-def]
    admin.create_topics([NewTopic("clock", 2)])
    produce(broker, "clock", [1_000, 3_000, 2_000])
    tp, empty = TopicPartition("clock", 0), TopicPartition("clock", 1)

    def offsets(spec: int | str) -> tuple[int, int]:
        answer = admin.list_offsets({tp: spec})[tp]
        return answer.offset, answer.timestamp

    assert offsets("earliest")[0] == 0
    assert offsets("latest")[0] == 3
    assert offsets("max-timestamp") == (1, 3_000)
    assert offsets(1_500) == (1, 3_000)
    assert offsets(2_500) == (1, 3_000)
    assert offsets(9_000) == (-1, -1)
    both = admin.list_offsets({tp: "latest", empty: "latest"}, isolation_level="read_committed")
    assert (both[tp].offset, both[empty].offset) == (3, 0)
    assert admin.delete_records({tp: 2}) == {tp: 2}
    assert offsets("earliest")[0] == 2
    assert admin.delete_records({tp: -1}) == {tp: 3}
    with pytest.raises(UnknownTopicOrPartitionError,
                       match=r"^unknown partition clock-7; unknown topic 'nope'$"):
        admin.list_offsets({TopicPartition("clock", 7): "latest", TopicPartition("nope", 0): 0})
    with pytest.raises(ValueError, match="offset spec"):
        admin.list_offsets({tp: "newest"})


# --- unreachable -------------------------------------------------------------------------------

def test_an_unreachable_broker_fails_fast_naming_the_address() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again when the test connects
    started = time.monotonic()
    with AdminClient(bootstrap_servers=f"127.0.0.1:{port}") as client, \
            pytest.raises(NoBrokersAvailableError, match=f"127.0.0.1:{port}"):
        client.list_topics()
    assert time.monotonic() - started < 5
