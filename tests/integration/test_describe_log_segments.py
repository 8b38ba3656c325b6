"""SamsaDescribeLogSegments (API key 10000) over a raw socket against a real broker: a topic with
small segments, produced to with confluent-kafka, described segment by segment; Kafka clients
still connect although ApiVersions advertises a key they do not know."""

from __future__ import annotations

import itertools
import socket
import struct
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from protocol.codec import Message
from protocol.frames import encode_request
from protocol.messages import response_header_version
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersionsResponse
from protocol.messages.request_header import RequestHeader
from protocol.messages.response_header import ResponseHeader
from protocol.messages.samsa_describe_log_segments_request import (
    DescribeLogSegmentsTopic,
    SamsaDescribeLogSegmentsRequest,
)
from protocol.messages.samsa_describe_log_segments_response import (
    DescribeLogSegmentsPartitionResult,
    SamsaDescribeLogSegmentsResponse,
)

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

QUIET = {"log_level": 3}
TIMEOUT = 15
UNKNOWN_TOPIC_OR_PARTITION = 3
ROUNDS, PER_ROUND = 8, 40
SEGMENT_BYTES, BATCH_BYTES = 4096, 1024


def call(broker: Any, request: Message, response_class: type[Message], version: int) -> Any:
    """One request on a fresh connection, answered with one response."""
    header = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                           correlation_id=7, client_id="layout-test")
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        sock.sendall(encode_request(header, request))
        size = struct.unpack(">i", _read(sock, 4))[0]
        body = memoryview(_read(sock, size))
    header_version = response_header_version(request.API_KEY, version)
    response_header, position = ResponseHeader.decode_from(body, 0, header_version)
    assert response_header.correlation_id == 7
    return response_class.decode(body[position:], version)


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def describe(broker: Any, topics: dict[str, list[int]] | None) -> SamsaDescribeLogSegmentsResponse:
    wanted = None if topics is None else [
        DescribeLogSegmentsTopic(name=name, partitions=indexes) for name, indexes in topics.items()
    ]
    request = SamsaDescribeLogSegmentsRequest(topics=wanted)
    response = call(broker, request, SamsaDescribeLogSegmentsResponse, 0)
    assert isinstance(response, SamsaDescribeLogSegmentsResponse) and response.error_code == 0
    return response


def produce_in_rounds(broker: Any, topic: str) -> list[int]:
    """ROUNDS flushes of PER_ROUND 100-byte records in batches of at most BATCH_BYTES (a batch
    larger than segment.bytes is refused, as by Kafka); returns the timestamps, by offset."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "batch.size": BATCH_BYTES, **QUIET})
    errors: list[object] = []
    base = int(time.time() * 1000) - 60_000
    timestamps = []
    for round_ in range(ROUNDS):
        for i in range(PER_ROUND):
            timestamp = base + round_ * 1000 + (i * 7919) % 500  # not monotonic within a round
            producer.produce(topic, value=b"x" * 100, partition=0, timestamp=timestamp,
                             on_delivery=lambda error, _: error and errors.append(error))
            timestamps.append(timestamp)
        assert producer.flush(TIMEOUT) == 0
    assert errors == []
    return timestamps


def consumed_timestamps(broker: Any, topic: str, count: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, **QUIET})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[int] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                got.append(message.timestamp()[1])
    finally:
        consumer.close()
    return got


def test_the_layout_of_a_multi_segment_topic(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    topic = NewTopic("layout", 2, 1, config={"segment.bytes": str(SEGMENT_BYTES)})
    admin.create_topics([topic])["layout"].result(TIMEOUT)
    timestamps = produce_in_rounds(broker, "layout")
    assert consumed_timestamps(broker, "layout", len(timestamps)) == timestamps

    response = describe(broker, {"layout": [0, 1]})
    assert [t.name for t in response.topics] == ["layout"]
    first, second = response.topics[0].partitions
    assert (first.partition_index, first.error_code) == (0, 0)
    assert (first.log_start_offset, first.high_watermark, first.last_stable_offset) == (
        0, len(timestamps), len(timestamps))
    check_segments(first, timestamps, broker.log_dir / "layout-0")
    assert (second.partition_index, second.error_code, second.high_watermark) == (1, 0, 0)
    assert [(s.base_offset, s.end_offset, s.size_in_bytes) for s in second.segments] == [(0, 0, 0)]

    everything = describe(broker, None)
    assert {(t.name, p.partition_index) for t in everything.topics for p in t.partitions} >= {
        ("layout", 0), ("layout", 1)}


def check_segments(
    partition: DescribeLogSegmentsPartitionResult, timestamps: list[int], directory: Any
) -> None:
    segments = partition.segments
    assert len(segments) > 1
    assert segments[0].base_offset == partition.log_start_offset
    for before, after in itertools.pairwise(segments):
        assert before.end_offset == after.base_offset
    assert segments[-1].end_offset == partition.high_watermark
    for segment in segments:
        held = timestamps[segment.base_offset : segment.end_offset]
        assert held, segment
        assert segment.max_timestamp == max(held)
        assert min(held) <= segment.first_timestamp <= max(held)
        # the segment's file, for readers co-located with log.dirs
        path = directory / f"{segment.base_offset:020d}.log"
        assert path.stat().st_size == segment.size_in_bytes


def test_unknown_topics_and_partitions_get_an_error(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic("known", 1, 1)])["known"].result(TIMEOUT)
    response = describe(broker, {"missing": [0], "known": [0, 5]})
    answers = {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}
    assert answers[("missing", 0)].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert answers[("missing", 0)].segments == []
    assert answers[("known", 5)].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert answers[("known", 0)].error_code == 0 and len(answers[("known", 0)].segments) == 1


def test_kafka_clients_ignore_the_samsa_api_key(broker) -> None:  # type: ignore[no-untyped-def]
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    versions = call(broker, request, ApiVersionsResponse, 3)
    assert (10000, 0, 0) in [(k.api_key, k.min_version, k.max_version) for k in versions.api_keys]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("clients", b"kafka-python").get(TIMEOUT)
    producer.close()
    confluent = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    confluent.produce("clients", b"librdkafka")
    assert confluent.flush(TIMEOUT) == 0
    consumer = KafkaConsumer("clients", bootstrap_servers=broker.bootstrap, group_id=None,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    values = [message.value for _, message in zip(range(2), consumer, strict=False)]
    consumer.close()
    assert values == [b"kafka-python", b"librdkafka"]
