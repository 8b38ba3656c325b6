"""Share sessions and share-fetched records without sockets: the epochs and partition lists
of ShareFetch/ShareAcknowledge requests (Kafka's ShareSessionHandler rules), and which records
of the returned batches are delivered (AcquiredRecords ranges, delivery counts, gaps)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import CorruptMessageError, ErrorCode
from protocol.messages.share_fetch_response import AcquiredRecords, PartitionData
from protocol.records import ControlRecordType, Record, encode_batch, encode_control_record
from samsa._decoding import Decoders
from samsa._share_acks import expand_batches
from samsa._share_fetch import (
    FINAL_EPOCH,
    FetchSettings,
    ShareSession,
    _with_count,
    share_records,
)
from samsa.config import parse_config
from samsa.types import ConsumerRecord, ShareConsumerRecord, TopicPartition

TOPIC_ID = uuid.UUID(int=7)
OTHER_ID = uuid.UUID(int=8)
P0, P1, P2 = (TopicPartition("t", i) for i in range(3))
Q0 = TopicPartition("q", 0)
IDS = {"t": TOPIC_ID, "q": OTHER_ID}
SETTINGS = FetchSettings(max_wait_ms=250, min_bytes=1, max_bytes=1000, max_records=10)
DECODERS = Decoders({**parse_config("share_consumer", {"group.id": "g"}),
                     "isolation.level": "read_uncommitted"})


def session() -> ShareSession:
    return ShareSession(node_id=1, group_id="g", member_id="m")


def listed(request) -> set[TopicPartition]:  # type: ignore[no-untyped-def]
    names = {v: k for k, v in IDS.items()}
    return {TopicPartition(names[t.topic_id], p.partition_index)
            for t in request.topics for p in t.partitions}


def test_a_new_session_lists_every_partition_and_cannot_carry_acknowledgements() -> None:
    share = session()
    request, failed = share.fetch_request({P0: TOPIC_ID, P1: TOPIC_ID}, {P0: {3: 1}}, IDS, SETTINGS)
    assert request.share_session_epoch == 0 and listed(request) == {P0, P1}
    assert failed == {P0}
    assert all(not p.acknowledgement_batches for t in request.topics for p in t.partitions)
    assert (request.max_wait_ms, request.max_records, request.batch_size) == (250, 10, 10)
    assert share.acknowledge_request({P0: {3: 1}}, IDS) is None


def test_a_session_lists_only_changes_and_carries_acknowledgements() -> None:
    share = session()
    share.fetch_request({P0: TOPIC_ID, P1: TOPIC_ID}, {}, IDS, SETTINGS)
    share.answered(0)
    request, failed = share.fetch_request({P0: TOPIC_ID, P1: TOPIC_ID}, {}, IDS, SETTINGS)
    assert request.share_session_epoch == 1 and request.topics == [] and not failed
    share.answered(0)
    # P1 leaves, P2 joins, P0 carries acknowledgements, Q0 (not assigned any more) too
    request, failed = share.fetch_request({P0: TOPIC_ID, P2: TOPIC_ID},
                                          {P0: {0: 1, 1: 1, 2: 2}, Q0: {5: 3}}, IDS, SETTINGS)
    assert request.share_session_epoch == 2 and not failed
    assert listed(request) == {P0, P2, Q0}
    assert [(f.topic_id, f.partitions) for f in request.forgotten_topics_data] == [(TOPIC_ID, [1])]
    batches = {(t.topic_id, p.partition_index): p.acknowledgement_batches
               for t in request.topics for p in t.partitions}
    assert expand_batches(batches[(TOPIC_ID, 0)]) == {0: 1, 1: 1, 2: 2}
    assert expand_batches(batches[(OTHER_ID, 0)]) == {5: 3}
    assert batches[(TOPIC_ID, 2)] == []


@pytest.mark.parametrize("code", [ErrorCode.SHARE_SESSION_NOT_FOUND,
                                  ErrorCode.INVALID_SHARE_SESSION_EPOCH, 133])
def test_session_errors_open_a_new_session(code: int) -> None:
    share = session()
    share.fetch_request({P0: TOPIC_ID}, {}, IDS, SETTINGS)
    share.answered(0)
    share.answered(code)
    request, _ = share.fetch_request({P0: TOPIC_ID}, {}, IDS, SETTINGS)
    assert request.share_session_epoch == 0 and listed(request) == {P0}


def test_other_errors_move_the_epoch_on_and_it_wraps_to_1() -> None:
    share = session()
    share.epoch = 5
    share.answered(ErrorCode.UNKNOWN_SERVER_ERROR)
    assert share.epoch == 6
    share.epoch = 2**31 - 1
    share.answered(0)
    assert share.epoch == 1


def test_close_acknowledges_with_the_final_epoch() -> None:
    share = session()
    share.fetch_request({P0: TOPIC_ID}, {}, IDS, SETTINGS)
    share.answered(0)
    request = share.acknowledge_request({P0: {4: 1, 5: 1}}, IDS, close=True)
    assert request is not None and request.share_session_epoch == FINAL_EPOCH
    [topic] = request.topics
    assert topic.topic_id == TOPIC_ID
    assert expand_batches(topic.partitions[0].acknowledgement_batches) == {4: 1, 5: 1}
    share.answered(0)
    assert share.is_new  # a closed session is gone


def batches(*parts: bytes) -> bytes:
    return b"".join(parts)


def plain(first: int, count: int) -> bytes:
    return encode_batch([Record(offset=first + i, timestamp=1000 + i, key=None,
                                value=f"v{first + i}".encode()) for i in range(count)])


def answer(records: bytes, *spans: tuple[int, int, int]) -> PartitionData:
    return PartitionData(partition_index=0, records=records, acquired_records=[
        AcquiredRecords(first_offset=a, last_offset=b, delivery_count=c) for a, b, c in spans])


def test_only_acquired_records_are_delivered_with_their_delivery_count() -> None:
    data = answer(batches(plain(0, 5), plain(5, 5)), (2, 4, 1), (7, 12, 3))
    shared = share_records(P0, 1, data, DECODERS)
    assert [(r.offset, r.delivery_count, r.value) for r in shared.records] == [
        (2, 1, b"v2"), (3, 1, b"v3"), (4, 1, b"v4"), (7, 3, b"v7"), (8, 3, b"v8"), (9, 3, b"v9")]
    assert shared.gaps == [10, 11, 12]  # acquired, but no record there
    assert all(r.topic == "t" and r.partition == 0 for r in shared.records)


def test_a_delivered_record_carries_every_field_of_the_decoded_one() -> None:
    """``_with_count`` passes the fields by position: a field added to ConsumerRecord must be
    added there too."""
    names = [name for name in ConsumerRecord.__dataclass_fields__]
    values: list[Any] = [f"field-{index}" for index in range(len(names))]
    decoded = ConsumerRecord(*values)
    shared = _with_count(decoded, 3)
    assert type(shared) is ShareConsumerRecord and shared.delivery_count == 3
    assert [getattr(shared, name) for name in names] == [getattr(decoded, name) for name in names]
    assert set(ShareConsumerRecord.__dataclass_fields__) == {*names, "delivery_count"}


def test_a_control_record_acquired_is_a_gap() -> None:
    marker = encode_batch([encode_control_record(ControlRecordType.COMMIT, coordinator_epoch=0,
                                                 offset=3, timestamp=0)],
                          is_control=True, is_transactional=True, producer_id=5, producer_epoch=0)
    shared = share_records(P0, 1, answer(batches(plain(0, 3), marker), (0, 3, 1)), DECODERS)
    assert [r.offset for r in shared.records] == [0, 1, 2] and shared.gaps == [3]


def test_nothing_acquired_delivers_nothing() -> None:
    shared = share_records(P0, 1, answer(plain(0, 3)), DECODERS)
    assert shared.records == [] and shared.gaps == [] and shared.exhausted


def test_a_corrupt_batch_fails() -> None:
    data = bytearray(plain(0, 3))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError):
        share_records(P0, 1, answer(bytes(data), (0, 2, 1)), DECODERS)


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5), st.integers(1, 5)), max_size=4))
def test_delivered_and_gaps_partition_the_acquired_offsets(
        spans: list[tuple[int, int, int]]) -> None:
    """Records at offsets 0..19: every acquired offset is delivered (if below 20) or a gap,
    never both, and a record's delivery count is its first acquired range's."""
    ranges = [(first, first + length, count) for first, length, count in spans]
    shared = share_records(P0, 1, answer(batches(plain(0, 10), plain(10, 10)), *ranges), DECODERS)
    acquired: dict[int, int] = {}
    for first, last, count in ranges:
        for offset in range(first, last + 1):
            acquired.setdefault(offset, count)
    delivered = {r.offset: r.delivery_count for r in shared.records}
    assert delivered == {o: c for o, c in acquired.items() if o < 20}
    assert shared.gaps == sorted(o for o in acquired if o >= 20)
