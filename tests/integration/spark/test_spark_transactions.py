"""``kafka.isolation.level=read_committed`` through ``format("samsa")``: records of aborted
transactions are left out and "latest" is the last stable offset, in network and file mode,
with transactions written by confluent-kafka's transactional producer (librdkafka)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

from tests.integration.spark.support import QUIET, TIMEOUT, create_topic, produce, read

pytestmark = pytest.mark.integration

COMMITTED = {"kafka.isolation.level": "read_committed"}


def transaction(producer: Producer, topic: str, tag: str, count: int, *, commit: bool) -> None:
    producer.begin_transaction()
    for n in range(count):
        producer.produce(topic, b"%s-%d" % (tag.encode(), n), partition=n % 2)
    producer.flush(TIMEOUT)
    if commit:
        producer.commit_transaction(TIMEOUT)
    else:
        producer.abort_transaction(TIMEOUT)


def transactional(broker: Any, name: str) -> Producer:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": name,
                         "linger.ms": 5, "batch.size": 2048, **QUIET})
    producer.init_transactions(TIMEOUT)
    return producer


def tags(rows: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        tag = bytes(row.value).split(b"-")[0].decode()
        counts[tag] = counts.get(tag, 0) + 1
    return counts


def test_read_committed_leaves_out_aborted_transactions(spark: Any, start_broker: Any) -> None:
    broker = start_broker()
    create_topic(broker, "txn", partitions=2)
    first, second = transactional(broker, "spark-a"), transactional(broker, "spark-b")
    transaction(first, "txn", "kept", 300, commit=True)
    transaction(second, "txn", "dropped", 200, commit=False)
    produce(broker, "txn", [{"value": b"plain-%d" % n, "partition": n % 2} for n in range(50)])
    transaction(first, "txn", "gone", 150, commit=False)
    transaction(second, "txn", "also", 100, commit=True)
    expected = {"kept": 300, "plain": 50, "also": 100}
    everything = {**expected, "dropped": 200, "gone": 150}
    for mode in ({}, {"samsa.logDirs": str(broker.log_dir)}):
        committed = read(spark, broker, subscribe="txn", **COMMITTED, **mode).collect()
        assert tags(committed) == expected, mode
        assert tags(read(spark, broker, subscribe="txn", **mode).collect()) == everything, mode
        # a range starting inside the aborted "gone" transaction (each partition: 150 kept,
        # a marker, 100 dropped, a marker, 25 plain, then "gone" from offset 277)
        inside = read(spark, broker, subscribe="txn", **COMMITTED, **mode,
                      startingOffsets='{"txn": {"0": 290, "1": 290}}').collect()
        assert tags(inside) == {"also": 100}, mode


def test_latest_is_the_last_stable_offset(spark: Any, start_broker: Any) -> None:
    broker = start_broker()
    create_topic(broker, "open", partitions=1)
    produce(broker, "open", [{"value": b"before-%d" % n} for n in range(20)])
    producer = transactional(broker, "spark-open")
    producer.begin_transaction()
    producer.produce("open", b"pending-0", partition=0)
    producer.flush(TIMEOUT)
    produce(broker, "open", [{"value": b"after-%d" % n} for n in range(5)])  # past the LSO
    assert tags(read(spark, broker, subscribe="open", **COMMITTED).collect()) == {"before": 20}
    assert tags(read(spark, broker, subscribe="open").collect()) == {
        "before": 20, "pending": 1, "after": 5}
    producer.commit_transaction(TIMEOUT)
    assert tags(read(spark, broker, subscribe="open", **COMMITTED).collect()) == {
        "before": 20, "pending": 1, "after": 5}
