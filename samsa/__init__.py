"""Samsa's Python client for Kafka-protocol brokers (Samsa's own, or Kafka).

    from samsa import Producer, Consumer, ShareConsumer, AdminClient

``Producer``, ``Consumer``, ``ShareConsumer`` (a share group member) and ``AdminClient`` are
blocking objects; each runs an
asyncio core (``samsa._cluster.Cluster`` over ``samsa._connection``) on its own event
loop thread. Configuration uses Kafka's names (see ``samsa.config``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from samsa.errors import ConfigError, KafkaError, KafkaTimeoutError
from samsa.types import (
    BrokerInfo,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionInfo,
    RecordMetadata,
    ShareConsumerRecord,
    TopicInfo,
    TopicPartition,
)

if TYPE_CHECKING:
    from samsa.acl import (
        AccessControlEntry,
        AccessControlEntryFilter,
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from samsa.admin import AdminClient, AsyncAdminClient, ConfigResource, NewTopic
    from samsa.consumer import AsyncConsumer, Consumer, ConsumerRebalanceListener
    from samsa.producer import AsyncProducer, Producer
    from samsa.share_consumer import AcknowledgeType, AsyncShareConsumer, ShareConsumer

# Client classes imported on first use, so that ``import samsa.types`` (the CLI) stays light.
_LAZY = {
    "AccessControlEntry": "samsa.acl",
    "AccessControlEntryFilter": "samsa.acl",
    "AclBinding": "samsa.acl",
    "AclBindingFilter": "samsa.acl",
    "AclOperation": "samsa.acl",
    "AclPermissionType": "samsa.acl",
    "PatternType": "samsa.acl",
    "ResourcePattern": "samsa.acl",
    "ResourcePatternFilter": "samsa.acl",
    "ResourceType": "samsa.acl",
    "AdminClient": "samsa.admin",
    "AsyncAdminClient": "samsa.admin",
    "ConfigResource": "samsa.admin",
    "NewTopic": "samsa.admin",
    "AsyncConsumer": "samsa.consumer",
    "Consumer": "samsa.consumer",
    "ConsumerRebalanceListener": "samsa.consumer",
    "AsyncProducer": "samsa.producer",
    "Producer": "samsa.producer",
    "AcknowledgeType": "samsa.share_consumer",
    "AsyncShareConsumer": "samsa.share_consumer",
    "ShareConsumer": "samsa.share_consumer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'samsa' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AcknowledgeType",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AdminClient",
    "AsyncAdminClient",
    "AsyncConsumer",
    "AsyncProducer",
    "AsyncShareConsumer",
    "BrokerInfo",
    "ConfigError",
    "ConfigResource",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "KafkaError",
    "KafkaTimeoutError",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "PatternType",
    "Producer",
    "RecordMetadata",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "ShareConsumer",
    "ShareConsumerRecord",
    "TopicInfo",
    "TopicPartition",
]
__version__ = "0.1.0"
