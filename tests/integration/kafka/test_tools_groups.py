"""Apache Kafka's console producer and consumer and ``kafka-consumer-groups`` (4.3.1, through
their main classes) against a real Samsa broker: keyed lines in and out, read_committed skipping
an aborted transaction, and a group's offsets, lag, reset and deletion as Samsa keeps them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat.apache_kafka import run_tool
from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.tools import create_topics, kafka, samsa_broker, table

pytestmark = pytest.mark.integration

TIMEOUT = 30


@pytest.fixture(scope="module")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with samsa_broker(tmp_path_factory.mktemp("samsa")) as broker:
        yield broker


def console_consume(samsa: BrokerProcess, topic: str, count: int, *args: str) -> list[str]:
    output = kafka("kafka-console-consumer", "--bootstrap-server", samsa.bootstrap, "--topic",
                   topic, "--from-beginning", "--max-messages", str(count), *args)
    return output.splitlines()


def test_console_producer_keys_then_console_consumer_prints_them(samsa: BrokerProcess) -> None:
    create_topics(samsa.bootstrap, ("lines", 1))
    kafka("kafka-console-producer", "--bootstrap-server", samsa.bootstrap, "--topic", "lines",
          "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
          stdin="k1:first\nk2:second\nk3:third\n")
    assert console_consume(samsa, "lines", 3, "--formatter-property", "print.key=true",
                           "--formatter-property", "print.offset=true") == [
        "Offset:0\tk1\tfirst", "Offset:1\tk2\tsecond", "Offset:2\tk3\tthird"]
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": "lines-check"})
    try:
        consumer.assign([TopicPartition("lines", 0, 0)])
        records = consumer.consume(3, timeout=TIMEOUT)
        assert [(r.key(), r.value()) for r in records] == [
            (b"k1", b"first"), (b"k2", b"second"), (b"k3", b"third")]
    finally:
        consumer.close()


def test_console_consumer_read_committed_skips_the_aborted_transaction(samsa: BrokerProcess) -> None:
    create_topics(samsa.bootstrap, ("transacted", 1))
    producer = Producer({"bootstrap.servers": samsa.bootstrap, "transactional.id": "console-txn"})
    producer.init_transactions(TIMEOUT)
    for value, commit in ((b"committed-1", True), (b"aborted", False), (b"committed-2", True)):
        producer.begin_transaction()
        producer.produce("transacted", value=value)
        producer.flush(TIMEOUT)
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT)
    assert console_consume(samsa, "transacted", 2, "--isolation-level", "read_committed") == [
        "committed-1", "committed-2"]
    assert console_consume(samsa, "transacted", 3) == ["committed-1", "aborted", "committed-2"]


def describe_group(samsa: BrokerProcess, group: str, *args: str) -> list[dict[str, str]]:
    return table(kafka("kafka-consumer-groups", "--bootstrap-server", samsa.bootstrap,
                       "--describe", "--group", group, *args))


def commit_through_confluent(samsa: BrokerProcess, group: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition("lagging", p, o) for p, o in offsets.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def committed(samsa: BrokerProcess, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition("lagging", p) for p in (0, 1)], timeout=TIMEOUT)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def test_consumer_groups_list_describe_lag_reset_delete(samsa: BrokerProcess) -> None:
    create_topics(samsa.bootstrap, ("lagging", 2))
    producer = Producer({"bootstrap.servers": samsa.bootstrap})
    for index in range(10):
        producer.produce("lagging", value=b"%d" % index, partition=index % 2)
    assert producer.flush(TIMEOUT) == 0
    commit_through_confluent(samsa, "laggards", {0: 3, 1: 5})
    server = ("--bootstrap-server", samsa.bootstrap)
    assert "laggards" in kafka("kafka-consumer-groups", *server, "--list").split()

    rows = describe_group(samsa, "laggards")
    assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"],
             r["CONSUMER-ID"]) for r in rows] == [
        ("lagging", "0", "3", "5", "2", "-"), ("lagging", "1", "5", "5", "0", "-")]
    [state] = describe_group(samsa, "laggards", "--state")
    assert (state["STATE"], state["#MEMBERS"]) == ("Empty", "0")

    reset = table(kafka("kafka-consumer-groups", *server, "--reset-offsets", "--group", "laggards",
                        "--topic", "lagging", "--to-earliest", "--execute"))
    assert sorted((r["PARTITION"], r["NEW-OFFSET"]) for r in reset) == [("0", "0"), ("1", "0")]
    assert committed(samsa, "laggards") == {0: 0, 1: 0}
    assert [r["LAG"] for r in describe_group(samsa, "laggards")] == ["5", "5"]

    deleted = kafka("kafka-consumer-groups", *server, "--delete", "--group", "laggards")
    assert "Deletion of requested consumer groups ('laggards') was successful." in deleted
    assert "laggards" not in kafka("kafka-consumer-groups", *server, "--list").split()
    assert committed(samsa, "laggards") == {0: -1001, 1: -1001}  # OFFSET_INVALID: none


def test_consumer_groups_see_an_active_member_and_refuse_to_reset_it(samsa: BrokerProcess) -> None:
    create_topics(samsa.bootstrap, ("watched", 1))
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": "watchers",
                         "client.id": "watcher", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["watched"])
        while not consumer.assignment():
            consumer.poll(0.5)
        [member] = describe_group(samsa, "watchers", "--members")
        assert (member["CLIENT-ID"], member["#PARTITIONS"], member["HOST"]) == (
            "watcher", "1", "/127.0.0.1")
        [state] = describe_group(samsa, "watchers", "--state")
        assert (state["ASSIGNMENT-STRATEGY"], state["STATE"], state["#MEMBERS"]) == (
            "range", "Stable", "1")
        server = ("--bootstrap-server", samsa.bootstrap)
        reset = kafka("kafka-consumer-groups", *server, "--reset-offsets", "--group", "watchers",
                      "--topic", "watched", "--to-latest", "--execute")
        assert "can only be reset if the group 'watchers' is inactive" in reset
        busy = run_tool("kafka-consumer-groups", *server, "--delete", "--group", "watchers")
        assert "GroupNotEmptyException" in busy.stdout
    finally:
        consumer.close()
