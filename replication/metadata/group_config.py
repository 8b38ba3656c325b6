"""Group configs: Kafka's ``GroupConfig``, the dynamic configs of the GROUP config resource.

A GROUP resource (config resource type 32, KIP-848) is named by a group id; its configs are
ConfigRecords on that name in ``__cluster_metadata`` (``MetadataImage.group_configs``), kept
whether or not the group exists, as Kafka keeps them. The keys are Kafka 4.3.1's (those Samsa
acts on), with Kafka's defaults and the bounds of Kafka's ``group.consumer.*`` /
``group.share.*`` broker defaults, plus Samsa's two share-group keys:

| key | default | allowed |
| --- | --- | --- |
| consumer.session.timeout.ms | 45000 | 45000..60000, above the heartbeat interval |
| consumer.heartbeat.interval.ms | 5000 | 5000..15000 |
| share.session.timeout.ms | 45000 | 45000..60000, above the heartbeat interval |
| share.heartbeat.interval.ms | 5000 | 5000..15000 |
| share.record.lock.duration.ms | 30000 | 15000..60000 (ConfigDef floor 1000) |
| share.delivery.count.limit | 5 | 2..10 |
| share.partition.max.record.locks | 2000 | 100..4000 |
| share.auto.offset.reset | latest | latest, earliest |
| share.isolation.level | read_uncommitted | read_committed, read_uncommitted |
| samsa.share.dead.letter.topic | "" (none) | "" or a legal topic name |
| samsa.share.record.expiry.ms | -1 (never) | -1 or 1..2^63-1 |

Not taken from Kafka 4.3.1: ``share.renew.acknowledge.enable`` (the RENEW acknowledgement) and
``share.assignment.interval.ms`` (Samsa assigns at the heartbeat, never offloaded), and the
``by_duration:`` reset strategy; they are unknown names / invalid values here rather than keys
that would be accepted and ignored.

``validate_group_configs`` raises Kafka's errors: an unknown name -> INVALID_CONFIG "Unknown
group config name: X"; a value of the wrong type or out of bounds -> INVALID_CONFIG naming the
key. ``share_settings`` is a share group's effective settings (its own configs over the broker's
``group.share.*`` defaults), what the share-group code reads. Pure functions, no state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from protocol.errors import InvalidConfigError
from replication.metadata.image import MetadataImage

__all__ = [
    "GROUP_CONFIG_DEFAULTS",
    "GROUP_CONFIG_KEYS",
    "GROUP_CONFIG_TYPES",
    "GroupConfigKey",
    "ShareGroupSettings",
    "group_config_values",
    "share_settings",
    "validate_group_configs",
]

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
# DescribeConfigs' config types (Kafka's ConfigDef.Type ids)
STRING_TYPE, INT_TYPE, LONG_TYPE = 2, 3, 5
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    """One integer group config: its default, its ConfigDef floor, and the broker-default
    bounds."""

    default: int
    at_least: int
    minimum: int
    maximum: int
    minimum_key: str
    maximum_key: str


GROUP_CONFIG_KEYS: dict[str, GroupConfigKey] = {
    "consumer.session.timeout.ms": GroupConfigKey(
        45000, 1, 45000, 60000,
        "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "consumer.heartbeat.interval.ms": GroupConfigKey(
        5000, 1, 5000, 15000,
        "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    "share.session.timeout.ms": GroupConfigKey(
        45000, 1, 45000, 60000,
        "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.heartbeat.interval.ms": GroupConfigKey(
        5000, 1, 5000, 15000,
        "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.record.lock.duration.ms": GroupConfigKey(
        30000, 1000, 15000, 60000,
        "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    "share.delivery.count.limit": GroupConfigKey(
        5, 2, 2, 10,
        "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    "share.partition.max.record.locks": GroupConfigKey(
        2000, 100, 100, 4000,
        "group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks"),
}
# The string-valued keys: default and the allowed values (None: any, checked below).
_STRING_KEYS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "share.auto.offset.reset": ("latest", ("latest", "earliest")),
    "share.isolation.level": ("read_uncommitted", ("read_committed", "read_uncommitted")),
    "samsa.share.dead.letter.topic": ("", None),
}
RECORD_EXPIRY_KEY = "samsa.share.record.expiry.ms"
DEAD_LETTER_TOPIC_KEY = "samsa.share.dead.letter.topic"

GROUP_CONFIG_DEFAULTS: dict[str, str] = {
    **{name: str(key.default) for name, key in GROUP_CONFIG_KEYS.items()},
    **{name: default for name, (default, _) in _STRING_KEYS.items()},
    RECORD_EXPIRY_KEY: "-1",
}
GROUP_CONFIG_TYPES: dict[str, int] = {
    **dict.fromkeys(GROUP_CONFIG_KEYS, INT_TYPE),
    **dict.fromkeys(_STRING_KEYS, STRING_TYPE),
    RECORD_EXPIRY_KEY: LONG_TYPE,
}
# (session timeout, heartbeat interval): the session must be longer than the interval.
_SESSION_PAIRS = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
)


def group_config_values(configs: Mapping[str, str]) -> dict[str, str]:
    """Every group config's effective value: the group's own over Kafka's defaults."""
    return {**GROUP_CONFIG_DEFAULTS, **configs}


def validate_group_configs(configs: Mapping[str, str]) -> dict[str, int | str]:
    """Kafka's ``GroupConfig.validate``: names first, then each value, then the pairs."""
    for name in configs:
        if name not in GROUP_CONFIG_DEFAULTS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
    values: dict[str, int | str] = {}
    for name, raw in group_config_values(configs).items():
        values[name] = _parse(name, raw)
    for name, key in GROUP_CONFIG_KEYS.items():
        _check_bounds(name, key, int(values[name]))
    for session, heartbeat in _SESSION_PAIRS:
        if int(values[session]) <= int(values[heartbeat]):
            raise InvalidConfigError(f"{session} must be greater than {heartbeat}")
    return values


def _parse(name: str, raw: str) -> int | str:
    if name in _STRING_KEYS:
        return _parse_string(name, raw)
    if name == RECORD_EXPIRY_KEY:
        value = _parse_number(name, raw, -(2**63), LONG_MAX, "LONG")
        if value == 0 or value < -1:
            raise InvalidConfigError(
                f"Invalid value {raw} for configuration {name}: must be -1 (never) or positive")
        return value
    key = GROUP_CONFIG_KEYS[name]
    value = _parse_number(name, raw, -(2**31), INT_MAX, "INT")
    if value < key.at_least:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {name}: Value must be at least {key.at_least}"
        )
    return value


def _parse_number(name: str, raw: str, low: int, high: int, type_name: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {name}: Not a number of type {type_name}"
        ) from None
    if not low <= value <= high:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {name}: Not a number of type {type_name}"
        )
    return value


def _parse_string(name: str, raw: str) -> str:
    _, allowed = _STRING_KEYS[name]
    value = raw.strip()
    if allowed is not None:
        lowered = value.lower()
        if lowered not in allowed:
            raise InvalidConfigError(
                f"Invalid value {raw} for configuration {name}: String must be one of: "
                f"{', '.join(allowed)}")
        return lowered
    if (value and not _TOPIC_NAME.fullmatch(value)) or value in (".", ".."):
        raise InvalidConfigError(f"Invalid value {raw} for configuration {name}: not a legal topic name")
    return value


def _check_bounds(name: str, key: GroupConfigKey, value: int) -> None:
    if value < key.minimum:
        raise InvalidConfigError(f"{name} must be greater than or equal to {key.minimum_key}")
    if value > key.maximum:
        raise InvalidConfigError(f"{name} must be less than or equal to {key.maximum_key}")


# ---- a share group's effective settings ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """A share group's effective settings. The defaults are Kafka's broker defaults
    (``group.share.*``); the broker passes its own (``BrokerConfig.share_group_defaults``)."""

    session_timeout_ms: int = 45_000  # share.session.timeout.ms / group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # share.heartbeat.interval.ms
    record_lock_duration_ms: int = 30_000  # share.record.lock.duration.ms
    delivery_count_limit: int = 5  # share.delivery.count.limit
    partition_max_record_locks: int = 2_000  # share.partition.max.record.locks
    auto_offset_reset: str = "latest"  # share.auto.offset.reset: "latest" | "earliest"
    isolation_level: str = "read_uncommitted"  # share.isolation.level
    dead_letter_topic: str | None = None  # samsa.share.dead.letter.topic ("" -> None)
    record_expiry_ms: int | None = None  # samsa.share.record.expiry.ms (-1 -> None)
    max_size: int = 200  # group.share.max.size (broker only)


_SETTING_OF_KEY = {
    "share.session.timeout.ms": "session_timeout_ms",
    "share.heartbeat.interval.ms": "heartbeat_interval_ms",
    "share.record.lock.duration.ms": "record_lock_duration_ms",
    "share.delivery.count.limit": "delivery_count_limit",
    "share.partition.max.record.locks": "partition_max_record_locks",
    "share.auto.offset.reset": "auto_offset_reset",
    "share.isolation.level": "isolation_level",
}


def share_settings(
    image: MetadataImage, group_id: str, *, defaults: ShareGroupSettings | None = None
) -> ShareGroupSettings:
    """The share group's effective settings: its group configs in ``image`` over ``defaults``
    (the broker's ``group.share.*``; Kafka's when None). A stored value that no longer parses
    (it was validated when written) falls back to the default."""
    settings = defaults or ShareGroupSettings()
    own = image.group_configs.get(group_id, {})
    changes: dict[str, object] = {}
    for name, raw in own.items():
        try:
            value = _parse(name, raw) if name in GROUP_CONFIG_DEFAULTS else None
        except InvalidConfigError:
            continue
        if name in _SETTING_OF_KEY:
            changes[_SETTING_OF_KEY[name]] = value
        elif name == DEAD_LETTER_TOPIC_KEY:
            changes["dead_letter_topic"] = value or None
        elif name == RECORD_EXPIRY_KEY:
            changes["record_expiry_ms"] = None if value == -1 else value
    return replace(settings, **changes)  # type: ignore[arg-type]
