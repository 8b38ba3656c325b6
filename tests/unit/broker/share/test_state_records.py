"""``__share_group_state`` record bytes: golden bytes built by hand from Kafka 4.3.1's
Share{Snapshot,Update}{Key,Value}.json (the record type as an int16 in front of a key written
at version 0, the value version 0 in front of the value), and round trips of any record."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.share.state_records import (
    RecordType,
    SharePartitionKey,
    ShareSnapshotRecord,
    ShareStateRecord,
    ShareStateTombstone,
    ShareUpdateRecord,
    decode_share_state_record,
    encode_share_state_record,
)
from broker.share.values import ShareSnapshot, StateBatch
from protocol.codec import DecodeError
from protocol.errors import InvalidRequestError, UnsupportedVersionError

KEY = SharePartitionKey("g", UUID(bytes=bytes(range(16))), 3)
# string "g" (int16 length), uuid (16 bytes), partition int32
KEY_BODY = b"\x00\x01g" + bytes(range(16)) + b"\x00\x00\x00\x03"
BATCH = StateBatch(first_offset=10, last_offset=19, delivery_state=2, delivery_count=1)
# first_offset int64, last_offset int64, delivery_state int8, delivery_count int16, no tags
BATCH_BYTES = (10).to_bytes(8, "big") + (19).to_bytes(8, "big") + b"\x02" + b"\x00\x01" + b"\x00"


def test_a_snapshot_record_is_kafkas_bytes() -> None:
    record = ShareSnapshotRecord(KEY, snapshot_epoch=70000, snapshot=ShareSnapshot(
        state_epoch=2, leader_epoch=7, start_offset=10, state_batches=(BATCH,)),
        create_timestamp=1_700_000_000_000, write_timestamp=1_700_000_000_123)
    key, value = encode_share_state_record(record)
    assert key == b"\x00\x00" + KEY_BODY  # record type 0, key version 0
    assert value == (
        b"\x00\x00"  # value version 0
        + (70000).to_bytes(4, "big")  # snapshot_epoch int32
        + b"\x00\x00\x00\x02"  # state_epoch int32
        + b"\x00\x00\x00\x07"  # leader_epoch int32
        + (10).to_bytes(8, "big")  # start_offset int64
        + (1_700_000_000_000).to_bytes(8, "big")  # create_timestamp int64
        + (1_700_000_000_123).to_bytes(8, "big")  # write_timestamp int64
        + b"\x02" + BATCH_BYTES  # compact array: length + 1
        + b"\x00"  # no tagged fields (delivery_complete_count -1 is the default, not written)
    )
    assert decode_share_state_record(key, value) == record


def test_a_known_delivery_complete_count_is_tagged_field_0() -> None:
    record = ShareSnapshotRecord(KEY, 0, ShareSnapshot(0, 0, 0, ()), delivery_complete_count=9)
    _, value = encode_share_state_record(record)
    assert value is not None
    # one tagged field: tag 0, size 4, int32 9
    assert value.endswith(b"\x01" + b"\x01\x00\x04\x00\x00\x00\x09")
    assert decode_share_state_record(*encode_share_state_record(record)) == record


def test_an_update_record_is_kafkas_bytes() -> None:
    record = ShareUpdateRecord(KEY, snapshot_epoch=5, leader_epoch=7, start_offset=-1, state_batches=(),
                               delivery_complete_count=3)
    key, value = encode_share_state_record(record)
    assert key == b"\x00\x01" + KEY_BODY  # record type 1, ShareUpdateKey at version 0
    assert value == (
        b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00\x00\x00\x07" + b"\xff" * 8
        + b"\x01"  # no state batches
        + b"\x01\x00\x04\x00\x00\x00\x03"  # tagged field 0: delivery_complete_count 3
    )
    assert decode_share_state_record(key, value) == record


@pytest.mark.parametrize("record_type", list(RecordType))
def test_a_tombstone_is_a_null_value(record_type: RecordType) -> None:
    record = ShareStateTombstone(record_type, KEY)
    key, value = encode_share_state_record(record)
    assert key == record_type.to_bytes(2, "big") + KEY_BODY and value is None
    assert decode_share_state_record(key, value) == record


def test_an_unknown_record_type_is_skipped_and_bad_bytes_are_errors() -> None:
    assert decode_share_state_record(b"\x00\x02" + KEY_BODY, b"\x00\x00") is None
    with pytest.raises(InvalidRequestError):
        decode_share_state_record(b"\x00", None)
    with pytest.raises(DecodeError):
        decode_share_state_record(b"\x00\x00" + KEY_BODY[:-1], None)
    _, value = encode_share_state_record(
        ShareUpdateRecord(KEY, snapshot_epoch=0, leader_epoch=0, start_offset=0, state_batches=()))
    assert value is not None
    with pytest.raises(UnsupportedVersionError):  # a value version no schema defines
        decode_share_state_record(b"\x00\x01" + KEY_BODY, b"\x00\x01" + value[2:])


int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
keys = st.builds(SharePartitionKey, st.text(max_size=20), st.uuids(), int32)
batches = st.builds(StateBatch, int64, int64, st.integers(-128, 127), int16)
batch_lists = st.lists(batches, max_size=5).map(tuple)
snapshots = st.builds(ShareSnapshot, int32, int32, int64, batch_lists)
records: st.SearchStrategy[ShareStateRecord] = st.one_of(
    st.builds(ShareSnapshotRecord, keys, int32, snapshots, int64, int64, int32),
    st.builds(ShareUpdateRecord, keys, int32, int32, int64, batch_lists, int32),
    st.builds(ShareStateTombstone, st.sampled_from(RecordType), keys),
)


@given(records)
def test_every_record_round_trips(record: ShareStateRecord) -> None:
    key, value = encode_share_state_record(record)
    assert decode_share_state_record(key, value) == record
    assert encode_share_state_record(record) == (key, value)
