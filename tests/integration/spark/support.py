"""What the Spark tests share: topics made and filled with confluent-kafka (an independent
client), segment layouts asked of the broker, reads through ``format("samsa")``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pyspark_samsa.metadata import ClusterView
from pyspark_samsa.options import parse_source_options
from samsa.segments import PartitionLayout
from samsa.types import TopicPartition

QUIET = {"log_level": 3}
TIMEOUT = 30
SEGMENT_BYTES = 8192  # small segments: many per topic
BATCH_BYTES = 2048  # a batch larger than segment.bytes is refused, as by Kafka


def create_topic(broker: Any, name: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    settings = {"segment.bytes": str(SEGMENT_BYTES), **{k.replace("_", "."): v
                                                         for k, v in config.items()}}
    admin.create_topics([NewTopic(name, partitions, 1, config=settings)])[name].result(TIMEOUT)


def produce(broker: Any, topic: str, records: Iterable[dict[str, Any]]) -> int:
    """Produce ``records`` (dicts of produce() arguments) and wait for every one."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "batch.size": BATCH_BYTES, **QUIET})
    errors: list[Any] = []
    count = 0
    for record in records:
        producer.produce(topic, on_delivery=lambda error, _: error and errors.append(error),
                         **record)
        count += 1
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    assert errors == [], errors[:3]
    return count


def values(topic: str, count: int, *, partitions: int = 1, start: int = 0,
           **extra: Any) -> list[dict[str, Any]]:
    """``count`` records ``value-<n>`` (key ``key-<n>`` for every other one), round robin over
    the partitions."""
    return [{"value": b"value-%06d" % n + b"." * 40, "key": b"key-%d" % n if n % 2 else None,
             "partition": n % partitions, **extra} for n in range(start, start + count)]


def layouts(broker: Any, topic: str) -> dict[TopicPartition, PartitionLayout]:
    view = ClusterView(parse_source_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic}, streaming=False))
    try:
        return view.layouts(view.topic_partitions())
    finally:
        view.close()


def segments_in_range(layout: PartitionLayout, start: int, end: int) -> int:
    return sum(1 for s in layout.segments if max(s.base_offset, start) < min(s.end_offset, end))


def read(spark: Any, broker: Any, **options: str) -> Any:
    reader = spark.read.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def stream(spark: Any, broker: Any, **options: str) -> Any:
    reader = spark.readStream.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def eventually(condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Await a state the broker reaches on its own schedule (checked, not slept on)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)
