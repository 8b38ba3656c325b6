"""A broker that serves before its logs are loaded (issue 18, ``samsa.log.background.load.above``),
tried with confluent-kafka as a client would meet it right after a restart: produce and consume
at once, after a clean stop and after kill -9, and nothing written before is lost or doubled."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

PARTITIONS = 400  # four chunks of loads
TIMEOUT = 60


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(log_dir=tmp_path / "logs", stderr_path=tmp_path / "broker.log",
                            overrides={"samsa.log.background.load.above": "0"}).start()
    yield process
    if process.alive():
        process.stop()


def produce(bootstrap: str, tag: str) -> set[bytes]:
    """Two records per partition, acks=all, idempotent; the values written."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": TIMEOUT * 1000})
    values = set()
    failures: list[str] = []
    for partition in range(PARTITIONS):
        for n in range(2):
            value = f"{tag}-{partition}-{n}".encode()
            values.add(value)
            producer.produce("bg", value, partition=partition,
                             on_delivery=lambda error, _: error and failures.append(str(error)))
    assert producer.flush(TIMEOUT) == 0 and not failures, failures[:3]
    return values


def consume_all(bootstrap: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("bg", p, 0) for p in range(PARTITIONS)])
    seen: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(seen) < expected:
            assert time.monotonic() < deadline, f"{len(seen)} of {expected} in {TIMEOUT} s"
            for message in consumer.consume(expected - len(seen), timeout=1):
                assert message.error() is None, message.error()
                seen.append(message.value())
    finally:
        consumer.close()
    return seen


def test_a_restarted_broker_serves_its_partitions_as_they_load(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("bg", PARTITIONS, 1)])["bg"].result(TIMEOUT)
    written = produce(broker.bootstrap, "before")

    broker.restart()  # listening once the internal topics are loaded; "bg" loads afterwards
    written |= produce(broker.bootstrap, "after-restart")  # retried until each log is served
    seen = consume_all(broker.bootstrap, len(written))
    assert sorted(seen) == sorted(written)
    assert f"loaded {PARTITIONS} logs in the background" in broker.log()

    broker.kill()
    broker.start()  # unclean: each log is recovered on the worker as it loads
    written |= produce(broker.bootstrap, "after-kill")
    seen = consume_all(broker.bootstrap, len(written))
    assert sorted(seen) == sorted(written)
    assert "could not be loaded" not in broker.log()
