"""A hypothesis state machine over a cluster driven only through the controller's planners:
brokers register, heartbeat (asking to unfence, fence, shut down), miss heartbeats until their
session expires, re-register as new incarnations, unregister; topics are created with placement,
leaders shrink and expand ISRs through AlterPartition, elections and reassignments run.

After every step, for every partition:
- the ISR is non-empty and a subset of the replicas, without duplicates;
- a leader is in the ISR and is an active broker (registered, unfenced, not shutting down);
- a leaderless partition has no active broker in its ISR (else it would have a leader);
- leader epoch and partition epoch never go down;
and for every broker: its epoch never goes down, the heartbeat manager agrees with the image on
fencing, and the image survives a snapshot round trip (image -> records -> image)."""

from __future__ import annotations

import uuid
from random import Random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from protocol.errors import (
    DuplicateBrokerRegistrationError,
    ErrorCode,
    InvalidReplicationFactorError,
)
from protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from protocol.messages.metadata.config_record import ConfigRecord
from replication.controller.alter_partition import plan_alter_partition
from replication.controller.cluster_control import plan_fence_stale_broker, plan_unregister_broker
from replication.controller.elections import (
    ElectionType,
    plan_balance_partition_leaders,
    plan_elect_leaders,
    plan_elect_unclean_leaders,
)
from replication.controller.reassignment import plan_alter_partition_reassignments
from replication.metadata.controller import plan_create_topic
from replication.metadata.image import TOPIC_RESOURCE_TYPE, MetadataImage
from replication.metadata.image_records import image_records
from storage.config import LogConfig
from tests.unit.replication.controller.cluster import Cluster

BROKERS = [1, 2, 3, 4]
TOPICS = ["a", "b", "c"]


class ClusterModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster = Cluster()
        self.rng = Random(0)
        self.epochs: dict[tuple[str, int], tuple[int, int]] = {}
        self.broker_epochs: dict[int, int] = {}

    @property
    def image(self) -> MetadataImage:
        return self.cluster.image

    def registered(self) -> list[int]:
        return sorted(self.image.brokers.by_id)

    @initialize(brokers=st.integers(2, 4), factor=st.integers(1, 3), partitions=st.integers(1, 4))
    def start(self, brokers: int, factor: int, partitions: int) -> None:
        """Most histories start from a running cluster with a topic."""
        self.cluster.start_brokers(BROKERS[:brokers], racks={b: f"r{b % 2}" for b in BROKERS})
        self.create_topic("a", partitions, min(factor, brokers))
        assert "a" in self.image.topics_by_name

    # -- brokers ---------------------------------------------------------------------------------

    @rule(broker_id=st.sampled_from(BROKERS), new_incarnation=st.booleans())
    def register(self, broker_id: int, new_incarnation: bool) -> None:
        known = broker_id in self.cluster.incarnations
        incarnation = uuid.uuid4() if new_incarnation or not known else None
        duplicate = (known and new_incarnation and broker_id in self.image.brokers.by_id
                     and self.cluster.heartbeats.has_valid_session(broker_id, self.cluster.now_ms))
        try:
            self.cluster.register(broker_id, rack=f"r{broker_id % 2}", incarnation=incarnation)
        except DuplicateBrokerRegistrationError:
            assert duplicate
            return
        assert not duplicate

    @precondition(lambda self: self.image.brokers.by_id)
    @rule(data=st.data(), want_fence=st.sampled_from([False, False, False, True]),
          want_shut_down=st.sampled_from([False, False, False, True]), caught_up=st.booleans())
    def heartbeat(self, data: st.DataObject, want_fence: bool, want_shut_down: bool,
                  caught_up: bool) -> None:
        broker_id = data.draw(st.sampled_from(self.registered()))
        offset = self.image.last_offset if caught_up else -1
        plan = self.cluster.heartbeat(broker_id, want_fence=want_fence,
                                      want_shut_down=want_shut_down,
                                      current_metadata_offset=offset)
        registration = self.image.brokers.by_id[broker_id]
        assert plan.is_fenced == registration.fenced
        if plan.should_shut_down:
            assert registration.fenced

    @precondition(lambda self: self.image.brokers.by_id)
    @rule()
    def everyone_heartbeats(self) -> None:
        """Every broker heartbeats, caught up, asking for nothing (brokers come back)."""
        for broker_id in self.registered():
            self.cluster.heartbeat(broker_id)

    @rule(milliseconds=st.sampled_from([1000, 5000, 9001]))
    def time_passes(self, milliseconds: int) -> None:
        self.cluster.now_ms += milliseconds
        while True:
            broker_id, records = plan_fence_stale_broker(self.image, self.cluster.heartbeats,
                                                         self.cluster.now_ms)
            if broker_id is None:
                break
            self.cluster.apply(records)
            assert self.image.brokers.by_id[broker_id].fenced

    @precondition(lambda self: self.image.brokers.by_id)
    @rule(data=st.data())
    def unregister(self, data: st.DataObject) -> None:
        broker_id = data.draw(st.sampled_from(self.registered()))
        self.cluster.apply(plan_unregister_broker(self.image, broker_id))
        assert broker_id not in self.image.brokers.by_id

    # -- topics and partitions -----------------------------------------------------------------

    @precondition(lambda self: self.image.brokers.by_id)
    @rule(name=st.sampled_from(TOPICS), partitions=st.integers(1, 4), factor=st.integers(1, 3))
    def create_topic(self, name: str, partitions: int, factor: int) -> None:
        if name in self.image.topics_by_name:
            return
        try:
            plan = plan_create_topic(
                self.image, name, num_partitions=partitions, replication_factor=factor,
                configs={}, node_id=1, default_num_partitions=1, default_replication_factor=1,
                default_config=LogConfig(), rng=self.rng)
        except InvalidReplicationFactorError:
            usable = [b for b in self.image.brokers.by_id.values() if not b.in_controlled_shutdown]
            assert factor > len(usable) or not any(b.active for b in usable)
            return
        self.cluster.apply(plan.records)

    @precondition(lambda self: self.image.topics_by_name)
    @rule(data=st.data(), version=st.sampled_from([1, 2, 3]))
    def alter_isr(self, data: st.DataObject, version: int) -> None:
        name = data.draw(st.sampled_from(sorted(self.image.topics_by_name)))
        topic = self.image.topics_by_name[name]
        index = data.draw(st.sampled_from(sorted(topic.partitions)))
        part = topic.partitions[index]
        if part.leader < 0:
            return
        others = [r for r in part.replicas if r != part.leader]
        followers = data.draw(st.lists(st.sampled_from(others), unique=True)) if others else []
        isr = [part.leader, *followers]
        leader = self.image.brokers.by_id[part.leader]
        request = AlterPartitionRequest(broker_id=leader.broker_id, broker_epoch=leader.epoch,
                                        topics=[TopicData(name, topic.topic_id, [PartitionData(
                                            index, part.leader_epoch, isr,
                                            [BrokerState(r, -1) for r in isr], 0,
                                            part.partition_epoch)])])
        results, records = plan_alter_partition(self.image, request, version=version)
        ineligible = any(not self.image.brokers.is_active(r) for r in isr)
        expected = ErrorCode.NONE
        if ineligible:
            expected = ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
        code = results[0].error_code
        assert code == expected or (
            code in (ErrorCode.NEW_LEADER_ELECTED, ErrorCode.FENCED_LEADER_EPOCH)
            and part.reassigning), (code, expected)
        self.cluster.apply(records)
        if code == ErrorCode.NONE:
            assert results[0].partition == self.image.topics_by_name[name].partitions[index]

    @precondition(lambda self: self.image.topics_by_name)
    @rule(kind=st.sampled_from([ElectionType.PREFERRED, ElectionType.UNCLEAN]))
    def elect(self, kind: ElectionType) -> None:
        _, records = plan_elect_leaders(self.image, kind, None)
        self.cluster.apply(records)

    @precondition(lambda self: self.image.topics_by_name)
    @rule()
    def rebalance(self) -> None:
        records, _ = plan_balance_partition_leaders(self.image)
        self.cluster.apply(records)
        records, _ = plan_elect_unclean_leaders(self.image)
        self.cluster.apply(records)

    @rule(name=st.sampled_from(TOPICS), enabled=st.sampled_from(["true", "false"]))
    def unclean_config(self, name: str, enabled: str) -> None:
        self.cluster.apply([ConfigRecord(resource_type=TOPIC_RESOURCE_TYPE, resource_name=name,
                                         name="unclean.leader.election.enable", value=enabled)])

    @precondition(lambda self: self.image.topics_by_name and self.image.brokers.by_id)
    @rule(data=st.data(), cancel=st.booleans())
    def reassign(self, data: st.DataObject, cancel: bool) -> None:
        name = data.draw(st.sampled_from(sorted(self.image.topics_by_name)))
        index = data.draw(st.sampled_from(sorted(self.image.topics_by_name[name].partitions)))
        target = None if cancel else data.draw(
            st.lists(st.sampled_from(self.registered()), min_size=1, max_size=3, unique=True))
        _, records = plan_alter_partition_reassignments(self.image, [(name, [(index, target)])])
        self.cluster.apply(records)

    # -- invariants ------------------------------------------------------------------------------

    @invariant()
    def partitions_are_consistent(self) -> None:
        for topic in self.image.topics_by_name.values():
            for part in topic.partitions.values():
                assert part.isr and len(set(part.isr)) == len(part.isr)
                assert set(part.isr) <= set(part.replicas), part
                if part.leader >= 0:
                    assert part.leader in part.isr and self.image.brokers.is_active(part.leader)
                else:
                    assert not any(self.image.brokers.is_active(r) for r in part.isr), part
                key = (topic.name, part.partition_id)
                before = self.epochs.get(key, (-1, -1))
                assert part.leader_epoch >= before[0] and part.partition_epoch >= before[1]
                self.epochs[key] = (part.leader_epoch, part.partition_epoch)

    @invariant()
    def brokers_are_consistent(self) -> None:
        for broker_id, registration in self.image.brokers.by_id.items():
            assert registration.epoch >= self.broker_epochs.get(broker_id, -1)
            self.broker_epochs[broker_id] = registration.epoch
            session = self.cluster.heartbeats.sessions[broker_id]
            assert session.fenced == registration.fenced
            if session.shutting_down:
                assert registration.in_controlled_shutdown
        assert set(self.cluster.heartbeats.sessions) == set(self.image.brokers.by_id)

    @invariant()
    def the_image_survives_a_snapshot(self) -> None:
        again = MetadataImage()
        for record in image_records(self.image):
            again.apply(record)
        assert again.brokers.by_id == self.image.brokers.by_id
        assert {n: t.partitions for n, t in again.topics_by_name.items()} == {
            n: t.partitions for n, t in self.image.topics_by_name.items()}


ClusterModel.TestCase.settings = settings(max_examples=60, stateful_step_count=50, deadline=None)
test_cluster_model = ClusterModel.TestCase
