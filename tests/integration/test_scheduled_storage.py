"""The broker runs the storage engine's scheduled work: compaction, retention, checkpoints."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration


def eventually(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Await a condition the broker reaches on its own schedule (checked, not slept on)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def create(bootstrap: str, name: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(10)


def read_all(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    records = []
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, "no end of partition"
            if message.error():
                break
            records.append((message.key(), message.value()))
    finally:
        consumer.close()
    return records


def test_the_broker_compacts_a_compacted_topic(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**{"log.cleaner.backoff.ms": "50"})
    create(broker.bootstrap, "users", {"cleanup.policy": "compact", "segment.bytes": "600",
                                       "min.cleanable.dirty.ratio": "0.01"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for round_number in range(40):
        for key in (b"alice", b"bob"):
            producer.produce("users", key=key, value=b"%s-%d" % (key, round_number))
        producer.flush(10)
    # The cleaner may already have run while producing: only the outcome is asserted.
    eventually(lambda: len(read_all(broker.bootstrap, "users")) < 30)
    latest = dict(read_all(broker.bootstrap, "users"))
    assert latest == {b"alice": b"alice-39", b"bob": b"bob-39"}


def test_the_broker_enforces_retention(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**{"log.retention.check.interval.ms": "50"})
    create(broker.bootstrap, "events", {"retention.bytes": "3000", "segment.bytes": "1024"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for number in range(100):
        producer.produce("events", value=b"%064d" % number)
        producer.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        def earliest() -> int:
            low, _ = consumer.get_watermark_offsets(TopicPartition("events", 0), timeout=10)
            return int(low)

        eventually(lambda: earliest() > 0)
        low, high = consumer.get_watermark_offsets(TopicPartition("events", 0), timeout=10)
        assert high == 100 and 0 < low < 100
    finally:
        consumer.close()


def test_the_broker_checkpoints_high_watermarks_and_restores_them(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**{"replica.high.watermark.checkpoint.interval.ms": "50"})
    create(broker.bootstrap, "orders", {})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for number in range(3):
        producer.produce("orders", value=b"%d" % number)
    producer.flush(10)
    path = broker.log_dir / "replication-offset-checkpoint"
    eventually(lambda: path.exists() and b"orders 0 3\n" in path.read_bytes())
    broker.restart()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("orders", 0), timeout=10) == (0, 3)
    finally:
        consumer.close()
