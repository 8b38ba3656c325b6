"""Broker configuration: Kafka's names and defaults, precedence, and one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig, ConfigError, Listener, parse_properties


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig.from_properties({})
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.advertised_listeners == config.listeners
    assert config.num_partitions == 1
    assert config.auto_create_topics_enable is True
    assert config.socket_request_max_bytes == 104857600
    assert config.queued_max_requests == 500
    assert config.connections_max_idle_ms == 600000
    assert config.log_config.max_message_bytes == 1048588
    assert config.log_config.retention_ms == 168 * 3_600_000
    assert config.log_config.segment_ms == 168 * 3_600_000
    assert config.log_flush_offset_checkpoint_interval_ms == 60000
    assert config.replica_high_watermark_checkpoint_interval_ms == 5000


def test_retention_precedence_ms_minutes_hours() -> None:
    assert BrokerConfig.from_properties({"log.retention.hours": "1"}).log_config.retention_ms == 3_600_000
    both = {"log.retention.hours": "1", "log.retention.minutes": "2"}
    assert BrokerConfig.from_properties(both).log_config.retention_ms == 120_000
    all_three = {**both, "log.retention.ms": "5"}
    assert BrokerConfig.from_properties(all_three).log_config.retention_ms == 5
    assert BrokerConfig.from_properties({"log.retention.hours": "-1"}).log_config.retention_ms == -1


def test_log_dirs_over_log_dir_and_listener_port_zero() -> None:
    config = BrokerConfig.from_properties(
        {"log.dir": "/a", "log.dirs": "/b, /c", "listeners": "PLAINTEXT://127.0.0.1:0"}
    )
    assert config.log_dirs == (Path("/b"), Path("/c"))
    assert config.listeners[0].port == 0


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("num.partitions", "zero", "not an integer"),
        ("num.partitions", "0", "must be between 1"),
        ("auto.create.topics.enable", "yes", "must be true or false"),
        ("listeners", "127.0.0.1:9092", "is not NAME://host:port"),
        ("message.max.bytes", "-3", "must be between"),
        ("log.cleanup.policy", "shred", "delete"),
        ("log.roll.hours", "0", "must be between"),
    ],
)
def test_bad_values_name_key_value_and_reason(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties({key: value})
    assert caught.value.key == key
    assert caught.value.value == value
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


def test_unknown_keys_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    BrokerConfig.from_properties({"no.such.key": "1"})
    assert "no.such.key" in caplog.text


def test_properties_file_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# comment\n! also\nnum.partitions = 4\nlog.dirs=/x,\\\n  /y\nnode.id: 7\n")
    config = BrokerConfig.load(path, ["num.partitions=6"])
    assert (config.num_partitions, config.node_id) == (6, 7)
    assert config.log_dirs == (Path("/x"), Path("/y"))
    with pytest.raises(ConfigError):
        BrokerConfig.load(None, ["no-equals-sign"])


def test_parse_properties_separators() -> None:
    assert parse_properties("a=1\nb : 2\nc\n") == {"a": "1", "b": "2", "c": ""}


def test_shipped_server_properties_parse_and_match_defaults() -> None:
    path = Path(__file__).resolve().parents[3] / "conf" / "server.properties"
    properties = parse_properties(path.read_text())
    config = BrokerConfig.from_properties(properties)
    defaults = BrokerConfig.from_properties({"log.dirs": properties.get("log.dirs", "")})
    assert config.log_config == defaults.log_config
    assert config.listeners == defaults.listeners


def test_startup_verification_is_a_samsa_key_defaulting_to_unclean() -> None:
    assert BrokerConfig.from_properties({}).samsa_log_verify_on_startup == "unclean"
    for mode in ("always", "never", "UNCLEAN"):
        config = BrokerConfig.from_properties({"samsa.log.verify.on.startup": mode})
        assert config.samsa_log_verify_on_startup == mode.lower()
    with pytest.raises(ConfigError, match="unclean, always, never"):
        BrokerConfig.from_properties({"samsa.log.verify.on.startup": "sometimes"})
