"""Apache Kafka 4.3.1's own ``kafka-storage format --add-scram`` formats a Samsa node (issue 14).

Kafka's tool (``kafka.tools.StorageTool``, run through its main class) writes ``meta.properties``
and a ``bootstrap.checkpoint`` holding the new cluster's feature levels and the ``--add-scram``
users into the data directory of a Samsa KRaft configuration; Samsa then starts on it, its first
active controller writes those records into the empty metadata log, and confluent-kafka
authenticates with SCRAM as the users the tool created — and only with their passwords. The
cluster id is the one given to the tool. A damaged ``bootstrap.checkpoint`` stops the start with
a message naming the file.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from compat.apache_kafka import free_port, random_cluster_id, run_tool
from tests.integration.conftest import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

USERS = {"alice": ("SCRAM-SHA-512", "alice-secret"), "bob": ("SCRAM-SHA-256", "bob-secret")}
TIMEOUT_S = 30.0


def node_settings(data: Path) -> dict[str, str]:
    """A combined-mode KRaft node: PLAINTEXT first (the fixture's started line), a SASL listener."""
    controller_port, sasl_port = free_port(), free_port()
    return {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                     f"CONTROLLER://127.0.0.1:{controller_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
        "log.dirs": str(data),
    }


def kafka_format(tmp_path: Path, settings: dict[str, str], cluster_id: str) -> None:
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    scram = [argument for user, (mechanism, password) in USERS.items()
             for argument in ("--add-scram", f"{mechanism}=[name={user},password={password}]")]
    result = run_tool("kafka-storage", "format", f"--cluster-id={cluster_id}", "-c", str(config), *scram,
                      check=True)
    assert "Formatting metadata directory" in result.stdout


def sasl_config(settings: dict[str, str], user: str, password: str | None = None) -> dict[str, Any]:
    mechanism, secret = USERS[user]
    port = settings["listeners"].split("SASL_PLAINTEXT://127.0.0.1:")[1].split(",")[0]
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": secret if password is None else password}


def wait_unfenced(node: BrokerProcess) -> None:
    """Clients asking before the broker's registration is unfenced get metadata without it
    (librdkafka then waits for a controller until its next refresh)."""
    deadline = time.monotonic() + TIMEOUT_S
    while "broker 1 unfenced" not in node.log():
        assert time.monotonic() < deadline and node.alive(), node.log()
        time.sleep(0.05)  # the node's log line is the only signal


def authentication_error(config: dict[str, Any]) -> bool:
    """Whether the client is refused with an authentication error (its error callback)."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + TIMEOUT_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    return any(error.code() == KafkaError._AUTHENTICATION for error in errors)


def produce_and_consume(config: dict[str, Any], topic: str) -> list[bytes]:
    producer = Producer({**config, "message.timeout.ms": 20000})
    errors: list[object] = []
    for index in range(3):
        producer.produce(topic, f"{topic}-{index}".encode(),
                         on_delivery=lambda error, _message: errors.append(error))
    assert producer.flush(TIMEOUT_S) == 0 and errors == [None] * 3, errors
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
            if len(values) == 3:
                break
        return values
    finally:
        consumer.close()


def test_samsa_starts_on_what_kafka_storage_formatted_and_knows_its_scram_users(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = node_settings(data)
    cluster_id = random_cluster_id()
    kafka_format(tmp_path, settings, cluster_id)
    assert (data / "bootstrap.checkpoint").is_file() and (data / "meta.properties").is_file()
    node = BrokerProcess(log_dir=data, overrides=settings, stderr_path=tmp_path / "samsa.log").start()
    try:
        wait_unfenced(node)
        admin = AdminClient(sasl_config(settings, "alice"))
        assert admin.describe_cluster(request_timeout=TIMEOUT_S).result().cluster_id == cluster_id
        assert "writing the bootstrap metadata from the binary bootstrap metadata file" in node.log()
        for user, topic in (("alice", "from-alice"), ("bob", "from-bob")):
            assert produce_and_consume(sasl_config(settings, user), topic) == [
                f"{topic}-{index}".encode() for index in range(3)]
        assert authentication_error(sasl_config(settings, "alice", password="not-alices"))
    finally:
        assert node.stop() == 0, node.log()
    node.start()  # the users are in the metadata log now: a restart keeps them
    try:
        wait_unfenced(node)
        assert produce_and_consume(sasl_config(settings, "bob"), "after-restart") == [
            f"after-restart-{index}".encode() for index in range(3)]
    finally:
        assert node.stop() == 0, node.log()


def test_a_damaged_bootstrap_file_stops_the_start_naming_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = node_settings(data)
    kafka_format(tmp_path, settings, random_cluster_id())
    path = data / "bootstrap.checkpoint"
    path.write_bytes(path.read_bytes()[:-10])
    node = BrokerProcess(log_dir=data, overrides=settings, stderr_path=tmp_path / "samsa.log")
    with pytest.raises(AssertionError, match="broker did not start"):
        node.start()
    assert f"the bootstrap metadata file {path} is damaged" in node.log()
