"""What librdkafka's admin test 0081 asks of a Kafka 4 broker, through confluent-kafka's
AdminClient: manual replica assignments and topic configs in CreateTopics, group configs (the
GROUP config resource) in IncrementalAlterConfigs and DescribeConfigs."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as PythonNewTopic

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TIMEOUT = 15
NODE_ID = 1  # the default node.id


def admin(broker) -> AdminClient:  # type: ignore[no-untyped-def]
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})


def _error(future) -> KafkaError:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT)
    error: KafkaError = caught.value.args[0]
    return error


def test_create_topics_as_0081_does(broker) -> None:  # type: ignore[no-untyped-def]
    client = admin(broker)
    configs = {"compression.type": "lz4", "delete.retention.ms": "900"}
    topics = [
        NewTopic("assigned", 8, replica_assignment=[[NODE_ID]] * 8),
        NewTopic("configured", 8, 1, config=configs),
        NewTopic("invalid", 8, 1, config={**configs, "dummy.doesntexist": "broker is verifying this"}),
        NewTopic("defaults", -1, -1),
    ]
    futures = client.create_topics(topics, operation_timeout=TIMEOUT)
    futures["assigned"].result(TIMEOUT)
    futures["configured"].result(TIMEOUT)
    futures["defaults"].result(TIMEOUT)
    error = _error(futures["invalid"])
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "dummy.doesntexist" in error.str() and "compression.type" not in error.str()

    listed = client.list_topics(timeout=TIMEOUT).topics
    assert len(listed["assigned"].partitions) == 8
    assert [p.replicas for p in listed["assigned"].partitions.values()] == [[NODE_ID]] * 8
    assert "invalid" not in listed
    resource = ConfigResource(ResourceType.TOPIC, "configured")
    described = client.describe_configs([resource])[resource].result(TIMEOUT)
    assert described["compression.type"].value == "lz4"
    assert described["compression.type"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["min.insync.replicas"].value == "1"


@pytest.mark.parametrize(
    ("assignment", "code"),
    [
        ([[NODE_ID + 1]], KafkaError.INVALID_REPLICA_ASSIGNMENT),  # no such broker
        ([[NODE_ID, NODE_ID]], KafkaError.INVALID_REPLICA_ASSIGNMENT),  # twice
    ],
)
def test_bad_replica_assignments_are_refused(broker, assignment, code) -> None:  # type: ignore[no-untyped-def]
    client = admin(broker)
    topic = NewTopic("bad", len(assignment), replica_assignment=assignment)
    future = client.create_topics([topic])["bad"]
    assert _error(future).code() == code
    assert "bad" not in client.list_topics(timeout=TIMEOUT).topics


def test_group_configs_as_0081_does(broker) -> None:  # type: ignore[no-untyped-def]
    client = admin(broker)
    group = ConfigResource(ResourceType.GROUP, "my-group")
    described = client.describe_configs([group])[group].result(TIMEOUT)  # no such group: fine
    assert described["consumer.session.timeout.ms"].value == "45000"
    assert described["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    group.add_incremental_config(
        ConfigEntry("consumer.session.timeout.ms", "50000",
                    incremental_operation=AlterConfigOpType.SET))
    client.incremental_alter_configs([group])[group].result(TIMEOUT)
    described = client.describe_configs([group])[group].result(TIMEOUT)
    assert described["consumer.session.timeout.ms"].value == "50000"
    assert described["consumer.session.timeout.ms"].source == 8  # GROUP_CONFIG

    too_long = ConfigResource(ResourceType.GROUP, "my-group")
    too_long.add_incremental_config(
        ConfigEntry("consumer.session.timeout.ms", "90000",
                    incremental_operation=AlterConfigOpType.SET))
    error = _error(client.incremental_alter_configs([too_long])[too_long])
    assert error.code() == KafkaError.INVALID_CONFIG

    reset = ConfigResource(ResourceType.GROUP, "my-group")
    reset.add_incremental_config(
        ConfigEntry("consumer.session.timeout.ms", None,
                    incremental_operation=AlterConfigOpType.DELETE))
    client.incremental_alter_configs([reset])[reset].result(TIMEOUT)
    described = client.describe_configs([group])[group].result(TIMEOUT)
    assert described["consumer.session.timeout.ms"].value == "45000"


def test_kafka_python_describes_the_metadata_quorum(broker) -> None:  # type: ignore[no-untyped-def]
    """kafka-python's ``describe_metadata_quorum`` (DescribeQuorum v2): this node leads and is
    the only voter, at the metadata log's end offset, which grows with a topic creation."""
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        before = client.describe_metadata_quorum()
        [topic] = before["topics"]
        [partition] = topic["partitions"]
        assert topic["topic_name"] == "__cluster_metadata"
        assert (partition["partition_index"], partition["error"]) == (0, None)
        assert partition["leader_id"] == NODE_ID
        assert [v["replica_id"] for v in partition["current_voters"]] == [NODE_ID]
        assert partition["current_voters"][0]["log_end_offset"] == partition["high_watermark"]
        assert partition["observers"] == []
        assert [node["node_id"] for node in before["nodes"]] == [NODE_ID]
        assert before["nodes"][0]["listeners"][0]["port"] == int(broker.bootstrap.rsplit(":", 1)[1])

        client.create_topics([PythonNewTopic("grows", 1, 1)])
        after = client.describe_metadata_quorum()
        assert after["topics"][0]["partitions"][0]["high_watermark"] > partition["high_watermark"]
    finally:
        client.close()
