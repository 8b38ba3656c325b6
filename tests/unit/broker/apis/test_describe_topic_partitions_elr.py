"""DescribeTopicPartitions reports the KIP-966 ELR and last known ELR the image holds (a
metadata log Apache Kafka 4.3 wrote leaves ``isr [] elr [1]`` after a clean shutdown)."""

from __future__ import annotations

import uuid

from broker.apis.describe_topic_partitions import _describe
from replication.metadata.image import PartitionImage, TopicImage


def test_elr_and_last_known_elr_are_described() -> None:
    topic = TopicImage("t", uuid.UUID(int=3), {
        0: PartitionImage(0, (1, 2), (), -1, 4, 7, eligible_leader_replicas=(1, 2),
                          last_known_elr=(1,)),
        1: PartitionImage(1, (2, 1), (2, 1), 2, 0, 0),
    })
    described = _describe(topic, [0, 1])
    first, second = described.partitions
    assert (first.leader_id, first.isr_nodes, first.eligible_leader_replicas,
            first.last_known_elr) == (-1, [], [1, 2], [1])
    assert (second.eligible_leader_replicas, second.last_known_elr) == ([], [])
