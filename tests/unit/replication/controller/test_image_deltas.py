"""Property test: after any sequence of topic and partition records proposed through the
controller (and restarts), the live partitions are exactly the partitions this node replicates
in a model of the records, each with the model's leader, leader epoch, replicas and ISR.

The model applies Kafka's rules itself (``PartitionRegistration.merge``: a record naming a
leader starts a new leader epoch; -2 = no change), independently of the image."""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.codec import Message
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.remove_topic_record import RemoveTopicRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.metadata.log import METADATA_TOPIC
from storage.clock import ManualClock
from tests.unit.replication.controller.node import NODE_ID, Node

NODES = (NODE_ID, 2, 3)
NO_LEADER_CHANGE = -2

replica_sets = st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True)


@dataclass
class ModelPartition:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0


@dataclass
class ModelTopic:
    topic_id: UUID
    partitions: dict[int, ModelPartition]


class ImageDeltas(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.clock = ManualClock(1000)
        self.node = Node.start(Path(self.directory.name), self.clock)
        self.topics: dict[str, ModelTopic] = {}

    def teardown(self) -> None:
        self.node.shutdown()
        self.directory.cleanup()

    def propose(self, records: list[Message]) -> None:
        assert self.node.controller.propose(records).exception() is None

    @rule(name=st.sampled_from(["a", "b", "c"]), data=st.data())
    def create_topic(self, name: str, data: st.DataObject) -> None:
        if name in self.topics:
            return
        layouts = data.draw(st.lists(replica_sets, min_size=1, max_size=3))
        topic = ModelTopic(uuid.uuid4(), {})
        records: list[Message] = [TopicRecord(name=name, topic_id=topic.topic_id)]
        for index, replicas in enumerate(layouts):
            leader = data.draw(st.sampled_from(replicas))
            topic.partitions[index] = ModelPartition(tuple(replicas), tuple(replicas), leader)
            records.append(PartitionRecord(
                partition_id=index, topic_id=topic.topic_id, replicas=replicas, isr=replicas,
                leader=leader, leader_epoch=0, partition_epoch=0))
        self.propose(records)
        self.topics[name] = topic

    @precondition(lambda self: self.topics)
    @rule(data=st.data())
    def change_partition(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.topics)))
        topic = self.topics[name]
        index = data.draw(st.sampled_from(sorted(topic.partitions)))
        model = topic.partitions[index]
        replicas = data.draw(st.none() | replica_sets)
        candidates = list(replicas if replicas is not None else model.replicas)
        leader = data.draw(st.sampled_from([NO_LEADER_CHANGE, -1, *candidates]))
        self.propose([PartitionChangeRecord(
            partition_id=index, topic_id=topic.topic_id, leader=leader, replicas=replicas,
            isr=replicas)])
        if replicas is not None:
            model.replicas = model.isr = tuple(replicas)
        if leader != NO_LEADER_CHANGE:
            model.leader, model.leader_epoch = leader, model.leader_epoch + 1

    @precondition(lambda self: self.topics)
    @rule(data=st.data())
    def remove_topic(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.topics)))
        self.propose([RemoveTopicRecord(topic_id=self.topics.pop(name).topic_id)])

    @rule()
    def restart(self) -> None:
        self.node.shutdown()
        self.node = Node.start(Path(self.directory.name), self.clock)

    @invariant()
    def live_partitions_are_the_modelled_replicas(self) -> None:
        expected = {
            (name, index): partition
            for name, topic in self.topics.items()
            for index, partition in topic.partitions.items() if NODE_ID in partition.replicas
        }
        live = self.node.replica_manager.partitions
        assert sorted(live) == sorted(expected)
        for key, model in expected.items():
            partition = live[key]
            assert partition.topic_id == self.topics[key[0]].topic_id
            assert (partition.leader_id, partition.leader_epoch) == (model.leader, model.leader_epoch)
            assert (partition.replicas, partition.isr) == (model.replicas, model.isr)
        logs = {key for key in self.node.log_manager.logs if key[0] != METADATA_TOPIC}
        assert logs == set(expected)


ImageDeltas.TestCase.settings = settings(max_examples=40, stateful_step_count=12, deadline=None)
TestImageDeltas = ImageDeltas.TestCase
