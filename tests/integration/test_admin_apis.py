"""The admin APIs (configs, partitions, records, cluster, log dirs) through confluent-kafka's
and kafka-python's admin clients, against a real broker process."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

QUIET = {"log_level": 3}
TIMEOUT = 15


def admin(broker) -> AdminClient:  # type: ignore[no-untyped-def]
    return AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})


def create_topic(client: AdminClient, name: str, partitions: int = 1) -> None:
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)


def describe(client: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    return client.describe_configs([resource])[resource].result(TIMEOUT)


def produce(broker, topic: str, count: int, partition: int = 0) -> None:  # type: ignore[no-untyped-def]
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=partition)
    assert producer.flush(TIMEOUT) == 0


def consume(broker, topic: str, partition: int, count: int, **config) -> list:  # type: ignore[no-untyped-def]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, **QUIET, **config})
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages: list = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(messages) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                messages.append(message)
    finally:
        consumer.close()
    return messages


def test_topic_configs_alter_describe_and_survive_restart(broker) -> None:  # type: ignore[no-untyped-def]
    client = admin(broker)
    create_topic(client, "cfg")
    topic = ConfigResource("topic", "cfg", incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    client.incremental_alter_configs([topic])[topic].result(TIMEOUT)
    for _ in range(2):
        entries = describe(client, ConfigResource("topic", "cfg"))
        assert entries["retention.ms"].value == "123456"
        assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert set(entries["cleanup.policy"].value.split(",")) == {"delete", "compact"}
        assert entries["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
        broker.restart()
        client = admin(broker)
    # The legacy API replaces the whole set: cleanup.policy goes back to its default.
    legacy = ConfigResource("topic", "cfg", set_config={"retention.ms": "7000"})
    client.alter_configs([legacy])[legacy].result(TIMEOUT)
    entries = describe(client, ConfigResource("topic", "cfg"))
    assert entries["retention.ms"].value == "7000"
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == (
        "delete", ConfigSource.DEFAULT_CONFIG.value)


def test_bad_config_values_and_unknown_topics(broker) -> None:  # type: ignore[no-untyped-def]
    client = admin(broker)
    create_topic(client, "bad")
    resource = ConfigResource("topic", "bad", incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as raised:
        client.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    error = raised.value.args[0]
    assert error.name() == "INVALID_CONFIG" and "retention.ms" in error.str()
    missing = ConfigResource("topic", "missing")
    with pytest.raises(KafkaException) as raised:
        describe(client, missing)
    assert raised.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"  # librdkafka's name
    checked = ConfigResource("topic", "bad", set_config={"retention.ms": "5"})
    client.alter_configs([checked], validate_only=True)[checked].result(TIMEOUT)
    assert describe(client, ConfigResource("topic", "bad"))["retention.ms"].value != "5"


def test_dynamic_broker_configs(broker) -> None:  # type: ignore[no-untyped-def]
    client = admin(broker)
    create_topic(client, "defaults")
    node = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([node])[node].result(TIMEOUT)
    entries = describe(client, ConfigResource("broker", "1"))
    assert entries["log.retention.ms"].value == "86400000"
    assert entries["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert entries["num.partitions"].is_read_only
    topic = describe(client, ConfigResource("topic", "defaults"))
    assert topic["retention.ms"].value == "86400000"
    assert topic["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    fixed = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as raised:
        client.incremental_alter_configs([fixed])[fixed].result(TIMEOUT)
    assert raised.value.args[0].name() == "INVALID_REQUEST"


def test_create_partitions_then_produce_and_consume_the_new_one(broker) -> None:  # type: ignore[no-untyped-def]
    client = admin(broker)
    create_topic(client, "grow")
    client.create_partitions([NewPartitions("grow", 8)], validate_only=True)["grow"].result(TIMEOUT)
    client.create_partitions([NewPartitions("grow", 4)])["grow"].result(TIMEOUT)
    assert len(client.list_topics("grow", timeout=TIMEOUT).topics["grow"].partitions) == 4
    with pytest.raises(KafkaException) as raised:
        client.create_partitions([NewPartitions("grow", 2)])["grow"].result(TIMEOUT)
    assert raised.value.args[0].name() == "INVALID_PARTITIONS"
    produce(broker, "grow", 5, partition=3)
    assert [m.value() for m in consume(broker, "grow", 3, 5)] == [b"%d" % i for i in range(5)]


def test_delete_records_moves_the_log_start_offset(broker) -> None:  # type: ignore[no-untyped-def]
    client = admin(broker)
    create_topic(client, "trim")
    produce(broker, "trim", 10)
    deleted = client.delete_records([TopicPartition("trim", 0, 4)])
    assert deleted[TopicPartition("trim", 0, 4)].result(TIMEOUT).low_watermark == 4
    earliest = client.list_offsets({TopicPartition("trim", 0): OffsetSpec.earliest()})
    assert earliest[TopicPartition("trim", 0)].result(TIMEOUT).offset == 4
    got = consume(broker, "trim", 0, 6, **{"auto.offset.reset": "earliest"})
    assert [m.offset() for m in got] == list(range(4, 10))
    too_far = client.delete_records([TopicPartition("trim", 0, 11)])
    with pytest.raises(KafkaException) as raised:
        too_far[TopicPartition("trim", 0, 11)].result(TIMEOUT)
    assert raised.value.args[0].name() == "OFFSET_OUT_OF_RANGE"


def test_describe_cluster_shows_this_node(broker) -> None:  # type: ignore[no-untyped-def]
    client = admin(broker)  # kept: a collected client cancels its futures
    cluster = client.describe_cluster().result(TIMEOUT)
    assert cluster.cluster_id
    assert cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, broker.host, broker.port)]


def test_kafka_python_admin(broker) -> None:  # type: ignore[no-untyped-def]
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import ConfigResource as KafkaConfigResource
    from kafka.admin import ConfigResourceType
    from kafka.admin import NewPartitions as KafkaNewPartitions
    from kafka.admin import NewTopic as KafkaNewTopic

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        client.create_topics([KafkaNewTopic("kp", num_partitions=1, replication_factor=1)])
        resource = KafkaConfigResource(ConfigResourceType.TOPIC, "kp", {"retention.ms": "4242"})
        client.alter_configs([resource], incremental=False)
        described = client.describe_configs(
            [KafkaConfigResource(ConfigResourceType.TOPIC, "kp")], config_filter="all")
        retention = described["topic"]["kp"]["retention.ms"]
        assert (retention["value"], retention["config_source"]) == ("4242", "DYNAMIC_TOPIC_CONFIG")
        client.create_partitions({"kp": KafkaNewPartitions(3)})
        assert len(client.describe_topics(["kp"])[0]["partitions"]) == 3
        produce(broker, "kp", 6, partition=2)
        result = client.delete_records({KafkaTopicPartition("kp", 2): 3})
        assert result[KafkaTopicPartition("kp", 2)]["low_watermark"] == 3
        cluster = client.describe_cluster()
        assert cluster["controller_id"] == 1
        assert [b["broker_id"] for b in cluster["brokers"]] == [1]
        log_dirs = client.describe_log_dirs()
        [directory] = log_dirs[0]["log_dirs"]
        assert directory["error_code"] == 0 and directory["total_bytes"] > 0
        sizes = {p["partition_index"]: p["partition_size"] for t in directory["topics"]
                 if t["name"] == "kp" for p in t["partitions"]}
        assert sizes[0] == 0 and sizes[2] > 0
    finally:
        client.close()
