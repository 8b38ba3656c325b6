"""Samsa's Python client for Kafka-protocol brokers (Samsa's own, or Kafka).

    from samsa import Producer, Consumer, AdminClient

``Producer``, ``Consumer`` and ``AdminClient`` are blocking objects; each runs an
asyncio core (``samsa._cluster.Cluster`` over ``samsa._connection``) on its own event
loop thread. Configuration uses Kafka's names (see ``samsa.config``).
"""

from __future__ import annotations

from samsa.errors import ConfigError, KafkaError, KafkaTimeoutError
from samsa.types import (
    BrokerInfo,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionInfo,
    RecordMetadata,
    TopicInfo,
    TopicPartition,
)

__all__ = [
    "BrokerInfo",
    "ConfigError",
    "ConsumerRecord",
    "KafkaError",
    "KafkaTimeoutError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "RecordMetadata",
    "TopicInfo",
    "TopicPartition",
]
__version__ = "0.1.0"
