"""Registered brokers in the metadata image (Kafka's ``ClusterImage`` / ``BrokerRegistration``).

Records applied here, in log order, by ``BrokersImage.apply``:
- RegisterBrokerRecord: the broker's registration replaces any earlier one (a new incarnation or
  an amended one). Its ``epoch`` is the record's ``broker_epoch``, which the active controller
  sets to the offset the record is written at (Kafka's broker epoch); ``registration_offsets``
  keeps the offset the record was applied at (the record's epoch when applied without one,
  as a snapshot is), which a heartbeat compares with ``current_metadata_offset`` to unfence.
- UnregisterBrokerRecord: removes the registration if its epoch matches.
- FenceBrokerRecord / UnfenceBrokerRecord (pre-3.3 metadata) and BrokerRegistrationChangeRecord
  (fenced: 1 fence, -1 unfence, 0 no change; in_controlled_shutdown: 1 enter, 0 no change;
  non-empty log_dirs replace the directories): change the registration if its epoch matches.
  Kafka's replay throws on a mismatch (a corrupt log); a Samsa image logs it and ignores the
  record, so one bad record cannot stop a broker from loading its metadata.
Fencing leaves ``in_controlled_shutdown`` as it was (Kafka's ``BrokerRegistration.cloneWith``);
a new incarnation's RegisterBrokerRecord clears it.

Values are frozen; the dictionaries are owned by the event loop that owns the image.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from uuid import UUID

from protocol.codec import Message
from protocol.messages.metadata.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from protocol.messages.metadata.fence_broker_record import FenceBrokerRecord
from protocol.messages.metadata.register_broker_record import (
    BrokerEndpoint as EndpointRecord,
)
from protocol.messages.metadata.register_broker_record import (
    BrokerFeature as FeatureRecord,
)
from protocol.messages.metadata.register_broker_record import RegisterBrokerRecord
from protocol.messages.metadata.unfence_broker_record import UnfenceBrokerRecord
from protocol.messages.metadata.unregister_broker_record import UnregisterBrokerRecord

__all__ = [
    "BROKER_RECORD_TYPES",
    "FENCE",
    "IN_CONTROLLED_SHUTDOWN",
    "UNFENCE",
    "BrokerEndpoint",
    "BrokerFeature",
    "BrokerRegistration",
    "BrokersImage",
    "broker_id_of",
]

logger = logging.getLogger("samsa.replication.metadata")

# Kafka's BrokerRegistrationFencingChange / BrokerRegistrationInControlledShutdownChange values.
FENCE = 1
UNFENCE = -1
IN_CONTROLLED_SHUTDOWN = 1

BROKER_RECORD_TYPES = (
    RegisterBrokerRecord, UnregisterBrokerRecord, FenceBrokerRecord, UnfenceBrokerRecord,
    BrokerRegistrationChangeRecord,
)


def broker_id_of(record: Message) -> int:
    """The broker a record of ``BROKER_RECORD_TYPES`` is about."""
    if isinstance(record, (FenceBrokerRecord, UnfenceBrokerRecord)):
        return record.id
    assert isinstance(record, (RegisterBrokerRecord, UnregisterBrokerRecord,
                               BrokerRegistrationChangeRecord))
    return record.broker_id


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One listener of a broker: Kafka's ``Endpoint`` (security_protocol is the protocol id)."""

    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerFeature:
    name: str
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: UUID
    listeners: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    is_migrating_zk_broker: bool = False
    directories: tuple[UUID, ...] = ()

    @property
    def active(self) -> bool:
        """Kafka's ``ClusterControlManager.isActive``: may lead and join ISRs."""
        return not self.fenced and not self.in_controlled_shutdown

    @classmethod
    def from_record(cls, record: RegisterBrokerRecord) -> BrokerRegistration:
        return cls(
            broker_id=record.broker_id, epoch=record.broker_epoch,
            incarnation_id=record.incarnation_id,
            listeners=tuple(BrokerEndpoint(e.name, e.host, e.port, e.security_protocol)
                            for e in record.end_points),
            features=tuple(BrokerFeature(f.name, f.min_supported_version, f.max_supported_version)
                           for f in record.features),
            rack=record.rack, fenced=record.fenced,
            in_controlled_shutdown=record.in_controlled_shutdown,
            is_migrating_zk_broker=record.is_migrating_zk_broker,
            directories=tuple(record.log_dirs),
        )

    def to_record(self) -> RegisterBrokerRecord:
        return RegisterBrokerRecord(
            broker_id=self.broker_id, is_migrating_zk_broker=self.is_migrating_zk_broker,
            incarnation_id=self.incarnation_id, broker_epoch=self.epoch,
            end_points=[EndpointRecord(e.name, e.host, e.port, e.security_protocol)
                        for e in self.listeners],
            features=[FeatureRecord(f.name, f.min_supported_version, f.max_supported_version)
                      for f in self.features],
            rack=self.rack, fenced=self.fenced, in_controlled_shutdown=self.in_controlled_shutdown,
            log_dirs=list(self.directories),
        )


@dataclass(slots=True)
class BrokersImage:
    by_id: dict[int, BrokerRegistration] = field(default_factory=dict)
    registration_offsets: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.by_id)

    def get(self, broker_id: int) -> BrokerRegistration | None:
        return self.by_id.get(broker_id)

    def is_active(self, broker_id: int) -> bool:
        registration = self.by_id.get(broker_id)
        return registration is not None and registration.active

    def copy(self) -> BrokersImage:
        return BrokersImage(dict(self.by_id), dict(self.registration_offsets))

    def apply(self, record: Message, offset: int = -1) -> None:
        if isinstance(record, RegisterBrokerRecord):
            self.by_id[record.broker_id] = BrokerRegistration.from_record(record)
            self.registration_offsets[record.broker_id] = (
                offset if offset >= 0 else record.broker_epoch)
        elif isinstance(record, UnregisterBrokerRecord):
            if self._matching(record, record.broker_id, record.broker_epoch) is not None:
                del self.by_id[record.broker_id]
                self.registration_offsets.pop(record.broker_id, None)
        elif isinstance(record, FenceBrokerRecord):
            self._change(record, record.id, record.epoch, fenced=True)
        elif isinstance(record, UnfenceBrokerRecord):
            self._change(record, record.id, record.epoch, fenced=False)
        elif isinstance(record, BrokerRegistrationChangeRecord):
            self._apply_change(record)

    def _apply_change(self, record: BrokerRegistrationChangeRecord) -> None:
        fenced = {FENCE: True, UNFENCE: False}.get(record.fenced)
        shutdown = True if record.in_controlled_shutdown == IN_CONTROLLED_SHUTDOWN else None
        directories = tuple(record.log_dirs) if record.log_dirs else None
        self._change(record, record.broker_id, record.broker_epoch, fenced=fenced,
                     in_controlled_shutdown=shutdown, directories=directories)

    def _change(
        self, record: Message, broker_id: int, epoch: int, *, fenced: bool | None,
        in_controlled_shutdown: bool | None = None, directories: tuple[UUID, ...] | None = None,
    ) -> None:
        current = self._matching(record, broker_id, epoch)
        if current is None:
            return
        changed = current
        if fenced is not None:
            changed = replace(changed, fenced=fenced)
        if in_controlled_shutdown is not None:
            changed = replace(changed, in_controlled_shutdown=in_controlled_shutdown)
        if directories is not None:
            changed = replace(changed, directories=directories)
        self.by_id[broker_id] = changed

    def _matching(self, record: Message, broker_id: int, epoch: int) -> BrokerRegistration | None:
        current = self.by_id.get(broker_id)
        if current is None or current.epoch != epoch:
            logger.error("%s ignored: no registration of broker %d with epoch %d",
                         type(record).__name__, broker_id, epoch)
            return None
        return current
