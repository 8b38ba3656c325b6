"""Samsa's ``Consumer`` reading transactional data written by confluent-kafka's transactional
producer: read_committed sees committed transactions only (never aborted records or the
COMMIT/ABORT markers), read_uncommitted sees every data record."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from samsa.consumer import Consumer
from samsa.types import TopicPartition

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}
TIMEOUT = 30.0


def write_transactions(bootstrap: str, topic: str) -> None:
    """Three transactions on partition 0: committed (c0..c9), aborted (a0..a9), committed
    (d0..d4); the log then holds 25 data records and 3 control markers."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn-reader",
                         **QUIET})
    producer.init_transactions(TIMEOUT)
    for prefix, count, commit in (("c", 10, True), ("a", 10, False), ("d", 5, True)):
        producer.begin_transaction()
        for i in range(count):
            producer.produce(topic, value=f"{prefix}{i}".encode(), partition=0)
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            assert producer.flush(TIMEOUT) == 0  # written before the abort (not purged unsent)
            producer.abort_transaction(TIMEOUT)


def read_all(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    consumer = Consumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                        enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning(TopicPartition(topic, 0))
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        # Read until the position passes the last marker (offset 27), so nothing is left.
        while consumer.position(TopicPartition(topic, 0)) < 28:
            assert time.monotonic() < deadline, f"read {len(values)} of {expected} records"
            values += [record.value for record in consumer.poll(0.5)]
    finally:
        consumer.close()
    return values


def test_read_committed_skips_aborted_records_and_markers(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    write_transactions(broker.bootstrap, "txn-topic")
    committed = read_all(broker.bootstrap, "txn-topic", "read_committed", 15)
    assert committed == [f"c{i}".encode() for i in range(10)] + [f"d{i}".encode() for i in range(5)]
    everything = read_all(broker.bootstrap, "txn-topic", "read_uncommitted", 25)
    assert everything == ([f"c{i}".encode() for i in range(10)]
                          + [f"a{i}".encode() for i in range(10)]
                          + [f"d{i}".encode() for i in range(5)])
