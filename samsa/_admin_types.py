"""Value types of the admin API (``samsa.admin`` re-exports them): frozen dataclasses with
Kafka's names (``NewTopic``, ``ConfigResource``, ``ConfigEntry``, ``TopicDescription``,
``ClusterDescription``, ``GroupListing``, ``GroupDescription``, ``MemberDescription``,
``QuorumInfo`` with its ``ReplicaState``s, ``QuorumNode``s and ``RaftVoterEndpoint``s), and
``PartitionSummary``.

Invariants: ``ConfigResource.type`` is ``"topic"``, ``"broker"`` or ``"group"`` (a group's
configs, e.g. a share group's ``share.auto.offset.reset``); ``ConfigEntry.source``
is the name of Kafka's ``ConfigEntry.ConfigSource`` (``"DYNAMIC_TOPIC_CONFIG"``,
``"DEFAULT_CONFIG"``, ...); a member's ``assignment`` is a frozenset of partitions (empty
when the group is not Stable, as the broker reports it). In a ``QuorumInfo`` the timestamps Kafka
sends as -1 (unknown) are None, and a replica's ``lag`` is the leader's log end offset minus the
replica's, as ``kafka-metadata-quorum describe --replication`` computes it.
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
    "PartitionSummary",
    "QuorumInfo",
    "QuorumNode",
    "RaftVoterEndpoint",
    "ReplicaState",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "SharePartitionOffset",
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
RESOURCE_TYPES = {"topic": 2, "broker": 4, "group": 32}


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
    """What configs belong to: ``ConfigResource("topic", "orders")``,
    ``ConfigResource("broker", "1")`` (``"broker", ""``: the cluster-wide broker defaults) or
    ``ConfigResource("group", "workers")``."""

    type: str
    name: str

    def __post_init__(self) -> None:
        if self.type not in RESOURCE_TYPES:
            raise ValueError(
                f"config resource type must be 'topic', 'broker' or 'group', not {self.type!r}")

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


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    """A share group member: its assignment is the partitions it fetches from (shared with the
    other members that are assigned them)."""

    member_id: str
    client_id: str
    host: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topics: tuple[str, ...] = ()
    assignment: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    """A share group as its coordinator (``coordinator_id``) describes it: state ("Empty",
    "Stable", "Dead"), group and assignment epochs, the assignor, the members."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    coordinator_id: int
    members: tuple[ShareMemberDescription, ...] = ()


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """A share-partition's start offset (every record below it is done), its leader epoch and
    lag (records from the start offset to the end that are not done yet), None where unknown."""

    start_offset: int
    leader_epoch: int | None = None
    lag: int | None = None


@dataclass(frozen=True, slots=True)
class RaftVoterEndpoint:
    """One listener of a voter (``CONTROLLER://host:port``)."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class QuorumNode:
    """A voter and its endpoints (DescribeQuorum v2, KIP-853)."""

    node_id: int
    endpoints: tuple[RaftVoterEndpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """A voter or observer as the Raft leader sees it; timestamps in ms, None when unknown."""

    replica_id: int
    log_end_offset: int
    lag: int
    last_fetch_timestamp: int | None = None
    last_caught_up_timestamp: int | None = None
    replica_directory_id: str | None = None


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """The KRaft metadata quorum (Kafka's ``QuorumInfo``): the leader, its epoch, the high
    watermark of ``__cluster_metadata``, voters and observers in the leader's order."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...] = ()
    nodes: Mapping[int, QuorumNode] = field(default_factory=dict)

    @property
    def leader(self) -> ReplicaState | None:
        return next((v for v in self.voters if v.replica_id == self.leader_id), None)


@dataclass(frozen=True, slots=True)
class PartitionSummary:
    """Every partition's health from Metadata: ``under_replicated`` have fewer in-sync
    replicas than replicas, ``offline`` have no leader, or one that is not a live broker
    (Kafka's ``--under-replicated-partitions`` / ``--unavailable-partitions``)."""

    topic_count: int
    partition_count: int
    under_replicated: tuple[PartitionInfo, ...] = ()
    offline: tuple[PartitionInfo, ...] = ()
