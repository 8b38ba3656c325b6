"""Per-key reads against a real broker: ``samsa.Consumer.read_key`` equals a filtered full
scan (every codec, many segments, after a restart from the key index files), and
``subscribe_key`` catches up and then sees a record produced after it started."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.consumer import Consumer
from samsa.errors import UnknownTopicOrPartitionError
from samsa.types import ConsumerRecord, TopicPartition
from tests.integration.cluster_nodes import wait_until

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}
TIMEOUT = 30.0
KEYS = [b"entity-%d" % number for number in range(12)]


def create_topic(broker: Any, name: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(TIMEOUT)


def produce(broker: Any, topic: str, pairs: list[tuple[bytes, bytes]], **config: object) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "batch.size": 2048, **QUIET, **config})
    for key, value in pairs:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(TIMEOUT) == 0


def full_scan(broker: Any, topic: str) -> list[ConsumerRecord]:
    with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        records: list[ConsumerRecord] = []
        while consumer.position(tp) < end:
            records += consumer.poll(1.0)
        return records


def test_read_key_equals_a_filtered_full_scan(start_broker: Any) -> None:
    broker = start_broker()
    create_topic(broker, "streams", **{"segment.bytes": "4096"})
    for number, codec in enumerate(("none", "gzip", "lz4", "zstd", "snappy")):
        produce(broker, "streams", [(KEYS[(i * 7 + number) % len(KEYS)], b"%s-%d" % (
            codec.encode(), i)) for i in range(400)], **{"compression.type": codec})
    scan = full_scan(broker, "streams")
    assert len(scan) == 2000
    assert len(list((broker.log_dir / "streams-0").glob("*.log"))) > 3
    with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
        for key in KEYS[:4]:
            expected = [(r.offset, r.value) for r in scan if r.key == key]
            got = consumer.read_key("streams", 0, key)
            assert [(r.offset, r.value) for r in got] == expected
            middle = expected[len(expected) // 2][0]
            assert [(r.offset, r.value) for r in consumer.read_key("streams", 0, key, middle)] == [
                entry for entry in expected if entry[0] >= middle]
        assert consumer.read_key("streams", 0, b"nobody") == []
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.read_key("streams", 7, KEYS[0])
    assert list((broker.log_dir / "streams-0").glob("*.keyindex"))  # written by the first read

    broker.stop()
    broker.start()
    with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
        expected = [(r.offset, r.value) for r in scan if r.key == KEYS[5]]
        assert [(r.offset, r.value) for r in consumer.read_key("streams", 0, KEYS[5])] == expected


def test_subscribe_key_catches_up_then_stays_live(broker: Any) -> None:
    create_topic(broker, "live", **{"segment.bytes": "8192"})
    produce(broker, "live", [(KEYS[i % 3], b"old-%d" % i) for i in range(300)])
    expected_old = [b"old-%d" % i for i in range(300) if i % 3 == 1]
    seen: queue.Queue[ConsumerRecord] = queue.Queue()
    stop = threading.Event()

    def follow() -> None:
        with Consumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=200) as consumer:
            for record in consumer.subscribe_key("live", 0, KEYS[1]):
                seen.put(record)
                if stop.is_set():
                    return

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    caught_up = [seen.get(timeout=TIMEOUT).value for _ in expected_old]
    assert caught_up == expected_old
    stop.set()  # the next record it yields ends it
    produce(broker, "live", [(KEYS[0], b"other"), (KEYS[1], b"new")])
    live = seen.get(timeout=TIMEOUT)
    assert (live.key, live.value, live.offset) == (KEYS[1], b"new", 301)
    follower.join(TIMEOUT)
    assert not follower.is_alive()


def test_read_key_after_compaction_equals_the_compacted_scan(start_broker: Any) -> None:
    """A compacted topic read by key, cleaned by the broker's own cleaner while its segments have
    key indexes: reads stay equal to a filtered full scan, and the cleaned segments carry key
    indexes of their own (kept through compaction)."""
    broker = start_broker(log_cleaner_backoff_ms="100")
    create_topic(broker, "entities", **{"cleanup.policy": "compact", "segment.bytes": "4096",
                                        "min.cleanable.dirty.ratio": "0.01",
                                        "min.compaction.lag.ms": "0"})
    produce(broker, "entities", [(KEYS[i % 4], b"v-%d" % i) for i in range(600)])
    with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
        before = consumer.read_key("entities", 0, KEYS[1])  # the log is now read by key
        assert [r.value for r in before] == [b"v-%d" % i for i in range(600) if i % 4 == 1]
    directory = broker.log_dir / "entities-0"

    wait_until(lambda: len(full_scan(broker, "entities")) < 600, timeout_s=TIMEOUT,
               what="the cleaner to compact the topic")
    # Before any key read after the cleaning (which would rebuild a missing index): every sealed
    # segment, the cleaned ones included, has its key index.
    logs = sorted(directory.glob("*.log"))
    assert len(logs) > 1
    assert all(log.with_suffix(".keyindex").exists() for log in logs[:-1]), sorted(
        path.name for path in directory.iterdir())
    # The cleaner may still be compacting (backoff 100 ms): a comparison counts only when the
    # scan is the same before and after the key reads, so both saw one state of the log.
    def reads_and_scan() -> tuple[dict[bytes, list[tuple[int, Any]]], list[tuple[int, Any, Any]]] | None:
        scan = [(r.offset, r.key, r.value) for r in full_scan(broker, "entities")]
        with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
            reads = {key: [(r.offset, r.value) for r in consumer.read_key("entities", 0, key)]
                     for key in KEYS[:4]}
        if [(r.offset, r.key, r.value) for r in full_scan(broker, "entities")] != scan:
            return None
        return reads, scan

    stable = wait_until(reads_and_scan, timeout_s=TIMEOUT, what="a scan stable across the key reads")
    assert stable is not None
    reads, scan = stable
    for key in KEYS[:4]:
        expected = [(offset, value) for offset, record_key, value in scan if record_key == key]
        assert expected
        assert reads[key] == expected
