"""KRaft's framing of a metadata record inside a RecordBatch v2 record value.

Byte layout (Kafka's ``AbstractApiMessageSerde``, frame version 1), the record's value::

    unsigned varint  frame version   1
    unsigned varint  record type     the schema's apiKey (TopicRecord = 2, ...)
    unsigned varint  record version
    ...              the record, encoded at that version by ``protocol.messages.metadata``

The record key is null. Several records that must apply together (a topic with its partitions
and configs) are written in one batch, as the KRaft controller writes an atomic batch.

Pure functions; no state. (It would sit well in ``protocol/``; it lives here until that package
takes it, see the report of issue #3.)
"""

from __future__ import annotations

from protocol.codec import DecodeError, Message, read_uvarint, write_uvarint
from protocol.errors import UnsupportedVersionError
from protocol.messages.metadata import RECORD_TYPES

__all__ = ["FRAME_VERSION", "MetadataRecordError", "decode_metadata_record", "encode_metadata_record"]

FRAME_VERSION = 1


class MetadataRecordError(Exception):
    """A metadata record value that cannot be read: the metadata log is corrupt or too new."""


def encode_metadata_record(record: Message, version: int | None = None) -> bytes:
    """Frame ``record`` at ``version``; by default at the lowest version that holds every field
    the record sets (a RegisterBrokerRecord in controlled shutdown needs v1, a PartitionRecord
    with eligible leader replicas v2), so older readers can read whatever does not need more."""
    if version is not None:
        return _frame(record, version)
    for candidate in range(record.MIN_VERSION, record.MAX_VERSION):
        try:
            return _frame(record, candidate)
        except UnsupportedVersionError:
            continue  # a field set here is not in this version
    return _frame(record, record.MAX_VERSION)


def _frame(record: Message, version: int) -> bytes:
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, record.API_KEY)
    write_uvarint(out, version)
    record.encode_into(out, version)
    return bytes(out)


def decode_metadata_record(value: bytes | memoryview) -> tuple[Message, int]:
    """The record and its version from a framed record value."""
    view = memoryview(value)
    try:
        frame_version, offset = read_uvarint(view, 0)
        record_type, offset = read_uvarint(view, offset)
        version, offset = read_uvarint(view, offset)
    except (IndexError, DecodeError) as error:
        raise MetadataRecordError(f"truncated metadata record frame: {error}") from None
    if frame_version != FRAME_VERSION:
        raise MetadataRecordError(f"unknown metadata frame version {frame_version}")
    if record_type not in RECORD_TYPES:
        raise MetadataRecordError(f"unknown metadata record type {record_type}")
    cls = RECORD_TYPES[record_type]
    try:
        record, end = cls.decode_from(view, offset, version)
    except Exception as error:
        raise MetadataRecordError(f"bad {cls.__name__} v{version}: {error}") from None
    if end != len(view):
        raise MetadataRecordError(f"{len(view) - end} bytes of garbage after {cls.__name__}")
    return record, version
