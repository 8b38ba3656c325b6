"""Committed offsets in ``__consumer_offsets``: partitioning, record bytes, replay, expiry,
tombstones, and the OffsetCommit/OffsetFetch/OffsetDelete handlers called directly (expiry:
``test_group_expiry``)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.apis import RequestContext, offset_commit, offset_delete, offset_fetch
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.group.offsets import (
    OFFSETS_TOPIC,
    OffsetAndMetadata,
    decode_offsets_record,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
)
from protocol.errors import ErrorCode
from protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic

MINUTE_MS = 60_000

# From Java (String.hashCode, then Utils.abs(h) % 50), run with OpenJDK.
JAVA_HASHES = [
    ("group", 98629247, 47),
    ("my-group", -1906497762, 12),
    ("", 0, 0),
    ("polygenelubricants", -2147483648, 0),  # Integer.MIN_VALUE: Utils.abs gives 0
    ("console-consumer-12345", 158455506, 6),
    ("grüppe-\U0001F600", -1039948164, 14),  # a surrogate pair counts as two code units
    ("Aa", 2112, 12),
    ("BB", 2112, 12),
]


@pytest.mark.parametrize(("group_id", "java_hash", "partition"), JAVA_HASHES)
def test_partition_for_matches_java(group_id: str, java_hash: int, partition: int) -> None:
    assert java_string_hash(group_id) == java_hash
    assert partition_for(group_id, 50) == partition


def test_key_bytes() -> None:
    expected = b"\x00\x01" + b"\x00\x05group" + b"\x00\x05topic" + b"\x00\x00\x00\x03"
    assert offset_commit_key("group", "topic", 3) == expected


def test_value_v3_bytes_without_expire_timestamp() -> None:
    offset = OffsetAndMetadata(42, leader_epoch=7, metadata="meta", commit_timestamp_ms=1000)
    expected = (b"\x00\x03" + struct.pack(">qih", 42, 7, 4) + b"meta" + struct.pack(">q", 1000))
    assert offset_commit_value(offset) == expected


def test_value_v1_bytes_with_expire_timestamp() -> None:
    offset = OffsetAndMetadata(42, leader_epoch=7, metadata="", commit_timestamp_ms=1000,
                               expire_timestamp_ms=5000)
    expected = b"\x00\x01" + struct.pack(">qh", 42, 0) + struct.pack(">qq", 1000, 5000)
    assert offset_commit_value(offset) == expected


def test_decode_round_trip_tombstone_and_other_types() -> None:
    offset = OffsetAndMetadata(9, leader_epoch=1, metadata="m", commit_timestamp_ms=5)
    key, decoded = decode_offsets_record(offset_commit_key("g", "t", 0), offset_commit_value(offset))  # type: ignore[misc]
    assert (key.group, key.topic, key.partition, decoded) == ("g", "t", 0, offset)
    assert decode_offsets_record(offset_commit_key("g", "t", 0), None)[1] is None  # type: ignore[index]
    assert decode_offsets_record(b"\x00\x02\x00\x01g", b"\x00\x03") is None  # GroupMetadata


# ---- the store on a real log ---------------------------------------------------------


def make_broker(log_dir: Path, clock: ManualClock, **overrides: str) -> Broker:
    properties = {"log.dirs": str(log_dir), "offsets.topic.num.partitions": "3", **overrides}
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=clock)
    broker.startup()
    broker.offsets_loader.load_all()  # what the daemon does in the background
    return broker


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock):  # type: ignore[no-untyped-def]
    broker = make_broker(tmp_path, clock)
    yield broker
    broker.shutdown()


def test_first_commit_creates_the_compacted_internal_topic(broker: Broker) -> None:
    broker.offset_store.commit("g", {("t", 0): OffsetAndMetadata(5)})
    topic = broker.replica_manager.topic_by_name(OFFSETS_TOPIC)
    assert topic is not None and len(topic.partitions) == 3
    log = broker.replica_manager.partition(OFFSETS_TOPIC, partition_for("g", 3)).log  # type: ignore[union-attr]
    assert log.config.cleanup_policy == ("compact",)
    assert log.config.segment_bytes == 104857600
    assert log.log_end_offset == 1


def test_replay_after_restart_applies_commits_and_tombstones(tmp_path: Path, clock: ManualClock) -> None:
    broker = make_broker(tmp_path, clock)
    store = broker.offset_store
    store.commit("g", {("t", 0): OffsetAndMetadata(1, metadata="a"), ("t", 1): OffsetAndMetadata(2)})
    store.commit("g", {("t", 0): OffsetAndMetadata(3, leader_epoch=4, metadata="b")})
    store.commit("h", {("u", 0): OffsetAndMetadata(7)})
    store.delete_offsets("g", [("t", 1)])
    assert store.delete_group("h") == 1
    broker.shutdown()
    reopened = make_broker(tmp_path, clock)
    try:
        assert reopened.offset_store.group_offsets("g") == {("t", 0): OffsetAndMetadata(3, 4, "b")}
        assert not reopened.offset_store.has_group("h")
    finally:
        reopened.shutdown()


# ---- handlers, called directly ---------------------------------------------------------


def context(broker: Broker, api_key: int, version: int) -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1)
    return RequestContext(header=header, api_version=version, broker=broker, connection_id="test")


def commit_request(group_id: str, *partitions: tuple[str, int, int, str | None], generation: int = -1,
                   member_id: str = "") -> OffsetCommitRequest:
    topics: dict[str, OffsetCommitRequestTopic] = {}
    for topic, index, offset, metadata in partitions:
        topics.setdefault(topic, OffsetCommitRequestTopic(name=topic)).partitions.append(
            OffsetCommitRequestPartition(partition_index=index, committed_offset=offset,
                                         committed_metadata=metadata))
    return OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=generation,
                               member_id=member_id, topics=list(topics.values()))


def commit(broker: Broker, request: OffsetCommitRequest, version: int = 9) -> dict[tuple[str, int], int]:
    response = offset_commit.handle(context(broker, 8, version), request)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}  # type: ignore[union-attr]


def test_commit_errors_per_partition(broker: Broker) -> None:
    create_topic(broker, "t", num_partitions=2)
    errors = commit(broker, commit_request("g", ("t", 0, 5, "m"), ("t", 1, 6, "x" * 4097), ("nope", 0, 1, None)))
    assert errors == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE,
                      ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert broker.offset_store.fetch("g", "t", 0) == OffsetAndMetadata(5, -1, "m", broker.clock.milliseconds())
    assert commit(broker, commit_request("", ("t", 0, 5, None))) == {("t", 0): ErrorCode.INVALID_GROUP_ID}


def test_commit_generation_rules_without_a_group(broker: Broker) -> None:
    create_topic(broker, "t")
    request = commit_request("nobody", ("t", 0, 5, None), generation=3, member_id="m")
    assert commit(broker, request, version=9) == {("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}
    assert commit(broker, request, version=8) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert commit(broker, commit_request("simple", ("t", 0, 5, None))) == {("t", 0): ErrorCode.NONE}
    assert broker.group_coordinator.get_group("simple") is not None  # an Empty group was created


def test_fetch_single_group_and_batched(broker: Broker) -> None:
    create_topic(broker, "t", num_partitions=2)
    commit(broker, commit_request("g", ("t", 0, 5, "meta")))
    single = offset_fetch.handle(context(broker, 9, 7), OffsetFetchRequest(
        group_id="g", topics=[OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]))
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in single.topics[0].partitions] == [  # type: ignore[union-attr]
        (0, 5, "meta"), (1, -1, "")]
    batched = offset_fetch.handle(context(broker, 9, 9), OffsetFetchRequest(groups=[
        OffsetFetchRequestGroup(group_id="g", topics=None),
        OffsetFetchRequestGroup(group_id="unknown", topics=[OffsetFetchRequestTopics(name="t", partition_indexes=[0])]),
    ]))
    groups = batched.groups  # type: ignore[union-attr]
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in groups[0].topics] == [
        ("t", [(0, 5)])]
    assert groups[1].topics[0].partitions[0].committed_offset == -1 and groups[1].error_code == 0


def test_offset_delete(broker: Broker) -> None:
    create_topic(broker, "t")
    commit(broker, commit_request("g", ("t", 0, 5, None)))

    def delete(group_id: str) -> int:
        request = OffsetDeleteRequest(group_id=group_id, topics=[
            OffsetDeleteRequestTopic(name="t", partitions=[OffsetDeleteRequestPartition(partition_index=0)])])
        response = offset_delete.handle(context(broker, 47, 0), request)
        return response.error_code or response.topics[0].partitions[0].error_code

    assert delete("missing") == ErrorCode.GROUP_ID_NOT_FOUND
    assert delete("g") == ErrorCode.NONE
    assert broker.offset_store.fetch("g", "t", 0) is None
