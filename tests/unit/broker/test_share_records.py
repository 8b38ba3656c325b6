"""A share group's ``__consumer_offsets`` records (types 11 and 15) against bytes written out
by hand from Kafka 4.3.1's schemas (ShareGroupMetadataKey/Value, ShareGroupStatePartitionMetadata
Key/Value: a non-flexible key, flexible values), and their replay, tombstones included."""

from __future__ import annotations

import struct
import uuid

from hypothesis import given
from hypothesis import strategies as st

from broker.group.group_records import group_metadata_key
from broker.group.share_records import (
    ShareGroupRecord,
    decode_share_group_record,
    share_group_epoch_record,
    share_group_partitions_record,
    share_group_tombstones,
)

TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def test_the_epoch_record_is_kafkas_bytes() -> None:
    key, value = share_group_epoch_record("q", 7)
    assert key == b"\x00\x0b" + b"\x00\x01q"  # type 11, then GroupId as an int16-length string
    # version 0, Epoch int32, MetadataHash int64 (0: not computed), no tagged fields
    assert value == b"\x00\x00" + struct.pack(">iq", 7, 0) + b"\x00"


def test_the_partitions_record_is_kafkas_bytes() -> None:
    key, value = share_group_partitions_record("q", {TOPIC: ("work", frozenset({2, 0}))})
    assert key == b"\x00\x0f" + b"\x00\x01q"
    topic = TOPIC.bytes + b"\x05work" + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"
    # InitializingTopics [], InitializedTopics [topic], DeletingTopics [], no tagged fields
    assert value == b"\x00\x00" + b"\x01" + b"\x02" + topic + b"\x01" + b"\x00"


def test_replay_keeps_the_last_epoch_and_partitions_and_a_tombstone_removes_the_group() -> None:
    groups: dict[str, ShareGroupRecord] = {}
    records = [share_group_epoch_record("q", 1),
               share_group_partitions_record("q", {TOPIC: ("work", frozenset({0}))}),
               share_group_epoch_record("q", 4), share_group_epoch_record("other", 2)]
    for key, value in records:
        assert decode_share_group_record(key, value, groups)
    assert (groups["q"].epoch, groups["q"].initialized) == (4, {TOPIC: ("work", frozenset({0}))})
    for key, value in share_group_tombstones("q"):
        assert decode_share_group_record(key, value, groups)
    assert set(groups) == {"other"}
    assert not decode_share_group_record(group_metadata_key("q"), None, groups)  # a classic group's


@given(st.text(max_size=20), st.integers(0, 2**31 - 1),
       st.dictionaries(st.uuids(), st.frozensets(st.integers(0, 1000), max_size=5), max_size=3))
def test_records_round_trip(group_id: str, epoch: int, partitions: dict[uuid.UUID, frozenset[int]]) -> None:
    initialized = {topic_id: (f"t-{topic_id.hex[:6]}", parts) for topic_id, parts in partitions.items()}
    groups: dict[str, ShareGroupRecord] = {}
    for key, value in (share_group_epoch_record(group_id, epoch),
                       share_group_partitions_record(group_id, initialized)):
        decode_share_group_record(key, value, groups)
    assert (groups[group_id].epoch, groups[group_id].initialized) == (epoch, initialized)
