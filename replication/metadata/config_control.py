"""Config changes as metadata records: Kafka's ``ConfigurationControlManager`` for one node.

A config resource is a resource type and a name: TOPIC (2) named by the topic, BROKER (4) named
by a node id or "" (the cluster-wide default), GROUP (32) named by a group id. Its dynamic configs are what its ConfigRecords add
up to in the image (``MetadataImage.topic_configs`` / ``broker_configs``); a ConfigRecord with a
null value deletes a key, so a deletion survives replay.

- ``incremental_changes``: IncrementalAlterConfigs' operations over the current dynamic configs,
  giving the new value of each named key (None = deleted). SET and DELETE take any key; APPEND
  and SUBTRACT only a LIST config (INVALID_CONFIG otherwise) and start from the current value,
  else from the config's default.
- ``legacy_changes``: AlterConfigs replaces the whole set: the given keys, and a deletion of
  every current key that is not given.
- ``plan_config_records``: checks the resource and the resulting configs and returns the
  ConfigRecords to append. A TOPIC change writes records for the keys whose value changes;
  a BROKER change writes one for every named key (KAFKA-14136: brokers reload on each record).
  A topic's configs are checked by ``LogConfig`` over the broker's topic defaults ->
  INVALID_CONFIG with its reason; then the topic must exist -> UNKNOWN_TOPIC_OR_PARTITION (Kafka
  validates before the existence check). BROKER values are checked by the broker beforehand,
  as Kafka's ``ConfigAdminManager`` does; here only the name. A GROUP (named by a group id, ""
  -> INVALID_REQUEST) is checked by ``group_config.validate_group_configs``; the group need not
  exist. A change writes records for the keys whose value changes.

Sans-IO: reads the image, returns records; the controller (``replication.controller``) proposes
them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import (
    InvalidConfigError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.metadata.config_record import ConfigRecord
from replication.metadata.controller import validate_topic_name
from replication.metadata.group_config import validate_group_configs
from replication.metadata.image import (
    BROKER_RESOURCE_TYPE,
    GROUP_RESOURCE_TYPE,
    TOPIC_RESOURCE_TYPE,
    MetadataImage,
)
from storage.config import LogConfig
from storage.errors import ConfigError

__all__ = [
    "APPEND",
    "DELETE",
    "OPERATION_NAMES",
    "SET",
    "SUBTRACT",
    "AlterOperation",
    "Changes",
    "current_configs",
    "incremental_changes",
    "legacy_changes",
    "plan_config_records",
]

# Kafka's AlterConfigOp.OpType ids.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

Changes = dict[str, str | None]


@dataclass(frozen=True, slots=True)
class AlterOperation:
    name: str
    operation: int
    value: str | None


def current_configs(image: MetadataImage, resource_type: int, name: str) -> dict[str, str]:
    if resource_type == TOPIC_RESOURCE_TYPE:
        return image.configs_of(name)
    if resource_type == BROKER_RESOURCE_TYPE:
        return dict(image.broker_configs.get(name, {}))
    if resource_type == GROUP_RESOURCE_TYPE:
        return dict(image.group_configs.get(name, {}))
    return {}


def incremental_changes(
    current: Mapping[str, str],
    operations: Sequence[AlterOperation],
    *,
    list_keys: Collection[str],
    defaults: Mapping[str, str],
) -> Changes:
    """The new value of each key the operations name (None: deleted)."""
    changes: Changes = {}
    for op in operations:
        if op.operation == SET:
            changes[op.name] = op.value
        elif op.operation == DELETE:
            changes[op.name] = None
        elif op.operation in (APPEND, SUBTRACT):
            if op.name not in list_keys:
                raise InvalidConfigError(
                    f"Can't {OPERATION_NAMES[op.operation]} to key {op.name} because its type "
                    "is not LIST."
                )
            old = current.get(op.name, defaults.get(op.name))
            changes[op.name] = _list_operation(op, _parts(old))
        else:
            raise InvalidRequestError(f"Unknown operations type {op.operation}")
    return changes


def _parts(value: str | None) -> list[str]:
    return [part for part in (value or "").split(",") if part]


def _list_operation(op: AlterOperation, parts: list[str]) -> str:
    for item in _parts(op.value):
        if op.operation == APPEND and item not in parts:
            parts.append(item)
        elif op.operation == SUBTRACT and item in parts:
            parts.remove(item)
    return ",".join(parts)


def legacy_changes(current: Mapping[str, str], configs: Mapping[str, str]) -> Changes:
    """AlterConfigs: the given values, and a deletion of each current key not given."""
    changes: Changes = {key: None for key in current if key not in configs}
    changes.update(configs)
    return changes


def plan_config_records(
    image: MetadataImage,
    resource_type: int,
    name: str,
    changes: Mapping[str, str | None],
    *,
    default_config: LogConfig,
) -> tuple[ConfigRecord, ...]:
    """The ConfigRecords of ``changes`` to one resource; raises the Kafka error of a refusal."""
    current = current_configs(image, resource_type, name)
    if resource_type == TOPIC_RESOURCE_TYPE:
        _validate_topic(image, name, {**current, **changes}, default_config)
        changed = {k: v for k, v in changes.items() if current.get(k) != v}
    elif resource_type == BROKER_RESOURCE_TYPE:
        _validate_broker_name(name)
        changed = dict(changes)
    elif resource_type == GROUP_RESOURCE_TYPE:
        _validate_group(name, {**current, **changes})
        changed = {k: v for k, v in changes.items() if current.get(k) != v}
    else:
        raise InvalidRequestError(f"Unknown resource type {resource_type}")
    return tuple(
        ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=value)
        for key, value in sorted(changed.items())
    )


def _validate_topic(
    image: MetadataImage, name: str, merged: Mapping[str, str | None], default_config: LogConfig
) -> None:
    if not name:
        raise InvalidRequestError("Default topic resources are not allowed.")
    validate_topic_name(name)
    configs = {key: value for key, value in merged.items() if value is not None}
    try:
        config = LogConfig.from_properties(configs, base=default_config)
    except ConfigError as error:
        raise InvalidConfigError(str(error)) from None
    if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({config.min_compaction_lag_ms})"
            f" > max.compaction.lag.ms ({config.max_compaction_lag_ms})"
        )
    if name not in image.topics_by_name:
        raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")


def _validate_group(name: str, merged: Mapping[str, str | None]) -> None:
    """Kafka's ``ControllerConfigurationValidator`` for GROUP: a name, then ``GroupConfig``."""
    if not name:
        raise InvalidRequestError("Default group resources are not allowed.")
    validate_group_configs({key: value for key, value in merged.items() if value is not None})


def _validate_broker_name(name: str) -> None:
    """Kafka's ``ControllerConfigurationValidator``: "" or a non-negative node id."""
    if not name:
        return
    try:
        node_id = int(name)
    except ValueError:
        raise InvalidRequestError("Unable to parse broker name as a base 10 number.") from None
    if node_id < 0:
        raise InvalidRequestError("Invalid negative broker ID.")
