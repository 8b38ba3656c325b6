"""Kafka's Java ``KafkaShareConsumer`` (kafka-clients 4.3.1) against a real Samsa broker, driven
as Kafka's system tests drive it: ``kafka-verifiable-share-consumer`` (one JSON event per line:
``records_consumed``, ``record_data`` with ``--verbose``, ``offsets_acknowledged``), and
``kafka-share-groups`` reading the group back (issue 15).

Two share consumers of one group, run at the same time on a topic of two partitions: between
them every record is delivered and acknowledged, none acknowledged twice; the tool sets the
group's ``share.auto.offset.reset`` through IncrementalAlterConfigs first, as a user would."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from compat.apache_kafka import TOOLS, java_command
from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.tools import create_topics, kafka, samsa_broker, table

pytestmark = pytest.mark.integration

RECORDS = 200
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with samsa_broker(tmp_path_factory.mktemp("samsa")) as broker:
        yield broker


class ShareConsumerProcess:
    """One ``VerifiableShareConsumer`` JVM; its JSON events collected by a reader thread."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        command = java_command(TOOLS["kafka-verifiable-share-consumer"], [
            "--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group,
            "--offset-reset-strategy", "earliest", "--acknowledgement-mode", "sync", "--verbose"])
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.events: list[dict[str, Any]] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                with self.changed:
                    self.events.append(json.loads(line))
                    self.changed.notify_all()

    def acknowledged(self) -> list[tuple[int, int]]:
        """(partition, offset) of every successful acknowledgement, repeats kept."""
        with self.changed:
            return [(part["partition"], offset) for event in self.events
                    if event["name"] == "offsets_acknowledged" and event["success"]
                    for part in event["partitions"] for offset in part["offsets"]]

    def values(self) -> list[str]:
        with self.changed:
            return [event["value"] for event in self.events if event["name"] == "record_data"]

    def stop(self) -> str:
        self.process.terminate()
        try:
            _, stderr = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, stderr = self.process.communicate()
        self.reader.join(10)
        return stderr


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for index in range(count):
        producer.produce(topic, value=f"value-{index}".encode(), partition=index % 2)
    assert producer.flush(30) == 0


def wait_until(consumers: list[ShareConsumerProcess], done: Any) -> bool:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if done():
            return True
        if any(consumer.process.poll() is not None for consumer in consumers):
            return False
        with consumers[0].changed:
            consumers[0].changed.wait(0.2)
    return False


def test_two_java_share_consumers_acknowledge_every_record_once(samsa: BrokerProcess,
                                                                tmp_path: Path) -> None:
    create_topics(samsa.bootstrap, ("java-queue", 2))
    produce(samsa.bootstrap, "java-queue", RECORDS)
    consumers = [ShareConsumerProcess(samsa.bootstrap, "java-queue", "java-share") for _ in range(2)]
    try:
        finished = wait_until(consumers, lambda: len(
            {ack for consumer in consumers for ack in consumer.acknowledged()}) >= RECORDS)
        groups = kafka("kafka-share-groups", "--bootstrap-server", samsa.bootstrap,
                       "--describe", "--group", "java-share", "--members")
    finally:
        errors = [consumer.stop() for consumer in consumers]
    acknowledged = [ack for consumer in consumers for ack in consumer.acknowledged()]
    assert finished, f"acknowledged {len(set(acknowledged))} of {RECORDS}: {errors}"
    assert sorted(acknowledged) == sorted({(p, o) for p in (0, 1) for o in range(RECORDS // 2)})
    values = [value for consumer in consumers for value in consumer.values()]
    assert set(values) == {f"value-{index}" for index in range(RECORDS)}
    members = table(groups)
    assert {row["GROUP"] for row in members} == {"java-share"}
    assert len(members) == 2
