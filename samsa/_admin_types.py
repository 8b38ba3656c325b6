"""Value types of the admin API (``samsa.admin`` re-exports them): frozen dataclasses with
Kafka's names (``NewTopic``, ``ConfigResource``, ``ConfigEntry``, ``TopicDescription``,
``ClusterDescription``, ``GroupListing``, ``GroupDescription``, ``MemberDescription``).

Invariants: ``ConfigResource.type`` is ``"topic"`` or ``"broker"``; ``ConfigEntry.source``
is the name of Kafka's ``ConfigEntry.ConfigSource`` (``"DYNAMIC_TOPIC_CONFIG"``,
``"DEFAULT_CONFIG"``, ...); a member's ``assignment`` is a frozenset of partitions (empty
when the group is not Stable, as the broker reports it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from samsa.types import BrokerInfo, PartitionInfo, TopicPartition

__all__ = [
    "CONFIG_SOURCES",
    "RESOURCE_TYPES",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "NewTopic",
    "TopicDescription",
]

# DescribeConfigs' ConfigSource wire values -> the Java client's ConfigEntry.ConfigSource names.
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}

# ConfigResource types on the wire (Kafka's ConfigResource.Type ids).
RESOURCE_TYPES = {"topic": 2, "broker": 4}


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create; -1 partitions / replication factor = the broker's defaults
    (``num.partitions``, ``default.replication.factor``)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """What configs belong to: ``ConfigResource("topic", "orders")`` or
    ``ConfigResource("broker", "1")`` (``"broker", ""``: the cluster-wide broker defaults)."""

    type: str
    name: str

    def __post_init__(self) -> None:
        if self.type not in RESOURCE_TYPES:
            raise ValueError(f"config resource type must be 'topic' or 'broker', not {self.type!r}")

    def __str__(self) -> str:
        return f"{self.type} {self.name!r}"


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config of a resource; ``value`` is None when it is sensitive or unset."""

    name: str
    value: str | None
    source: str = "UNKNOWN"
    is_default: bool = False
    read_only: bool = False
    sensitive: bool = False


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """A topic as the metadata describes it; partitions in partition order."""

    name: str
    topic_id: str
    is_internal: bool
    partitions: tuple[PartitionInfo, ...]


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group by Kafka's state names ("Stable", "Empty", ..., "Dead" for an unknown group);
    ``protocol`` is the assignor's name while Stable, else ""."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...] = ()
