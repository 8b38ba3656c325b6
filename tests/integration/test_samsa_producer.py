"""Samsa's Producer and AsyncProducer against a real broker process, checked with
confluent-kafka (librdkafka) as the consumer and as the reference partitioner."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.errors import (
    KafkaTimeoutError,
    MessageTooLargeError,
    NoBrokersAvailableError,
    UnknownTopicOrPartitionError,
)
from samsa.producer import AsyncProducer, Producer

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(30)


def consume_everything(bootstrap: str, topic: str, partitions: int = 1) -> list:  # type: ignore[type-arg]
    """Every record of the topic, up to the high watermarks read first: exactly what the log
    holds, so duplicates show."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}",
                         "enable.auto.commit": False, **QUIET})
    try:
        ends = {p: consumer.get_watermark_offsets(ConfluentTopicPartition(topic, p), 10)[1]
                for p in range(partitions)}
        consumer.assign([ConfluentTopicPartition(topic, p, 0) for p in range(partitions)])
        messages: list = []  # type: ignore[type-arg]
        wanted = sum(ends.values())
        deadline = time.monotonic() + 60
        while len(messages) < wanted and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                messages.append(message)
        assert len(messages) == wanted
        return messages
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_reaches_a_confluent_consumer(broker, codec: str) -> None:  # type: ignore[no-untyped-def]
    topic = f"samsa-{codec}"
    now = int(time.time() * 1000)
    with Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                   "linger.ms": 20}) as producer:
        futures = [producer.send(topic, b"value-%d" % i * 5, key=b"k%d" % i,
                                 timestamp_ms=now - 1000 + i,
                                 headers=[("h1", b"x%d" % i), ("h2", None)])
                   for i in range(300)]
        metadata = [future.result(30) for future in futures]
    assert [m.offset for m in metadata] == list(range(300))
    assert {(m.topic, m.partition) for m in metadata} == {(topic, 0)}
    assert metadata[7].timestamp == now - 1000 + 7
    assert (metadata[7].serialized_key_size, metadata[7].serialized_value_size) == (2, 35)
    messages = consume_everything(broker.bootstrap, topic)
    for index, message in enumerate(messages):
        assert message.offset() == index
        assert message.key() == b"k%d" % index
        assert message.value() == b"value-%d" % index * 5
        assert message.headers() == [("h1", b"x%d" % index), ("h2", None)]
        assert message.timestamp()[1] == now - 1000 + index


def test_strings_and_serializers(broker) -> None:  # type: ignore[no-untyped-def]
    with Producer(bootstrap_servers=broker.bootstrap, value_serializer=lambda v: repr(v).encode(),
                  linger_ms=0) as producer:
        producer.send("typed", {"n": 1}, key="ключ").result(30)
    with Producer(bootstrap_servers=broker.bootstrap) as producer:
        producer.send("typed", "naïve", key=memoryview(b"mv")).result(30)
        producer.send("typed", None, key=None).result(30)
        with pytest.raises(TypeError, match="value must be bytes, str or None"):
            producer.send("typed", 42)
    messages = consume_everything(broker.bootstrap, "typed")
    assert [(m.key(), m.value()) for m in messages] == [
        ("ключ".encode(), b"{'n': 1}"), (b"mv", "naïve".encode()), (None, None)]


def test_keyed_records_land_where_confluent_puts_them(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "keyed-samsa", 6)
    create_topic(broker.bootstrap, "keyed-librdkafka", 6)
    keys = [b"user-%d" % i for i in range(200)] + [b"", b"\x00\xff" * 7]
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        ours = [producer.send("keyed-samsa", b"v", key=key).result(30).partition for key in keys]
    reference = ConfluentProducer({"bootstrap.servers": broker.bootstrap,
                                   "partitioner": "murmur2_random", **QUIET})
    theirs: dict[bytes, int] = {}
    for key in keys:
        reference.produce("keyed-librdkafka", b"v", key=key,
                          on_delivery=lambda error, m: theirs.__setitem__(m.key(), m.partition()))
    assert reference.flush(30) == 0
    assert ours == [theirs[key] for key in keys]
    assert len(set(ours)) == 6


def test_null_keys_stick_to_a_partition_per_batch(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "sticky", 4)
    # Kafka's built-in partitioner (KIP-794): a null-key record goes to the sticky partition,
    # which moves on once batch.size bytes went to it (and its batch is complete) or twice that.
    # A linger far longer than the test: how the records split does not depend on timing.
    with Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 2000,
                   "linger.ms": 60_000}) as producer:
        futures = [producer.send("sticky", b"x" * 100) for _ in range(400)]
        producer.flush()
    partitions = [future.result().partition for future in futures]
    runs = [len(list(group)) for _, group in itertools.groupby(partitions)]
    # ~110 bytes a record: a partition keeps at least 2000 / 110 records in a row; a run may be
    # longer (twice that before it must move on, or the draw picks the same partition again)
    assert min(runs[:-1]) >= 2000 // 110
    assert len(set(partitions)) > 1  # it moves on (10 or more draws, each 3/4 to move)


def test_idempotent_producer_across_a_broker_restart(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    create_topic(broker.bootstrap, "exactly-once", 1)
    count = 20_000
    acknowledged = threading.Event()
    delivered: list[int] = []

    def on_delivery(metadata, error) -> None:  # type: ignore[no-untyped-def]
        if error is None:
            delivered.append(metadata.offset)
            if len(delivered) == 3000:
                acknowledged.set()

    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2, "batch.size": 4096,
                   "request.timeout.ms": 5000, "retry.backoff.ms": 50}) as producer:
        for index in range(count // 2):
            producer.send("exactly-once", b"%06d" % index, partition=0, on_delivery=on_delivery)
        assert acknowledged.wait(60)
        broker.restart()  # records in flight and queued while it is down
        for index in range(count // 2, count):
            producer.send("exactly-once", b"%06d" % index, partition=0, on_delivery=on_delivery)
        producer.flush(90)
    assert sorted(delivered) == list(range(count))
    values = [m.value() for m in consume_everything(broker.bootstrap, "exactly-once")]
    assert values == [b"%06d" % index for index in range(count)]  # in order, no duplicate


@pytest.mark.parametrize("acks", ["0", "1"])
def test_acks_0_and_1(broker, acks: str) -> None:  # type: ignore[no-untyped-def]
    topic = f"acks-{acks}"
    create_topic(broker.bootstrap, topic)
    with Producer({"bootstrap.servers": broker.bootstrap, "acks": acks}) as producer:
        assert producer.config["enable.idempotence"] is False  # as the Java client decides
        futures = [producer.send(topic, b"%d" % i) for i in range(1000)]
        producer.flush()
        offsets = [future.result().offset for future in futures]
    assert offsets == ([-1] * 1000 if acks == "0" else list(range(1000)))
    values = [m.value() for m in consume_everything(broker.bootstrap, topic)]
    assert values == [b"%d" % i for i in range(1000)]


def test_a_record_over_max_request_size_fails_with_message_too_large(broker) -> None:  # type: ignore[no-untyped-def]
    errors: list[Exception | None] = []
    with Producer({"bootstrap.servers": broker.bootstrap, "max.request.size": 1000}) as producer:
        future = producer.send("too-large", b"x" * 2000,
                               on_delivery=lambda metadata, error: errors.append(error))
        assert isinstance(future.exception(5), MessageTooLargeError)
        assert "max.request.size" in str(future.exception())
        assert isinstance(errors[0], MessageTooLargeError)
        assert producer.send("too-large", b"x" * 500).result(30).offset == 0


def test_the_brokers_message_too_large_fails_one_record_and_splits_batches(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "small-messages", 1, **{"max.message.bytes": "2000"})
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 60_000}) as producer:
        big = producer.send("small-messages", b"x" * 5000)
        producer.flush()
        with pytest.raises(MessageTooLargeError):
            big.result()
        small = [producer.send("small-messages", b"%03d" % i * 20) for i in range(100)]
        producer.flush()  # one 6 KB batch, refused, split until the halves fit
        assert [f.result().offset for f in small] == list(range(100))
    values = [m.value() for m in consume_everything(broker.bootstrap, "small-messages")]
    assert values == [b"%03d" % i * 20 for i in range(100)]


def test_unknown_topic_without_auto_creation(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(auto_create_topics_enable="false")
    with Producer({"bootstrap.servers": broker.bootstrap, "max.block.ms": 500}) as producer:
        with pytest.raises(UnknownTopicOrPartitionError, match=r"auto\.create\.topics\.enable"):
            producer.partitions_for("missing", wait=False)
        with pytest.raises(KafkaTimeoutError, match="not present in metadata after 500 ms"):
            producer.send("missing", b"x")


def test_an_unreachable_broker_is_named() -> None:
    with Producer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 300}) as producer, \
            pytest.raises(NoBrokersAvailableError, match=r"127\.0\.0\.1:1"):
        producer.partitions_for("any", wait=False)


def test_delivery_timeout_and_buffer_memory_while_the_broker_is_down(broker) -> None:  # type: ignore[no-untyped-def]
    with Producer({"bootstrap.servers": broker.bootstrap, "delivery.timeout.ms": 1500,
                   "request.timeout.ms": 1000, "linger.ms": 0, "batch.size": 1000,
                   "buffer.memory": 3000, "max.block.ms": 300}) as producer:
        assert producer.send("down", b"first").result(30).offset == 0
        assert broker.stop() == 0
        started = time.monotonic()
        waiting = [producer.send("down", b"x" * 600) for _ in range(3)]  # 3 batches: all memory
        with pytest.raises(KafkaTimeoutError, match="no buffer memory"):
            producer.send("down", b"y" * 600)  # blocks max.block.ms for memory, then gives up
        for future in waiting:
            with pytest.raises(KafkaTimeoutError):
                future.result(30)
        assert 1.0 < time.monotonic() - started < 20
        producer.close(0)


def test_callbacks_run_on_the_producer_thread_and_close_delivers(broker) -> None:  # type: ignore[no-untyped-def]
    threads: list[str] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 60_000})
    futures = [producer.send("closing", b"%d" % i,
                             on_delivery=lambda m, e: threads.append(threading.current_thread().name))
               for i in range(10)]
    assert not any(f.done() for f in futures)  # lingering
    producer.close()  # delivers what is queued
    assert [f.result(0).offset for f in futures] == list(range(10))
    assert set(threads) == {"samsa-producer"}
    with pytest.raises(Exception, match="closed"):
        producer.send("closing", b"late")


def test_async_producer(broker) -> None:  # type: ignore[no-untyped-def]
    async def main() -> list[int]:
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=1) as producer:
            assert await producer.partitions_for("async") == [0]
            futures = [await producer.send("async", b"%d" % i, key=b"k") for i in range(50)]
            await producer.flush()
            return [(await future).offset for future in futures]

    assert asyncio.run(main()) == list(range(50))
    assert len(consume_everything(broker.bootstrap, "async")) == 50
