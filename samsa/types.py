"""Value types of Samsa's client API: frozen dataclasses, Kafka's names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "BrokerInfo",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "RecordMetadata",
    "ShareConsumerRecord",
    "TopicInfo",
    "TopicPartition",
]


class TopicPartition(NamedTuple):
    """A partition of a topic; hashable, orders by topic then partition."""

    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker at one endpoint; ``fenced`` as DescribeCluster v2 says it (KIP-1073: Kafka's
    ``Node.isFenced``), False where nothing says so (Metadata lists unfenced brokers only)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    topic_id: str = ""
    is_internal: bool = False
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """One record as the consumer returns it. ``timestamp_type`` 0 = CreateTime, 1 =
    LogAppendTime; ``headers`` as (key, value) pairs in order."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...] = ()
    leader_epoch: int = -1
    serialized_key_size: int = -1
    serialized_value_size: int = -1


@dataclass(frozen=True, slots=True)
class ShareConsumerRecord(ConsumerRecord):
    """A record as a share consumer (``samsa.ShareConsumer``) returns it: a ``ConsumerRecord``
    plus ``delivery_count``, how many times the share group has delivered it, this time
    included (1 on the first delivery; Kafka's ``ConsumerRecord.deliveryCount``)."""

    delivery_count: int = 1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed position: the offset of the next record to read, and free-form metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int
    leader_epoch: int = -1
