"""The metadata log keys of the broker config: Kafka's names and defaults, and its checks."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig, ConfigError
from replication.metadata.log import MetadataLogConfig


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig.from_properties({}).metadata_log_config
    assert config == MetadataLogConfig(
        max_record_bytes_between_snapshots=20971520, max_snapshot_interval_ms=3600000,
        retention_max_bytes=104857600, retention_ms=604800000, segment_bytes=1073741824,
        segment_ms=604800000)


def test_keys_are_read() -> None:
    config = BrokerConfig.from_properties({
        "metadata.log.max.record.bytes.between.snapshots": "1000",
        "metadata.log.max.snapshot.interval.ms": "0",
        "metadata.max.retention.bytes": "-1",
        "metadata.max.retention.ms": "-1",
        "metadata.log.segment.min.bytes": "1024",
        "metadata.log.segment.bytes": "4096",
        "metadata.log.segment.ms": "60000",
    }).metadata_log_config
    assert config == MetadataLogConfig(1000, 0, -1, -1, 4096, 60000)
    assert config.log_config().segment_bytes == 4096
    assert config.log_config().retention_ms == -1 and config.log_config().retention_bytes == -1


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("metadata.log.segment.bytes", "1048576", "below 8388608"),
    ("metadata.log.max.record.bytes.between.snapshots", "0", "between 1"),
    ("metadata.log.max.snapshot.interval.ms", "-1", "between 0"),
    ("metadata.max.retention.ms", "soon", "not an integer"),
])
def test_bad_values_stop_start_up(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as caught:
        BrokerConfig.from_properties({key: value})
    assert caught.value.key == key
