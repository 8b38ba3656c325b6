"""Broker registrations in the image: Kafka's replay rules for RegisterBroker, UnregisterBroker,
Fence/UnfenceBroker and BrokerRegistrationChange records; the delta's broker changes; records
framed at the lowest version that holds them."""

from __future__ import annotations

import uuid

import pytest

from protocol.codec import Message
from protocol.messages.metadata.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from protocol.messages.metadata.fence_broker_record import FenceBrokerRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from protocol.messages.metadata.unfence_broker_record import UnfenceBrokerRecord
from protocol.messages.metadata.unregister_broker_record import UnregisterBrokerRecord
from replication.metadata.delta import MetadataDelta
from replication.metadata.image import MetadataImage
from replication.metadata.records import decode_metadata_record, encode_metadata_record

INCARNATION = uuid.UUID(int=42)


def register(broker_id: int = 1, epoch: int = 10, **fields: object) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=INCARNATION, broker_epoch=epoch,
        end_points=[BrokerEndpoint("PLAINTEXT", "h", 9092, 0)], rack="r", **fields)  # type: ignore[arg-type]


def applied(*records: Message) -> MetadataImage:
    image = MetadataImage()
    for offset, record in enumerate(records, start=10):
        image.apply(record, offset)
    return image


def test_registration_fields_and_offset() -> None:
    image = applied(register(fenced=True))
    registration = image.brokers.by_id[1]
    assert (registration.epoch, registration.rack, registration.fenced) == (10, "r", True)
    assert registration.listeners[0].name == "PLAINTEXT"
    assert image.brokers.registration_offsets[1] == 10
    assert registration.to_record() == register(fenced=True)


@pytest.mark.parametrize(("change", "fenced", "shutting_down"), [
    (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=-1), False, False),
    (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=1), True, False),
    (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=0), True, False),
    (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, in_controlled_shutdown=1),
     True, True),
    (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=9, fenced=-1), True, False),
    (UnfenceBrokerRecord(id=1, epoch=10), False, False),
    (UnfenceBrokerRecord(id=1, epoch=11), True, False),
    (FenceBrokerRecord(id=1, epoch=10), True, False),
])
def test_changes_apply_only_to_the_registered_epoch(change: Message, fenced: bool,
                                                    shutting_down: bool) -> None:
    registration = applied(register(fenced=True), change).brokers.by_id[1]
    assert (registration.fenced, registration.in_controlled_shutdown) == (fenced, shutting_down)


def test_fencing_keeps_controlled_shutdown_a_new_registration_clears_it() -> None:
    image = applied(register(fenced=False),
                    BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10,
                                                   in_controlled_shutdown=1),
                    BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=1))
    assert image.brokers.by_id[1].in_controlled_shutdown and not image.brokers.is_active(1)
    image.apply(register(epoch=20), 20)
    assert not image.brokers.by_id[1].in_controlled_shutdown


def test_unregister_needs_the_epoch() -> None:
    image = applied(register(), UnregisterBrokerRecord(broker_id=1, broker_epoch=9))
    assert 1 in image.brokers.by_id
    image.apply(UnregisterBrokerRecord(broker_id=1, broker_epoch=10), 20)
    assert 1 not in image.brokers.by_id and 1 not in image.brokers.registration_offsets


def test_the_delta_reports_broker_changes() -> None:
    image = applied(register(1), register(2, epoch=11, fenced=False))
    delta = MetadataDelta()
    for record in (register(3, epoch=12),
                   BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=-1),
                   UnregisterBrokerRecord(broker_id=2, broker_epoch=11),
                   BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=0)):
        delta.observe(image, record)
        image.apply(record)
    changes = delta.changed_brokers(image)
    assert [(c.broker_id, c.before is None, c.after is None) for c in changes] == [
        (1, False, False), (2, False, True), (3, True, False)]
    assert changes[0].before is not None and changes[0].before.fenced
    assert changes[0].after is not None and not changes[0].after.fenced
    assert [c.broker_id for c in MetadataDelta.full(image).changed_brokers(image)] == [1, 3]


@pytest.mark.parametrize(("record", "version"), [
    (register(), 0),
    (register(in_controlled_shutdown=True), 1),
    (register(log_dirs=[uuid.UUID(int=5)]), 3),
    (PartitionRecord(topic_id=INCARNATION, replicas=[1], isr=[1], leader=1), 0),
    (PartitionRecord(topic_id=INCARNATION, replicas=[1], isr=[1], leader=1,
                     leader_recovery_state=1), 0),  # a tagged field from v0
    (PartitionRecord(topic_id=INCARNATION, replicas=[1], isr=[1], leader=1,
                     eligible_leader_replicas=[2]), 2),
])
def test_records_are_framed_at_the_lowest_version_that_holds_them(record: Message,
                                                                  version: int) -> None:
    decoded, decoded_version = decode_metadata_record(encode_metadata_record(record))
    assert decoded == record and decoded_version == version
