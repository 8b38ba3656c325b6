"""compat's stand-in for kafka-python's broker fixture, and the scripts running Kafka's own tools:
pure (no socket).

The ``kafka-home/bin`` scripts (Kafka's own kafka-topics.sh, kafka-acls.sh and kafka-storage.sh),
``SamsaBroker.address`` reading a listener from the broker log, and the kafka-python broker
templates rendered as its ``KafkaFixture`` renders them, then read by Samsa's own config code and
by the stand-in ``SpawnedService`` (the ``--standalone`` quorum as Samsa's static one).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
from pathlib import Path
from types import ModuleType

import pytest

from broker.config import BrokerConfig, parse_properties
from compat.apache_kafka import TOOLS, java_command
from compat.kafka_home import KAFKA_TOOLS, kafka_home
from compat.samsa_broker import SamsaBroker

RESOURCES = Path(__file__).resolve().parents[3] / "compat" / "kafka_python" / "resources"
SERVICE = RESOURCES.parent / "service.py"


def test_kafka_home_runs_kafkas_own_tools(tmp_path: Path) -> None:
    home = kafka_home(tmp_path)
    assert home == (tmp_path / "kafka-home").resolve()
    for script, tool in KAFKA_TOOLS.items():
        path = home / "bin" / script
        assert os.access(path, os.X_OK)
        line = path.read_text().splitlines()[1]
        assert shlex.split(line) == ["exec", *java_command(TOOLS[tool], []), "$@"]
    assert set(KAFKA_TOOLS) == {"kafka-topics.sh", "kafka-acls.sh", "kafka-storage.sh"}
    assert TOOLS[KAFKA_TOOLS["kafka-storage.sh"]] == "kafka.tools.StorageTool"
    compat = Path(__file__).resolve().parents[3] / "compat"
    assert not (compat / "kafka_topics.py").exists() and not (compat / "kafka_storage.py").exists()


def test_address_reads_this_starts_listeners_from_the_log(tmp_path: Path) -> None:
    log = tmp_path / "broker.log"
    log.write_text("x INFO samsa.broker: node 1 serving on PLAINTEXT://127.0.0.1:1111, "
                   "SASL_PLAINTEXT://127.0.0.1:2222 (uvloop)\n")
    broker = SamsaBroker(log, _log_offset=log.stat().st_size)
    with open(log, "a") as output:
        output.write("y INFO samsa.broker: node 1 serving on PLAINTEXT://127.0.0.1:3333, "
                     "SASL_PLAINTEXT://localhost:4444 (asyncio)\n")
    assert broker.address("SASL_PLAINTEXT") == "localhost:4444"
    assert broker.address("plaintext") == "127.0.0.1:3333"
    with pytest.raises(RuntimeError, match="no INTERNAL listener"):
        broker.address("INTERNAL")


def _fixture_binding(mechanism: str, tmp_path: Path) -> dict[str, object]:
    """The attributes of kafka-python's KafkaFixture the templates name, for one SASL broker."""
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              'username="alice" password="alice-secret" user_alice="alice-secret";\n'
              if mechanism == "PLAIN" else
              "org.apache.kafka.common.security.scram.ScramLoginModule required "
              'username="alice" password="alice-secret";\n')
    return {"broker_id": 0, "transport": "SASL_PLAINTEXT", "host": "localhost", "port": 9093,
            "controller_port": 9094, "tmp_dir": tmp_path, "partitions": 4, "replicas": 1,
            "auto_create_topic": True, "sasl_mechanism": mechanism, "jaas_config": module,
            "sasl_config": f"sasl.enabled.mechanisms={mechanism}\n"
                           f"sasl.mechanism.inter.broker.protocol={mechanism}\n",
            "ssl_config": "", "acl_config": "authorizer.class.name=org.apache.kafka.metadata.authorizer."
                          "StandardAuthorizer\nallow.everyone.if.no.acl.found=true"}


def _service() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compat_kafka_python_service", SERVICE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_fixture_templates_give_a_samsa_sasl_broker(mechanism: str, tmp_path: Path) -> None:
    binding = _fixture_binding(mechanism, tmp_path)
    rendered = {name: (RESOURCES / name).read_text().format(**binding)
                for name in ("kafka.properties", "kafka_server_jaas.conf", "sasl_command.conf")}
    (tmp_path / "kafka.properties").write_text(rendered["kafka.properties"])
    (tmp_path / "jaas.conf").write_text(rendered["kafka_server_jaas.conf"])
    service = _service()
    spawned = service.SpawnedService(
        ["/kafka/bin/kafka-run-class.sh", "kafka.Kafka", str(tmp_path / "kafka.properties")],
        {"KAFKA_OPTS": f" -Djava.security.auth.login.config={tmp_path / 'jaas.conf'}"})
    settings = spawned._settings(tmp_path / "kafka.properties")
    assert settings["sasl.jaas.config"] == binding["jaas_config"].strip()  # type: ignore[union-attr]
    assert settings["controller.quorum.voters"] == "0@localhost:9094"  # --standalone's voter
    config = BrokerConfig.from_properties(settings)
    by_name = {listener.name: listener for listener in config.listeners}
    assert (by_name["SASL_PLAINTEXT"].port, by_name["CONTROLLER"].port) == (9093, 9094)
    assert config.kraft.is_controller and config.kraft.is_broker
    assert config.kraft.quorum.voter_ids == frozenset({0})
    assert config.kraft.inter_broker_listener_name == "SASL_PLAINTEXT"
    sasl = config.listener_security["SASL_PLAINTEXT"]
    assert sasl.mechanisms == (mechanism,)
    assert sasl.plain_users == ({"alice": "alice-secret"} if mechanism == "PLAIN" else {})
    assert config.listener_security["CONTROLLER"].security_protocol == "PLAINTEXT"
    command = parse_properties(rendered["sasl_command.conf"])
    assert (command["security.protocol"], command["sasl.mechanism"]) == ("SASL_PLAINTEXT",
                                                                         mechanism)


def test_java_stores_of_the_ssl_fixture_become_pem_stores(tmp_path: Path) -> None:
    """kafka-python's SSL fixture hands the broker PKCS#12 stores (keytool's default, named
    .jks) with passwords; the stand-in gives Samsa PEM copies, which its config accepts."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl CLI")

    def openssl(*arguments: str) -> None:
        subprocess.run(["openssl", *arguments], cwd=tmp_path, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out",
            "cert.pem", "-days", "1", "-subj", "/CN=localhost")
    openssl("pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-out", "ks.jks",
            "-passout", "pass:foobar")
    openssl("pkcs12", "-export", "-nokeys", "-in", "cert.pem", "-out", "ts.jks",
            "-passout", "pass:foobar")
    settings = _service()._pem_stores({
        "listeners": "SSL://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
        "ssl.keystore.location": str(tmp_path / "ks.jks"), "ssl.keystore.password": "foobar",
        "ssl.key.password": "foobar", "ssl.truststore.location": str(tmp_path / "ts.jks"),
        "ssl.truststore.password": "foobar"})
    assert settings["ssl.keystore.type"] == settings["ssl.truststore.type"] == "PEM"
    assert not {"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password"} & set(
        settings)
    keystore = Path(settings["ssl.keystore.location"]).read_text()
    assert "PRIVATE KEY" in keystore and "BEGIN CERTIFICATE" in keystore
    assert "BEGIN CERTIFICATE" in Path(settings["ssl.truststore.location"]).read_text()
    BrokerConfig.from_properties(settings)  # Samsa takes them (contexts built at start-up)
    assert _service()._pem_stores({"listeners": "PLAINTEXT://:0"}) == {"listeners": "PLAINTEXT://:0"}
