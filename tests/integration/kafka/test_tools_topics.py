"""Apache Kafka's ``kafka-topics`` and ``kafka-configs`` (4.3.1, through their main classes)
against a real Samsa broker: what they print, and Samsa's state as confluent-kafka's
AdminClient sees it afterwards."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from compat.apache_kafka import run_tool
from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.tools import kafka, samsa_broker

pytestmark = pytest.mark.integration

TIMEOUT = 30


@pytest.fixture(scope="module")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with samsa_broker(tmp_path_factory.mktemp("samsa")) as broker:
        yield broker


@pytest.fixture(scope="module")
def admin(samsa: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": samsa.bootstrap})


def node_id(admin: AdminClient) -> int:
    [broker] = admin.list_topics(timeout=TIMEOUT).brokers
    return int(broker)


def topic_configs(admin: AdminClient, topic: str) -> dict[str, str | None]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(TIMEOUT)
    return {name: entry.value for name, entry in entries.items()}


def describe_lines(output: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """``kafka-topics --describe`` of one topic: its summary line and its partition lines, as
    ``{"PartitionCount": "3", ...}`` (tab-separated ``Key: value`` cells)."""
    def cells(line: str) -> dict[str, str]:
        return {key: value.strip() for key, value in
                (cell.split(":", 1) for cell in line.strip().split("\t") if ":" in cell)}

    lines = [line for line in output.splitlines() if line.strip()]
    return cells(lines[0]), [cells(line) for line in lines[1:]]


def test_topics_create_list_describe_alter_delete(samsa: BrokerProcess, admin: AdminClient) -> None:
    server = ("--bootstrap-server", samsa.bootstrap)
    created = kafka("kafka-topics", *server, "--create", "--topic", "orders", "--partitions", "3",
                    "--replication-factor", "1", "--config", "retention.ms=3600000",
                    "--config", "cleanup.policy=compact")
    assert created.strip() == "Created topic orders."
    assert "orders" in kafka("kafka-topics", *server, "--list").split()

    summary, partitions = describe_lines(kafka("kafka-topics", *server, "--describe", "--topic", "orders"))
    assert (summary["Topic"], summary["PartitionCount"], summary["ReplicationFactor"]) == ("orders", "3", "1")
    assert sorted(summary["Configs"].split(",")) == ["cleanup.policy=compact", "retention.ms=3600000"]
    node = str(node_id(admin))
    assert [(p["Partition"], p["Leader"], p["Replicas"], p["Isr"]) for p in partitions] == [
        (str(index), node, node, node) for index in range(3)]
    metadata = admin.list_topics("orders", timeout=TIMEOUT).topics["orders"]
    assert sorted(metadata.partitions) == [0, 1, 2]
    assert topic_configs(admin, "orders")["retention.ms"] == "3600000"

    kafka("kafka-topics", *server, "--alter", "--topic", "orders", "--partitions", "5")
    assert len(admin.list_topics("orders", timeout=TIMEOUT).topics["orders"].partitions) == 5
    summary, partitions = describe_lines(kafka("kafka-topics", *server, "--describe", "--topic", "orders"))
    assert summary["PartitionCount"] == "5" and len(partitions) == 5

    kafka("kafka-topics", *server, "--delete", "--topic", "orders")
    assert "orders" not in kafka("kafka-topics", *server, "--list").split()
    assert "orders" not in admin.list_topics(timeout=TIMEOUT).topics


def test_topics_refusals_are_kafkas(samsa: BrokerProcess) -> None:
    server = ("--bootstrap-server", samsa.bootstrap)
    kafka("kafka-topics", *server, "--create", "--topic", "twice", "--partitions", "2")
    again = run_tool("kafka-topics", *server, "--create", "--topic", "twice")
    assert again.returncode == 1 and "Topic 'twice' already exists" in again.stdout
    kafka("kafka-topics", *server, "--create", "--topic", "twice", "--if-not-exists")
    fewer = run_tool("kafka-topics", *server, "--alter", "--topic", "twice", "--partitions", "1")
    assert fewer.returncode == 1 and "InvalidPartitionsException" in fewer.stderr
    missing = run_tool("kafka-topics", *server, "--describe", "--topic", "no-such-topic")
    assert missing.returncode == 1 and "does not exist" in missing.stdout


def test_configs_of_a_topic_add_describe_delete(samsa: BrokerProcess, admin: AdminClient) -> None:
    server = ("--bootstrap-server", samsa.bootstrap)
    kafka("kafka-topics", *server, "--create", "--topic", "tuned", "--partitions", "1")
    entity = ("--entity-type", "topics", "--entity-name", "tuned")
    altered = kafka("kafka-configs", *server, "--alter", *entity,
                    "--add-config", "max.message.bytes=20000,retention.ms=60000")
    assert altered.strip() == "Completed updating config for topic tuned."
    described = kafka("kafka-configs", *server, "--describe", *entity)
    assert described.splitlines()[0] == "Dynamic configs for topic tuned are:"
    assert ("  max.message.bytes=20000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
            "max.message.bytes=20000, DEFAULT_CONFIG:message.max.bytes=1048588}") in described.splitlines()
    assert "  retention.ms=60000 sensitive=false" in described
    configs = topic_configs(admin, "tuned")
    assert (configs["max.message.bytes"], configs["retention.ms"]) == ("20000", "60000")

    kafka("kafka-configs", *server, "--alter", *entity, "--delete-config", "max.message.bytes")
    described = kafka("kafka-configs", *server, "--describe", *entity)
    assert "max.message.bytes" not in described and "retention.ms=60000" in described
    assert topic_configs(admin, "tuned")["max.message.bytes"] == "1048588"  # Kafka's default

    bad = run_tool("kafka-configs", *server, "--alter", *entity, "--add-config", "retention.ms=abc")
    assert bad.returncode == 1 and "InvalidConfigurationException" in bad.stderr


def test_configs_of_the_broker_per_node_cluster_wide_and_all(
        samsa: BrokerProcess, admin: AdminClient) -> None:
    server = ("--bootstrap-server", samsa.bootstrap)
    node = str(node_id(admin))
    entity = ("--entity-type", "brokers", "--entity-name", node)
    assert kafka("kafka-configs", *server, "--describe", *entity).strip() == (
        f"Dynamic configs for broker {node} are:")
    kafka("kafka-configs", *server, "--alter", "--entity-type", "brokers", "--entity-default",
          "--add-config", "log.retention.ms=7200000")
    assert kafka("kafka-configs", *server, "--alter", *entity, "--add-config",
                 "log.retention.ms=3600000").strip() == f"Completed updating config for broker {node}."
    described = kafka("kafka-configs", *server, "--describe", *entity).splitlines()
    assert described[1] == (
        "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.ms=3600000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, "
        "DEFAULT_CONFIG:log.retention.hours=168}")
    every = kafka("kafka-configs", *server, "--describe", *entity, "--all")
    assert every.splitlines()[0] == f"All configs for broker {node} are:"
    values = dict(re.findall(r"^  ([a-z0-9.]+)=(\S*) sensitive=", every, re.MULTILINE))
    assert (values["log.retention.ms"], values["num.partitions"], values["log.dirs"]) == (
        "3600000", "1", str(samsa.log_dir))
    kafka("kafka-topics", *server, "--create", "--topic", "inherits", "--partitions", "1")
    assert topic_configs(admin, "inherits")["retention.ms"] == "3600000"  # this node's dynamic

    kafka("kafka-configs", *server, "--alter", *entity, "--delete-config", "log.retention.ms")
    assert topic_configs(admin, "inherits")["retention.ms"] == "7200000"  # the cluster-wide one
    kafka("kafka-configs", *server, "--alter", "--entity-type", "brokers", "--entity-default",
          "--delete-config", "log.retention.ms")
    assert topic_configs(admin, "inherits")["retention.ms"] == "604800000"  # 168 hours
    static = run_tool("kafka-configs", *server, "--alter", *entity, "--add-config", "log.dirs=/x")
    assert static.returncode == 1
    assert "Cannot update these configs dynamically: Set(log.dirs)" in static.stderr
