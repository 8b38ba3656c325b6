"""What the Spark tests share: topics made and filled with confluent-kafka (an independent
client), segment layouts read from the broker's files on disk and log start offsets asked
through confluent-kafka (not through Samsa's own ``ClusterView``, which plans the reads under
test), reads through ``format("samsa")``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

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


def segment_base_offsets(broker: Any, topic: str, partition: int) -> list[int]:
    """The base offsets of a partition's segments, from the names of its ``.log`` files in the
    broker's log directory (``<topic>-<partition>/<20-digit base offset>.log``, as Kafka)."""
    directory = Path(broker.log_dir) / f"{topic}-{partition}"
    return sorted(int(path.name.removesuffix(".log")) for path in directory.glob("*.log"))


def segments_in_range(base_offsets: list[int], end_offset: int, start: int, end: int) -> int:
    """How many segments hold offsets in ``[start, end)``: each holds those from its base offset
    to the next one's, the last to ``end_offset`` (the partition's end)."""
    ends = [*base_offsets[1:], end_offset]
    return sum(1 for base, stop in zip(base_offsets, ends, strict=True)
               if max(base, start) < min(stop, end))


def log_start_offset(broker: Any, topic: str, partition: int) -> int:
    """The partition's log start offset (its low watermark), asked through confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks", **QUIET})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)
    finally:
        consumer.close()
    return int(low)


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
