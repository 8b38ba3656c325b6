"""``samsa.config.parse_config``: Kafka's names, the Java client's defaults, typed values,
clear errors, and the producer's idempotence rules."""

from __future__ import annotations

import pytest

from samsa.config import ADMIN, COMMON, CONSUMER, PRODUCER, known_keys, parse_config
from samsa.errors import ConfigError, KafkaError


def test_defaults_are_the_java_clients() -> None:
    producer = parse_config("producer")
    assert producer["bootstrap.servers"] == ["localhost:9092"]
    assert producer["acks"] == "all"
    assert producer["linger.ms"] == 5
    assert producer["batch.size"] == 16_384
    assert producer["enable.idempotence"] is True
    assert producer["retries"] == 2**31 - 1
    assert producer["delivery.timeout.ms"] == 120_000
    consumer = parse_config("consumer")
    assert consumer["auto.offset.reset"] == "latest"
    assert consumer["enable.auto.commit"] is True
    assert consumer["session.timeout.ms"] == 45_000
    assert consumer["partition.assignment.strategy"] == ["range", "cooperative-sticky"]
    admin = parse_config("admin")
    assert admin["request.timeout.ms"] == 30_000
    assert admin["default.api.timeout.ms"] == 60_000


def test_every_key_of_a_role_is_filled_in() -> None:
    for role, tables in (("producer", (COMMON, PRODUCER)), ("consumer", (COMMON, CONSUMER)),
                         ("admin", (COMMON, ADMIN))):
        config = parse_config(role)
        expected = {name for table in tables for name in table}
        assert set(config) == expected == set(known_keys(role))


def test_underscores_spell_the_same_key_as_dots() -> None:
    dotted = parse_config("producer", {"linger.ms": 20, "bootstrap.servers": "a:1"})
    underscored = parse_config("producer", None, {"linger_ms": 20, "bootstrap_servers": "a:1"})
    assert dotted == underscored
    assert dotted["linger.ms"] == 20


def test_overrides_win_over_settings() -> None:
    config = parse_config("consumer", {"fetch.min.bytes": 5}, {"fetch_min_bytes": 7})
    assert config["fetch.min.bytes"] == 7


@pytest.mark.parametrize(("key", "text", "expected"), [
    ("linger.ms", " 25 ", 25),
    ("enable.idempotence", "false", False),
    ("enable.idempotence", "TRUE", True),
    ("check.crcs", "0", False),
    ("bootstrap.servers", "a:1, b:2,,", ["a:1", "b:2"]),
    ("client.id", "  me ", "me"),
    ("compression.type", "zstd", "zstd"),
    ("partition.assignment.strategy", "roundrobin,range", ["roundrobin", "range"]),
])
def test_string_values_as_a_properties_file_gives_them(key: str, text: str, expected: object) -> None:
    role = "consumer" if key in CONSUMER else "producer"
    assert parse_config(role, {key: text})[key] == expected


def test_list_values_may_be_sequences() -> None:
    config = parse_config("admin", {"bootstrap.servers": ("h1:1", "h2:2")})
    assert config["bootstrap.servers"] == ["h1:1", "h2:2"]


@pytest.mark.parametrize(("role", "key"), [
    ("producer", "group.id"),  # a consumer key
    ("consumer", "linger.ms"),  # a producer key
    ("admin", "acks"),
    ("admin", "no.such.key"),
])
def test_unknown_keys_are_refused_with_the_key_named(role: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(role, {key: "1"})
    assert caught.value.key == key
    assert f"unknown {role} config" in str(caught.value)


def test_keys_to_ignore_are_dropped() -> None:
    config = parse_config("producer", {"group.id": "g", "linger.ms": 1}, ignore=["group.id"])
    assert "group.id" not in config
    assert config["linger.ms"] == 1


@pytest.mark.parametrize(("role", "key", "value", "reason"), [
    ("producer", "linger.ms", "soon", "must be an integer"),
    ("producer", "linger.ms", True, "must be an integer"),
    ("producer", "linger.ms", -1, "must be at least 0"),
    ("producer", "compression.gzip.level", 10, "must be at most 9"),
    ("producer", "acks", "2", "must be one of"),
    ("producer", "compression.type", "brotli", "must be one of"),
    ("producer", "enable.idempotence", "maybe", "must be true or false"),
    ("consumer", "partition.assignment.strategy", "range,sticky", "'sticky' is not one of"),
    ("consumer", "group.id", ["g"], "must be a string"),
    ("admin", "bootstrap.servers", "localhost", "each entry must be host:port"),
    ("admin", "bootstrap.servers", "h:port", "each entry must be host:port"),
    ("admin", "security.protocol", "SSL", "must be one of PLAINTEXT"),
])
def test_bad_values_name_the_key_the_value_and_why(role: str, key: str, value: object,
                                                  reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(role, {key: value})
    error = caught.value
    assert (error.key, error.value) == (key, value)
    assert reason in error.reason
    assert str(error) == f"invalid config {key}={value!r}: {error.reason}"
    assert isinstance(error, KafkaError) and isinstance(error, ValueError)


def test_bootstrap_servers_must_not_be_empty() -> None:
    with pytest.raises(ConfigError, match="must not be empty") as caught:
        parse_config("admin", {"bootstrap.servers": " , "})
    assert caught.value.key == "bootstrap.servers"


def test_heartbeat_must_be_below_the_session_timeout() -> None:
    with pytest.raises(ConfigError, match=r"lower than session\.timeout\.ms"):
        parse_config("consumer", {"session.timeout.ms": 3000, "heartbeat.interval.ms": 3000})
    assert parse_config("consumer", {"session.timeout.ms": 3001})["session.timeout.ms"] == 3001


def test_a_parsed_config_parses_to_itself() -> None:
    for role in ("producer", "consumer", "admin"):
        config = parse_config(role, {"bootstrap.servers": "h:1", "client.id": "x"})
        assert parse_config(role, config) == config


# --- idempotence (the Java client's rules) -------------------------------------------------

def test_idempotence_is_on_by_default_with_acks_all() -> None:
    config = parse_config("producer")
    assert config["enable.idempotence"] is True
    assert config["acks"] == "all"


def test_acks_minus_one_means_all() -> None:
    assert parse_config("producer", {"acks": "-1"})["acks"] == "all"
    assert parse_config("producer", {"acks": -1})["acks"] == "all"


@pytest.mark.parametrize("conflict", [
    {"acks": "1"},
    {"acks": "0"},
    {"retries": 0},
    {"max.in.flight.requests.per.connection": 6},
])
def test_a_conflicting_setting_turns_default_idempotence_off(conflict: dict[str, object]) -> None:
    config = parse_config("producer", conflict)
    assert config["enable.idempotence"] is False


@pytest.mark.parametrize(("conflict", "key"), [
    ({"acks": "1"}, "acks"),
    ({"retries": 0}, "retries"),
    ({"max.in.flight.requests.per.connection": 6}, "max.in.flight.requests.per.connection"),
])
def test_a_conflict_with_explicit_idempotence_is_an_error(conflict: dict[str, object],
                                                          key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config("producer", {"enable.idempotence": "true", **conflict})
    assert caught.value.key == key
    assert "enable.idempotence" in caught.value.reason


def test_explicitly_off_idempotence_allows_anything() -> None:
    config = parse_config("producer", {"enable.idempotence": False, "acks": "1",
                                       "max.in.flight.requests.per.connection": 10})
    assert config["enable.idempotence"] is False
    assert config["max.in.flight.requests.per.connection"] == 10


def test_five_in_flight_keeps_idempotence() -> None:
    config = parse_config("producer", {"max.in.flight.requests.per.connection": 5})
    assert config["enable.idempotence"] is True


def test_transactions_are_refused_for_now() -> None:
    with pytest.raises(ConfigError, match="transactions are not supported"):
        parse_config("producer", {"transactional.id": "t"})
