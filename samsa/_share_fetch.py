"""Share sessions and share-fetched records (sans-IO): what a share consumer sends to one
broker and what it makes of the answer.

``ShareSession`` is Kafka's ShareSessionHandler role for one broker: the session epoch (0
opens a session and lists every partition; each answered request moves it on, wrapping from
2^31-1 to 1; -1 closes it) and the partitions the broker's session holds. A request after
the first lists only the partitions added (``topics``) and removed (``forgotten_topics_data``);
a partition with acknowledgements to carry is listed too. Acknowledgements cannot ride on an
epoch-0 request (the broker has no acquisition of this member to match them with): they fail
and their records' acquisition locks lapse at the broker, which delivers them again.
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH and SHARE_SESSION_LIMIT_REACHED send the
session back to epoch 0; any other answer moves the epoch on.

``share_records`` turns one partition of a ShareFetch answer into records: the batches (the
61-byte v2 headers of ``protocol.records``, decoded by ``samsa._decoding``) hold more than the
member acquired; only offsets inside ``acquired_records`` ranges are delivered, each with its
range's delivery count. An acquired offset without a record (a control record, or one
compacted away) is a gap, acknowledged as such.

State: a ``ShareSession`` belongs to the share consumer's event loop; requests to one broker
are sent one at a time (the epoch must move in step).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

import crc32c

from protocol.compression import compression_type, decompress
from protocol.errors import CorruptMessageError, ErrorCode
from protocol.messages.share_acknowledge_request import (
    AcknowledgementBatch as AcknowledgeRequestBatch,
)
from protocol.messages.share_acknowledge_request import (
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from protocol.messages.share_fetch_request import (
    AcknowledgementBatch as FetchRequestBatch,
)
from protocol.messages.share_fetch_request import (
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
    ShareFetchRequest,
)
from protocol.messages.share_fetch_response import PartitionData
from samsa._decoding import Decoders, decode_records, parse_batches
from samsa._share_acks import acknowledgement_batches
from samsa.types import ConsumerRecord, ShareConsumerRecord, TopicPartition

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "SESSION_RESET_ERRORS",
    "FetchSettings",
    "ShareSession",
    "SharedRecords",
    "share_records",
]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SHARE_SESSION_LIMIT_REACHED = 133  # Kafka 4.1's code; not in protocol.errors' table
SESSION_RESET_ERRORS = frozenset({ErrorCode.SHARE_SESSION_NOT_FOUND,
                                  ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                  SHARE_SESSION_LIMIT_REACHED})
_HEADER_SIZE = 61
_CONTROL_BIT = 0x20
_TIMESTAMP_TYPE_BIT = 0x08

Acknowledgements = Mapping[TopicPartition, Mapping[int, int]]


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """The consumer's fetch configs, as a ShareFetch request carries them."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    max_records: int = 500


@dataclass(slots=True)
class ShareSession:
    """The share session with broker ``node_id`` (see the module docstring)."""

    node_id: int
    group_id: str
    member_id: str
    epoch: int = INITIAL_EPOCH
    partitions: dict[TopicPartition, UUID] = field(default_factory=dict)

    @property
    def is_new(self) -> bool:
        return self.epoch == INITIAL_EPOCH

    def fetch_request(self, wanted: Mapping[TopicPartition, UUID], acknowledgements: Acknowledgements,
                      topic_ids: Mapping[str, UUID], settings: FetchSettings
                      ) -> tuple[ShareFetchRequest, set[TopicPartition]]:
        """The next ShareFetch: fetch ``wanted`` (the assigned partitions this broker leads),
        carrying ``acknowledgements``; also the partitions whose acknowledgements could not be
        carried (a new session)."""
        failed: set[TopicPartition] = set()
        if self.is_new:
            self.partitions = dict(wanted)
            listed = dict(wanted)
            forgotten: dict[TopicPartition, UUID] = {}
            failed = set(acknowledgements)
            acknowledgements = {}
        else:
            listed = {tp: topic_id for tp, topic_id in wanted.items()
                      if self.partitions.get(tp) != topic_id}
            forgotten = {tp: topic_id for tp, topic_id in self.partitions.items()
                         if wanted.get(tp) != topic_id}
            self.partitions = dict(wanted)
        topics: dict[UUID, dict[int, FetchPartition]] = {}
        for tp, topic_id in listed.items():
            topics.setdefault(topic_id, {})[tp.partition] = FetchPartition(
                partition_index=tp.partition)
        for tp, acks in acknowledgements.items():
            found = wanted.get(tp) or topic_ids.get(tp.topic)
            if found is None:
                failed.add(tp)
                continue
            entry = topics.setdefault(found, {}).setdefault(
                tp.partition, FetchPartition(partition_index=tp.partition))
            entry.acknowledgement_batches = [
                FetchRequestBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                  acknowledge_types=list(b.acknowledge_types))
                for b in acknowledgement_batches(acks)]
        request = ShareFetchRequest(
            group_id=self.group_id, member_id=self.member_id, share_session_epoch=self.epoch,
            max_wait_ms=settings.max_wait_ms, min_bytes=settings.min_bytes,
            max_bytes=settings.max_bytes, max_records=settings.max_records,
            batch_size=settings.max_records,
            topics=[FetchTopic(topic_id=topic_id, partitions=list(partitions.values()))
                    for topic_id, partitions in topics.items()],
            forgotten_topics_data=_forgotten(forgotten))
        return request, failed

    def acknowledge_request(self, acknowledgements: Acknowledgements,
                            topic_ids: Mapping[str, UUID], *, close: bool = False
                            ) -> ShareAcknowledgeRequest | None:
        """A ShareAcknowledge carrying ``acknowledgements`` (closing the session with
        ``close``); None when there is no session to carry them (a new session)."""
        if self.is_new:
            return None
        if close:
            self.epoch = FINAL_EPOCH
        topics: dict[UUID, list[AcknowledgePartition]] = {}
        for tp, acks in acknowledgements.items():
            found = self.partitions.get(tp) or topic_ids.get(tp.topic)
            if found is None:
                continue
            topics.setdefault(found, []).append(AcknowledgePartition(
                partition_index=tp.partition, acknowledgement_batches=[
                    AcknowledgeRequestBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                            acknowledge_types=list(b.acknowledge_types))
                    for b in acknowledgement_batches(acks)]))
        return ShareAcknowledgeRequest(
            group_id=self.group_id, member_id=self.member_id, share_session_epoch=self.epoch,
            topics=[AcknowledgeTopic(topic_id=topic_id, partitions=partitions)
                    for topic_id, partitions in topics.items()])

    def answered(self, error_code: int) -> None:
        """Move the epoch on after an answer with top-level ``error_code``."""
        if error_code in SESSION_RESET_ERRORS or self.epoch == FINAL_EPOCH:
            self.reset()
        else:
            self.epoch = 1 if self.epoch == 2**31 - 1 else self.epoch + 1

    def reset(self) -> None:
        """Open a new session with the next request (after an error or a lost connection)."""
        self.epoch = INITIAL_EPOCH
        self.partitions = {}


def _forgotten(partitions: Mapping[TopicPartition, UUID]) -> list[ForgottenTopic]:
    topics: dict[UUID, list[int]] = {}
    for tp, topic_id in partitions.items():
        topics.setdefault(topic_id, []).append(tp.partition)
    return [ForgottenTopic(topic_id=t, partitions=sorted(p)) for t, p in topics.items()]


@dataclass(slots=True)
class SharedRecords:
    """One partition's records from one ShareFetch answer, handed out over polls."""

    tp: TopicPartition
    node_id: int
    records: list[ShareConsumerRecord]
    gaps: list[int]
    index: int = 0

    @property
    def exhausted(self) -> bool:
        return self.index >= len(self.records) and not self.gaps


def _acquired(data: PartitionData) -> dict[int, int]:
    """offset -> delivery count of every acquired offset (the first range naming it wins)."""
    acquired: dict[int, int] = {}
    for span in data.acquired_records:
        for offset in range(span.first_offset, span.last_offset + 1):
            acquired.setdefault(offset, span.delivery_count)
    return acquired


def share_records(tp: TopicPartition, node_id: int, data: PartitionData,
                  decoders: Decoders) -> SharedRecords:
    """The acquired records of one partition's answer (see the module docstring); a batch
    failing its CRC check raises ``CorruptMessageError``."""
    acquired = _acquired(data)
    records: list[ShareConsumerRecord] = []
    if acquired and data.records:
        raw = data.records
        view = raw if isinstance(raw, memoryview) else memoryview(raw)
        low, high = min(acquired), max(acquired)
        for batch in parse_batches(view):
            if batch.last_offset < low or batch.base_offset > high:
                continue
            if batch.attributes & _CONTROL_BIT:
                continue
            if decoders.check_crcs and crc32c.crc32c(
                    view[batch.position + 21:batch.end]) != batch.crc:
                raise CorruptMessageError(
                    f"record batch at offset {batch.base_offset} of {tp.topic}-{tp.partition} "
                    f"fails its CRC check")
            payload = view[batch.position + _HEADER_SIZE:batch.end]
            codec = batch.attributes & 0x07
            plain = bytes(payload) if codec == 0 else decompress(compression_type(codec), payload)
            append_time = batch.max_timestamp if batch.attributes & _TIMESTAMP_TYPE_BIT else None
            for record in decode_records(
                    plain, batch.count, topic=tp.topic, partition=tp.partition,
                    base_offset=batch.base_offset, base_timestamp=batch.base_timestamp,
                    log_append_time=append_time, leader_epoch=batch.leader_epoch,
                    min_offset=low, key_deserializer=decoders.key,
                    value_deserializer=decoders.value):
                count = acquired.get(record.offset)
                if count is not None:
                    records.append(_with_count(record, count))
    delivered = {record.offset for record in records}
    gaps = sorted(offset for offset in acquired if offset not in delivered)
    records.sort(key=lambda record: record.offset)
    return SharedRecords(tp, node_id, records, gaps)


def _with_count(record: ConsumerRecord, delivery_count: int) -> ShareConsumerRecord:
    """``record`` with its delivery count. Once per record delivered: the fields are passed
    by position (a dict of ``getattr`` over the dataclass fields, then ``**``, cost 4x as
    much; ``bench.share``). A unit test checks that every field is carried over."""
    return ShareConsumerRecord(
        record.topic, record.partition, record.offset, record.timestamp, record.timestamp_type,
        record.key, record.value, record.headers, record.leader_epoch,
        record.serialized_key_size, record.serialized_value_size, delivery_count)
