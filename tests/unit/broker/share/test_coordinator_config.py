"""The share coordinator's keys: Kafka 4.3.1's names and defaults (ShareCoordinatorConfig), its
validation refused at start-up with the key and the reason, and conf/server.properties
documenting each with its default."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig, ConfigError
from broker.share.coordinator_config import ShareCoordinatorConfig

DEFAULTS = {
    "share.coordinator.state.topic.num.partitions": "50",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "share.coordinator.state.topic.segment.bytes": "104857600",
    "share.coordinator.snapshot.update.records.per.snapshot": "500",
    "share.coordinator.write.timeout.ms": "5000",
}


def test_defaults_are_kafkas() -> None:
    assert BrokerConfig.from_properties({}).share_coordinator_config == ShareCoordinatorConfig(
        state_topic_num_partitions=50, state_topic_replication_factor=3, state_topic_min_isr=2,
        state_topic_segment_bytes=104857600, snapshot_update_records_per_snapshot=500,
        write_timeout_ms=5000)


def test_values_are_read() -> None:
    config = BrokerConfig.from_properties({
        "share.coordinator.state.topic.num.partitions": "3",
        "share.coordinator.snapshot.update.records.per.snapshot": "0",
        "share.coordinator.write.timeout.ms": "100",
    }).share_coordinator_config
    assert (config.state_topic_num_partitions, config.snapshot_update_records_per_snapshot,
            config.write_timeout_ms) == (3, 0, 100)


@pytest.mark.parametrize(("key", "value"), [
    ("share.coordinator.state.topic.num.partitions", "0"),
    ("share.coordinator.state.topic.replication.factor", "0"),
    ("share.coordinator.state.topic.min.isr", "0"),
    ("share.coordinator.state.topic.segment.bytes", "0"),
    ("share.coordinator.snapshot.update.records.per.snapshot", "501"),
    ("share.coordinator.snapshot.update.records.per.snapshot", "-1"),
    ("share.coordinator.write.timeout.ms", "0"),
    ("share.coordinator.write.timeout.ms", "soon"),
])
def test_bad_values_are_refused_with_the_key_and_why(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties({key: value})
    assert caught.value.key == key and caught.value.value == value
    assert "must be between" in str(caught.value) or "not an integer" in str(caught.value)


def test_server_properties_documents_each_key_with_its_default() -> None:
    text = (Path(__file__).resolve().parents[4] / "conf" / "server.properties").read_text()
    for key, default in DEFAULTS.items():
        assert f"#{key}={default}\n" in text
