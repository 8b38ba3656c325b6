"""``__share_group_state`` records: the share coordinator's key and value bytes, byte for byte
what Kafka 4.3.1 writes (``ShareSnapshotKey``/``ShareSnapshotValue`` and
``ShareUpdateKey``/``ShareUpdateValue``, ``protocol/schemas/kafka/share-coordinator/``), and the
frozen values Samsa reads them into.

Every record is keyed by one share partition, (group id, topic id, partition). Kafka 4.3.1 puts
the record type (the schema's ``apiKey``, Kafka's ``CoordinatorRecordType``) as an int16 in
front of the key and writes the key at version 0 (its coordinator-record serde refuses any
other); the int16 in front of the value is the value's version, 0, the only one the schemas
define::

    snapshot key    int16 0 | ShareSnapshotKey v0 {group_id: string, topic_id: uuid,
                    partition: int32}
    snapshot value  int16 0 | ShareSnapshotValue v0 (flexible) {snapshot_epoch: int32,
                    state_epoch: int32, leader_epoch: int32, start_offset: int64,
                    create_timestamp: int64, write_timestamp: int64,
                    state_batches: compact [{first_offset: int64, last_offset: int64,
                    delivery_state: int8, delivery_count: int16, tagged fields}],
                    tagged fields {0: delivery_complete_count int32, absent when -1}}
    update key      int16 1 | ShareUpdateKey v0 {group_id: string, topic_id: uuid,
                    partition: int32}            (the same bytes as a snapshot key's body)
    update value    int16 0 | ShareUpdateValue v0 (flexible) {snapshot_epoch: int32,
                    leader_epoch: int32, start_offset: int64 (-1: unchanged),
                    state_batches: as above, tagged fields {0: delivery_complete_count}}
    null value      a tombstone for that key

A snapshot is a share partition's whole state; an update carries state batches to merge over
it (``broker.share.state_batches``) and no state epoch. The two record types have different
keys, so a compacted topic keeps the latest of each (``broker.share.state_store`` says why
that is still enough for what Samsa writes). The value class is picked by the key's record
type, as Kafka's loader does. Delivery states are stored as they come (Samsa's DEAD_LETTERING
codes 100-102 included, ``broker.share.values``).

Pure functions and frozen values; no state.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from uuid import UUID

from broker.share.values import ShareSnapshot, StateBatch
from protocol.errors import InvalidRequestError
from protocol.messages.share_coordinator import share_snapshot_value, share_update_value
from protocol.messages.share_coordinator.share_snapshot_key import ShareSnapshotKey
from protocol.messages.share_coordinator.share_snapshot_value import ShareSnapshotValue
from protocol.messages.share_coordinator.share_update_key import ShareUpdateKey
from protocol.messages.share_coordinator.share_update_value import ShareUpdateValue

__all__ = [
    "KEY_VERSION",
    "VALUE_VERSION",
    "RecordType",
    "SharePartitionKey",
    "ShareSnapshotRecord",
    "ShareStateRecord",
    "ShareStateTombstone",
    "ShareUpdateRecord",
    "decode_share_state_record",
    "encode_share_state_record",
    "record_key",
]

KEY_VERSION = 0  # Kafka's serde writes every coordinator key at version 0
VALUE_VERSION = 0
_INT16 = struct.Struct(">h")


class RecordType(IntEnum):
    """The int16 in front of a ``__share_group_state`` key: the schema's ``apiKey`` (Kafka's
    ``CoordinatorRecordType`` ids)."""

    SHARE_SNAPSHOT = 0
    SHARE_UPDATE = 1


@dataclass(frozen=True, slots=True, order=True)
class SharePartitionKey:
    """One share partition: what every ``__share_group_state`` record is keyed by."""

    group_id: str
    topic_id: UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotRecord:
    """A ShareSnapshot record: the share partition's whole state. ``snapshot_epoch`` counts the
    snapshots of this share partition (an int32, wrapping as Kafka's Java ``int`` does);
    ``create_timestamp``/``write_timestamp`` (ms) are when the state was created and when
    this snapshot was written; ``delivery_complete_count`` -1 is "not known"."""

    key: SharePartitionKey
    snapshot_epoch: int
    snapshot: ShareSnapshot
    create_timestamp: int = 0
    write_timestamp: int = 0
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareUpdateRecord:
    """A ShareUpdate record: state batches to merge over the latest snapshot's state, and the
    start offset and leader epoch from then on (-1: unchanged)."""

    key: SharePartitionKey
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareStateTombstone:
    """A null value: the share partition's record of this type is deleted."""

    record_type: RecordType
    key: SharePartitionKey


ShareStateRecord = ShareSnapshotRecord | ShareUpdateRecord | ShareStateTombstone


def record_key(record_type: RecordType, key: SharePartitionKey) -> bytes:
    """The record key bytes: the record type, then the key struct at version 0."""
    body: ShareSnapshotKey | ShareUpdateKey
    if record_type is RecordType.SHARE_SNAPSHOT:
        body = ShareSnapshotKey(group_id=key.group_id, topic_id=key.topic_id, partition=key.partition)
    else:
        body = ShareUpdateKey(group_id=key.group_id, topic_id=key.topic_id, partition=key.partition)
    return _INT16.pack(record_type) + body.encode(KEY_VERSION)


def encode_share_state_record(record: ShareStateRecord) -> tuple[bytes, bytes | None]:
    """(key, value) bytes of one record; the value is None for a tombstone."""
    if isinstance(record, ShareStateTombstone):
        return record_key(record.record_type, record.key), None
    if isinstance(record, ShareSnapshotRecord):
        snapshot = record.snapshot
        value: ShareSnapshotValue | ShareUpdateValue = ShareSnapshotValue(
            snapshot_epoch=record.snapshot_epoch,
            state_epoch=snapshot.state_epoch,
            leader_epoch=snapshot.leader_epoch,
            start_offset=snapshot.start_offset,
            delivery_complete_count=record.delivery_complete_count,
            create_timestamp=record.create_timestamp,
            write_timestamp=record.write_timestamp,
            state_batches=[_snapshot_batch(batch) for batch in snapshot.state_batches],
        )
        return record_key(RecordType.SHARE_SNAPSHOT, record.key), _value_bytes(value)
    value = ShareUpdateValue(
        snapshot_epoch=record.snapshot_epoch,
        leader_epoch=record.leader_epoch,
        start_offset=record.start_offset,
        delivery_complete_count=record.delivery_complete_count,
        state_batches=[_update_batch(batch) for batch in record.state_batches],
    )
    return record_key(RecordType.SHARE_UPDATE, record.key), _value_bytes(value)


def _value_bytes(value: ShareSnapshotValue | ShareUpdateValue) -> bytes:
    return _INT16.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


def _snapshot_batch(batch: StateBatch) -> share_snapshot_value.StateBatch:
    return share_snapshot_value.StateBatch(
        first_offset=batch.first_offset, last_offset=batch.last_offset,
        delivery_state=batch.delivery_state, delivery_count=batch.delivery_count,
    )


def _update_batch(batch: StateBatch) -> share_update_value.StateBatch:
    return share_update_value.StateBatch(
        first_offset=batch.first_offset, last_offset=batch.last_offset,
        delivery_state=batch.delivery_state, delivery_count=batch.delivery_count,
    )


def decode_share_state_record(key: bytes, value: bytes | None) -> ShareStateRecord | None:
    """The record these bytes hold, or None for a record type this module does not know (a
    newer Kafka's; the loader skips it, as Kafka's does). Malformed bytes raise
    ``DecodeError``; a value version other than 0 raises ``UnsupportedVersionError``."""
    record_type = _INT16.unpack_from(key)[0] if len(key) >= 2 else None
    if record_type not in (RecordType.SHARE_SNAPSHOT, RecordType.SHARE_UPDATE):
        if record_type is None:
            raise InvalidRequestError("a __share_group_state key needs its int16 record type")
        return None
    partition_key = _decode_key(RecordType(record_type), memoryview(key)[2:])
    if value is None:
        return ShareStateTombstone(RecordType(record_type), partition_key)
    version = _INT16.unpack_from(value)[0] if len(value) >= 2 else -1
    body = memoryview(value)[2:]
    if record_type == RecordType.SHARE_SNAPSHOT:
        return _snapshot_record(partition_key, ShareSnapshotValue.decode(body, version))
    return _update_record(partition_key, ShareUpdateValue.decode(body, version))


def _decode_key(record_type: RecordType, body: memoryview) -> SharePartitionKey:
    decoded: ShareSnapshotKey | ShareUpdateKey
    if record_type is RecordType.SHARE_SNAPSHOT:
        decoded = ShareSnapshotKey.decode(body, KEY_VERSION)
    else:
        decoded = ShareUpdateKey.decode(body, KEY_VERSION)
    return SharePartitionKey(decoded.group_id, decoded.topic_id, decoded.partition)


def _snapshot_record(key: SharePartitionKey, value: ShareSnapshotValue) -> ShareSnapshotRecord:
    snapshot = ShareSnapshot(
        state_epoch=value.state_epoch,
        leader_epoch=value.leader_epoch,
        start_offset=value.start_offset,
        state_batches=_state_batches(value.state_batches),
    )
    return ShareSnapshotRecord(
        key, value.snapshot_epoch, snapshot,
        create_timestamp=value.create_timestamp, write_timestamp=value.write_timestamp,
        delivery_complete_count=value.delivery_complete_count,
    )


def _update_record(key: SharePartitionKey, value: ShareUpdateValue) -> ShareUpdateRecord:
    return ShareUpdateRecord(
        key, value.snapshot_epoch, value.leader_epoch, value.start_offset,
        _state_batches(value.state_batches), value.delivery_complete_count,
    )


def _state_batches(
    batches: list[share_snapshot_value.StateBatch] | list[share_update_value.StateBatch],
) -> tuple[StateBatch, ...]:
    return tuple(
        StateBatch(batch.first_offset, batch.last_offset, batch.delivery_state, batch.delivery_count)
        for batch in batches
    )
