"""Building metadata images of a cluster for the controller planners' tests: brokers registered
through ``plan_register_broker`` and unfenced through heartbeats, topics through
``plan_create_topic``, every record applied at the next offset, as the active controller would."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from random import Random

from protocol.codec import Message
from protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.controller.cluster_control import (
    plan_broker_heartbeat,
    plan_register_broker,
)
from replication.controller.heartbeats import BrokerHeartbeatManager
from replication.metadata.image import MetadataImage, PartitionImage
from replication.metadata.records import decode_metadata_record, encode_metadata_record

CLUSTER_ID = "samsa-test-cluster"


class Cluster:
    """An image, the active controller's heartbeat manager and a clock, stepped by tests."""

    def __init__(self, session_timeout_ms: int = 9000) -> None:
        self.image = MetadataImage()
        self.heartbeats = BrokerHeartbeatManager(session_timeout_ms)
        self.now_ms = 1_000
        self.incarnations: dict[int, uuid.UUID] = {}

    @property
    def next_offset(self) -> int:
        return self.image.last_offset + 1

    def apply(self, records: Iterable[Message]) -> None:
        """Commit ``records`` as one batch: through the codec, then into the image."""
        for record in records:
            decoded, _ = decode_metadata_record(encode_metadata_record(record))
            assert decoded == record
            self.image.apply(decoded, self.next_offset)
            self.heartbeats.replay(decoded, self.image, self.now_ms)

    def register(self, broker_id: int, *, rack: str | None = None,
                 incarnation: uuid.UUID | None = None, previous_broker_epoch: int = -1) -> int:
        incarnation = incarnation or self.incarnations.get(broker_id) or uuid.uuid4()
        request = BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=incarnation,
            listeners=[Listener("PLAINTEXT", f"broker{broker_id}", 9092, 0)], rack=rack,
            previous_broker_epoch=previous_broker_epoch)
        plan = plan_register_broker(self.image, self.heartbeats, request, cluster_id=CLUSTER_ID,
                                    next_offset=self.next_offset, now_ms=self.now_ms)
        self.incarnations[broker_id] = incarnation
        self.apply(plan.records)
        return plan.broker_epoch

    def heartbeat(self, broker_id: int, **fields: object):  # type: ignore[no-untyped-def]
        registration = self.image.brokers.by_id[broker_id]
        fields.setdefault("current_metadata_offset", self.image.last_offset)
        request = BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=registration.epoch,
                                         **fields)  # type: ignore[arg-type]
        plan = plan_broker_heartbeat(self.image, self.heartbeats, request, now_ms=self.now_ms,
                                     next_offset=self.next_offset)
        self.apply(plan.records)
        return plan

    def start_brokers(self, broker_ids: Iterable[int], racks: dict[int, str] | None = None) -> None:
        """Register and unfence each broker."""
        for broker_id in broker_ids:
            self.register(broker_id, rack=(racks or {}).get(broker_id))
        for broker_id in broker_ids:
            self.heartbeat(broker_id)
            assert not self.image.brokers.by_id[broker_id].fenced

    def add_topic(self, name: str, layout: Sequence[Sequence[int]],
                  isrs: Sequence[Sequence[int]] | None = None) -> uuid.UUID:
        """A topic with the given replica lists (ISR: all replicas unless given; leader: the
        first ISR member), written directly."""
        topic_id = uuid.uuid4()
        records: list[Message] = [TopicRecord(name=name, topic_id=topic_id)]
        for index, replicas in enumerate(layout):
            isr = list(replicas if isrs is None else isrs[index])
            records.append(PartitionRecord(
                partition_id=index, topic_id=topic_id, replicas=list(replicas), isr=isr,
                leader=isr[0] if isr else -1, leader_epoch=0, partition_epoch=0))
        self.apply(records)
        return topic_id

    def partition(self, name: str, index: int = 0) -> PartitionImage:
        return self.image.topics_by_name[name].partitions[index]


def seeded(seed: int = 0) -> Random:
    return Random(seed)
