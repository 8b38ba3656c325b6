"""Old clients that Kafka 4 still serves, against a real broker process.

- Debian 12's kcat 1.7.1 (librdkafka 2.0.2), installed by the project (``.ci/install-kcat.sh``,
  which ``make test`` runs): metadata (-L), keyed records with headers produced (-P) and
  consumed (-C) exactly, every compression codec, a consumer group (-G) that commits, and
  offsets by timestamp (-Q). Without kcat these tests fail, saying how to install it.
  librdkafka 2.0.2 decides what a broker can do from ApiVersions ranges that must include
  version 0 of some APIs: it compresses only if Produce v0 is listed (Kafka 4 lists it and
  serves v3+, KAFKA-18659) and joins groups only if FindCoordinator v0 and JoinGroup v0 are
  listed (Kafka 4.0.1+ serves them, KAFKA-19444). It consumes with ListOffsets v2.
- kafka-python 3.0.12 with ``api_version`` pinned, which makes it use the versions that broker
  release had (``kafka.protocol.broker_version_data``): (0, 11) is the oldest whose versions
  Kafka 4 still serves (Produce v3, Fetch v5, ListOffsets v2, OffsetCommit v3, JoinGroup v2);
  (2, 1) is KIP-896's baseline. Each produces, consumes in a group, commits, and a second
  member of the group resumes from the commit.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from protocol.records import CompressionType, iter_batches

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

KCAT_MISSING = ("kcat is not installed: `make test` installs it with .ci/install-kcat.sh "
                "(as root: apt-get install -y kcat)")
GROUP_OVERRIDES = {"group_initial_rebalance_delay_ms": "0"}
CODECS = {"gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
          "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}
PINNED = [(0, 11), (1, 0), (2, 1), (2, 6), (3, 0)]
FIRST_SEGMENT = "00000000000000000000.log"


def kcat(broker: Any, *arguments: str, stdin: str | None = None, timeout: float = 60) -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail(KCAT_MISSING, pytrace=False)
    done = subprocess.run([path, "-b", broker.bootstrap, *arguments], input=stdin,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"kcat {arguments} failed:\n{done.stderr}\n{broker.log()[-3000:]}"
    return done.stdout


def create_topic(broker: Any, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


def stored_codecs(broker: Any, topic: str) -> set[CompressionType]:
    """The compression of every batch in the topic's first partition, read from its segment."""
    data = (broker.log_dir / f"{topic}-0" / FIRST_SEGMENT).read_bytes()
    return {batch.header.compression for batch in iter_batches(data)}


def keyed_lines(count: int, width: int = 1) -> str:
    return "".join(f"key-{i}:{f'value-{i}-' * width}\n" for i in range(count))


# ---- kcat ----------------------------------------------------------------------------------


def test_kcat_is_debians_old_one() -> None:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail(KCAT_MISSING, pytrace=False)
    version = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=30).stdout
    # What these tests are about: an old librdkafka's view of ApiVersions.
    assert re.search(r"Version 1\.7\.1 .*librdkafka 2\.0\.2", version), version


def test_kcat_lists_the_broker_and_its_topics(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "kcat-listed", 3)
    listing = json.loads(kcat(broker, "-L", "-J"))
    assert [b["name"] for b in listing["brokers"]] == [broker.bootstrap]
    (topic,) = [t for t in listing["topics"] if t["topic"] == "kcat-listed"]
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]


def test_kcat_produces_and_consumes_keyed_records_with_headers(broker) -> None:  # type: ignore[no-untyped-def]
    kcat(broker, "-P", "-t", "kcat-keyed", "-K:", "-H", "origin=kcat", stdin=keyed_lines(5))
    out = kcat(broker, "-C", "-t", "kcat-keyed", "-o", "beginning", "-e",
               "-f", "%k|%s|%o|%h\n")
    assert out.splitlines() == [f"key-{i}|value-{i}-|{i}|origin=kcat" for i in range(5)]


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_compresses_with_every_codec(broker, codec: str) -> None:  # type: ignore[no-untyped-def]
    topic = f"kcat-{codec}"
    lines = keyed_lines(50, width=20)  # repetitive: compressed is smaller, so librdkafka keeps it
    kcat(broker, "-P", "-t", topic, "-K:", "-z", codec, stdin=lines)
    assert stored_codecs(broker, topic) == {CODECS[codec]}
    out = kcat(broker, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k:%s\n")
    assert out == lines


def test_kcat_consumes_in_a_group_and_commits(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**GROUP_OVERRIDES)
    create_topic(broker, "kcat-group", 2)
    for partition in (0, 1):
        kcat(broker, "-P", "-t", "kcat-group", "-p", str(partition), "-K:",
             stdin=keyed_lines(3 + partition))
    out = kcat(broker, "-G", "kcat-group-g", "kcat-group", "-e",
               "-X", "auto.offset.reset=earliest", "-f", "%p %o %k\n")
    assert sorted(out.splitlines()) == sorted(
        [f"0 {i} key-{i}" for i in range(3)] + [f"1 {i} key-{i}" for i in range(4)])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        committed = admin.list_group_offsets("kcat-group-g")["kcat-group-g"]
    finally:
        admin.close()
    assert {tp.partition: meta.offset for tp, meta in committed.items()} == {0: 3, 1: 4}


def test_kcat_queries_offsets_by_timestamp(broker) -> None:  # type: ignore[no-untyped-def]
    before_ms = int(time.time() * 1000) - 60_000
    kcat(broker, "-P", "-t", "kcat-times", "-K:", stdin=keyed_lines(3))

    def offset_for(timestamp: int) -> int:
        answer = json.loads(kcat(broker, "-Q", "-J", "-t", f"kcat-times:0:{timestamp}"))
        return answer["kcat-times"]["0"]["offset"]  # type: ignore[no-any-return]

    assert offset_for(-2) == 0  # earliest
    assert offset_for(-1) == 3  # latest
    assert offset_for(before_ms) == 0
    assert offset_for(before_ms + 3_600_000) == -1  # nothing that late: not found


# ---- kafka-python pinned to old broker releases ----------------------------------------------


def consume(consumer: KafkaConsumer, count: int, timeout: float = 30.0) -> list[Any]:
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            records += batch
    return records


@pytest.mark.parametrize("api_version", PINNED, ids=lambda v: ".".join(map(str, v)))
def test_kafka_python_pinned_produces_consumes_and_commits(start_broker, api_version) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**GROUP_OVERRIDES)
    topic, group = "pinned", "pinned-group"
    partition = TopicPartition(topic, 0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version)
    sent_at = int(time.time() * 1000)
    futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
               for i in range(10)]
    producer.flush(30)
    assert [f.get(10).offset for f in futures] == list(range(10))

    def member() -> KafkaConsumer:
        return KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                             api_version=api_version, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_wait_ms=100)

    first = member()
    got = consume(first, 10)
    assert [(r.key, r.value, r.offset) for r in got] == [
        (b"k%d" % i, b"v%d" % i, i) for i in range(10)]
    first.commit()
    assert first.committed(partition) == 10
    assert first.end_offsets([partition]) == {partition: 10}
    assert first.offsets_for_times({partition: sent_at - 60_000})[partition].offset == 0
    first.close()

    producer.send(topic, key=b"k10", value=b"v10", partition=0)
    producer.flush(30)
    producer.close()
    second = member()
    assert [r.offset for r in consume(second, 1)] == [10]  # resumes from the commit
    second.close()
    assert "Traceback" not in broker.log(), broker.log()
