"""Config changes as records: incremental and legacy semantics, validation, replay of deletions;
adding partitions."""

from __future__ import annotations

import uuid

import pytest

from protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    InvalidTopicExceptionError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.metadata.config_control import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    AlterOperation,
    incremental_changes,
    legacy_changes,
    plan_config_records,
)
from replication.metadata.controller import plan_create_partitions
from replication.metadata.image import BROKER_RESOURCE_TYPE, TOPIC_RESOURCE_TYPE, MetadataImage
from storage.config import LogConfig

DEFAULTS = LogConfig().to_properties()
LIST_KEYS = {"cleanup.policy"}


def _image(topic: str = "t", partitions: int = 1, **configs: str) -> MetadataImage:
    image = MetadataImage()
    topic_id = uuid.uuid4()
    image.apply(TopicRecord(name=topic, topic_id=topic_id))
    for index in range(partitions):
        image.apply(PartitionRecord(partition_id=index, topic_id=topic_id, replicas=[1], isr=[1],
                                    leader=1))
    for key, value in configs.items():
        image.apply(ConfigRecord(resource_type=TOPIC_RESOURCE_TYPE, resource_name=topic,
                                 name=key, value=value))
    return image


def _ops(*ops: tuple[str, int, str | None]) -> list[AlterOperation]:
    return [AlterOperation(*op) for op in ops]


@pytest.mark.parametrize(
    ("current", "op", "expected"),
    [
        ({}, ("cleanup.policy", APPEND, "compact"), "delete,compact"),  # from the default
        ({"cleanup.policy": "compact"}, ("cleanup.policy", APPEND, "compact"), "compact"),
        ({"cleanup.policy": "compact"}, ("cleanup.policy", APPEND, "delete,compact"),
         "compact,delete"),
        ({"cleanup.policy": "delete,compact"}, ("cleanup.policy", SUBTRACT, "delete"), "compact"),
        ({}, ("cleanup.policy", SUBTRACT, "compact"), "delete"),  # absent: nothing to remove
        ({"cleanup.policy": "compact"}, ("cleanup.policy", SUBTRACT, "compact"), ""),
        ({"retention.ms": "5"}, ("retention.ms", SET, "7"), "7"),
        ({"retention.ms": "5"}, ("retention.ms", DELETE, None), None),
    ],
)
def test_incremental_operations(current, op, expected) -> None:  # type: ignore[no-untyped-def]
    changes = incremental_changes(current, _ops(op), list_keys=LIST_KEYS, defaults=DEFAULTS)
    assert changes == {op[0]: expected}


@pytest.mark.parametrize("operation", [APPEND, SUBTRACT])
def test_append_and_subtract_need_a_list_config(operation: int) -> None:
    with pytest.raises(InvalidConfigError, match=r"retention\.ms because its type is not LIST"):
        incremental_changes({}, _ops(("retention.ms", operation, "1")), list_keys=LIST_KEYS,
                            defaults=DEFAULTS)


def test_unknown_operation_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequestError):
        incremental_changes({}, _ops(("retention.ms", 9, "1")), list_keys=LIST_KEYS,
                            defaults=DEFAULTS)


def test_legacy_changes_delete_what_is_not_given() -> None:
    assert legacy_changes({"a": "1", "b": "2"}, {"b": "3", "c": "4"}) == {
        "a": None, "b": "3", "c": "4",
    }


def test_topic_records_only_for_changed_keys_and_null_for_deletions() -> None:
    image = _image(**{"retention.ms": "100", "segment.bytes": "1000"})
    changes = {"retention.ms": "100", "segment.bytes": None, "cleanup.policy": "compact"}
    records = plan_config_records(image, TOPIC_RESOURCE_TYPE, "t", changes,
                                  default_config=LogConfig())
    assert [(r.name, r.value) for r in records] == [("cleanup.policy", "compact"),
                                                    ("segment.bytes", None)]
    for record in records:
        image.apply(record)
    assert image.configs_of("t") == {"retention.ms": "100", "cleanup.policy": "compact"}


def test_a_deleted_config_is_gone_after_replay_and_empty_sets_are_dropped() -> None:
    image = _image(**{"retention.ms": "100"})
    image.apply(ConfigRecord(resource_type=TOPIC_RESOURCE_TYPE, resource_name="t",
                             name="retention.ms", value=None))
    assert image.configs_of("t") == {}
    assert "t" not in image.topic_configs
    image.apply(ConfigRecord(resource_type=BROKER_RESOURCE_TYPE, resource_name="",
                             name="log.retention.ms", value="5"))
    assert image.broker_configs == {"": {"log.retention.ms": "5"}}


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"retention.ms": "abc"}, "retention.ms"),
        ({"cleanup.policy": "shred"}, "cleanup.policy"),
        ({"no.such.config": "1"}, "no.such.config"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms"),
    ],
)
def test_bad_topic_values_are_invalid_config_naming_the_key(changes, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidConfigError, match=needle):
        plan_config_records(_image(), TOPIC_RESOURCE_TYPE, "t", changes,
                            default_config=LogConfig())


def test_topic_resource_errors() -> None:
    image = _image()
    with pytest.raises(UnknownTopicOrPartitionError):
        plan_config_records(image, TOPIC_RESOURCE_TYPE, "missing", {"retention.ms": "1"},
                            default_config=LogConfig())
    with pytest.raises(InvalidRequestError, match="Default topic"):
        plan_config_records(image, TOPIC_RESOURCE_TYPE, "", {}, default_config=LogConfig())
    with pytest.raises(InvalidTopicExceptionError):
        plan_config_records(image, TOPIC_RESOURCE_TYPE, "a/b", {}, default_config=LogConfig())
    with pytest.raises(InvalidRequestError, match="Unknown resource type"):
        plan_config_records(image, 16, "x", {}, default_config=LogConfig())


def test_broker_records_for_every_named_key_and_name_checks() -> None:
    image = MetadataImage()
    records = plan_config_records(image, BROKER_RESOURCE_TYPE, "1", {"log.retention.ms": None},
                                  default_config=LogConfig())
    assert records == (ConfigRecord(resource_type=BROKER_RESOURCE_TYPE, resource_name="1",
                                    name="log.retention.ms", value=None),)
    for name in ("x", "-1"):
        with pytest.raises(InvalidRequestError):
            plan_config_records(image, BROKER_RESOURCE_TYPE, name, {}, default_config=LogConfig())


def test_create_partitions_adds_records_for_the_new_indexes_only() -> None:
    image = _image(partitions=2)
    topic, records = plan_create_partitions(image, "t", 4, assignments=None, node_id=1)
    assert [r.partition_id for r in records if isinstance(r, PartitionRecord)] == [2, 3]
    for record in records:
        image.apply(record)
    assert sorted(image.topics_by_name["t"].partitions) == [0, 1, 2, 3]
    assert topic.topic_id == image.topics_by_name["t"].topic_id


@pytest.mark.parametrize(
    ("count", "assignments", "error", "needle"),
    [
        (1, None, InvalidPartitionsError, "already has 1"),
        (0, None, InvalidPartitionsError, "would not be an increase"),
        (3, [[1]], InvalidReplicaAssignmentError, "only 1 assignment"),
        (2, [[2]], InvalidReplicaAssignmentError, "broker 2, but no such broker"),
        (2, [[1, 1]], InvalidReplicaAssignmentError, "more than once"),
        (2, [[]], InvalidReplicaAssignmentError, "empty replica list"),
    ],
)
def test_create_partitions_refusals(count, assignments, error, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=needle):
        plan_create_partitions(_image(), "t", count, assignments=assignments, node_id=1)


def test_create_partitions_accepts_this_node_as_assignment_and_rejects_unknown_topics() -> None:
    _, records = plan_create_partitions(_image(), "t", 3, assignments=[[1], [1]], node_id=1)
    assert len(records) == 2
    with pytest.raises(UnknownTopicOrPartitionError):
        plan_create_partitions(_image(), "nope", 3, assignments=None, node_id=1)
