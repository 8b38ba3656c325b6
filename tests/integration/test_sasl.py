"""SASL_PLAINTEXT end to end: a real broker with a PLAINTEXT and a SASL_PLAINTEXT listener,
driven by confluent-kafka (librdkafka), kafka-python and raw protocol frames."""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from protocol.frames import encode_request
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.metadata_request import MetadataRequest
from protocol.messages.request_header import RequestHeader
from protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')
SASL_SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
}
TIMEOUT = 30.0


class SaslBroker:
    def __init__(self, process: BrokerProcess) -> None:
        self.process = process
        self.sasl_port = 0
        self._find_ports()

    def _find_ports(self) -> None:
        match = re.findall(r"SASL_PLAINTEXT://127\.0\.0\.1:(\d+)", self.process.log())
        self.sasl_port = int(match[-1])

    @property
    def plaintext(self) -> str:
        return self.process.bootstrap

    @property
    def sasl(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def restart(self) -> None:
        assert self.process.stop() == 0, self.process.log()
        self.process.overrides = {
            **self.process.overrides,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.process.port},"
                         f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
        }
        self.process.start()
        self._find_ports()


@pytest.fixture
def start_sasl_broker(tmp_path: Path) -> Iterator[object]:
    started: list[SaslBroker] = []

    def start(**extra: str) -> SaslBroker:
        index = len(started)
        process = BrokerProcess(tmp_path / f"logs-{index}", {**SASL_SETTINGS, **extra},
                                tmp_path / f"broker-{index}.log").start()
        started.append(SaslBroker(process))
        return started[-1]

    yield start
    for broker in started:
        if broker.process.alive():
            assert broker.process.stop() == 0, broker.process.log()


@pytest.fixture
def sasl_broker(start_sasl_broker) -> SaslBroker:  # type: ignore[no-untyped-def]
    return start_sasl_broker()  # type: ignore[no-any-return]


def client_config(broker: SaslBroker, mechanism: str, user: str, password: str) -> dict[str, object]:
    return {"bootstrap.servers": broker.sasl, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def produce(config: Mapping[str, Any], topic: str, values: list[bytes]) -> list[KafkaError | None]:
    producer = Producer({**config, "message.timeout.ms": 10000})
    errors: list[KafkaError | None] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, _message: errors.append(error))
    assert producer.flush(TIMEOUT) == 0
    return errors


def consume(config: Mapping[str, Any], topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def create_scram_user(broker: SaslBroker, user: str, password: str, mechanism: ScramMechanism,
                      iterations: int = 8192) -> None:
    admin = AdminClient({"bootstrap.servers": broker.plaintext})
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, iterations), password.encode())])
    for future in futures.values():
        assert future.result(TIMEOUT) is None


# -- confluent-kafka -------------------------------------------------------------------------


def test_plain_producer_and_consumer(sasl_broker: SaslBroker) -> None:
    config = client_config(sasl_broker, "PLAIN", "alice", "alice-secret")
    values = [f"plain-{i}".encode() for i in range(20)]
    assert produce(config, "plain-topic", values) == [None] * 20
    assert consume(config, "plain-topic", 20) == values


@pytest.mark.parametrize("mechanism", [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512])
def test_scram_users_created_with_the_admin_api(sasl_broker: SaslBroker, mechanism) -> None:  # type: ignore[no-untyped-def]
    create_scram_user(sasl_broker, "carol", "carol-secret", mechanism)
    admin = AdminClient({"bootstrap.servers": sasl_broker.plaintext})
    description = admin.describe_user_scram_credentials(["carol"])["carol"].result(TIMEOUT)
    assert [(info.mechanism, info.iterations) for info in description.scram_credential_infos] == [
        (mechanism, 8192)]
    name = "SCRAM-SHA-256" if mechanism == ScramMechanism.SCRAM_SHA_256 else "SCRAM-SHA-512"
    config = client_config(sasl_broker, name, "carol", "carol-secret")
    values = [f"scram-{i}".encode() for i in range(10)]
    assert produce(config, "scram-topic", values) == [None] * 10
    assert consume(config, "scram-topic", 10) == values


def test_scram_admin_errors_and_deletion(sasl_broker: SaslBroker) -> None:
    admin = AdminClient({"bootstrap.servers": sasl_broker.plaintext})
    describe = admin.describe_user_scram_credentials(["nobody"])["nobody"]
    with pytest.raises(Exception, match=r"RESOURCE_NOT_FOUND|does not exist"):
        describe.result(TIMEOUT)
    few = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")])["dave"]
    with pytest.raises(Exception, match="Too few iterations"):
        few.result(TIMEOUT)
    create_scram_user(sasl_broker, "dave", "dave-secret", ScramMechanism.SCRAM_SHA_256)
    deleted = admin.alter_user_scram_credentials([UserScramCredentialDeletion(
        "dave", ScramMechanism.SCRAM_SHA_256)])["dave"]
    assert deleted.result(TIMEOUT) is None
    errors: list[KafkaError] = []
    producer = Producer({**client_config(sasl_broker, "SCRAM-SHA-256", "dave", "dave-secret"),
                         "error_cb": errors.append})
    deadline = time.monotonic() + TIMEOUT
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION


@pytest.mark.parametrize(("mechanism", "user"), [("PLAIN", "alice"), ("PLAIN", "mallory"),
                                                 ("SCRAM-SHA-256", "carol")])
def test_wrong_password_is_an_authentication_error_and_nothing_is_produced(
    sasl_broker: SaslBroker, mechanism: str, user: str
) -> None:
    create_scram_user(sasl_broker, "carol", "carol-secret", ScramMechanism.SCRAM_SHA_256)
    admin = AdminClient({"bootstrap.servers": sasl_broker.plaintext})
    admin.create_topics([NewTopic("guarded", 1)])["guarded"].result(TIMEOUT)
    errors: list[KafkaError] = []
    producer = Producer({**client_config(sasl_broker, mechanism, user, "wrong"),
                         "error_cb": errors.append, "message.timeout.ms": 3000})
    delivered: list[KafkaError | None] = []
    producer.produce("guarded", b"must not land", on_delivery=lambda e, _m: delivered.append(e))
    producer.flush(TIMEOUT)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed" in errors[0].str()
    assert delivered and delivered[0] is not None
    watcher = Consumer({"bootstrap.servers": sasl_broker.plaintext, "group.id": "watch"})
    try:
        from confluent_kafka import TopicPartition
        assert watcher.get_watermark_offsets(TopicPartition("guarded", 0), TIMEOUT) == (0, 0)
    finally:
        watcher.close()


def test_metadata_answers_with_the_listener_the_client_came_in_on(sasl_broker: SaslBroker) -> None:
    sasl_admin = AdminClient(client_config(sasl_broker, "PLAIN", "alice", "alice-secret"))
    plain_admin = AdminClient({"bootstrap.servers": sasl_broker.plaintext})
    [sasl_node] = sasl_admin.list_topics(timeout=TIMEOUT).brokers.values()
    [plain_node] = plain_admin.list_topics(timeout=TIMEOUT).brokers.values()
    assert (sasl_node.host, sasl_node.port) == ("127.0.0.1", sasl_broker.sasl_port)
    assert (plain_node.host, plain_node.port) == ("127.0.0.1", sasl_broker.process.port)


def test_reauthentication_keeps_the_connection_usable(start_sasl_broker) -> None:  # type: ignore[no-untyped-def]
    broker: SaslBroker = start_sasl_broker(**{"connections.max.reauth.ms": "2000"})
    create_scram_user(broker, "carol", "carol-secret", ScramMechanism.SCRAM_SHA_512)
    producer = Producer({**client_config(broker, "SCRAM-SHA-512", "carol", "carol-secret"),
                         "linger.ms": 0})
    errors: list[KafkaError | None] = []
    sent = 0
    deadline = time.monotonic() + TIMEOUT
    while "re-authenticated" not in broker.process.log() and time.monotonic() < deadline:
        producer.produce("reauth", f"m{sent}".encode(), on_delivery=lambda e, _m: errors.append(e))
        sent += 1
        producer.poll(0.1)
    for _ in range(5):  # the re-authenticated connection carries on
        producer.produce("reauth", f"m{sent}".encode(), on_delivery=lambda e, _m: errors.append(e))
        sent += 1
    assert producer.flush(TIMEOUT) == 0
    assert "re-authenticated as User:carol" in broker.process.log()
    assert errors == [None] * sent
    config = client_config(broker, "SCRAM-SHA-512", "carol", "carol-secret")
    assert len(consume(config, "reauth", sent)) == sent


def test_credentials_survive_a_restart(sasl_broker: SaslBroker) -> None:
    create_scram_user(sasl_broker, "erin", "erin-secret", ScramMechanism.SCRAM_SHA_256, 4096)
    sasl_broker.restart()
    config = client_config(sasl_broker, "SCRAM-SHA-256", "erin", "erin-secret")
    assert produce(config, "after-restart", [b"still here"]) == [None]


# -- kafka-python ----------------------------------------------------------------------------


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "bob", "bob-secret"), ("SCRAM-SHA-256", "frank", "frank-secret")])
def test_kafka_python_producer_and_consumer(
    sasl_broker: SaslBroker, mechanism: str, user: str, password: str
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    create_scram_user(sasl_broker, "frank", "frank-secret", ScramMechanism.SCRAM_SHA_256)
    settings = {"bootstrap_servers": sasl_broker.sasl, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": mechanism, "sasl_plain_username": user,
                "sasl_plain_password": password}
    producer = KafkaProducer(**settings)
    for i in range(5):
        producer.send("kp-sasl", f"v{i}".encode()).get(TIMEOUT)
    producer.close()
    consumer = KafkaConsumer("kp-sasl", auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             group_id=None, **settings)
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 5:
            break
    consumer.close()
    assert values == [f"v{i}".encode() for i in range(5)]


# -- raw frames ------------------------------------------------------------------------------


def frame(message, version: int, correlation_id: int) -> bytes:  # type: ignore[no-untyped-def]
    header = RequestHeader(request_api_key=message.API_KEY, request_api_version=version,
                           correlation_id=correlation_id, client_id="raw")
    return encode_request(header, message)


def read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _read(sock, 4))[0]
    return _read(sock, size)


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("first", ["metadata", "api_versions_then_metadata"])
def test_a_request_before_authentication_closes_the_connection(sasl_broker: SaslBroker, first: str) -> None:
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=TIMEOUT) as sock:
        if first == "api_versions_then_metadata":
            sock.sendall(frame(ApiVersionsRequest(), 0, 1))
            assert struct.unpack(">i", read_frame(sock)[:4])[0] == 1
        sock.sendall(frame(MetadataRequest(topics=None), 1, 2))
        assert closed(sock)
    # The PLAINTEXT listener is unaffected, and the broker is alive.
    assert AdminClient({"bootstrap.servers": sasl_broker.plaintext}).list_topics(timeout=TIMEOUT)


def test_an_expired_session_is_closed_at_its_next_request(start_sasl_broker) -> None:  # type: ignore[no-untyped-def]
    broker: SaslBroker = start_sasl_broker(**{"connections.max.reauth.ms": "1000"})
    with socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=TIMEOUT) as sock:
        sock.sendall(frame(SaslHandshakeRequest(mechanism="PLAIN"), 1, 1))
        read_frame(sock)
        sock.sendall(frame(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1, 2))
        body = read_frame(sock)
        response, _ = SaslAuthenticateResponse.decode_from(memoryview(body), 4, 1)
        assert response.error_code == 0 and response.session_lifetime_ms == 1000
        sock.sendall(frame(MetadataRequest(topics=None), 1, 3))
        assert struct.unpack(">i", read_frame(sock)[:4])[0] == 3  # within the session
        time.sleep(1.2)  # the session's lifetime is the condition under test
        sock.sendall(frame(MetadataRequest(topics=None), 1, 4))
        assert closed(sock)


# -- the Samsa client --------------------------------------------------------------------------


@pytest.mark.parametrize("auth", ["SCRAM-SHA-512", "PLAIN-jaas"])
def test_samsa_client_authenticates(sasl_broker: SaslBroker, auth: str) -> None:
    import samsa
    from samsa._connection import connect
    from samsa._sasl import SaslCredentials

    create_scram_user(sasl_broker, "grace", "grace-secret", ScramMechanism.SCRAM_SHA_512)
    if auth == "PLAIN-jaas":
        settings = {"sasl.mechanism": "PLAIN", "sasl.jaas.config":
                    'org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'username="alice" password="alice-secret";'}
    else:
        settings = {"sasl.mechanism": auth, "sasl.username": "grace", "sasl.password": "grace-secret"}
    config = {"bootstrap.servers": sasl_broker.sasl, "security.protocol": "SASL_PLAINTEXT",
              **settings}
    with samsa.Producer(config=config) as producer:
        for i in range(5):
            producer.send("samsa-sasl", f"s{i}".encode()).result(TIMEOUT)
    with samsa.Consumer("samsa-sasl", config={**config, "group.id": "samsa-sasl-group",
                                              "auto.offset.reset": "earliest"}) as consumer:
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(values) < 5 and time.monotonic() < deadline:
            values += [record.value for record in consumer.poll(1.0)]
    assert values == [f"s{i}".encode() for i in range(5)]

    async def wrong_password() -> None:
        mechanism = str(settings["sasl.mechanism"])
        await connect("127.0.0.1", sasl_broker.sasl_port, node_id=-1, client_id="t",
                      request_timeout_ms=10000, setup_timeout_ms=10000,
                      max_response_bytes=1 << 20,
                      sasl=SaslCredentials(mechanism, "grace" if "SCRAM" in mechanism else "alice",
                                           "wrong"))

    with pytest.raises(samsa.errors.SaslAuthenticationFailedError):
        asyncio.run(wrong_password())
