"""The controller of the replication simulation: one process, no Raft, made of Samsa's real
controller planners (``replication.controller``) over a ``MetadataImage``.

What it does, each through the planner the daemon's active controller uses:
- registration (``plan_register_broker``: a new incarnation while the old session is valid is
  refused, DUPLICATE_BROKER_REGISTRATION; one after it leaves every ISR and leadership) and
  heartbeats (``plan_broker_heartbeat``: a fenced broker caught up with its registration is
  unfenced, leaderless partitions get a leader from their ISR);
- session expiry (``plan_fence_stale_broker``, checked every few ms): the broker leaves every
  ISR and leadership, a new leader comes from the ISR (clean elections only: the topic keeps
  ``unclean.leader.election.enable=false``); leader and partition epochs bump;
- AlterPartition (``plan_alter_partition`` at v3, Kafka's validation order: leader epoch,
  partition epoch, eligible replicas with their broker epochs);
- preferred-leader elections (``plan_elect_leaders``), as the auto leader rebalance does.

A plan's records are committed at once (the quorum is out of scope here): appended to the
metadata log (``records``, offset = index), applied to the image and replayed into the
heartbeat manager, as ``tests.unit.replication.controller.cluster`` does. Brokers fetch the log
from an offset (a long poll in the simulator). The topic ("t", ``partitions`` partitions,
replication factor 3) is created once every broker is registered and unfenced; replica ``k`` of
partition ``p`` is broker ``(p + k) % brokers`` (with 5 brokers: a seeded choice).

State: owned by the one ``Simulation`` (single-threaded).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from protocol.codec import Message
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.alter_partition_request import AlterPartitionRequest
from protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.controller.alter_partition import AlterPartitionResult, plan_alter_partition
from replication.controller.cluster_control import (
    plan_broker_heartbeat,
    plan_fence_stale_broker,
    plan_register_broker,
)
from replication.controller.elections import ElectionType, plan_elect_leaders
from replication.controller.heartbeats import BrokerHeartbeatManager
from replication.metadata.image import MetadataImage, PartitionImage
from tests.simulation.replication.options import BROKER_SESSION_TIMEOUT_MS, REPLICATION_FACTOR

CLUSTER_ID = "simulated-replication"
TOPIC = "t"


@dataclass(frozen=True)
class HeartbeatAnswer:
    error_code: int
    fenced: bool = True


class ControllerModel:
    def __init__(self, broker_ids: list[int], partitions: int, rng: random.Random) -> None:
        self.broker_ids = broker_ids
        self.partition_count = partitions
        self.rng = rng
        self.image = MetadataImage()
        self.heartbeats = BrokerHeartbeatManager(BROKER_SESSION_TIMEOUT_MS)
        self.records: list[Message] = []
        self.topic_id = uuid.UUID(int=rng.getrandbits(128))
        self.topic_created = False

    @property
    def next_offset(self) -> int:
        return len(self.records)

    def commit(self, records: list[Message] | tuple[Message, ...], now_ms: int) -> bool:
        for record in records:
            offset = len(self.records)
            self.records.append(record)
            self.image.apply(record, offset)
            self.heartbeats.replay(record, self.image, now_ms)
        return bool(records)

    # -- broker lifecycle -----------------------------------------------------------------------

    def register(self, broker_id: int, incarnation_id: uuid.UUID, now_ms: int) -> tuple[int, int]:
        """(error code, broker epoch)."""
        request = BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=incarnation_id,
            listeners=[Listener("PLAINTEXT", f"broker{broker_id}", 9092, 0)])
        try:
            plan = plan_register_broker(self.image, self.heartbeats, request,
                                        cluster_id=CLUSTER_ID, next_offset=self.next_offset,
                                        now_ms=now_ms)
        except KafkaError as error:
            return error.code, -1
        self.commit(plan.records, now_ms)
        return ErrorCode.NONE, plan.broker_epoch

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                  now_ms: int) -> HeartbeatAnswer:
        request = BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=broker_epoch,
                                         current_metadata_offset=metadata_offset)
        try:
            plan = plan_broker_heartbeat(self.image, self.heartbeats, request, now_ms=now_ms,
                                         next_offset=self.next_offset)
        except KafkaError as error:
            return HeartbeatAnswer(error.code)
        self.commit(plan.records, now_ms)
        self.maybe_create_topic(now_ms)
        return HeartbeatAnswer(ErrorCode.NONE, plan.is_fenced)

    def fence_stale_brokers(self, now_ms: int) -> list[int]:
        fenced: list[int] = []
        while True:
            broker_id, records = plan_fence_stale_broker(self.image, self.heartbeats, now_ms)
            if broker_id is None:
                return fenced
            self.commit(records, now_ms)
            fenced.append(broker_id)

    def maybe_create_topic(self, now_ms: int) -> None:
        if self.topic_created or not all(self.image.brokers.is_active(b) for b in self.broker_ids):
            return
        self.topic_created = True
        records: list[Message] = [TopicRecord(name=TOPIC, topic_id=self.topic_id)]
        for index in range(self.partition_count):
            replicas = self._placement(index)
            records.append(PartitionRecord(
                partition_id=index, topic_id=self.topic_id, replicas=replicas,
                isr=list(replicas), leader=replicas[0], leader_epoch=0, partition_epoch=0))
        self.commit(records, now_ms)

    def _placement(self, index: int) -> list[int]:
        count = len(self.broker_ids)
        if count == REPLICATION_FACTOR:
            return [self.broker_ids[(index + k) % count] for k in range(REPLICATION_FACTOR)]
        return self.rng.sample(self.broker_ids, REPLICATION_FACTOR)

    # -- partitions -----------------------------------------------------------------------------

    def alter_partition(self, request: AlterPartitionRequest,
                        now_ms: int) -> tuple[int, list[AlterPartitionResult]]:
        """(top-level error code, per-partition results) of an AlterPartition (v3)."""
        try:
            results, records = plan_alter_partition(self.image, request, version=3)
        except KafkaError as error:
            return error.code, []
        self.commit(records, now_ms)
        return ErrorCode.NONE, results

    def elect_preferred(self, index: int, now_ms: int) -> bool:
        _, records = plan_elect_leaders(self.image, ElectionType.PREFERRED, [(TOPIC, [index])])
        return self.commit(records, now_ms)

    def partition(self, index: int) -> PartitionImage | None:
        topic = self.image.topics_by_name.get(TOPIC)
        return None if topic is None else topic.partitions.get(index)

    def all_replicas_in_sync(self) -> bool:
        """Every partition's ISR is all its replicas, and every broker is active."""
        if not self.topic_created:
            return False
        if not all(self.image.brokers.is_active(b) for b in self.broker_ids):
            return False
        return all(set(p.isr) == set(p.replicas) for p in self._partitions())

    def _partitions(self) -> list[PartitionImage]:
        topic = self.image.topics_by_name.get(TOPIC)
        return [] if topic is None else list(topic.partitions.values())
