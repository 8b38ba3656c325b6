"""ShareFetch and ShareAcknowledge against a real broker, with raw requests: two members of a
share group take turns on one partition — each record delivered to one member at a time, a
released record redelivered with delivery count 2, a record whose lock runs out redelivered,
the delivery limit archiving, a long poll woken by a produce, the session's epoch rules, a
connection that closes releasing its records, and acknowledged records not redelivered after
a restart."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest

from protocol.frames import encode_request
from protocol.messages import RESPONSES, response_header_version
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.fetch_request import FetchPartition as PlainFetchPartition
from protocol.messages.fetch_request import FetchRequest
from protocol.messages.fetch_request import FetchTopic as PlainFetchTopic
from protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.request_header import RequestHeader
from protocol.messages.response_header import ResponseHeader
from protocol.messages.share_acknowledge_request import AcknowledgementBatch as AckBatch
from protocol.messages.share_acknowledge_request import (
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from protocol.messages.share_fetch_request import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
)
from protocol.records import Record, encode_batch, iter_batches
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

TOPIC, GROUP = "share-queue", "share-group"
ACCEPT, RELEASE = 1, 2
INVALID_RECORD_STATE, SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH = 121, 122, 123
OVERRIDES = {"group_share_record_lock_duration_ms": "1000", "group_share_delivery_count_limit": "3"}


class Wire:
    """One connection: requests framed by the protocol package, responses decoded whole."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.sock = socket.create_connection((broker.host, broker.port), timeout=15)
        self.correlation_id = 0

    def call(self, request: Any, version: int) -> Any:
        self.correlation_id += 1
        header = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                               correlation_id=self.correlation_id, client_id="share-test")
        self.sock.sendall(encode_request(header, request))
        frame = memoryview(self._read(struct.unpack(">i", self._read(4))[0]))
        response_header, offset = ResponseHeader.decode_from(
            frame, 0, response_header_version(request.API_KEY, version))
        assert response_header.correlation_id == self.correlation_id
        return RESPONSES[request.API_KEY].decode(frame[offset:], version)

    def _read(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError(f"the broker closed the connection\n{self.broker.log()[-3000:]}")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


class Member:
    """A share consumer speaking raw ShareFetch/ShareAcknowledge v1 over its own connection."""

    def __init__(self, broker: Any, member_id: str, topic_id: UUID, group: str = GROUP) -> None:
        self.wire = Wire(broker)
        self.group = group
        self.member_id = member_id
        self.topic_id = topic_id
        self.epoch = 0

    def fetch(self, *, max_records: int = 100, max_wait_ms: int = 0,
              acks: list[tuple[int, int, list[int]]] | None = None) -> Any:
        partition = FetchPartition(partition_index=0, acknowledgement_batches=[
            AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=types)
            for first, last, types in acks or []])
        response = self.wire.call(ShareFetchRequest(
            group_id=self.group, member_id=self.member_id, share_session_epoch=self.epoch,
            max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, max_records=max_records,
            topics=[FetchTopic(topic_id=self.topic_id, partitions=[partition])] if self.epoch == 0 or acks else []),
            1)
        if response.error_code == 0:
            self.epoch += 1
        return response

    def acknowledge(self, acks: list[tuple[int, int, list[int]]], *, epoch: int | None = None) -> Any:
        response = self.wire.call(ShareAcknowledgeRequest(
            group_id=self.group, member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch,
            topics=[AcknowledgeTopic(topic_id=self.topic_id, partitions=[AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[
                    AckBatch(first_offset=first, last_offset=last, acknowledge_types=types)
                    for first, last, types in acks])])]), 1)
        if response.error_code == 0 and epoch is None:
            self.epoch += 1
        return response


def acquired(response: Any) -> list[tuple[int, int]]:
    """(offset, delivery count) of every acquired record, checked against the records sent."""
    assert response.error_code == 0, response
    result = []
    for topic in response.responses:
        for partition in topic.partitions:
            assert partition.error_code == 0, partition
            offsets = {record_offset for batch in iter_batches(partition.records or b"")
                       for record_offset in range(batch.base_offset, batch.last_offset + 1)}
            for each in partition.acquired_records:
                for offset in range(each.first_offset, each.last_offset + 1):
                    assert offset in offsets  # the records come with their acquisition
                    result.append((offset, each.delivery_count))
    return sorted(result)


def ack_errors(response: Any) -> list[int]:
    return [partition.acknowledge_error_code for topic in response.responses for partition in topic.partitions]


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the tests that need no restart (each uses its own topic and group)."""
    path = tmp_path_factory.mktemp("share-fetch")
    broker = BrokerProcess(log_dir=path / "logs", stderr_path=path / "broker.log",
                           overrides={key.replace("_", "."): value for key, value in OVERRIDES.items()})
    broker.start()
    yield broker
    assert broker.stop() == 0, broker.log()


def setup_topic(broker: Any, topic: str = TOPIC) -> tuple[Wire, UUID]:
    admin = Wire(broker)
    created = admin.call(CreateTopicsRequest(timeout_ms=5000, topics=[CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)]), 7)
    assert created.topics[0].error_code == 0
    described = admin.call(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)
    return admin, described.topics[0].topic_id


def produce(admin: Wire, *values: bytes, topic: str = TOPIC) -> None:
    now = int(time.time() * 1000)
    for value in values:  # one batch per record: acquisitions line up with batches
        batch = encode_batch([Record(offset=0, timestamp=now, key=None, value=value)])
        response = admin.call(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])]), 9)
        assert response.responses[0].partition_responses[0].error_code == 0


def test_two_members_share_a_partition(shared_broker: BrokerProcess) -> None:
    broker = shared_broker
    admin, topic_id = setup_topic(broker)
    a, b = Member(broker, "member-a", topic_id), Member(broker, "member-b", topic_id)
    opened = a.fetch()  # share.auto.offset.reset=latest: starts at the end (nothing yet)
    assert acquired(opened) == [] and opened.acquisition_lock_timeout_ms == 1000
    assert acquired(b.fetch()) == []
    produce(admin, *(b"record-%d" % i for i in range(6)))

    assert acquired(a.fetch(max_records=3)) == [(0, 1), (1, 1), (2, 1)]
    assert acquired(b.fetch(max_records=10)) == [(3, 1), (4, 1), (5, 1)]
    assert acquired(b.fetch()) == []  # nothing left that is not locked

    # per-offset types: 0 and 2 accepted, 1 released -> delivered again, count 2
    assert acknowledged_ok(a.acknowledge([(0, 2, [ACCEPT, RELEASE, ACCEPT])]))
    response = b.fetch(acks=[(3, 5, [ACCEPT])])
    assert ack_errors(response) == [0]
    assert acquired(response) == [(1, 2)]
    # a record b does not hold: INVALID_RECORD_STATE, nothing changes
    assert partition_errors(a.acknowledge([(1, 1, [ACCEPT])])) == [INVALID_RECORD_STATE]

    # b lets its lock run out (1 s): a's long poll gets the record, count 3
    start = time.monotonic()
    assert acquired(a.fetch(max_wait_ms=5000)) == [(1, 3)]
    assert time.monotonic() - start < 4
    assert partition_errors(b.acknowledge([(1, 1, [ACCEPT])])) == [INVALID_RECORD_STATE]
    # released at the delivery limit (3): archived, never delivered again
    assert acknowledged_ok(a.acknowledge([(1, 1, [RELEASE])]))
    produce(admin, b"record-6")
    assert acquired(b.fetch()) == [(6, 1)]
    assert acquired(a.fetch()) == []


def test_long_polls_are_woken_and_closing_releases(shared_broker: BrokerProcess) -> None:
    broker, topic, group = shared_broker, "share-long-poll", "share-long-poll-group"
    _, topic_id = setup_topic(broker, topic)
    a, b = Member(broker, "member-a", topic_id, group), Member(broker, "member-b", topic_id, group)
    assert acquired(a.fetch()) == [] and acquired(b.fetch()) == []
    # a produce wakes a waiting ShareFetch (the delay only makes the fetch wait first)
    threading.Timer(0.3, lambda: produce(Wire(broker), b"late", topic=topic)).start()
    start = time.monotonic()
    assert acquired(a.fetch(max_wait_ms=5000)) == [(0, 1)]
    assert time.monotonic() - start < 3
    # a's connection closes: its session goes and its record is released, waking b
    a.wire.close()
    start = time.monotonic()
    assert acquired(b.fetch(max_wait_ms=5000)) == [(0, 2)]
    assert time.monotonic() - start < 0.9  # the release, not the 1 s lock expiry
    # the session's epoch rules
    wrong = b.wire.call(ShareFetchRequest(group_id=group, member_id="member-b", share_session_epoch=b.epoch + 1,
                                          max_records=10), 1)
    assert wrong.error_code == INVALID_SHARE_SESSION_EPOCH
    unknown = b.wire.call(ShareFetchRequest(group_id=group, member_id="member-z", share_session_epoch=3,
                                            max_records=10), 1)
    assert unknown.error_code == SHARE_SESSION_NOT_FOUND
    # closing the session (epoch -1) releases what it holds: another member gets it at once
    closed = b.wire.call(ShareFetchRequest(group_id=group, member_id="member-b", share_session_epoch=-1,
                                           max_records=10), 1)
    assert closed.error_code == 0
    c = Member(broker, "member-c", topic_id, group)
    assert acquired(c.fetch()) == [(0, 3)]


def test_a_rejected_record_goes_to_the_dead_letter_topic(shared_broker: BrokerProcess) -> None:
    broker, topic, group, dead_letters = shared_broker, "share-orders", "share-dlq-group", "share-orders.dlq"
    admin, topic_id = setup_topic(broker, topic)
    setup_topic(broker, dead_letters)
    altered = admin.call(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=32, resource_name=group, configs=[AlterableConfig(
            name="samsa.share.dead.letter.topic", config_operation=0, value=dead_letters)])]), 1)
    assert [each.error_code for each in altered.responses] == [0]
    member = Member(broker, "member-a", topic_id, group)
    assert acquired(member.fetch()) == []
    produce(admin, b"poison", b"fine", topic=topic)
    assert acquired(member.fetch()) == [(0, 1), (1, 1)]
    assert acknowledged_ok(member.acknowledge([(0, 1, [3, ACCEPT])]))  # 3: Reject
    fetched = admin.call(FetchRequest(max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                      session_epoch=-1, topics=[PlainFetchTopic(topic=dead_letters, partitions=[
                                          PlainFetchPartition(partition=0, fetch_offset=0,
                                                              partition_max_bytes=1 << 20)])]), 12)
    [record] = [record for batch in iter_batches(fetched.responses[0].partitions[0].records or b"")
                for record in batch.records]
    headers = dict(record.headers)
    assert record.value == b"poison"
    assert (headers["samsa.dlq.topic"], headers["samsa.dlq.partition"], headers["samsa.dlq.offset"]) == (
        topic.encode(), b"0", b"0")
    assert (headers["samsa.dlq.reason"], headers["samsa.dlq.delivery.count"]) == (b"rejected", b"1")
    produce(admin, b"next", topic=topic)
    assert acquired(member.fetch()) == [(2, 1)]  # the rejected record is not delivered again


@pytest.mark.slow  # a broker of its own, restarted
def test_acknowledged_records_stay_acknowledged_across_a_restart(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**OVERRIDES)
    admin, topic_id = setup_topic(broker)
    a = Member(broker, "member-a", topic_id)
    assert acquired(a.fetch()) == []
    produce(admin, b"r0", b"r1", b"r2")
    assert acquired(a.fetch()) == [(0, 1), (1, 1), (2, 1)]
    assert acknowledged_ok(a.acknowledge([(0, 0, [ACCEPT]), (2, 2, [ACCEPT])]))
    broker.restart()
    b = Member(broker, "member-b", topic_id)
    deadline = time.monotonic() + 20
    while True:  # the share coordinator may be loading its state
        response = b.fetch()
        if response.error_code == 0 and all(p.error_code == 0 for t in response.responses for p in t.partitions):
            break
        assert time.monotonic() < deadline, response
        b.epoch = 0
        time.sleep(0.1)
    assert acquired(response) == [(1, 2)]


def acknowledged_ok(response: Any) -> bool:
    assert response.error_code == 0, response
    return partition_errors(response) == [0]


def partition_errors(response: Any) -> list[int]:
    assert response.error_code == 0, response
    return [partition.error_code for topic in response.responses for partition in topic.partitions]


def test_the_in_flight_window_is_described_by_the_leader(shared_broker: BrokerProcess) -> None:
    """Samsa's DescribeSharePartitions through ``AdminClient.describe_share_partitions``: 3
    records, the first accepted, two held by member-a (delivery count 1, locked until about
    now + the lock duration); a group nobody fetched for is not loaded."""
    from samsa.admin import AdminClient
    from samsa.types import TopicPartition

    broker, topic, group = shared_broker, "share-described", "share-described-group"
    admin, topic_id = setup_topic(broker, topic)
    member = Member(broker, "member-a", topic_id, group)
    assert acquired(member.fetch()) == []  # latest: starts at the end
    produce(admin, b"r0", b"r1", b"r2", topic=topic)
    before_ms = int(time.time() * 1000)
    assert acquired(member.fetch()) == [(0, 1), (1, 1), (2, 1)]
    assert acknowledged_ok(member.acknowledge([(0, 0, [ACCEPT])]))
    tp = TopicPartition(topic, 0)
    with AdminClient(bootstrap_servers=broker.bootstrap) as client:
        state = client.describe_share_partitions(group, [tp])[tp]
        other = client.describe_share_partitions("nobody-fetched", [tp])[tp]
    assert (state.loaded, state.high_watermark, state.start_offset, state.end_offset) == (True, 3, 1, 3)
    assert (state.in_flight_records, state.acquired_records, state.max_delivery_count) == (2, 2, 1)
    [held] = state.ranges
    assert (held.first_offset, held.last_offset, held.state, held.member_id) == (1, 2, "ACQUIRED", "member-a")
    assert held.lock_deadline_ms is not None and before_ms <= held.lock_deadline_ms <= before_ms + 5_000
    assert (other.loaded, other.in_flight_records, other.ranges) == (False, 0, ())
