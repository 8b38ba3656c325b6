"""samsa.testing's fixtures, as a project that installed samsa uses them (the plugin is loaded
through its pytest11 entry point): real brokers, real clients (confluent-kafka, kafka-python,
aiokafka, Samsa's)."""

from __future__ import annotations

import asyncio
import socket
import textwrap

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer

from samsa.testing import Broker, BrokerStartError, Cluster, wait_until

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.integration


def test_confluent_kafka_produces_and_consumes_through_the_fixture(samsa_broker: Broker) -> None:
    samsa_broker.create_topic("confluent", partitions=2)
    producer = ConfluentProducer({"bootstrap.servers": samsa_broker.bootstrap, "acks": "all"})
    for number in range(10):
        producer.produce("confluent", f"v{number}".encode(), key=f"k{number}".encode())
    assert producer.flush(30) == 0
    consumer = ConfluentConsumer({"bootstrap.servers": samsa_broker.bootstrap,
                                  "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["confluent"])
    values = []
    try:
        while len(values) < 10:
            message = consumer.poll(10)
            assert message is not None and message.error() is None
            values.append(message.value())
    finally:
        consumer.close()
    assert sorted(values) == sorted(f"v{number}".encode() for number in range(10))
    assert sorted(record.value for record in samsa_broker.read("confluent")) == sorted(values)


def test_kafka_python_produces_and_consumes_through_the_fixture(samsa_broker: Broker) -> None:
    samsa_broker.create_topic("kafka-python")
    producer = KafkaProducer(bootstrap_servers=samsa_broker.bootstrap, acks="all")
    producer.send("kafka-python", b"hello").get(30)
    producer.close()
    consumer = KafkaConsumer("kafka-python", bootstrap_servers=samsa_broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    assert next(consumer).value == b"hello"
    consumer.close()


def test_aiokafka_produces_and_consumes_through_the_fixture(samsa_broker: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    samsa_broker.create_topic("aiokafka")

    async def roundtrip() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=samsa_broker.bootstrap, acks="all")
        await producer.start()
        try:
            for number in range(3):
                await producer.send_and_wait("aiokafka", f"a{number}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aiokafka", bootstrap_servers=samsa_broker.bootstrap,
                                    auto_offset_reset="earliest", group_id="aio")
        await consumer.start()
        try:
            return [(await asyncio.wait_for(consumer.getone(), 10)).value for _ in range(3)]
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip()) == [b"a0", b"a1", b"a2"]


def test_the_helpers_create_produce_and_read_back(samsa_broker: Broker) -> None:
    samsa_broker.create_topic("helpers", partitions=3)
    offsets = samsa_broker.produce("helpers", ["x", "y"], key="same")
    assert offsets == [0, 1]
    records = samsa_broker.read("helpers")
    assert [(record.key, record.value, record.offset) for record in records] == [
        (b"same", b"x", 0), (b"same", b"y", 1)]


def test_acknowledged_records_survive_kill_and_restart_on_the_same_port(
        samsa_broker: Broker) -> None:
    samsa_broker.create_topic("durable")
    samsa_broker.produce("durable", ["before"])
    bootstrap = samsa_broker.bootstrap
    samsa_broker.kill()
    assert not samsa_broker.alive
    samsa_broker.restart()
    assert samsa_broker.bootstrap == bootstrap
    samsa_broker.produce("durable", ["after"])
    assert [record.value for record in samsa_broker.read("durable")] == [b"before", b"after"]


def test_a_paused_broker_answers_nothing_until_resumed(samsa_broker: Broker) -> None:
    samsa_broker.pause()
    try:
        with socket.create_connection((samsa_broker.host, samsa_broker.port), timeout=5) as sock:
            sock.settimeout(0.5)
            # ApiVersions v0: size 10, api key 18, version 0, correlation id 7, client id "".
            sock.sendall(bytes.fromhex("0000000a" "0012" "0000" "00000007" "0000"))
            with pytest.raises(TimeoutError):
                sock.recv(4)
    finally:
        samsa_broker.resume()
    samsa_broker.create_topic("after-pause")
    assert samsa_broker.produce("after-pause", ["ok"]) == [0]


def test_a_broker_that_cannot_start_says_why(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BrokerStartError, match=r"log\.retention\.ms"):
        Broker(tmp_path, {"log.retention.ms": "soon"}).start()


@pytest.mark.cluster
def test_the_cluster_fixture_survives_the_loss_of_the_leader(samsa_cluster: Cluster) -> None:
    samsa_cluster.create_topic("replicated", partitions=1)
    samsa_cluster.produce("replicated", ["one"])
    leader = samsa_cluster.leader("replicated")
    samsa_cluster.kill(leader)
    wait_until(lambda: samsa_cluster.leader("replicated") not in (-1, leader),
               timeout_s=30, what="a new leader")
    samsa_cluster.produce("replicated", ["two"])
    samsa_cluster.restart(leader)
    wait_until(lambda: len(samsa_cluster.read("replicated", timeout_s=10)) == 2, timeout_s=30,
               what="both records readable with the old leader back")
    paused = samsa_cluster.leader("replicated")
    samsa_cluster.pause(paused)
    assert samsa_cluster.node(paused).paused
    assert samsa_cluster.leader("replicated") in (-1, *samsa_cluster.node_ids)  # others answer
    samsa_cluster.resume(paused)
    assert [record.value for record in samsa_cluster.read("replicated")] == [b"one", b"two"]


def _run_inner(pytester: pytest.Pytester, ini: str, body: str) -> pytest.RunResult:
    pytester.makeini(textwrap.dedent(ini))
    pytester.makepyfile(textwrap.dedent(body))
    return pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")


def test_session_scope_shares_one_broker_and_samsa_config_reaches_it(
        pytester: pytest.Pytester) -> None:
    result = _run_inner(pytester, """
        [pytest]
        samsa_scope = session
        samsa_config =
            num.partitions = 4
        """, """
        seen = set()

        def test_one(samsa_broker):
            seen.add(samsa_broker.bootstrap)

        def test_two(samsa_broker):
            seen.add(samsa_broker.bootstrap)
            assert len(seen) == 1

        def test_config(samsa_broker):
            samsa_broker.produce("auto-created", ["x"])
            from samsa import AdminClient
            admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap})
            assert len(admin.describe_topics(["auto-created"])["auto-created"].partitions) == 4
            admin.close()
        """)
    result.assert_outcomes(passed=3)


def test_function_scope_gives_each_test_its_own_broker(pytester: pytest.Pytester) -> None:
    result = _run_inner(pytester, """
        [pytest]
        """, """
        seen = []

        def test_one(samsa_broker):
            seen.append(samsa_broker.bootstrap)

        def test_two(samsa_broker):
            assert samsa_broker.bootstrap not in seen
        """)
    result.assert_outcomes(passed=2)


def test_an_unknown_scope_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = _run_inner(pytester, """
        [pytest]
        samsa_scope = forever
        """, """
        def test_one(samsa_broker):
            pass
        """)
    result.stdout.fnmatch_lines(["*samsa_scope = 'forever'*"])
    assert result.ret != 0
