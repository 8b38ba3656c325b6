"""DescribeConfigs entries and dynamic broker configs: sources, synonyms, precedence, checks."""

from __future__ import annotations

import uuid

import pytest

from broker.config import BrokerConfig
from broker.config_admin import (
    ConfigSource,
    describe_broker,
    describe_topic,
    dynamic_log_config,
    validate_broker_configs,
)
from protocol.errors import InvalidRequestError
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.metadata.image import BROKER_RESOURCE_TYPE, TOPIC_RESOURCE_TYPE, MetadataImage

NODE = 1


def _image(topic_configs: dict[str, str] | None = None, **layers: dict[str, str]) -> MetadataImage:
    image = MetadataImage()
    image.apply(TopicRecord(name="t", topic_id=uuid.uuid4()))
    for key, value in (topic_configs or {}).items():
        image.apply(ConfigRecord(resource_type=TOPIC_RESOURCE_TYPE, resource_name="t", name=key,
                                 value=value))
    for level, configs in layers.items():
        name = "" if level == "cluster" else str(NODE)
        for key, value in configs.items():
            image.apply(ConfigRecord(resource_type=BROKER_RESOURCE_TYPE, resource_name=name,
                                     name=key, value=value))
    return image


def _topic_entries(static: BrokerConfig, image: MetadataImage) -> dict:  # type: ignore[type-arg]
    default = dynamic_log_config(static, image, NODE)
    entries = describe_topic(static, image, NODE, "t", default_config=default)
    return {entry.name: entry for entry in entries}


def test_topic_sources_follow_kafka_precedence() -> None:
    static = BrokerConfig.from_properties({"log.segment.bytes": "2000000"})
    image = _image({"retention.ms": "1000"}, cluster={"log.cleanup.policy": "compact"},
                   node={"log.retention.bytes": "99"})
    entries = _topic_entries(static, image)
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert (entries["retention.bytes"].value, entries["retention.bytes"].source) == (
        "99", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == (
        "compact", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
        "2000000", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG
    assert [(s.name, s.source) for s in entries["segment.bytes"].synonyms] == [
        ("log.segment.bytes", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", ConfigSource.DEFAULT_CONFIG),
    ]
    assert [(s.name, s.value, s.source) for s in entries["retention.ms"].synonyms] == [
        ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    ]
    assert entries["cleanup.policy"].config_type == 7  # LIST
    assert not any(entry.read_only or entry.is_sensitive for entry in entries.values())


def test_retention_ms_from_hours_is_described_as_kafka_does() -> None:
    # log.retention.ms is unset: Kafka drops the hours/minutes synonyms -> DEFAULT_CONFIG.
    entries = _topic_entries(BrokerConfig.from_properties({}), _image())
    assert entries["retention.ms"].value == str(168 * 3_600_000)
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["retention.ms"].synonyms == ()


def test_dynamic_log_config_precedence_node_over_cluster_over_static() -> None:
    static = BrokerConfig.from_properties({"log.retention.hours": "1"})
    assert dynamic_log_config(static, _image(), NODE).retention_ms == 3_600_000
    image = _image(cluster={"log.retention.ms": "5000"})
    assert dynamic_log_config(static, image, NODE).retention_ms == 5000
    image = _image(cluster={"log.retention.ms": "5000"}, node={"log.retention.ms": "7000"})
    assert dynamic_log_config(static, image, NODE).retention_ms == 7000


def test_broker_description_of_this_node() -> None:
    static = BrokerConfig.from_properties({"num.partitions": "3"})
    image = _image(node={"log.retention.ms": "5000", "custom.thing": "x"})
    entries = {e.name: e for e in describe_broker(static, image, NODE, str(NODE))}
    assert (entries["num.partitions"].value, entries["num.partitions"].source) == (
        "3", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["num.partitions"].read_only
    assert not entries["log.retention.ms"].read_only
    assert entries["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert entries["log.retention.hours"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["log.retention.hours"].read_only
    assert entries["auto.create.topics.enable"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["log.retention.minutes"].value is None
    custom = entries["custom.thing"]
    assert (custom.value, custom.is_sensitive, custom.read_only) == (None, True, True)


def test_broker_description_of_the_cluster_default_lists_dynamic_defaults_only() -> None:
    image = _image(cluster={"log.cleanup.policy": "compact"}, node={"log.retention.ms": "1"})
    entries = describe_broker(BrokerConfig.from_properties({}), image, NODE, "")
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("log.cleanup.policy", "compact", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]
    assert [s.source for s in entries[0].synonyms] == [ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]


@pytest.mark.parametrize(
    ("configs", "needle"),
    [
        ({"num.partitions": "3"}, r"Cannot update these configs dynamically: Set\(num.partitions\)"),
        ({"log.retention.hours": "3"}, "log.retention.hours"),
        ({"log.retention.ms": "soon"}, "log.retention.ms"),
        ({"log.cleanup.policy": "shred"}, "log.cleanup.policy"),
    ],
)
def test_broker_changes_kafka_refuses_are_invalid_request(configs, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidRequestError, match=needle):
        validate_broker_configs(BrokerConfig.from_properties({}), _image(), NODE, "1", configs)


def test_broker_changes_kafka_accepts() -> None:
    static = BrokerConfig.from_properties({})
    validate_broker_configs(static, _image(), NODE, "", {"log.retention.ms": "1000",
                                                        "custom.key": "anything"})


KRAFT_NODE = {"log.dirs": "/nonexistent", "process.roles": "broker,controller", "node.id": "1",
              "controller.quorum.voters": "1@127.0.0.1:9093",
              "controller.listener.names": "CONTROLLER",
              "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
              "inter.broker.listener.name": "PLAINTEXT"}


def test_a_node_that_sets_inter_broker_listener_name_accepts_dynamic_configs() -> None:
    """make cluster's nodes set inter.broker.listener.name; the defaulted
    security.inter.broker.protocol is not "set" too (librdkafka's 0081_admin AlterConfigs of a
    BROKER resource was refused: "Only one of inter.broker.listener.name and
    security.inter.broker.protocol should be set"), and dynamic topic defaults apply."""
    static = BrokerConfig.from_properties(KRAFT_NODE)
    validate_broker_configs(static, _image(), NODE, "1",
                            {"sasl.kerberos.min.time.before.relogin": "58000"})
    image = _image(node={"log.retention.ms": "5000"})
    assert dynamic_log_config(static, image, NODE).retention_ms == 5000
