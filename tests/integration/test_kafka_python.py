"""kafka-python against a real broker process."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def consume(broker, topic: str, count: int, *, partitions: int = 1, timeout: float = 30.0) -> list:  # type: ignore[no-untyped-def]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             group_id=None, fetch_max_wait_ms=100)
    consumer.assign([TopicPartition(topic, index) for index in range(partitions)])
    consumer.seek_to_beginning()
    messages: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                messages += records
    finally:
        consumer.close()
    return sorted(messages, key=lambda m: (m.partition, m.offset))


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec(broker, codec: str | None) -> None:  # type: ignore[no-untyped-def]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec,
                             linger_ms=5)
    now = int(time.time() * 1000)
    futures = [
        producer.send(f"kp-{codec}", key=b"k%d" % i, value=b"v%d" % i,
                      headers=[("h", b"%d" % i)], timestamp_ms=now + i)
        for i in range(300)
    ]
    producer.flush(30)
    offsets = [future.get(10).offset for future in futures]
    producer.close()
    assert offsets == list(range(300))
    got = consume(broker, f"kp-{codec}", 300)
    assert [(m.key, m.value, m.headers, m.timestamp) for m in got] == [
        (b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], now + i) for i in range(300)
    ]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks_and_ten_thousand_messages(broker, acks) -> None:  # type: ignore[no-untyped-def]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, linger_ms=5)
    count = 10_000 if acks == 1 else 500
    for i in range(count):
        producer.send("kp-acks", value=b"%d" % i)
    producer.flush(60)
    producer.close()
    assert [int(m.value) for m in consume(broker, "kp-acks", count)] == list(range(count))


def test_admin_create_and_delete_topics(broker) -> None:  # type: ignore[no-untyped-def]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("kp-admin", num_partitions=4, replication_factor=1)])
        assert "kp-admin" in admin.list_topics()
        admin.delete_topics(["kp-admin"])
        assert "kp-admin" not in admin.list_topics()
    finally:
        admin.close()


def test_large_message_and_many_partitions(broker) -> None:  # type: ignore[no-untyped-def]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp-wide", num_partitions=16, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=1_000_000)
    big = b"x" * 900_000
    producer.send("kp-wide", value=big, partition=3)
    for i in range(160):
        producer.send("kp-wide", value=b"%d" % i, partition=i % 16)
    producer.flush(30)
    producer.close()
    got = consume(broker, "kp-wide", 161, partitions=16)
    assert sum(1 for m in got if m.value == big) == 1
    assert sorted(int(m.value) for m in got if m.value != big) == list(range(160))
