"""Topic operations as metadata records: what Kafka's ``ReplicationControlManager`` decides.

A new topic gets a random UUID, ``num_partitions`` PartitionRecords (leader epoch 0, partition
epoch 0) and a ConfigRecord per explicit config; deleting writes a RemoveTopicRecord; adding
partitions writes a PartitionRecord per new partition. Where the replicas go:
- when the image has registered brokers (a cluster), replicas are placed over them by
  ``replication.controller.placement`` (or taken from a manual assignment of registered brokers,
  each listed once, every partition with the same count); the ISR is the replicas that are
  active (unfenced, not in controlled shutdown), in replica order, and the leader is its first.
  An ISR that would be empty is INVALID_REPLICATION_FACTOR (placed) or
  INVALID_REPLICA_ASSIGNMENT (manual), as in Kafka;
- when it has none (one node that does not register), this node is the only replica, leader
  and ISR; a manual assignment is accepted when every replica list is exactly ``[this node]``
  and is INVALID_REPLICA_ASSIGNMENT otherwise; a replication factor above 1 is
  INVALID_REPLICATION_FACTOR.
Errors are Kafka's, raised as
``protocol.errors`` exceptions: invalid names
and collisions -> INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR (a factor above the one node there is), INVALID_CONFIG,
UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID on delete, INVALID_REQUEST for
``__cluster_metadata``.

Sans-IO: ``plan_*`` read the image and return records; the controller
(``replication.controller``) proposes them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from random import Random
from uuid import UUID

from protocol.codec import Message
from protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicExceptionError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.remove_topic_record import RemoveTopicRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.controller.placement import place_replicas, usable_brokers
from replication.metadata.image import TOPIC_RESOURCE_TYPE, MetadataImage, TopicImage
from replication.metadata.log import METADATA_TOPIC
from storage.config import LogConfig
from storage.errors import ConfigError

__all__ = [
    "INTERNAL_TOPICS",
    "MAX_RECORDS_PER_USER_OP",
    "TopicPlan",
    "check_records_per_operation",
    "is_internal",
    "plan_create_partitions",
    "plan_create_topic",
    "plan_delete_topic",
    "random_topic_id",
    "validate_manual_assignment",
    "validate_topic_name",
]

# Kafka's Topic.INTERNAL_TOPICS; __cluster_metadata is not a topic clients can see at all.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
MAX_NAME_LENGTH = 249
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_RANDOM = Random()  # placement's random start, as Kafka's placer holds one Random


# Kafka's reserved Uuids: ZERO_UUID and METADATA_TOPIC_ID (0...01)
_RESERVED_IDS = frozenset({UUID(int=0), UUID(int=1)})


def random_topic_id() -> UUID:
    """A new topic id as Kafka's ``Uuid.randomUuid``: never a reserved id, and never one whose
    string form (URL-safe base64 of the 16 bytes) starts with '-', which a command line would
    take for an option."""
    while True:
        candidate = uuid.uuid4()
        if candidate not in _RESERVED_IDS and candidate.bytes[0] >> 2 != 62:  # 62 encodes '-'
            return candidate


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: raise INVALID_TOPIC_EXCEPTION with Kafka's reason."""
    reason = None
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_NAME_LENGTH:
        reason = (
            f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
        )
    elif not set(name) <= _LEGAL:
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    if reason is not None:
        raise InvalidTopicExceptionError(f"Topic name is invalid: {reason}")

# Kafka's QuorumController.MAX_RECORDS_PER_USER_OP (its MAX_RECORDS_PER_BATCH).
MAX_RECORDS_PER_USER_OP = 10_000


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """What a creation would write: the records, the new id and the effective settings."""

    topic_id: UUID
    num_partitions: int
    replication_factor: int
    config: LogConfig
    records: tuple[Message, ...]


def plan_create_topic(
    image: MetadataImage,
    name: str,
    *,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str | None],
    node_id: int,
    default_num_partitions: int,
    default_replication_factor: int,
    default_config: LogConfig,
    assignments: Sequence[tuple[int, Sequence[int]]] = (),
    rng: Random | None = None,
) -> TopicPlan:
    """Kafka's ``ReplicationControlManager.createTopic``. ``assignments`` are CreateTopics'
    manual (partition index, replica ids) pairs; then the partition count and replication
    factor come from them and must be sent as -1. ``rng`` seeds placement (tests)."""
    if name == METADATA_TOPIC:
        raise InvalidRequestError(f"Creation of internal topic {METADATA_TOPIC} is prohibited.")
    validate_topic_name(name)
    if name in image.topics_by_name:
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
    _check_collision(image, name)
    clustered = len(image.brokers) > 0
    if assignments:
        check_records_per_operation(1 + len(configs) + len(assignments))
        layout = _manual_layout(image, assignments, num_partitions, replication_factor, node_id)
    else:
        partitions, factor = _default_layout(
            num_partitions, replication_factor, default_num_partitions, default_replication_factor,
            clustered=clustered,
        )
        check_records_per_operation(1 + len(configs) + partitions)
        layout = (_placed(image, partitions, factor, rng) if clustered
                  else [[node_id]] * partitions)
    factor = len(layout[0])
    explicit = {key: value for key, value in configs.items() if value is not None}
    config = _validated_config(explicit, default_config)
    topic_id = random_topic_id()
    records: list[Message] = [TopicRecord(name=name, topic_id=topic_id)]
    records += [
        ConfigRecord(resource_type=TOPIC_RESOURCE_TYPE, resource_name=name, name=key, value=value)
        for key, value in sorted(explicit.items())
    ]
    records += [
        _new_partition(image, topic_id, index, replicas) for index, replicas in enumerate(layout)
    ]
    return TopicPlan(topic_id, len(layout), factor, config, tuple(records))


def _new_partition(
    image: MetadataImage, topic_id: UUID, index: int, replicas: Sequence[int]
) -> PartitionRecord:
    """Kafka's ``buildPartitionRegistration``: the ISR is the active replicas (all of them on a
    node without registrations), the leader the first of it. Callers checked it is not empty."""
    isr = [r for r in replicas if image.brokers.is_active(r)] if len(image.brokers) else replicas
    return PartitionRecord(
        partition_id=index, topic_id=topic_id, replicas=list(replicas), isr=list(isr),
        leader=isr[0], leader_epoch=0, partition_epoch=0,
    )


def _placed(
    image: MetadataImage, count: int, factor: int, rng: Random | None
) -> list[list[int]]:
    """``count`` placements over the registered brokers, each with an active replica."""
    try:
        layout = place_replicas(usable_brokers(image), count, factor, rng or _RANDOM)
    except InvalidReplicationFactorError as error:
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {factor} time(s): {error.message}") from None
    for replicas in layout:
        if not any(image.brokers.is_active(replica) for replica in replicas):
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {factor} time(s): All brokers are currently "
                "fenced or in controlled shutdown.")
    return layout


def check_records_per_operation(count: int) -> None:
    """Refuse an operation that would write more than ``MAX_RECORDS_PER_USER_OP`` records, as
    Kafka's controller does (its records list is bounded: POLICY_VIOLATION). Checked before
    anything is placed: a CreateTopics of 2^31-1 partitions must not make the controller
    build that many records (a protocol fuzzer's request kept a node's worker busy for
    minutes, its memory growing, and a validate-only one would block the event loop)."""
    if count > MAX_RECORDS_PER_USER_OP:
        raise PolicyViolationError("Unable to perform excessively large batch operation.")


def _default_layout(
    num_partitions: int, replication_factor: int, default_partitions: int, default_factor: int,
    *, clustered: bool,
) -> tuple[int, int]:
    """The partition count and replication factor of a creation without assignments."""
    if replication_factor < -1 or replication_factor == 0:
        raise InvalidReplicationFactorError(
            "Replication factor must be larger than 0, or -1 to use the default value."
        )
    if num_partitions < -1 or num_partitions == 0:
        raise InvalidPartitionsError("Number of partitions was set to an invalid non-positive value.")
    partitions = default_partitions if num_partitions == -1 else num_partitions
    factor = default_factor if replication_factor == -1 else replication_factor
    if factor > 1 and not clustered:
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {factor} time(s): The target replication factor "
            f"of {factor} cannot be reached because only 1 broker(s) are registered."
        )
    return partitions, factor


def _manual_layout(
    image: MetadataImage,
    assignments: Sequence[tuple[int, Sequence[int]]],
    num_partitions: int,
    replication_factor: int,
    node_id: int,
) -> list[list[int]]:
    """Kafka's checks of CreateTopics' manual assignments, in its order."""
    if replication_factor != -1:
        raise InvalidRequestError(
            "A manual partition assignment was specified, but replication factor was not set to -1."
        )
    if num_partitions != -1:
        raise InvalidRequestError(
            "A manual partition assignment was specified, but numPartitions was not set to -1."
        )
    layout: dict[int, list[int]] = {}
    factor: int | None = None
    for partition_index, replicas in assignments:
        if partition_index in layout:
            raise InvalidReplicaAssignmentError(
                f"Found multiple manual partition assignments for partition {partition_index}"
            )
        validate_manual_assignment(image, list(replicas), node_id, factor)
        _check_some_replica_active(image, replicas, partition_index)
        factor = len(replicas)
        layout[partition_index] = list(replicas)
    if set(layout) != set(range(len(layout))):
        raise InvalidReplicaAssignmentError(
            "partitions should be a consecutive 0-based integer sequence"
        )
    return [layout[index] for index in range(len(layout))]


def _check_some_replica_active(
    image: MetadataImage, replicas: Sequence[int], partition_index: int
) -> None:
    if len(image.brokers) and not any(image.brokers.is_active(r) for r in replicas):
        raise InvalidReplicaAssignmentError(
            f"All brokers specified in the manual partition assignment for partition "
            f"{partition_index} are fenced or in controlled shutdown.")


def _check_collision(image: MetadataImage, name: str) -> None:
    """Kafka rejects names that differ from an existing one only by '.' versus '_'."""
    if "." not in name and "_" not in name:
        return
    unified = name.replace(".", "_")
    for existing in image.topics_by_name:
        if existing.replace(".", "_") == unified:
            raise InvalidTopicExceptionError(
                f"Topic '{name}' collides with existing topic: {existing}"
            )


def _validated_config(configs: Mapping[str, str], default_config: LogConfig) -> LogConfig:
    try:
        return LogConfig.from_properties(configs, base=default_config)
    except ConfigError as error:
        raise InvalidConfigError(str(error)) from None


def topic_config(image: MetadataImage, name: str, default_config: LogConfig) -> LogConfig:
    """A topic's effective LogConfig: its ConfigRecords over the broker's defaults."""
    configs = image.topic_configs.get(name)
    if not configs:
        return default_config
    return LogConfig.from_properties(configs, base=default_config)


def plan_delete_topic(
    image: MetadataImage, *, name: str | None = None, topic_id: UUID | None = None
) -> tuple[TopicImage, tuple[Message, ...]]:
    topic = _find(image, name, topic_id)
    if is_internal(topic.name):
        raise InvalidRequestError(f"Deletion of internal topic {topic.name} is prohibited.")
    return topic, (RemoveTopicRecord(topic_id=topic.topic_id),)


def _find(image: MetadataImage, name: str | None, topic_id: UUID | None) -> TopicImage:
    if name is not None:
        topic = image.topics_by_name.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")
        return topic
    topic = image.topics_by_id.get(topic_id) if topic_id is not None else None
    if topic is None:
        raise UnknownTopicIdError("This server does not host this topic ID.")
    return topic


def plan_create_partitions(
    image: MetadataImage,
    name: str,
    count: int,
    *,
    assignments: list[list[int]] | None,
    node_id: int,
    rng: Random | None = None,
) -> tuple[TopicImage, tuple[Message, ...]]:
    """Grow ``name`` to ``count`` partitions (Kafka's ``ReplicationControlManager``): increase
    only, each new partition with as many replicas as partition 0 has."""
    topic = image.topics_by_name.get(name)
    if topic is None:
        raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")
    current = len(topic.partitions)
    if count == current:
        raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
    if count < current:
        raise InvalidPartitionsError(
            f"The topic {name} currently has {current} partition(s); {count} would not be an increase."
        )
    additional = count - current
    check_records_per_operation(additional)
    if assignments is not None and len(assignments) != additional:
        raise InvalidReplicaAssignmentError(
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified."
        )
    layout = _new_partitions_layout(image, topic, current, count, assignments, node_id, rng)
    records = tuple(
        _new_partition(image, topic.topic_id, index, replicas)
        for index, replicas in enumerate(layout, start=current)
    )
    return topic, records


def _new_partitions_layout(
    image: MetadataImage, topic: TopicImage, current: int, count: int,
    assignments: list[list[int]] | None, node_id: int, rng: Random | None,
) -> list[list[int]]:
    factor = len(topic.partitions[0].replicas) if 0 in topic.partitions else 1
    if assignments is None:
        if not len(image.brokers):
            return [[node_id]] * (count - current)
        return _placed(image, count - current, factor, rng)
    for offset, replicas in enumerate(assignments):
        validate_manual_assignment(image, replicas, node_id,
                                   factor if len(image.brokers) else None)
        _check_some_replica_active(image, replicas, current + offset)
    return [list(replicas) for replicas in assignments]


def validate_manual_assignment(
    image: MetadataImage, replicas: Sequence[int], node_id: int, factor: int | None = None
) -> None:
    """Kafka's ``validateManualPartitionAssignment``: a non-empty list of registered brokers
    (this node alone when none is registered), each once, ``factor`` of them when given."""
    if not replicas:
        raise InvalidReplicaAssignmentError(
            "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for broker_id in sorted(replicas):
        registered = (broker_id in image.brokers.by_id if len(image.brokers)
                      else broker_id == node_id)
        if not registered:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered."
            )
        if broker_id == previous:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        previous = broker_id
    if factor is not None and len(replicas) != factor:
        raise InvalidReplicaAssignmentError(
            f"The manual partition assignment includes a partition with {len(replicas)} "
            f"replica(s), but this is not consistent with previous partitions, which have "
            f"{factor} replica(s).")
