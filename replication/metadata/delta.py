"""What one committed batch of metadata records changed, and what that means for this node.

``MetadataDelta`` is filled record by record *before* each record is applied to the image
(``observe``), so it keeps the state each touched partition had before the batch: Kafka's
``MetadataDelta`` / ``TopicsDelta``. ``MetadataDelta.full(image)`` is the delta of a whole image
from nothing (start-up: every partition and broker is new). ``brokers_before`` holds each
broker whose registration a record of the batch touched, as it was before the batch (None: not
registered); ``changed_brokers(image)`` pairs that with the registration after it (Kafka's
``ClusterDelta``).

``local_changes`` (Kafka's ``TopicsDelta.localChanges``) turns a delta and the image after it
into what the replica manager must do on node ``node_id``:
- ``deletes``: partitions of removed topics, and partitions this node was a replica of before
  the batch and is not any more (stop serving, delete the log);
- ``leaders``: touched partitions this node leads after the batch (become leader with the
  image's leader epoch);
- ``followers``: touched partitions this node is a replica of, led by another node.
A partition not touched by the batch is not listed. Pure functions over values; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from protocol.codec import Message
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.remove_topic_record import RemoveTopicRecord
from replication.metadata.brokers import BROKER_RECORD_TYPES, BrokerRegistration, broker_id_of
from replication.metadata.image import (
    BROKER_RESOURCE_TYPE,
    TOPIC_RESOURCE_TYPE,
    MetadataImage,
    PartitionImage,
    TopicImage,
)

__all__ = [
    "BrokerChange",
    "LocalReplicaChanges",
    "MetadataDelta",
    "ReplicaState",
    "local_changes",
]


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """One broker's registration before and after a batch (None: not registered)."""

    broker_id: int
    before: BrokerRegistration | None
    after: BrokerRegistration | None


@dataclass(slots=True)
class MetadataDelta:
    # (topic id, partition) -> its state before the batch (None: it did not exist)
    partitions_before: dict[tuple[UUID, int], PartitionImage | None] = field(default_factory=dict)
    removed_topics: list[TopicImage] = field(default_factory=list)
    topic_configs_changed: set[str] = field(default_factory=set)  # topic names
    broker_configs_changed: bool = False
    # broker id -> its registration before the batch (None: it was not registered)
    brokers_before: dict[int, BrokerRegistration | None] = field(default_factory=dict)

    @classmethod
    def full(cls, image: MetadataImage) -> MetadataDelta:
        delta = cls()
        delta.brokers_before.update((broker_id, None) for broker_id in image.brokers.by_id)
        for topic in image.topics_by_id.values():
            delta.partitions_before.update(
                ((topic.topic_id, index), None) for index in topic.partitions)
        return delta

    def observe(self, image: MetadataImage, record: Message) -> None:
        """Note ``record``, which is about to be applied to ``image``."""
        if isinstance(record, (PartitionRecord, PartitionChangeRecord)):
            topic = image.topics_by_id.get(record.topic_id)
            before = None if topic is None else topic.partitions.get(record.partition_id)
            self.partitions_before.setdefault((record.topic_id, record.partition_id), before)
        elif isinstance(record, RemoveTopicRecord):
            removed = image.topics_by_id.get(record.topic_id)
            if removed is not None:
                self.removed_topics.append(removed)
        elif isinstance(record, ConfigRecord):
            if record.resource_type == TOPIC_RESOURCE_TYPE:
                self.topic_configs_changed.add(record.resource_name)
            elif record.resource_type == BROKER_RESOURCE_TYPE:
                self.broker_configs_changed = True
        elif isinstance(record, BROKER_RECORD_TYPES):
            broker_id = broker_id_of(record)
            self.brokers_before.setdefault(broker_id, image.brokers.get(broker_id))

    def changed_brokers(self, image: MetadataImage) -> tuple[BrokerChange, ...]:
        """The brokers whose registration the batch changed, by id; ``image`` is after it."""
        changes = (BrokerChange(broker_id, before, image.brokers.get(broker_id))
                   for broker_id, before in sorted(self.brokers_before.items()))
        return tuple(change for change in changes if change.before != change.after)


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """A partition this node hosts, as the image has it after the batch."""

    topic: str
    topic_id: UUID
    partition: PartitionImage


@dataclass(frozen=True, slots=True)
class LocalReplicaChanges:
    deletes: tuple[tuple[str, int], ...] = ()  # (topic name, partition)
    leaders: tuple[ReplicaState, ...] = ()
    followers: tuple[ReplicaState, ...] = ()


def local_changes(delta: MetadataDelta, image: MetadataImage, node_id: int) -> LocalReplicaChanges:
    deletes = [(topic.name, index) for topic in delta.removed_topics for index in topic.partitions]
    leaders: list[ReplicaState] = []
    followers: list[ReplicaState] = []
    for (topic_id, index), before in sorted(delta.partitions_before.items(), key=_by_key):
        topic = image.topics_by_id.get(topic_id)
        after = None if topic is None else topic.partitions.get(index)
        if topic is None or after is None:
            continue  # removed in the same batch: covered by removed_topics
        if node_id in after.replicas:
            state = ReplicaState(topic.name, topic_id, after)
            (leaders if after.leader == node_id else followers).append(state)
        elif before is not None and node_id in before.replicas:
            deletes.append((topic.name, index))
    return LocalReplicaChanges(tuple(deletes), tuple(leaders), tuple(followers))


def _by_key(item: tuple[tuple[UUID, int], PartitionImage | None]) -> tuple[str, int]:
    (topic_id, index), _ = item
    return str(topic_id), index
