"""TLS end to end: real Samsa brokers with SSL and SASL_SSL listeners (certificates made by the
``openssl`` CLI for each module), driven by confluent-kafka (librdkafka), kafka-python, and
Apache Kafka's own Java client through ``kafka-topics``; mutual TLS with the principal mapping
shown through ACLs; a failed handshake logged while the broker carries on; a three-node KRaft
cluster whose inter-broker and controller traffic is TLS with client certificates."""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.integration.cluster_nodes import ClusterNodes, wait_until
from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.tools import kafka
from tests.integration.test_sasl import consume, produce  # the same clients over SASL
from tests.integration.tls_certs import Identity, Pki, make_pki

pytestmark = pytest.mark.integration

TIMEOUT = 30.0
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret";')
# alice's certificate subject is CN=alice,OU=eng,O=Samsa: engineers get their common name.
MAPPING_RULES = "RULE:^CN=([^,]+),OU=eng,.*$/$1/,DEFAULT"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(Path(tmp_path_factory.mktemp("pki")))


def broker_tls(pki: Pki, **extra: str) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker.keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca), **extra}


def port_of(broker: BrokerProcess, name: str) -> int:
    return int(re.findall(rf"\b{name}://127\.0\.0\.1:(\d+)", broker.log())[-1])


def rdkafka_ssl(pki: Pki, port: int, identity: Identity | None = None, *,
                ca: Path | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                              "ssl.ca.location": str(ca or pki.ca)}
    if identity is not None:
        config |= {"ssl.certificate.location": str(identity.certificate),
                   "ssl.key.location": str(identity.key)}
    return config


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(TIMEOUT)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    started: list[BrokerProcess] = []

    def start_broker(**overrides: str) -> BrokerProcess:
        index = len(started)
        broker = BrokerProcess(tmp_path / f"logs-{index}", overrides,
                               tmp_path / f"broker-{index}.log").start()
        started.append(broker)
        return broker

    yield start_broker
    for broker in started:
        if broker.alive():
            assert broker.stop() == 0, broker.log()[-3000:]


# -- SSL: librdkafka and kafka-python ---------------------------------------------------------


def test_ssl_produce_and_fetch_with_both_clients(pki: Pki, start: Any) -> None:
    broker = start(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **broker_tls(pki))
    port = port_of(broker, "SSL")
    create_topic(broker.bootstrap, "tls-topic", partitions=2)
    values = [f"v{i}".encode() * 500 for i in range(300)]  # ~1 MB: fetches span many batches
    assert produce(rdkafka_ssl(pki, port), "tls-topic", values) == [None] * 300
    assert sorted(consume(rdkafka_ssl(pki, port), "tls-topic", 300)) == sorted(values)

    from kafka import KafkaConsumer, KafkaProducer

    ssl_args = {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "SSL",
                "ssl_cafile": str(pki.ca)}
    producer = KafkaProducer(**ssl_args)
    for i in range(50):
        producer.send("kp-topic", f"kp-{i}".encode())
    producer.flush(TIMEOUT)
    producer.close()
    consumer = KafkaConsumer("kp-topic", auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             group_id="kp", **ssl_args)
    got = [message.value for _, message in zip(range(50), consumer, strict=False)]
    consumer.close()
    assert got == [f"kp-{i}".encode() for i in range(50)]


def test_untrusted_certificates_fail_the_handshake_and_the_broker_carries_on(
        pki: Pki, start: Any) -> None:
    broker = start(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                   **broker_tls(pki, **{"ssl.client.auth": "required"}))
    port = port_of(broker, "SSL")
    # A client certificate from a CA the broker does not trust: the broker refuses it.
    admin = AdminClient({**rdkafka_ssl(pki, port, pki.untrusted_client), "log_level": 0})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    wait_until(lambda: "Failed authentication with 127.0.0.1" in broker.log(),
               what="the broker's log line for the failed handshake")
    assert "SSL handshake failed" in broker.log()
    # No client certificate at all while one is required: refused as well.
    with pytest.raises(KafkaException):
        AdminClient({**rdkafka_ssl(pki, port), "log_level": 0}).list_topics(timeout=3)
    # A client that does not trust the broker's CA fails on its side, with a clear reason.
    errors: list[str] = []
    untrusting = AdminClient({**rdkafka_ssl(pki, port, pki.client("alice"), ca=pki.untrusted_ca),
                              "error_cb": lambda error: errors.append(str(error)), "log_level": 0})
    with pytest.raises(KafkaException):
        untrusting.list_topics(timeout=3)
    untrusting.poll(1)  # serves error_cb
    assert any("certificate verify failed" in error for error in errors), errors
    # ... and the broker still serves a trusted client, on TLS and on PLAINTEXT.
    trusted = AdminClient(rdkafka_ssl(pki, port, pki.client("alice")))
    assert trusted.list_topics(timeout=10).brokers
    assert AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).brokers


def alert_after_handshake(pki: Pki, port: int, identity: Identity | None,
                          version: ssl.TLSVersion) -> str:
    """The reason of the TLS error a client gets from the broker (on its first read: TLS 1.3
    clients finish their handshake before the broker checks their certificate)."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.maximum_version = version
    if identity is not None:
        context.load_cert_chain(identity.certificate, identity.key)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(b"\x00\x00\x00\x00")
                tls.recv(1)
        except ssl.SSLError as error:
            return str(error.reason)
    return "no error"


def test_a_refused_handshake_tells_the_client_why(pki: Pki, start: Any) -> None:
    """The broker sends the TLS alert before it closes (asyncio's own TLS protocol dropped it
    and clients saw the connection end), as Kafka does."""
    broker = start(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                   **broker_tls(pki, **{"ssl.client.auth": "required"}))
    port = port_of(broker, "SSL")
    tls13, tls12 = ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2
    assert alert_after_handshake(pki, port, None, tls13) == "TLSV13_ALERT_CERTIFICATE_REQUIRED"
    assert alert_after_handshake(pki, port, None, tls12) == "SSLV3_ALERT_HANDSHAKE_FAILURE"
    assert alert_after_handshake(pki, port, pki.untrusted_client, tls13) == \
        "TLSV1_ALERT_UNKNOWN_CA"
    assert AdminClient(rdkafka_ssl(pki, port, pki.client("alice"))).list_topics(timeout=10).brokers


def test_requested_client_auth_names_its_cas_so_librdkafka_leaves_a_foreign_certificate_out(
        pki: Pki, start: Any) -> None:
    """With ssl.client.auth=requested the broker names its trusted CAs in the certificate
    request, as Kafka's does; librdkafka then sends no certificate from another CA and is
    served as User:ANONYMOUS (without the names it sent it and the handshake failed)."""
    broker = start(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                   **broker_tls(pki, **{"ssl.client.auth": "requested"}))
    port = port_of(broker, "SSL")
    create_topic(broker.bootstrap, "foreign-cert")
    foreign = rdkafka_ssl(pki, port, pki.untrusted_client)
    assert produce(foreign, "foreign-cert", [b"anonymous"]) == [None]
    assert consume(foreign, "foreign-cert", 1) == [b"anonymous"]
    assert "Failed authentication" not in broker.log()


# -- mutual TLS: the principal through ssl.principal.mapping.rules, checked by ACLs -----------


def test_mutual_tls_principals_are_mapped_and_authorized(pki: Pki, start: Any) -> None:
    broker = start(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                   **broker_tls(pki, **{"ssl.client.auth": "requested",
                                        "ssl.principal.mapping.rules": MAPPING_RULES}),
                   **{"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    port = port_of(broker, "SSL")
    create_topic(broker.bootstrap, "guarded")  # PLAINTEXT: ANONYMOUS, a super user here
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    bindings = [AclBinding(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL,
                           "User:alice", "*", operation, AclPermissionType.ALLOW)
                for operation in (AclOperation.WRITE, AclOperation.READ)]
    bindings.append(AclBinding(ResourceType.GROUP, "*", ResourcePatternType.LITERAL,
                               "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))
    for future in admin.create_acls(bindings, request_timeout=10).values():
        future.result()
    alice = rdkafka_ssl(pki, port, pki.client("alice"))  # mapped to User:alice
    bob = rdkafka_ssl(pki, port, pki.client("bob"))  # DEFAULT: User:CN=bob,OU=ops,O=Samsa
    assert produce(alice, "guarded", [b"from alice"]) == [None]
    assert consume(alice, "guarded", 1) == [b"from alice"]
    denied = produce(bob, "guarded", [b"from bob"])
    assert [error.code() for error in denied if error] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # bob's full distinguished name is his principal: an ACL on it lets him in.
    for future in admin.create_acls([AclBinding(
            ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL,
            "User:CN=bob,OU=ops,O=Samsa", "*", AclOperation.WRITE,
            AclPermissionType.ALLOW)], request_timeout=10).values():
        future.result()
    assert wait_until(lambda: produce(bob, "guarded", [b"from bob"]) == [None], timeout_s=15,
                      what="bob's write allowed")


# -- SASL_SSL: SASL's principal over TLS ------------------------------------------------------


def test_sasl_ssl_plain_and_scram(pki: Pki, start: Any) -> None:
    broker = start(listeners="PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                   **broker_tls(pki), **{
                       "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                       "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS})
    port = port_of(broker, "SASL_SSL")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
            b"carol-secret")]).values():
        assert future.result(TIMEOUT) is None
    base = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca)}
    plain = {**base, "sasl.mechanism": "PLAIN", "sasl.username": "alice",
             "sasl.password": "alice-secret"}
    scram = {**base, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol",
             "sasl.password": "carol-secret"}
    assert produce(plain, "sasl-ssl", [b"plain"]) == [None]
    assert produce(scram, "sasl-ssl", [b"scram"]) == [None]
    assert sorted(consume(scram, "sasl-ssl", 2)) == [b"plain", b"scram"]
    wrong = AdminClient({**plain, "sasl.password": "nope", "log_level": 0})
    with pytest.raises(KafkaException):
        wrong.list_topics(timeout=5)

    from kafka import KafkaConsumer, KafkaProducer

    kafka_python = {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "SASL_SSL",
                    "ssl_cafile": str(pki.ca), "sasl_mechanism": "SCRAM-SHA-512",
                    "sasl_plain_username": "carol", "sasl_plain_password": "carol-secret"}
    producer = KafkaProducer(**kafka_python)
    producer.send("sasl-ssl", b"kafka-python").get(TIMEOUT)
    producer.close()
    consumer = KafkaConsumer("sasl-ssl", auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             group_id="kp-sasl", **kafka_python)
    got = sorted(message.value for _, message in zip(range(3), consumer, strict=False))
    consumer.close()
    assert got == [b"kafka-python", b"plain", b"scram"]


# -- Apache Kafka's Java client over TLS -------------------------------------------------------


def test_kafka_topics_over_mutual_tls(pki: Pki, start: Any, tmp_path: Path) -> None:
    broker = start(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                   **broker_tls(pki, **{"ssl.client.auth": "required"}))
    port = port_of(broker, "SSL")
    properties = tmp_path / "client-ssl.properties"
    properties.write_text("\n".join([
        "security.protocol=SSL",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={pki.ca}",
        "ssl.keystore.type=PEM", f"ssl.keystore.location={pki.client('alice').keystore}",
    ]) + "\n")
    bootstrap = ["--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(properties)]
    kafka("kafka-topics", *bootstrap, "--create", "--topic", "java-tls", "--partitions", "3")
    described = kafka("kafka-topics", *bootstrap, "--describe", "--topic", "java-tls")
    assert "PartitionCount: 3" in described and "Leader: 1" in described


# -- a three-node cluster whose node-to-node traffic is TLS ------------------------------------


@pytest.mark.slow  # a three-node cluster, ~20 s with its stop: `make slow`
def test_cluster_with_ssl_inter_broker_and_controller_listeners(
        pki: Pki, cluster_nodes: Any) -> None:
    # The cluster fixture names its listeners PLAINTEXT and CONTROLLER; the protocol map makes
    # both SSL, with client certificates required: every replica fetch, Raft RPC, heartbeat and
    # forwarded request between the nodes is mutual TLS (listener names are only names).
    cluster: ClusterNodes = cluster_nodes(3, **broker_tls(pki, **{
        "listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:SSL",
        "ssl.client.auth": "required"}))
    client = {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SSL",
              "ssl.ca.location": str(pki.ca),
              "ssl.certificate.location": str(pki.client("alice").certificate),
              "ssl.key.location": str(pki.client("alice").key)}
    admin = AdminClient(client)
    wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, what="3 brokers",
               timeout_s=60)
    admin.create_topics([NewTopic("replicated", 3, 3)])["replicated"].result(TIMEOUT)
    values = [f"r{i}".encode() for i in range(100)]
    assert produce({**client, "acks": "all"}, "replicated", values) == [None] * 100

    def fully_replicated() -> bool:
        topic = admin.list_topics("replicated", timeout=5).topics["replicated"]
        return all(len(p.isrs) == 3 for p in topic.partitions.values())

    wait_until(fully_replicated, what="every partition's ISR has all three nodes")
    assert sorted(consume(client, "replicated", 100)) == sorted(values)
