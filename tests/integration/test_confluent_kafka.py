"""librdkafka (confluent-kafka) against a real broker process."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer as _Consumer
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}  # errors only: librdkafka logs every disconnect at level 6


def producer(broker, **config) -> Producer:  # type: ignore[no-untyped-def]
    return Producer({"bootstrap.servers": broker.bootstrap, **QUIET, **config})


def consume(broker, topic: str, count: int, *, partitions: int = 1, timeout: float = 30.0,  # type: ignore[no-untyped-def]
            **config) -> list:
    consumer = _Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
        **QUIET, **config,
    })
    consumer.assign([TopicPartition(topic, index, 0) for index in range(partitions)])
    messages = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                messages.append(message)
    finally:
        consumer.close()
    return messages


def produce_all(p: Producer, topic: str, values: list[bytes], **fields) -> list:  # type: ignore[no-untyped-def]
    reports: list = []

    def on_delivery(error, message) -> None:  # type: ignore[no-untyped-def]
        reports.append((error, message))

    for value in values:
        p.produce(topic, value=value, on_delivery=on_delivery, **fields)
        p.poll(0)
    assert p.flush(30) == 0
    errors = [error for error, _ in reports if error is not None]
    assert not errors, errors[:3]
    return reports


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec_with_keys_headers_and_timestamps(broker, codec: str) -> None:  # type: ignore[no-untyped-def]
    p = producer(broker, **{"compression.type": codec, "linger.ms": 5})
    now = int(time.time() * 1000)
    for index in range(500):
        p.produce(f"codec-{codec}", key=b"k%d" % index, value=b"value-%d" % index * 3,
                  headers=[("h1", b"x%d" % index), ("h2", None)], timestamp=now - 1000 + index)
    assert p.flush(30) == 0
    messages = consume(broker, f"codec-{codec}", 500)
    assert [m.offset() for m in messages] == list(range(500))
    for index, m in enumerate(messages):
        assert m.key() == b"k%d" % index
        assert m.value() == b"value-%d" % index * 3
        assert m.headers() == [("h1", b"x%d" % index), ("h2", None)]
        assert m.timestamp()[1] == now - 1000 + index


def test_ten_thousand_messages(broker) -> None:  # type: ignore[no-untyped-def]
    values = [b"%06d" % i for i in range(10_000)]
    produce_all(producer(broker, **{"linger.ms": 10}), "many", values)
    assert [m.value() for m in consume(broker, "many", 10_000)] == values


def test_large_messages(broker) -> None:  # type: ignore[no-untyped-def]
    values = [bytes([i]) * 900_000 for i in range(5)]
    produce_all(producer(broker, **{"message.max.bytes": 1_000_000}), "large", values)
    got = consume(broker, "large", 5, **{"fetch.max.bytes": 1_000_000,
                                          "max.partition.fetch.bytes": 100_000})
    assert [m.value() for m in got] == values


def test_many_partitions(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic("wide", num_partitions=16, replication_factor=1)])["wide"].result(10)
    p = producer(broker)
    for index in range(1600):
        p.produce("wide", value=b"%d" % index, partition=index % 16)
    assert p.flush(30) == 0
    got = consume(broker, "wide", 1600, partitions=16)
    assert sorted(int(m.value()) for m in got) == list(range(1600))
    assert {m.partition() for m in got} == set(range(16))


def test_auto_create_on_produce_uses_num_partitions(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**{"num.partitions": "3"})
    produce_all(producer(broker), "auto", [b"a", b"b"])
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET}).list_topics(timeout=10)
    assert len(metadata.topics["auto"].partitions) == 3
    assert metadata.brokers[1].port == broker.port


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker, acks: str) -> None:  # type: ignore[no-untyped-def]
    values = [b"m%d" % i for i in range(200)]
    produce_all(producer(broker, acks=acks, **{"linger.ms": 1}), f"acks-{acks}", values)
    assert [m.value() for m in consume(broker, f"acks-{acks}", 200)] == values


def test_offsets_for_times(broker) -> None:  # type: ignore[no-untyped-def]
    p = producer(broker, **{"linger.ms": 0})
    base = int(time.time() * 1000) - 100_000
    for index in range(100):
        p.produce("times", value=b"%d" % index, timestamp=base + index * 1000)
        p.flush(10)  # one batch each, so lookups land inside the time index
    consumer = _Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", **QUIET})
    try:
        wanted = [TopicPartition("times", 0, base + 42_500), TopicPartition("times", 0, base)]
        first, zero = consumer.offsets_for_times(wanted[:1], timeout=10) + consumer.offsets_for_times(
            wanted[1:], timeout=10)
        assert first.offset == 43
        assert zero.offset == 0
        late = consumer.offsets_for_times([TopicPartition("times", 0, base + 10**9)], timeout=10)
        assert late[0].offset == -1  # nothing that late: the end (librdkafka reports -1)
        low, high = consumer.get_watermark_offsets(TopicPartition("times", 0), timeout=10)
        assert (low, high) == (0, 100)
    finally:
        consumer.close()


def test_restart_keeps_data_and_topics(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic("kept", num_partitions=2, replication_factor=1,
                                  config={"retention.ms": "86400000"})])["kept"].result(10)
    values = [b"v%d" % i for i in range(300)]
    produce_all(producer(broker), "kept", values, partition=1)
    topic_id_before = _topic_id(broker, "kept")
    broker.restart()
    assert _topic_id(broker, "kept") == topic_id_before
    assert [m.value() for m in consume(broker, "kept", 300, partitions=2)] == values
    produce_all(producer(broker), "kept", [b"after"], partition=1)
    got = consume(broker, "kept", 301, partitions=2)
    assert got[-1].offset() == 300


def _topic_id(broker, topic: str) -> str:  # type: ignore[no-untyped-def]
    import socket
    import struct

    from protocol.frames import encode_request
    from protocol.messages.metadata_request import MetadataRequest as Request
    from protocol.messages.metadata_request import MetadataRequestTopic
    from protocol.messages.metadata_response import MetadataResponse
    from protocol.messages.request_header import RequestHeader

    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=7,
                           client_id="test")
    frame = encode_request(header, Request(topics=[MetadataRequestTopic(name=topic)],
                                           allow_auto_topic_creation=False))
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        sock.sendall(frame)
        size = struct.unpack(">i", _read(sock, 4))[0]
        body = _read(sock, size)
    response = MetadataResponse.decode(body[5:], 12)  # correlation id + empty tagged fields
    assert response.topics[0].error_code == 0
    return str(response.topics[0].topic_id)


def _read(sock, count: int) -> bytes:  # type: ignore[no-untyped-def]
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data
