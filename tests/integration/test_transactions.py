"""Transactions against a real broker process: confluent-kafka's (librdkafka) and kafka-python's
transactional producers, read_committed and read_uncommitted consumers, offsets sent to a
transaction, fencing, the transaction timeout, and a broker restart in the middle."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_offsets_response import ListOffsetsResponse
from tests.integration.test_bad_input import Client
from tests.integration.test_confluent_kafka import QUIET, producer
from tests.integration.test_scheduled_storage import eventually

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

PARTITIONS = 3


def create_topic(broker, name: str, partitions: int = PARTITIONS) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(10)


def transactional(broker, transactional_id: str, **config):  # type: ignore[no-untyped-def]
    p = producer(broker, **{"transactional.id": transactional_id, **config})
    p.init_transactions(30)
    return p


def read_all(broker, topic: str, isolation: str, *, partitions: int = PARTITIONS,  # type: ignore[no-untyped-def]
             timeout: float = 20.0) -> list[bytes]:
    """Every value up to the end of each partition (for read_committed: its LSO)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader",
                         "isolation.level": isolation, "enable.partition.eof": True,
                         "enable.auto.commit": False, **QUIET})
    consumer.assign([TopicPartition(topic, index, 0) for index in range(partitions)])
    values, finished = [], set()
    deadline = time.monotonic() + timeout
    try:
        while len(finished) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                finished.add(message.partition())
                continue
            values.append(message.value())
    finally:
        consumer.close()
    assert len(finished) == partitions, "did not reach the end of every partition"
    return sorted(values)


def latest_offset(broker, topic: str, partition: int, isolation_level: int) -> int:  # type: ignore[no-untyped-def]
    """The partition's latest offset: its last stable offset for isolation level 1
    (read_committed), its high watermark for 0."""
    client = Client(broker)
    request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=partition,
                                                                      timestamp=-1)])])
    try:
        response = client.call(2, 5, request, ListOffsetsResponse, flexible=False)
    finally:
        client.sock.close()
    return response.topics[0].partitions[0].offset


def test_confluent_commit_and_abort_read_committed_sees_only_committed(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "tx-rd")
    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "tx-group", **QUIET})
    p = transactional(broker, "tx-rd-1")
    p.begin_transaction()
    committed = [b"c%d" % i for i in range(9)]
    for index, value in enumerate(committed):
        p.produce("tx-rd", value=value, partition=index % PARTITIONS)
    p.send_offsets_to_transaction([TopicPartition("tx-rd", 0, 42), TopicPartition("tx-rd", 1, 7)],
                                  group.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    p.begin_transaction()
    aborted = [b"a%d" % i for i in range(6)]
    for index, value in enumerate(aborted):
        p.produce("tx-rd", value=value, partition=index % PARTITIONS)
    p.send_offsets_to_transaction([TopicPartition("tx-rd", 0, 99)], group.consumer_group_metadata(), 30)
    p.flush(30)
    p.abort_transaction(30)
    assert read_all(broker, "tx-rd", "read_committed") == sorted(committed)
    assert read_all(broker, "tx-rd", "read_uncommitted") == sorted(committed + aborted)
    found = group.committed([TopicPartition("tx-rd", 0), TopicPartition("tx-rd", 1)], 10)
    assert [tp.offset for tp in found] == [42, 7]  # the aborted 99 never became visible
    group.close()


def test_a_new_instance_fences_the_old_producer(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "tx-fence", partitions=1)
    old = transactional(broker, "tx-fence-id")
    old.begin_transaction()
    old.produce("tx-fence", value=b"zombie")
    old.flush(10)
    new = transactional(broker, "tx-fence-id")  # aborts the old instance's transaction
    new.begin_transaction()
    new.produce("tx-fence", value=b"fresh")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        old.produce("tx-fence", value=b"late")
        old.commit_transaction(10)
    assert raised.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                           KafkaError.INVALID_PRODUCER_EPOCH)
    assert read_all(broker, "tx-fence", "read_committed", partitions=1) == [b"fresh"]
    assert read_all(broker, "tx-fence", "read_uncommitted", partitions=1) == [b"fresh", b"zombie"]


def test_an_expired_transaction_is_aborted_by_the_broker(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    create_topic(broker, "tx-timeout", partitions=1)
    p = transactional(broker, "tx-timeout-id", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce("tx-timeout", value=b"slow")
    p.flush(10)
    # Open, the transaction holds the last stable offset at its first offset (0); the broker's
    # abort after transaction.timeout.ms writes the marker at 1 and releases it to 2.
    eventually(lambda: latest_offset(broker, "tx-timeout", 0, 1) == 2)
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    assert latest_offset(broker, "tx-timeout", 0, 1) == latest_offset(broker, "tx-timeout", 0, 0) == 2
    assert read_all(broker, "tx-timeout", "read_committed", partitions=1) == []


def test_transactions_survive_a_broker_restart(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    create_topic(broker, "tx-restart", partitions=1)
    p = transactional(broker, "tx-restart-id", **{"message.timeout.ms": 60_000})
    p.begin_transaction()
    p.produce("tx-restart", value=b"first")
    p.commit_transaction(30)  # offsets 0 and the marker at 1
    p.begin_transaction()
    p.produce("tx-restart", value=b"open")
    p.flush(30)  # offset 2, its transaction still open
    assert (latest_offset(broker, "tx-restart", 0, 1), latest_offset(broker, "tx-restart", 0, 0)) == (2, 3)
    broker.restart()
    assert (latest_offset(broker, "tx-restart", 0, 1), latest_offset(broker, "tx-restart", 0, 0)) == (2, 3)
    assert read_all(broker, "tx-restart", "read_committed", partitions=1) == [b"first"]
    p.produce("tx-restart", value=b"after")  # the same producer carries on (Kafka resumes)
    p.commit_transaction(60)
    assert read_all(broker, "tx-restart", "read_committed", partitions=1) == [b"after", b"first", b"open"]
    assert latest_offset(broker, "tx-restart", 0, 1) == latest_offset(broker, "tx-restart", 0, 0) == 5


def test_kafka_python_transactional_producer(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "tx-kp", partitions=2)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="tx-kp-id")
    p.init_transactions()
    p.begin_transaction()
    for index in range(4):
        p.send("tx-kp", value=b"kept-%d" % index, partition=index % 2)
    p.commit_transaction()
    p.begin_transaction()
    for index in range(2):
        p.send("tx-kp", value=b"dropped-%d" % index, partition=index % 2)
    p.flush()
    p.abort_transaction()
    p.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    consumer.assign([KafkaTopicPartition("tx-kp", 0), KafkaTopicPartition("tx-kp", 1)])
    got = sorted(message.value for message in consumer)
    consumer.close()
    assert got == [b"kept-0", b"kept-1", b"kept-2", b"kept-3"]
    assert read_all(broker, "tx-kp", "read_uncommitted", partitions=2) == sorted(
        [b"kept-%d" % i for i in range(4)] + [b"dropped-0", b"dropped-1"])

