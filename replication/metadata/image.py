"""The in-memory metadata image: what the records of ``__cluster_metadata`` add up to.

Invariants:
- ``topics_by_name`` and ``topics_by_id`` hold the same ``TopicImage`` objects;
- a topic's partitions are numbered 0..n-1 once its creation batch has been applied;
- topic configs are kept by topic name (a ConfigRecord's resource name) and go with the topic
  when a RemoveTopicRecord is applied, as KRaft's ``ConfigurationControlManager`` does;
- group configs (GROUP resource) are kept by group id, whether or not the group exists;
- dynamic broker configs are kept by resource name: "" is the cluster-wide default, a node id
  (as text) that node's own; a ConfigRecord with a null value deletes a key; an empty set of
  configs is dropped.

- a PartitionChangeRecord is merged as Kafka's ``PartitionRegistration.merge``: a null field
  (or -2 leader, -1 leader recovery state) keeps the old value; naming a leader, even the same
  one, starts a new leader epoch; every change starts a new partition epoch.

- finalized feature levels (KIP-584) are kept by name from FeatureLevelRecords (level 0 removes
  one, as Kafka's ``FeaturesDelta``); ``metadata.version`` is always there: an image starts at
  Samsa's own level (``METADATA_VERSION_LEVEL``) until a record says otherwise, because Kafka's
  loader refuses an image without one (``FeaturesImage.metadataVersionOrThrow``) and so would
  refuse Samsa's snapshots in ``kafka-metadata-shell``.

Records are applied in log order by ``apply``; a record type the image does not track
(Kafka's RegisterControllerRecord, ...) is ignored; broker registrations go to ``brokers``
(``replication.metadata.brokers``), ACL records to ``acls``, SCRAM credentials to ``scram``.
The image is owned by the broker's event loop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from uuid import UUID

from protocol.codec import Message
from protocol.messages.metadata.access_control_entry_record import AccessControlEntryRecord
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.feature_level_record import FeatureLevelRecord
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.producer_ids_record import ProducerIdsRecord
from protocol.messages.metadata.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from protocol.messages.metadata.remove_topic_record import RemoveTopicRecord
from protocol.messages.metadata.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from protocol.messages.metadata.topic_record import TopicRecord
from protocol.messages.metadata.user_scram_credential_record import UserScramCredentialRecord
from replication.metadata.acls import AclImage
from replication.metadata.brokers import BROKER_RECORD_TYPES, BrokersImage
from replication.metadata.scram import ScramCredentials

__all__ = [
    "BROKER_RESOURCE_TYPE",
    "GROUP_RESOURCE_TYPE",
    "METADATA_VERSION",
    "METADATA_VERSION_LEVEL",
    "NO_LEADER",
    "NO_LEADER_CHANGE",
    "RECOVERED",
    "RECOVERING",
    "TOPIC_RESOURCE_TYPE",
    "MetadataImage",
    "PartitionImage",
    "TopicImage",
    "feature_level_records",
    "merge_partition",
]

logger = logging.getLogger("samsa.replication.metadata")

TOPIC_RESOURCE_TYPE = 2  # Kafka's ConfigResource.Type.TOPIC
BROKER_RESOURCE_TYPE = 4  # Kafka's ConfigResource.Type.BROKER
GROUP_RESOURCE_TYPE = 32  # Kafka's ConfigResource.Type.GROUP (KIP-848 group configs)
NO_LEADER = -1  # Kafka's LeaderConstants.NO_LEADER
NO_LEADER_CHANGE = -2  # Kafka's LeaderConstants.NO_LEADER_CHANGE (PartitionChangeRecord.leader)
RECOVERED = 0  # Kafka's LeaderRecoveryState: the leader's log is complete
RECOVERING = 1  # chosen by an unclean election, not yet recovered; -1 in a change: no change


@dataclass(frozen=True, slots=True)
class PartitionImage:
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()  # a reassignment in progress: replicas to drop
    adding_replicas: tuple[int, ...] = ()  # ... and replicas being added
    leader_recovery_state: int = RECOVERED
    eligible_leader_replicas: tuple[int, ...] = ()  # KIP-966 ELR, kept when records carry it
    last_known_elr: tuple[int, ...] = ()

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionImage:
        return cls(
            partition_id=record.partition_id, replicas=tuple(record.replicas),
            isr=tuple(record.isr), leader=record.leader, leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            removing_replicas=tuple(record.removing_replicas),
            adding_replicas=tuple(record.adding_replicas),
            leader_recovery_state=record.leader_recovery_state,
            eligible_leader_replicas=tuple(record.eligible_leader_replicas or ()),
            last_known_elr=tuple(record.last_known_elr or ()),
        )


def merge_partition(old: PartitionImage, record: PartitionChangeRecord) -> PartitionImage:
    """``old`` with ``record`` applied (Kafka's ``PartitionRegistration.merge``)."""
    changes_leader = record.leader != NO_LEADER_CHANGE
    return PartitionImage(
        partition_id=old.partition_id,
        replicas=_or_old(record.replicas, old.replicas),
        isr=_or_old(record.isr, old.isr),
        leader=record.leader if changes_leader else old.leader,
        leader_epoch=old.leader_epoch + 1 if changes_leader else old.leader_epoch,
        partition_epoch=old.partition_epoch + 1,
        removing_replicas=_or_old(record.removing_replicas, old.removing_replicas),
        adding_replicas=_or_old(record.adding_replicas, old.adding_replicas),
        leader_recovery_state=(old.leader_recovery_state if record.leader_recovery_state == -1
                               else record.leader_recovery_state),
        eligible_leader_replicas=_or_old(record.eligible_leader_replicas,
                                         old.eligible_leader_replicas),
        last_known_elr=_or_old(record.last_known_elr, old.last_known_elr),
    )


def _or_old(new: list[int] | None, old: tuple[int, ...]) -> tuple[int, ...]:
    return old if new is None else tuple(new)


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: UUID
    partitions: dict[int, PartitionImage] = field(default_factory=dict)


# Kafka's ``MetadataVersion`` feature. Samsa's records are those of Apache Kafka 4.0's metadata
# (ELR fields of KIP-966 included, which need 4.0-IV1 or later), so it claims 4.0-IV3, the level
# ``kafka-storage format`` of Kafka 4.0 finalizes: feature level 25 (3.3-IV3 is 7, the oldest
# Kafka 4 reads; each later IBP_x_y_IVn is one more).
METADATA_VERSION = "metadata.version"
METADATA_VERSION_LEVEL = 25


def _initial_features() -> dict[str, int]:
    return {METADATA_VERSION: METADATA_VERSION_LEVEL}


@dataclass(slots=True)
class MetadataImage:
    topics_by_name: dict[str, TopicImage] = field(default_factory=dict)
    topics_by_id: dict[UUID, TopicImage] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # "" = cluster default
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # by group id
    next_producer_id: int = 0  # the first producer id not yet handed out in a block
    last_offset: int = -1  # the offset of the last record applied
    acls: AclImage = field(default_factory=AclImage)  # replication.metadata.acls
    scram: ScramCredentials = field(default_factory=ScramCredentials)  # replication.metadata.scram
    brokers: BrokersImage = field(default_factory=BrokersImage)  # replication.metadata.brokers
    # KRaft: the cluster id the first active controller chose (``cluster_id_record``); None on
    # a single node, whose id lives only in meta.properties as before.
    cluster_id: str | None = None
    # finalized feature levels by name (FeatureLevelRecord); metadata.version always present
    features: dict[str, int] = field(default_factory=_initial_features)

    def configs_of(self, topic: str) -> dict[str, str]:
        return dict(self.topic_configs.get(topic, {}))

    def apply(self, record: Message, offset: int = -1) -> None:
        """Apply one record; ``offset`` is its offset in the metadata log."""
        if isinstance(record, TopicRecord):
            self._add_topic(record)
        elif isinstance(record, PartitionRecord):
            self._add_partition(record)
        elif isinstance(record, PartitionChangeRecord):
            self._change_partition(record)
        elif isinstance(record, ConfigRecord):
            self._set_config(record)
        elif isinstance(record, RemoveTopicRecord):
            self._remove_topic(record)
        elif isinstance(record, ProducerIdsRecord):
            self.next_producer_id = max(self.next_producer_id, record.next_producer_id)
        elif isinstance(record, (AccessControlEntryRecord, RemoveAccessControlEntryRecord)):
            self.acls.apply(record)
        elif isinstance(record, (UserScramCredentialRecord, RemoveUserScramCredentialRecord)):
            self.scram.apply(record)
        elif isinstance(record, BROKER_RECORD_TYPES):
            self.brokers.apply(record, offset)
        elif isinstance(record, FeatureLevelRecord):
            self._set_feature(record)
        if offset >= 0:
            self.last_offset = offset

    def _add_topic(self, record: TopicRecord) -> None:
        topic = TopicImage(record.name, record.topic_id)
        self.topics_by_name[record.name] = topic
        self.topics_by_id[record.topic_id] = topic

    def _add_partition(self, record: PartitionRecord) -> None:
        topic = self.topics_by_id.get(record.topic_id)
        if topic is None:
            logger.warning("PartitionRecord for unknown topic id %s ignored", record.topic_id)
            return
        topic.partitions[record.partition_id] = PartitionImage.from_record(record)

    def _change_partition(self, record: PartitionChangeRecord) -> None:
        topic = self.topics_by_id.get(record.topic_id)
        old = None if topic is None else topic.partitions.get(record.partition_id)
        if topic is None or old is None:
            return
        topic.partitions[record.partition_id] = merge_partition(old, record)

    def _set_config(self, record: ConfigRecord) -> None:
        if is_cluster_id_record(record):
            self.cluster_id = self.cluster_id or record.value  # fixed once: the first one wins
            return
        if record.resource_type == TOPIC_RESOURCE_TYPE:
            by_resource = self.topic_configs
        elif record.resource_type == BROKER_RESOURCE_TYPE:
            by_resource = self.broker_configs
        elif record.resource_type == GROUP_RESOURCE_TYPE:
            by_resource = self.group_configs
        else:
            return
        configs = by_resource.setdefault(record.resource_name, {})
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
        if not configs:
            del by_resource[record.resource_name]

    def _set_feature(self, record: FeatureLevelRecord) -> None:
        if record.feature_level > 0:
            self.features[record.name] = record.feature_level
        elif record.name != METADATA_VERSION:  # Kafka never finalizes metadata.version to 0
            self.features.pop(record.name, None)

    def _remove_topic(self, record: RemoveTopicRecord) -> None:
        topic = self.topics_by_id.pop(record.topic_id, None)
        if topic is None:
            return
        self.topics_by_name.pop(topic.name, None)
        self.topic_configs.pop(topic.name, None)


# Kafka fixes a cluster's id with a format step (meta.properties only). Samsa's nodes form a
# cluster without one: the first active controller picks the id and commits it as the first
# record of the metadata log, in Kafka's own ConfigRecord format (the cluster-wide BROKER
# resource "" and the key ``cluster.id``), so Kafka's tools read the log unchanged; the image
# keeps it apart from the dynamic broker configs.
CLUSTER_ID_CONFIG = "cluster.id"


def cluster_id_record(cluster_id: str) -> ConfigRecord:
    return ConfigRecord(resource_type=BROKER_RESOURCE_TYPE, resource_name="",
                        name=CLUSTER_ID_CONFIG, value=cluster_id)


def is_cluster_id_record(record: ConfigRecord) -> bool:
    return (record.resource_type == BROKER_RESOURCE_TYPE and record.resource_name == ""
            and record.name == CLUSTER_ID_CONFIG)


def feature_level_records(image: MetadataImage) -> list[FeatureLevelRecord]:
    """The finalized features as records, ``metadata.version`` first (Kafka's
    ``FeaturesImage.write``): what opens a snapshot and a new cluster's metadata log."""
    names = sorted(image.features, key=lambda name: (name != METADATA_VERSION, name))
    return [FeatureLevelRecord(name=name, feature_level=image.features[name]) for name in names]
