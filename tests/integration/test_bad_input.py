"""Malformed and refused input over raw sockets: Kafka's error codes, and a broker that stays up."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from protocol.frames import encode_request
from protocol.messages.api_versions_response import ApiVersionsResponse
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.create_topics_response import CreateTopicsResponse
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.fetch_response import FetchResponse
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.metadata_response import MetadataResponse
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.produce_response import ProduceResponse
from protocol.messages.request_header import RequestHeader
from protocol.records import Record, encode_batch

pytestmark = pytest.mark.integration


class Client:
    """A bare Kafka connection speaking our codec."""

    def __init__(self, broker) -> None:  # type: ignore[no-untyped-def]
        self.sock = socket.create_connection((broker.host, broker.port), timeout=10)
        self.correlation_id = 0

    def send(self, api_key: int, version: int, request) -> int:  # type: ignore[no-untyped-def]
        self.correlation_id += 1
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=self.correlation_id, client_id="raw")
        self.sock.sendall(encode_request(header, request))
        return self.correlation_id

    def receive(self) -> tuple[int, bytes]:
        size = struct.unpack(">i", self.read(4))[0]
        body = self.read(size)
        return struct.unpack_from(">i", body)[0], body[4:]

    def call(self, api_key: int, version: int, request, response_class, *, flexible: bool):  # type: ignore[no-untyped-def]
        correlation_id = self.send(api_key, version, request)
        received, body = self.receive()
        assert received == correlation_id
        return response_class.decode(body[1:] if flexible else body, version)

    def read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def is_closed_by_peer(self) -> bool:
        self.sock.settimeout(10)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


def batch(*values: bytes) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([Record(offset=i, timestamp=now, key=None, value=v) for i, v in enumerate(values)])


def produce(client: Client, topic: str, partitions: dict[int, bytes], *, acks: int = 1) -> ProduceResponse:
    request = ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=i, records=r) for i, r in partitions.items()])])
    return client.call(0, 9, request, ProduceResponse, flexible=True)


def create(client: Client, name: str, partitions: int = 1, **configs: str) -> CreateTopicsResponse:
    from protocol.messages.create_topics_request import CreatableTopicConfig

    topic = CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                           configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
    return client.call(19, 7, CreateTopicsRequest(topics=[topic]), CreateTopicsResponse, flexible=True)


def log_end_offset(client: Client, topic: str, partition: int = 0) -> int:
    request = FetchRequest(max_wait_ms=0, topics=[FetchTopic(topic=topic, partitions=[
        FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1)])])
    response = client.call(1, 11, request, FetchResponse, flexible=False)
    return response.responses[0].partitions[0].high_watermark


def test_broken_crc_is_corrupt_message_and_only_that_partition_fails(broker) -> None:  # type: ignore[no-untyped-def]
    client = Client(broker)
    create(client, "crc", partitions=2)
    good = batch(b"fine")
    bad = bytearray(batch(b"hello", b"world"))
    bad[-1] ^= 0xFF  # a flipped bit in the records: the CRC no longer matches
    response = produce(client, "crc", {0: bytes(bad), 1: good})
    codes = {p.index: p.error_code for p in response.responses[0].partition_responses}
    assert codes == {0: 2, 1: 0}  # CORRUPT_MESSAGE; the other partition is appended
    assert log_end_offset(client, "crc", 0) == 0
    assert log_end_offset(client, "crc", 1) == 1


def test_oversize_record_is_message_too_large(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**{"message.max.bytes": "10000"})
    client = Client(broker)
    create(client, "big")
    response = produce(client, "big", {0: batch(b"x" * 20_000)})
    assert response.responses[0].partition_responses[0].error_code == 10
    assert log_end_offset(client, "big") == 0


def test_unknown_topic_with_auto_create_off(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**{"auto.create.topics.enable": "false"})
    client = Client(broker)
    response = produce(client, "nope", {0: batch(b"x")})
    assert response.responses[0].partition_responses[0].error_code == 3
    metadata = client.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="nope")]),
                           MetadataResponse, flexible=True)
    assert metadata.topics[0].error_code == 3


def test_internal_and_invalid_topics(broker) -> None:  # type: ignore[no-untyped-def]
    client = Client(broker)
    response = produce(client, "__consumer_offsets", {0: batch(b"x")})
    assert response.responses[0].partition_responses[0].error_code == 17  # INVALID_TOPIC_EXCEPTION
    metadata = client.call(3, 12, MetadataRequest(topics=None), MetadataResponse, flexible=True)
    assert "__cluster_metadata" not in {t.name for t in metadata.topics}
    results = {t.name: t.error_code for t in create(client, "bad/name").topics}
    assert results == {"bad/name": 17}
    assert create(client, "__cluster_metadata").topics[0].error_code == 42  # INVALID_REQUEST
    replicated = client.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
        name="r3", num_partitions=1, replication_factor=3)]), CreateTopicsResponse, flexible=True)
    assert replicated.topics[0].error_code == 38  # INVALID_REPLICATION_FACTOR
    assert create(client, "dup").topics[0].error_code == 0
    assert create(client, "dup").topics[0].error_code == 36  # TOPIC_ALREADY_EXISTS
    assert create(client, "cfg", **{"retention.ms": "soon"}).topics[0].error_code == 40


def test_unsupported_api_versions_version_gets_error_35_and_our_range(broker) -> None:  # type: ignore[no-untyped-def]
    client = Client(broker)
    header = RequestHeader(request_api_key=18, request_api_version=99, correlation_id=5,
                           client_id="future")
    body = header.encode(2) + b"\x00\x00\x00" + b"\x00"  # a body v99 might have
    client.sock.sendall(struct.pack(">i", len(body)) + body)
    correlation_id, payload = client.receive()
    assert correlation_id == 5
    response = ApiVersionsResponse.decode(payload, 0)
    assert response.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]
    # the connection stays usable
    answer = client.call(18, 3, __import__("protocol.messages.api_versions_request",
                                          fromlist=["x"]).ApiVersionsRequest(), ApiVersionsResponse,
                         flexible=False)
    assert answer.error_code == 0 and {k.api_key for k in answer.api_keys} >= {0, 1, 2, 3, 18, 19, 20}


def test_unsupported_produce_version_gets_unsupported_version(broker) -> None:  # type: ignore[no-untyped-def]
    client = Client(broker)
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[TopicProduceData(
        name="old", partition_data=[PartitionProduceData(index=0, records=batch(b"x"))])])
    response = client.call(0, 2, request, ProduceResponse, flexible=False)
    assert response.responses[0].partition_responses[0].error_code == 35


def test_garbage_and_absurd_frames_close_only_that_connection(broker) -> None:  # type: ignore[no-untyped-def]
    absurd = Client(broker)
    absurd.sock.sendall(struct.pack(">i", 2_000_000_000) + b"xxxx")
    assert absurd.is_closed_by_peer()
    negative = Client(broker)
    negative.sock.sendall(struct.pack(">i", -5))
    assert negative.is_closed_by_peer()
    garbage = Client(broker)
    garbage.sock.sendall(struct.pack(">i", 12) + b"\x7f\x7f" + b"\xff" * 10)  # unknown API key
    assert garbage.is_closed_by_peer()
    truncated = Client(broker)
    truncated.sock.sendall(struct.pack(">i", 3) + b"\x00\x00\x00")  # a header cut short
    assert truncated.is_closed_by_peer()
    healthy = Client(broker)
    assert create(healthy, "still-up").topics[0].error_code == 0
    assert produce(healthy, "still-up", {0: batch(b"ok")}).responses[0].partition_responses[0].error_code == 0
    assert "closing connection" in broker.log()


def test_acks_zero_error_closes_the_connection(broker) -> None:  # type: ignore[no-untyped-def]
    client = Client(broker)
    request = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[TopicProduceData(
        name="__consumer_offsets", partition_data=[PartitionProduceData(index=0, records=batch(b"x"))])])
    client.send(0, 9, request)
    assert client.is_closed_by_peer()


def test_pipelined_requests_are_answered_in_order(broker) -> None:  # type: ignore[no-untyped-def]
    client = Client(broker)
    create(client, "pipe")
    long_poll = FetchRequest(max_wait_ms=300, min_bytes=1_000_000, topics=[FetchTopic(
        topic="pipe", partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1000)])])
    first = client.send(1, 11, long_poll)
    second = client.send(3, 12, MetadataRequest(topics=None))
    assert client.receive()[0] == first
    assert client.receive()[0] == second


def test_long_poll_is_woken_by_an_append(broker) -> None:  # type: ignore[no-untyped-def]
    consumer, producer = Client(broker), Client(broker)
    create(producer, "wake")
    request = FetchRequest(max_wait_ms=20_000, min_bytes=1, topics=[FetchTopic(
        topic="wake", partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=10_000)])])
    started = time.monotonic()
    consumer.send(1, 11, request)
    produce(producer, "wake", {0: batch(b"hello")})
    _, payload = consumer.receive()
    assert time.monotonic() - started < 5
    response = FetchResponse.decode(payload, 11)
    records = response.responses[0].partitions[0].records
    assert records is not None and bytes(records).endswith(b"hello\x00")
