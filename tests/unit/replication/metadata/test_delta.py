"""``MetadataDelta`` / ``local_changes``: what one batch means for node 1, case by case
(the state machine in ``tests/unit/replication/controller/test_image_deltas.py`` covers
sequences of batches)."""

from __future__ import annotations

import uuid

import pytest

from protocol.codec import Message
from protocol.messages.metadata.config_record import ConfigRecord
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.remove_topic_record import RemoveTopicRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.metadata.delta import LocalReplicaChanges, MetadataDelta, local_changes
from replication.metadata.image import BROKER_RESOURCE_TYPE, TOPIC_RESOURCE_TYPE, MetadataImage

NODE = 1
TOPIC_ID = uuid.uuid4()


def partition(index: int, replicas: list[int], leader: int) -> PartitionRecord:
    return PartitionRecord(partition_id=index, topic_id=TOPIC_ID, replicas=replicas, isr=replicas,
                           leader=leader, leader_epoch=0, partition_epoch=0)


def apply(image: MetadataImage, records: list[Message]) -> MetadataDelta:
    delta = MetadataDelta()
    for record in records:
        delta.observe(image, record)
        image.apply(record)
    return delta


def summary(changes: LocalReplicaChanges) -> tuple[list[tuple[str, int]], list[tuple[int, int]],
                                                    list[tuple[int, int]]]:
    """deletes; (partition, leader epoch) of leaders; (partition, leader) of followers."""
    return (list(changes.deletes),
            [(s.partition.partition_id, s.partition.leader_epoch) for s in changes.leaders],
            [(s.partition.partition_id, s.partition.leader) for s in changes.followers])


@pytest.fixture
def image() -> MetadataImage:
    created = MetadataImage()
    apply(created, [TopicRecord(name="t", topic_id=TOPIC_ID), partition(0, [1, 2], 1),
                    partition(1, [2, 3], 2), partition(2, [2, 1], 2)])
    return created


CASES = {
    "a new leader elsewhere makes this node a follower": (
        [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2)], ([], [], [(0, 2)])),
    "the same leader named again starts a new epoch": (
        [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1)], ([], [(0, 1)], [])),
    "an ISR change alone keeps the epoch": (
        [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[1])], ([], [(0, 0)], [])),
    "moved away from this node: deleted": (
        [PartitionChangeRecord(partition_id=2, topic_id=TOPIC_ID, replicas=[2, 3], leader=2)],
        ([("t", 2)], [], [])),
    "moved onto this node and elected": (
        [PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, replicas=[1, 2], leader=1)],
        ([], [(1, 1)], [])),
    "a change elsewhere does not concern this node": (
        [PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, leader=3)], ([], [], [])),
    "a removed topic: every partition deleted, changes before it in the batch ignored": (
        [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2),
         RemoveTopicRecord(topic_id=TOPIC_ID)], ([("t", 0), ("t", 1), ("t", 2)], [], [])),
}


@pytest.mark.parametrize("records, expected", CASES.values(), ids=CASES.keys())
def test_local_changes(image: MetadataImage, records: list[Message], expected: object) -> None:
    delta = apply(image, records)
    assert summary(local_changes(delta, image, NODE)) == expected


def test_a_full_delta_lists_every_replica_of_this_node(image: MetadataImage) -> None:
    changes = local_changes(MetadataDelta.full(image), image, NODE)
    assert summary(changes) == ([], [(0, 0)], [(2, 2)])


def test_config_records_are_noted_by_resource(image: MetadataImage) -> None:
    delta = apply(image, [
        ConfigRecord(resource_type=TOPIC_RESOURCE_TYPE, resource_name="t", name="retention.ms",
                     value="1"),
        ConfigRecord(resource_type=BROKER_RESOURCE_TYPE, resource_name="", name="log.retention.ms",
                     value="1"),
    ])
    assert delta.topic_configs_changed == {"t"} and delta.broker_configs_changed
