"""Kafka 4's topic config keys in ``LogConfig``: compression, min.insync.replicas, unclean leader
election, throttled replicas, tiered-storage keys — their defaults, bounds and error messages."""

from __future__ import annotations

import pytest

from storage.config import LogConfig
from storage.errors import ConfigError

KAFKA_4_TOPIC_KEYS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}


def test_every_kafka_4_topic_key_is_known_with_kafkas_defaults() -> None:
    properties = LogConfig().to_properties()
    assert set(properties) == KAFKA_4_TOPIC_KEYS
    assert properties["compression.type"] == "producer"
    assert properties["compression.gzip.level"] == "-1"
    assert properties["compression.lz4.level"] == "9"
    assert properties["compression.zstd.level"] == "3"
    assert properties["min.insync.replicas"] == "1"
    assert properties["unclean.leader.election.enable"] == "false"
    assert properties["local.retention.ms"] == properties["local.retention.bytes"] == "-2"


def test_properties_round_trip() -> None:
    config = LogConfig.from_properties({
        "compression.type": "lz4", "compression.zstd.level": "-5", "min.insync.replicas": "2",
        "leader.replication.throttled.replicas": "0:1, 1:1", "delete.retention.ms": "900",
    })
    assert LogConfig.from_properties(config.to_properties()) == config
    assert config.to_properties()["leader.replication.throttled.replicas"] == "0:1,1:1"


@pytest.mark.parametrize("value", ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])
def test_every_broker_compression_type_is_accepted(value: str) -> None:
    assert LogConfig.from_properties({"compression.type": value}).compression_type == value


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("compression.type", "lz5", "String must be one of"),
        ("compression.gzip.level", "0", "between 1 and 9 or equal to -1"),
        ("compression.gzip.level", "10", "between -1 and 9"),
        ("compression.lz4.level", "18", "between 1 and 17"),
        ("compression.zstd.level", "23", "between -131072 and 22"),
        ("min.insync.replicas", "0", "between 1 and"),
        ("unclean.leader.election.enable", "yes", "true or false"),
        ("follower.replication.throttled.replicas", "0-1", "the literal '*'"),
        ("remote.storage.enable", "true", "Tiered Storage functionality is disabled"),
        ("local.retention.ms", "-3", "between -2 and"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as caught:
        LogConfig.from_properties({key: value})
    assert caught.value.key == key


def test_an_unknown_name_is_reported_before_any_bad_value() -> None:
    """librdkafka's 0081 sends a valid compression.type with an unknown key: Kafka names the
    unknown key, whatever the order."""
    with pytest.raises(ConfigError, match=r"Unknown topic config name: dummy\.doesntexist") as caught:
        LogConfig.from_properties({
            "compression.type": "lz4", "delete.retention.ms": "nope",
            "dummy.doesntexist": "broker is verifying this",
        })
    assert caught.value.key == "dummy.doesntexist"


@pytest.mark.parametrize(("raw", "expected"), [
    ("delete,compact", "delete,compact"),  # the order given, as Kafka lists it
    ("compact, delete", "compact,delete"),
    ("compact,compact", "compact"),
    ("", ""),  # Kafka 4.2+: infinite retention
])
def test_cleanup_policy_keeps_kafkas_list(raw: str, expected: str) -> None:
    config = LogConfig.from_properties({"cleanup.policy": raw})
    assert config.to_properties()["cleanup.policy"] == expected


def test_cleanup_policy_refuses_other_policies() -> None:
    with pytest.raises(ConfigError, match="must be a list of 'delete' and/or 'compact', or empty"):
        LogConfig.from_properties({"cleanup.policy": "delete,bogus"})
