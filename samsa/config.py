"""Client configuration: Kafka's config names, defaults and validation.

A client takes a mapping of Kafka's dotted names (``{"bootstrap.servers": "h:9092"}``)
and/or keyword arguments with underscores (``bootstrap_servers="h:9092"``); both spell
the same key. Values may be given typed (``5``, ``True``) or as the strings a
properties file or a command line holds (``"5"``, ``"true"``).

``parse_config(role, settings)`` returns a plain ``dict`` of every key the role
knows, defaults filled in, each value converted to its type. An unknown key or a
bad value raises ``ConfigError`` naming the key, the value and why, before any
connection is opened.

Defaults are the Java client's (Kafka 4.x), e.g. ``linger.ms`` 5, ``acks`` all,
``enable.idempotence`` true, ``partition.assignment.strategy`` range then
cooperative-sticky.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa._sasl import sasl_credentials
from samsa.errors import ConfigError

__all__ = ["ADMIN", "COMMON", "CONSUMER", "PRODUCER", "SHARE_CONSUMER", "ConfigKey", "parse_config"]

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One setting: its type (``int``, ``bool``, ``str``, ``list``, ``object``), default, checks."""

    name: str
    kind: str
    default: Any
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    doc: str = ""

    def convert(self, value: Any) -> Any:
        """``value`` converted to this key's type and checked; ``ConfigError`` if it can't be."""
        if value is None:
            return None
        converted = _CONVERTERS[self.kind](self, value)
        if self.choices and self.kind != "list" and converted not in self.choices:  # lists: per item
            raise ConfigError(self.name, value, f"must be one of {', '.join(self.choices)}")
        if self.minimum is not None and converted < self.minimum:
            raise ConfigError(self.name, value, f"must be at least {self.minimum}")
        if self.maximum is not None and converted > self.maximum:
            raise ConfigError(self.name, value, f"must be at most {self.maximum}")
        return converted


def _to_int(key: ConfigKey, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(key.name, value, "must be an integer")
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(key.name, value, "must be an integer") from None


def _to_bool(key: ConfigKey, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(key.name, value, "must be true or false")


def _to_str(key: ConfigKey, value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ConfigError(key.name, value, "must be a string")


def _to_list(key: ConfigKey, value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    result = [str(item).strip() for item in items if str(item).strip()]
    if key.choices:
        for item in result:
            if item not in key.choices:
                raise ConfigError(key.name, value, f"{item!r} is not one of {', '.join(key.choices)}")
    return result


def _to_object(key: ConfigKey, value: Any) -> Any:
    return value


_CONVERTERS: dict[str, Callable[[ConfigKey, Any], Any]] = {
    "int": _to_int,
    "bool": _to_bool,
    "str": _to_str,
    "list": _to_list,
    "object": _to_object,
}


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {key.name: key for key in keys}


COMMON = _keys(
    ConfigKey("bootstrap.servers", "list", ["localhost:9092"], doc="host:port pairs to start from"),
    ConfigKey("client.id", "str", "samsa"),
    ConfigKey("request.timeout.ms", "int", 30_000, minimum=0),
    ConfigKey("default.api.timeout.ms", "int", 60_000, minimum=0),
    ConfigKey("metadata.max.age.ms", "int", 300_000, minimum=0),
    ConfigKey("retry.backoff.ms", "int", 100, minimum=0),
    ConfigKey("retry.backoff.max.ms", "int", 1_000, minimum=0),
    ConfigKey("reconnect.backoff.ms", "int", 50, minimum=0),
    ConfigKey("reconnect.backoff.max.ms", "int", 1_000, minimum=0),
    ConfigKey("socket.connection.setup.timeout.ms", "int", 10_000, minimum=0),
    ConfigKey("connections.max.idle.ms", "int", 540_000),
    ConfigKey("receive.message.max.bytes", "int", 100_000_000, minimum=1_000),
    ConfigKey("client.rack", "str", ""),
    ConfigKey("security.protocol", "str", "PLAINTEXT", choices=("PLAINTEXT", "SASL_PLAINTEXT")),
    # SASL (samsa._sasl): librdkafka's username/password, or Java's sasl.jaas.config.
    ConfigKey("sasl.mechanism", "str", "GSSAPI", doc="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    ConfigKey("sasl.username", "str", ""),
    ConfigKey("sasl.password", "str", ""),
    ConfigKey("sasl.jaas.config", "str", ""),
)

PRODUCER = _keys(
    ConfigKey("acks", "str", "all", choices=("all", "-1", "0", "1")),
    ConfigKey("linger.ms", "int", 5, minimum=0),
    ConfigKey("batch.size", "int", 16_384, minimum=0),
    ConfigKey("buffer.memory", "int", 33_554_432, minimum=0),
    ConfigKey("max.block.ms", "int", 60_000, minimum=0),
    ConfigKey("max.request.size", "int", 1_048_576, minimum=1),
    ConfigKey("compression.type", "str", "none", choices=("none", "gzip", "snappy", "lz4", "zstd")),
    ConfigKey("compression.gzip.level", "int", -1, minimum=-1, maximum=9),
    ConfigKey("compression.lz4.level", "int", 9, minimum=1, maximum=17),
    ConfigKey("compression.zstd.level", "int", 3, minimum=-131_072, maximum=22),
    ConfigKey("max.in.flight.requests.per.connection", "int", 5, minimum=1),
    ConfigKey("enable.idempotence", "bool", True),
    ConfigKey("retries", "int", _INT32_MAX, minimum=0),
    ConfigKey("delivery.timeout.ms", "int", 120_000, minimum=0),
    ConfigKey("partitioner.ignore.keys", "bool", False),
    ConfigKey("partitioner.adaptive.partitioning.enable", "bool", True),
    ConfigKey("partitioner.availability.timeout.ms", "int", 0, minimum=0, maximum=0,
              doc="only 0: leaving out partitions of a slow broker is not implemented"),
    ConfigKey("transactional.id", "str", None),
    ConfigKey("key.serializer", "object", None, doc="callable(value) -> bytes, or None for bytes/str"),
    ConfigKey("value.serializer", "object", None, doc="callable(value) -> bytes, or None for bytes/str"),
)

CONSUMER = _keys(
    ConfigKey("group.id", "str", None),
    ConfigKey("group.instance.id", "str", None),
    ConfigKey("group.protocol", "str", "classic", choices=("classic",)),
    ConfigKey("auto.offset.reset", "str", "latest", choices=("earliest", "latest", "none")),
    ConfigKey("enable.auto.commit", "bool", True),
    ConfigKey("auto.commit.interval.ms", "int", 5_000, minimum=0),
    ConfigKey("session.timeout.ms", "int", 45_000, minimum=1),
    ConfigKey("heartbeat.interval.ms", "int", 3_000, minimum=1),
    ConfigKey("max.poll.interval.ms", "int", 300_000, minimum=1),
    ConfigKey("max.poll.records", "int", 500, minimum=1),
    ConfigKey("fetch.min.bytes", "int", 1, minimum=0),
    ConfigKey("fetch.max.bytes", "int", 52_428_800, minimum=0),
    ConfigKey("fetch.max.wait.ms", "int", 500, minimum=0),
    ConfigKey("max.partition.fetch.bytes", "int", 1_048_576, minimum=0),
    ConfigKey("isolation.level", "str", "read_uncommitted",
              choices=("read_uncommitted", "read_committed")),
    ConfigKey("partition.assignment.strategy", "list", ["range", "cooperative-sticky"],
              choices=("range", "roundrobin", "cooperative-sticky")),
    ConfigKey("check.crcs", "bool", True),
    ConfigKey("allow.auto.create.topics", "bool", True),
    ConfigKey("exclude.internal.topics", "bool", True),
    ConfigKey("key.deserializer", "object", None, doc="callable(bytes) -> value, or None for bytes"),
    ConfigKey("value.deserializer", "object", None, doc="callable(bytes) -> value, or None for bytes"),
)

# KafkaShareConsumer's keys (ShareConsumerConfig): the group's session timeout, heartbeat
# interval, isolation level and offset reset are the group's configs, kept by the broker.
SHARE_CONSUMER = _keys(
    ConfigKey("group.id", "str", None),
    ConfigKey("share.acknowledgement.mode", "str", "implicit", choices=("implicit", "explicit")),
    ConfigKey("max.poll.records", "int", 500, minimum=1),
    ConfigKey("fetch.min.bytes", "int", 1, minimum=0),
    ConfigKey("fetch.max.bytes", "int", 52_428_800, minimum=0),
    ConfigKey("fetch.max.wait.ms", "int", 500, minimum=0),
    ConfigKey("check.crcs", "bool", True),
    ConfigKey("key.deserializer", "object", None, doc="callable(bytes) -> value, or None for bytes"),
    ConfigKey("value.deserializer", "object", None, doc="callable(bytes) -> value, or None for bytes"),
)

ADMIN: dict[str, ConfigKey] = {}

_ROLES: dict[str, tuple[dict[str, ConfigKey], ...]] = {
    "producer": (COMMON, PRODUCER),
    "consumer": (COMMON, CONSUMER),
    "share_consumer": (COMMON, SHARE_CONSUMER),
    "admin": (COMMON, ADMIN),
}


def known_keys(role: str) -> dict[str, ConfigKey]:
    """Every key ``role`` ("producer", "consumer", "share_consumer", "admin") accepts."""
    merged: dict[str, ConfigKey] = {}
    for table in _ROLES[role]:
        merged.update(table)
    return merged


def parse_config(
    role: str,
    settings: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    ignore: Iterable[str] = (),
) -> dict[str, Any]:
    """The complete, typed configuration for ``role`` from ``settings`` then ``overrides``.

    Underscores in a name stand for dots (``linger_ms`` is ``linger.ms``). Keys in
    ``ignore`` are accepted and dropped (e.g. another role's keys in a shared dict).
    """
    keys = known_keys(role)
    ignored = set(ignore)
    result = {name: key.default for name, key in keys.items()}
    explicit: set[str] = set()
    for source in (settings or {}, overrides or {}):
        for raw_name, value in source.items():
            name = raw_name.replace("_", ".")
            if name in ignored or raw_name in ignored:
                continue
            key = keys.get(name)
            if key is None:
                raise ConfigError(raw_name, value, f"unknown {role} config")
            result[name] = key.convert(value)
            explicit.add(name)
    return _check_consistency(role, result, explicit)


def _check_consistency(role: str, config: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
    if not config["bootstrap.servers"]:
        raise ConfigError("bootstrap.servers", config["bootstrap.servers"], "must not be empty")
    for address in config["bootstrap.servers"]:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError("bootstrap.servers", address, "each entry must be host:port")
    if config["security.protocol"] == "SASL_PLAINTEXT":
        sasl_credentials(config)  # a bad mechanism or missing credentials fail here
    if role == "producer":
        _check_producer(config, explicit)
    if role == "share_consumer" and not config["group.id"]:
        raise ConfigError("group.id", config["group.id"], "a share consumer needs a group.id")
    if role == "consumer" and config["heartbeat.interval.ms"] >= config["session.timeout.ms"]:
        raise ConfigError("heartbeat.interval.ms", config["heartbeat.interval.ms"],
                          "must be lower than session.timeout.ms")
    return config


def _check_producer(config: dict[str, Any], explicit: set[str]) -> None:
    """The Java client's rules: idempotence (on by default) needs acks=all, at most 5 in
    flight and retries; when it was not asked for explicitly, a conflicting setting turns
    it off instead of failing."""
    if config["transactional.id"]:
        raise ConfigError("transactional.id", config["transactional.id"],
                          "transactions are not supported yet")
    if config["acks"] == "-1":
        config["acks"] = "all"
    conflicting = (config["acks"] != "all" or config["retries"] == 0
                   or config["max.in.flight.requests.per.connection"] > 5)
    if conflicting and "enable.idempotence" not in explicit:
        config["enable.idempotence"] = False
    if config["enable.idempotence"]:
        if config["acks"] != "all":
            raise ConfigError("acks", config["acks"], "must be all when enable.idempotence is true")
        if config["max.in.flight.requests.per.connection"] > 5:
            raise ConfigError("max.in.flight.requests.per.connection",
                              config["max.in.flight.requests.per.connection"],
                              "must be at most 5 when enable.idempotence is true")
        if config["retries"] == 0:
            raise ConfigError("retries", 0, "must be above 0 when enable.idempotence is true")
