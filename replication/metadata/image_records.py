"""The records that rebuild a metadata image: what a snapshot holds (Kafka's ``image.write``).

``image_records(image)`` gives, in Kafka's ``MetadataImage.write`` order (features, cluster,
topics, configs, producer ids, ACLs, SCRAM): a FeatureLevelRecord per finalized feature,
``metadata.version`` first (Kafka's loader refuses a snapshot without it); a RegisterBrokerRecord per registered broker (its epoch,
fencing and controlled-shutdown state included, as Kafka's ``BrokerRegistration.toRecord``); per
topic its TopicRecord and a PartitionRecord per partition (reassignment, leader recovery state
and ELR included); a
ConfigRecord per key of every TOPIC, BROKER and GROUP config resource; one ProducerIdsRecord
(broker id -1, broker epoch -1, as Kafka's ``ProducerIdsImage.write``) when a block was ever
handed out; an AccessControlEntryRecord per ACL with its id; a UserScramCredentialRecord per
(user, mechanism). Applying them in order to an empty ``MetadataImage`` gives an image equal to
``image`` (ACL ``generation``, ``last_offset`` and the brokers' ``registration_offsets`` aside:
they count history, not state; a registration read back from a snapshot takes its epoch, the
offset the controller wrote it at, as its registration offset).

Invariant to keep: every piece of state ``MetadataImage.apply`` keeps must be written here, or
a snapshot loses it; ``tests/unit/replication/metadata/test_snapshot.py`` checks the round trip
against random operation sequences.

``copy_image`` copies the containers the event loop mutates, so a worker thread can write a
snapshot of the copy while the loop keeps applying records (the values inside are frozen).
"""

from __future__ import annotations

from collections.abc import Iterator

from protocol.codec import Message
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.producer_ids_record import ProducerIdsRecord
from protocol.messages.metadata.topic_record import TopicRecord
from protocol.messages.metadata.user_scram_credential_record import UserScramCredentialRecord
from replication.metadata.acls import AclImage
from replication.metadata.image import (
    BROKER_RESOURCE_TYPE,
    GROUP_RESOURCE_TYPE,
    TOPIC_RESOURCE_TYPE,
    MetadataImage,
    TopicImage,
    cluster_id_record,
    feature_level_records,
)
from replication.metadata.scram import ScramCredentials

__all__ = ["copy_image", "image_records"]


def image_records(image: MetadataImage) -> Iterator[Message]:
    yield from feature_level_records(image)
    if image.cluster_id is not None:
        yield cluster_id_record(image.cluster_id)
    for registration in image.brokers.by_id.values():
        yield registration.to_record()
    yield from _topic_records(image)
    for resource_type, by_resource in (
        (TOPIC_RESOURCE_TYPE, image.topic_configs),
        (BROKER_RESOURCE_TYPE, image.broker_configs),
        (GROUP_RESOURCE_TYPE, image.group_configs),
    ):
        yield from _config_records(resource_type, by_resource)
    if image.next_producer_id > 0:
        yield ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                next_producer_id=image.next_producer_id)
    for acl_id, acl in image.acls.by_id.items():
        yield acl.to_record(acl_id)
    yield from _scram_records(image.scram)


def _topic_records(image: MetadataImage) -> Iterator[Message]:
    for topic in image.topics_by_id.values():
        yield TopicRecord(name=topic.name, topic_id=topic.topic_id)
        for partition in topic.partitions.values():
            yield PartitionRecord(
                partition_id=partition.partition_id, topic_id=topic.topic_id,
                replicas=list(partition.replicas), isr=list(partition.isr),
                leader=partition.leader, leader_epoch=partition.leader_epoch,
                partition_epoch=partition.partition_epoch,
                removing_replicas=list(partition.removing_replicas),
                adding_replicas=list(partition.adding_replicas),
                leader_recovery_state=partition.leader_recovery_state,
                # None, not []: a record without ELR encodes at the versions before KIP-966
                eligible_leader_replicas=list(partition.eligible_leader_replicas) or None,
                last_known_elr=list(partition.last_known_elr) or None,
            )


def _config_records(resource_type: int, by_resource: dict[str, dict[str, str]]) -> Iterator[Message]:
    for resource_name, configs in by_resource.items():
        for name, value in configs.items():
            yield ConfigRecord(resource_type=resource_type, resource_name=resource_name,
                               name=name, value=value)


def _scram_records(scram: ScramCredentials) -> Iterator[Message]:
    for user, mechanisms in scram.by_user.items():
        for mechanism, credential in mechanisms.items():
            yield UserScramCredentialRecord(
                name=user, mechanism=mechanism, salt=credential.salt,
                stored_key=credential.stored_key, server_key=credential.server_key,
                iterations=credential.iterations,
            )


def copy_image(image: MetadataImage) -> MetadataImage:
    """A copy sharing only frozen values (partitions, ACLs, credentials, strings)."""
    topics = {
        topic_id: TopicImage(topic.name, topic.topic_id, dict(topic.partitions))
        for topic_id, topic in image.topics_by_id.items()
    }
    return MetadataImage(
        topics_by_name={topic.name: topic for topic in topics.values()},
        topics_by_id=topics,
        topic_configs={name: dict(configs) for name, configs in image.topic_configs.items()},
        broker_configs={name: dict(configs) for name, configs in image.broker_configs.items()},
        group_configs={name: dict(configs) for name, configs in image.group_configs.items()},
        next_producer_id=image.next_producer_id,
        last_offset=image.last_offset,
        acls=AclImage(dict(image.acls.by_id), dict(image.acls.counts), image.acls.generation),
        scram=ScramCredentials({user: dict(mechanisms)
                                for user, mechanisms in image.scram.by_user.items()}),
        brokers=image.brokers.copy(),
        cluster_id=image.cluster_id,
        features=dict(image.features),
    )
