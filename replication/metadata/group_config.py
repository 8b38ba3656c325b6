"""Group configs: Kafka's ``GroupConfig``, the dynamic configs of the GROUP config resource.

A GROUP resource (config resource type 32, KIP-848) is named by a group id; its configs are
ConfigRecords on that name in ``__cluster_metadata`` (``MetadataImage.group_configs``), kept
whether or not the group exists, as Kafka keeps them. The keys are Kafka 4.0's, with Kafka's
defaults and the bounds of Kafka's ``group.consumer.*`` / ``group.share.*`` broker defaults:

| key | default | allowed |
| --- | --- | --- |
| consumer.session.timeout.ms | 45000 | 45000..60000, above the heartbeat interval |
| consumer.heartbeat.interval.ms | 5000 | 5000..15000 |
| share.session.timeout.ms | 45000 | 45000..60000, above the heartbeat interval |
| share.heartbeat.interval.ms | 5000 | 5000..15000 |
| share.record.lock.duration.ms | 30000 | 15000..60000 |

Samsa's group coordinator runs classic groups only, which these keys do not govern (in Kafka
either): they are validated, stored and described. ``validate_group_configs`` raises Kafka's
errors: an unknown name -> INVALID_CONFIG "Unknown group config name: X"; a value that is not an
integer or out of bounds -> INVALID_CONFIG naming the key. Pure functions, no state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.errors import InvalidConfigError

__all__ = [
    "GROUP_CONFIG_DEFAULTS",
    "GROUP_CONFIG_KEYS",
    "GroupConfigKey",
    "group_config_values",
    "validate_group_configs",
]


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    """One group config: its default, its ConfigDef floor, and the broker-default bounds."""

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
}
GROUP_CONFIG_DEFAULTS: dict[str, str] = {
    name: str(key.default) for name, key in GROUP_CONFIG_KEYS.items()
}
# (session timeout, heartbeat interval): the session must be longer than the interval.
_SESSION_PAIRS = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
)


def group_config_values(configs: Mapping[str, str]) -> dict[str, str]:
    """Every group config's effective value: the group's own over Kafka's defaults."""
    return {**GROUP_CONFIG_DEFAULTS, **configs}


def validate_group_configs(configs: Mapping[str, str]) -> dict[str, int]:
    """Kafka's ``GroupConfig.validate``: names first, then each value, then the pairs."""
    for name in configs:
        if name not in GROUP_CONFIG_KEYS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
    values = {name: _parse(name, raw) for name, raw in group_config_values(configs).items()}
    for name, value in values.items():
        _check_bounds(name, value)
    for session, heartbeat in _SESSION_PAIRS:
        if values[session] <= values[heartbeat]:
            raise InvalidConfigError(f"{session} must be greater than {heartbeat}")
    return values


def _parse(name: str, raw: str) -> int:
    key = GROUP_CONFIG_KEYS[name]
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {name}: Not a number of type INT"
        ) from None
    if not -(2**31) <= value < 2**31:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {name}: Not a number of type INT"
        )
    if value < key.at_least:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {name}: Value must be at least {key.at_least}"
        )
    return value


def _check_bounds(name: str, value: int) -> None:
    key = GROUP_CONFIG_KEYS[name]
    if value < key.minimum:
        raise InvalidConfigError(f"{name} must be greater than or equal to {key.minimum_key}")
    if value > key.maximum:
        raise InvalidConfigError(f"{name} must be less than or equal to {key.maximum_key}")
