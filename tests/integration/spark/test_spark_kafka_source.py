"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10) against Samsa: the
path a team moving from Kafka takes, unchanged. Batch and streaming reads see exactly what
confluent-kafka wrote (and what ``format("samsa")`` reads), read_committed skips an aborted
transaction, and ``write.format("kafka")`` produces records confluent-kafka reads back."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from tests.integration.spark.support import QUIET, TIMEOUT, create_topic, produce, read, values

pytestmark = pytest.mark.integration


def kafka_read(spark: Any, broker: Any, topic: str, **options: str) -> Any:
    reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows_of(frame: Any) -> dict[tuple[int, int], tuple[Any, ...]]:
    return {(r.partition, r.offset): (bytes(r.key) if r.key is not None else None, bytes(r.value),
                                      r.timestamp)
            for r in frame.select("partition", "offset", "key", "value", "timestamp").collect()}


def test_spark_kafka_batch_read_sees_every_record_as_the_samsa_source_does(
        spark: Any, broker: Any) -> None:
    create_topic(broker, "spark-kafka", partitions=3)
    records = values("spark-kafka", 900, partitions=3)
    produce(broker, "spark-kafka", records)
    frame = kafka_read(spark, broker, "spark-kafka")
    assert frame.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                             "timestampType"]
    seen = rows_of(frame)
    assert len(seen) == 900
    assert sorted(value for _, value, _ in seen.values()) == sorted(r["value"] for r in records)
    for partition in range(3):  # offsets dense from 0 in every partition
        assert sorted(o for p, o in seen if p == partition) == list(range(300))
    assert seen == rows_of(read(spark, broker, subscribe="spark-kafka"))


def test_spark_kafka_read_committed_skips_an_aborted_transaction(spark: Any, broker: Any) -> None:
    create_topic(broker, "spark-kafka-txn")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "spark-k",
                         **QUIET})
    producer.init_transactions(TIMEOUT)
    for outcome, count in (("commit", 5), ("abort", 7), ("commit", 3)):
        producer.begin_transaction()
        for i in range(count):
            producer.produce("spark-kafka-txn", value=f"{outcome}-{i}".encode())
        assert producer.flush(TIMEOUT) == 0  # written before the abort (librdkafka purges the rest)
        if outcome == "commit":
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)
    committed = kafka_read(spark, broker, "spark-kafka-txn",
                           **{"kafka.isolation.level": "read_committed"})
    assert sorted(bytes(r.value).decode() for r in committed.collect()) == sorted(
        [f"commit-{i}" for i in range(5)] + [f"commit-{i}" for i in range(3)])
    uncommitted = kafka_read(spark, broker, "spark-kafka-txn")
    everything = sorted(bytes(r.value).decode() for r in uncommitted.collect())
    assert sum(value.startswith("abort") for value in everything) == 7, everything


def test_spark_kafka_streaming_reads_the_topic_to_its_end(spark: Any, broker: Any, tmp_path: Any) -> None:
    create_topic(broker, "spark-kafka-stream", partitions=2)
    produce(broker, "spark-kafka-stream", values("spark-kafka-stream", 400, partitions=2))
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", "spark-kafka-stream").option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "150").load())
    query = (stream.selectExpr("partition", "offset").writeStream.format("memory")
             .queryName("spark_kafka_stream").option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    rows = spark.sql("select partition, offset from spark_kafka_stream").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (p, o) for p in range(2) for o in range(200))
    assert len(query.recentProgress) >= 3  # 400 records at most 150 a trigger


def test_spark_kafka_write_produces_records_a_kafka_client_reads(spark: Any, broker: Any) -> None:
    create_topic(broker, "spark-kafka-out", partitions=2)
    frame = spark.createDataFrame([(f"k{i % 5}", f"v{i}") for i in range(200)], ["key", "value"])
    (frame.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", "spark-kafka-out").save())
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "spark-out-check",
                         "auto.offset.reset": "earliest", **QUIET})
    consumer.subscribe(["spark-kafka-out"])
    got: dict[str, str] = {}
    try:
        while len(got) < 200:
            message = consumer.poll(TIMEOUT)
            assert message is not None, f"only {len(got)} of 200 records came back"
            assert message.error() is None, message.error()
            got[message.value().decode()] = message.key().decode()
    finally:
        consumer.close()
    assert got == {f"v{i}": f"k{i % 5}" for i in range(200)}
