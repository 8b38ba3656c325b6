"""Samsa serves a log directory Apache Kafka 4.3.1 wrote (issue 14): the other way round from
``test_dump_log.py``.

A real Kafka node (KRaft, combined mode, ``compat.apache_kafka``) is written to with
confluent-kafka — plain records in two partitions past ``log.segment.bytes`` (1 MiB, Kafka 4's
least) so segments roll, a zstd topic, a committed, an aborted and a committed transaction, a
group's committed offsets — and everything is read back from Kafka. Kafka is then stopped
(SIGTERM: a clean shutdown) or killed (SIGKILL), and a Samsa node (KRaft, the same node id,
``log.dirs`` = Kafka's data directory) starts on its files: Kafka's metadata log and snapshot
(topics, topic ids, configs, the cluster id in meta.properties, features — Kafka 4.3 finalizes
``eligible.leader.replicas.version``, so Samsa's controller elects from the KIP-966 ELR Kafka
left), its segments, indexes, checkpoints, producer snapshots, ``.txnindex``, and
``__consumer_offsets``. Samsa must serve the same offsets, records and timestamps (read_committed
skipping the aborted ones), the group's offsets, take new produces after Kafka's log end, and a
new transaction of the transactional id Kafka's coordinator knew.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from compat.apache_kafka import ApacheKafka, free_port
from storage.clean_shutdown import read_broker_epoch
from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.conftest import TEST_HEAP

pytestmark = pytest.mark.timeout(180)

TOPICS = {"plain": 2, "comp": 1, "txn": 1}
GROUP = "kafka-group"
COMMITTED = {("plain", 0): 123, ("plain", 1): 77}
TRANSACTIONAL_ID = "kafka-txn"
KAFKA_CONFIGS = {
    "log.segment.bytes": "1048576",  # Kafka 4's least: the plain partitions roll
    "log.index.interval.bytes": "4096",  # index entries in every segment
    "metadata.log.max.record.bytes.between.snapshots": "1000",  # a metadata snapshot too
    "metadata.log.max.snapshot.interval.ms": "500",
}

Record = tuple[int, bytes | None, bytes | None, int]  # offset, key, value, timestamp


@dataclass
class Written:
    """What Kafka served before it went down."""

    records: dict[tuple[str, int, str], list[Record]]  # (topic, partition, isolation) -> records
    watermarks: dict[tuple[str, int], tuple[int, int]]
    topic_ids: dict[str, str]


def write(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([
        NewTopic("plain", 2, 1), NewTopic("comp", 1, 1, config={"compression.type": "producer"}),
        NewTopic("txn", 1, 1)])
    for future in futures.values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(2600):  # ~1.1 MiB a partition
        producer.produce("plain", key=f"k{i}".encode(), value=f"v{i:05d}".encode() * 140,
                         partition=i % 2, timestamp=1_700_000_000_000 + i)
    compressed = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd",
                           "linger.ms": 20})
    for i in range(100):
        compressed.produce("comp", value=f"z{i}".encode() * 10)
    assert producer.flush(30) == 0 and compressed.flush(30) == 0
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID})
    transactional.init_transactions(30)
    for prefix, commit in (("commit", True), ("abort", False), ("commit2", True)):
        transactional.begin_transaction()
        for i in range(5):
            transactional.produce("txn", value=f"{prefix}-{i}".encode())
        transactional.flush(30)
        (transactional.commit_transaction if commit else transactional.abort_transaction)(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    offsets = [TopicPartition(t, p, o) for (t, p), o in COMMITTED.items()]
    for attempt in range(20):  # the group coordinator may still be loading its partition
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            break
        except KafkaException as error:
            retriable = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
            if attempt == 19 or error.args[0].code() not in retriable:
                raise
            time.sleep(0.25)
    consumer.close()


def read(bootstrap: str) -> Written:
    records = {}
    watermarks = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                             "isolation.level": isolation, "enable.auto.commit": False})
        for topic, partitions in TOPICS.items():
            if isolation == "read_uncommitted" and topic != "txn":
                continue  # the same records either way
            for partition in range(partitions):
                marks = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
                watermarks[(topic, partition)] = marks
                records[(topic, partition, isolation)] = consume(consumer, topic, partition,
                                                                 marks[1])
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures end
    metadata = admin.describe_topics(TopicCollection(list(TOPICS)))
    topic_ids = {name: str(future.result(10).topic_id) for name, future in metadata.items()}
    return Written(records, watermarks, topic_ids)


def consume(consumer: Consumer, topic: str, partition: int, end: int) -> list[Record]:
    consumer.assign([TopicPartition(topic, partition, 0)])
    got: list[Record] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        batch = consumer.consume(500, 1)
        for message in batch:
            assert message.error() is None, message.error()
            got.append((message.offset() or 0, message.key(), message.value(),
                        message.timestamp()[1]))
        position = consumer.position([TopicPartition(topic, partition)])[0].offset
        if (got and got[-1][0] >= end - 1) or position >= end:
            break
    return got


def samsa_on(data: Path, log: Path) -> BrokerProcess:
    """Samsa in KRaft combined mode as node 1 of Kafka's cluster, on Kafka's data directory."""
    controller_port = free_port()
    settings = {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{controller_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
        # after a kill the new incarnation registers once the old one's session expires
        "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
    }
    return BrokerProcess(log_dir=data, overrides=settings, stderr_path=log).start()


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)  # a remote broker's metadata: nothing to await but asking again


def serving(bootstrap: str) -> bool:
    """Every partition has leader 1 and answers ListOffsets (after a kill the old incarnation's
    session must expire before the new one registers, as in Kafka: DUPLICATE_BROKER_REGISTRATION
    until ``broker.session.timeout.ms``)."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
    if not all(name in metadata.topics and len(metadata.topics[name].partitions) == count
               and all(p.leader == 1 for p in metadata.topics[name].partitions.values())
               for name, count in TOPICS.items()):
        return False
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        for name, count in TOPICS.items():
            for partition in range(count):
                consumer.get_watermark_offsets(TopicPartition(name, partition), 2)
    except KafkaException:
        return False
    finally:
        consumer.close()
    return True


def check_samsa_serves(samsa: BrokerProcess, written: Written) -> None:
    wait_for(lambda: serving(samsa.bootstrap), "Samsa to lead Kafka's partitions", 45)
    served = read(samsa.bootstrap)
    assert served.topic_ids == written.topic_ids
    assert served.watermarks == written.watermarks
    for key, records in written.records.items():
        assert served.records[key] == records, key
    committed = [r[2] or b"" for r in served.records[("txn", 0, "read_committed")]]
    assert [v.decode() for v in committed] == [f"{p}-{i}" for p in ("commit", "commit2")
                                               for i in range(5)]
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": GROUP})
    offsets = consumer.committed([TopicPartition(t, p) for t, p in COMMITTED], timeout=15)
    consumer.close()
    assert {(o.topic, o.partition): o.offset for o in offsets} == COMMITTED
    check_new_writes(samsa.bootstrap, written)


def check_new_writes(bootstrap: str, written: Written) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: list[int] = []
    for _ in range(3):
        producer.produce("plain", value=b"after", partition=0,
                         on_delivery=lambda error, message: delivered.append(message.offset() or 0))
    assert producer.flush(30) == 0
    end = written.watermarks[("plain", 0)][1]
    assert delivered == [end, end + 1, end + 2]
    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID})
    transactional.init_transactions(30)  # fences Kafka's epoch of the id, from its state log
    transactional.begin_transaction()
    transactional.produce("txn", value=b"samsa-commit")
    transactional.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "isolation.level": "read_committed"})
    txn_end = written.watermarks[("txn", 0)][1]
    records = consume(consumer, "txn", 0, txn_end + 2)
    consumer.close()
    assert records[-1][2] == b"samsa-commit"


# The kill -9 case is `slow` (~24 s, `make slow`): make test keeps the clean one.
@pytest.mark.parametrize("stop", ["clean", pytest.param("killed", marks=pytest.mark.slow)])
def test_samsa_serves_kafkas_directory(tmp_path: Path, stop: str) -> None:
    kafka = ApacheKafka(tmp_path / "kafka", heap=TEST_HEAP, configs=KAFKA_CONFIGS).start()
    try:
        write(kafka.bootstrap)
        written = read(kafka.bootstrap)
    finally:
        code = kafka.stop() if stop == "clean" else kafka.kill()
    assert code in (0, 143, -9), code
    assert len(list((kafka.data / "plain-0").glob("*.log"))) > 1, "no segment rolled"
    # Kafka's clean-shutdown marker names its broker epoch: Samsa's registration proves a clean
    # shutdown with it and is elected from the ELR; after a kill there is none, and the last
    # known leader is elected (RECOVERING) once the old incarnation's session is fenced.
    epoch = read_broker_epoch(kafka.data)
    assert (epoch is not None and epoch > 0) if stop == "clean" else epoch is None
    samsa = samsa_on(kafka.data, tmp_path / "samsa.log")
    try:
        check_samsa_serves(samsa, written)
    finally:
        assert samsa.stop() == 0, samsa.log()[-5000:]
    assert "Traceback" not in samsa.log()
