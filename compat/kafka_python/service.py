"""Stand-in for kafka-python's ``test/service.py``, which its sdist leaves out.

``make compat`` copies this file to ``test/service.py`` inside the unpacked kafka-python sdist.
Its ``KafkaFixture`` uses it two ways:

- With ``KAFKA_URI`` set (the main run), the fixture wraps the already-running Samsa broker in
  an ``ExternalService``: nothing to start or stop.
- Without it (``test_sasl_integration.py``, run on its own), the fixture renders
  ``kafka.properties`` and ``kafka_server_jaas.conf`` from the templates compat copies into
  ``servers/resources/default/``, runs ``$KAFKA_ROOT/bin/kafka-storage.sh format --standalone``
  — Apache Kafka's own tool, which writes ``meta.properties``, the ``--add-scram`` users and
  feature levels into ``bootstrap.checkpoint`` and a one-voter bootstrap snapshot into
  ``__cluster_metadata-0`` — and then ``SpawnedService([".../kafka-run-class.sh", "kafka.Kafka",
  PROPERTIES], env)``. In place of the JVM, ``SpawnedService.start`` starts a Samsa broker on
  that data directory with those properties, passing the ``KafkaServer`` entry of the JAAS file
  named by ``-Djava.security.auth.login.config`` in ``KAFKA_OPTS`` as ``sasl.jaas.config``
  (PLAIN users are its ``user_<name>`` options). Samsa reads the SCRAM users from
  ``bootstrap.checkpoint`` itself. One translation: ``--standalone`` formats a dynamic quorum
  (KIP-853, ``controller.quorum.bootstrap.servers`` and no ``controller.quorum.voters``, which
  Kafka's tool refuses together with ``--standalone``); Samsa has only static quorums, so the
  stand-in starts it with ``controller.quorum.voters=<node.id>@<that one bootstrap server>`` —
  the same single voter. For an SSL broker (``test_ssl_integration.py``'s fixture)
  the fixture makes a Java key store and trust store with ``keytool`` (``ssl.keystore.type``
  unset: Kafka's JKS; JDK 9+ writes PKCS#12 whatever the file is called); Samsa reads PEM
  stores only, so the stand-in converts both with the ``openssl`` CLI (``keytool
  -importkeystore`` first for a true JKS file) into PEM files beside them and starts the broker
  with ``ssl.keystore.type=PEM`` / ``ssl.truststore.type=PEM`` and no store passwords — the
  conversion Samsa's README tells its users to make. ``wait_for(pattern)`` — the fixture waits for the JVM's
  "Kafka Server started" and "Replayed UserScramCredentialRecord" lines — answers whether the
  broker is up and its registration unfenced (clients asking earlier get metadata without it);
  on False the fixture stops it and retries on another port, as it would a JVM.

The broker's log is appended to ``$SAMSA_COMPAT_BROKER_LOG`` (set by compat, kept with the
results) or else ``$LOG_DIR/samsa-broker.log``; ``dump_logs()`` logs its tail.
"""

import logging
import os
import re
import subprocess
import time
from pathlib import Path

from compat.samsa_broker import SamsaBroker

log = logging.getLogger(__name__)

JAAS_OPTION = re.compile(r"-Djava\.security\.auth\.login\.config=(\S+)")
KAFKA_SERVER_ENTRY = re.compile(r"\bKafkaServer\s*\{(.*?)\}\s*;", re.DOTALL)
UNFENCED = re.compile(r"broker \d+ unfenced")
UNFENCED_TIMEOUT_S = 30
LOG_TAIL_LINES = 40


class ExternalService:
    """A broker someone else started: nothing to start, stop or log."""

    def __init__(self, host, port):
        log.info("Using already running service at %s:%d", host, port)
        self.host = host
        self.port = port

    def start(self):
        pass

    def stop(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True

    def dump_logs(self):
        pass


class SpawnedService:
    """A Samsa broker where kafka-python would run a Kafka JVM (see the module docstring)."""

    def __init__(self, args=None, env=None):
        self.args = list(args or [])
        self.env = dict(env or os.environ)
        self.broker = None
        self.ready = False

    def start(self):
        if "kafka.Kafka" not in self.args:
            raise RuntimeError(f"compat: no stand-in for {self.args[:2]} (only kafka.Kafka)")
        properties_path = Path(self.args[-1])
        log_path = Path(self.env.get("SAMSA_COMPAT_BROKER_LOG")
                        or Path(self.env["LOG_DIR"]) / "samsa-broker.log")
        try:
            self.broker = SamsaBroker(log_path, self._settings(properties_path)).start()
            self.ready = self._wait_unfenced()
        except Exception:
            log.exception("compat: the Samsa broker for %s did not come up", properties_path)

    def _wait_unfenced(self):
        """The broker's log says its registration is unfenced (the only signal it gives)."""
        deadline = time.monotonic() + UNFENCED_TIMEOUT_S
        with open(self.broker.log_path, errors="replace") as log:
            log.seek(self.broker._log_offset)
            seen = ""
            while time.monotonic() < deadline and self.broker.alive():
                seen += log.read()
                if UNFENCED.search(seen):
                    return True
                time.sleep(0.05)
        return False

    def _settings(self, properties_path):
        settings = _static_quorum(_pem_stores(_read_properties(properties_path)))
        jaas = _jaas_entry(self.env.get("KAFKA_OPTS", ""))
        if jaas:
            settings["sasl.jaas.config"] = jaas
        return settings

    def stop(self):
        if self.broker is not None:
            self.broker.stop()
            self.broker = None
        self.ready = False

    def wait_for(self, pattern, timeout=30):
        return self.ready

    def dump_logs(self):
        if self.broker is None or not self.broker.log_path.exists():
            return
        lines = self.broker.log_path.read_text(errors="replace").splitlines()
        log.info("Samsa broker log (last %d lines):\n%s", LOG_TAIL_LINES,
                 "\n".join(lines[-LOG_TAIL_LINES:]))


def _read_properties(path):
    settings = {}
    for line in path.read_text().splitlines():
        text = line.strip()
        if text and not text.startswith(("#", "!")):
            key, _, value = text.partition("=")
            settings[key.strip()] = value.strip()
    return settings


JKS_MAGIC = b"\xfe\xed\xfe\xed"


def _pem_stores(settings):
    """``settings`` with a Java key store and trust store (JKS or PKCS#12) replaced by PEM
    copies, which Samsa reads; PEM stores and settings without stores are returned as is."""
    for kind, openssl_option in (("keystore", "-nodes"), ("truststore", "-nokeys")):
        location = settings.get(f"ssl.{kind}.location")
        store_type = settings.get(f"ssl.{kind}.type", "JKS").upper()
        if not location or store_type == "PEM":
            continue
        password = settings.pop(f"ssl.{kind}.password", "")
        pem = Path(f"{location}.pem")
        _to_pem(Path(location), password, openssl_option, pem)
        settings[f"ssl.{kind}.location"] = str(pem)
        settings[f"ssl.{kind}.type"] = "PEM"
        if kind == "keystore":
            settings.pop("ssl.key.password", None)  # -nodes: the PEM key is not encrypted
    return settings


def _to_pem(store, password, openssl_option, pem):
    pkcs12 = store
    if store.read_bytes()[:4] == JKS_MAGIC:  # a true JKS file: to PKCS#12 first
        pkcs12 = store.with_name(store.name + ".p12")
        subprocess.run(["keytool", "-importkeystore", "-noprompt", "-srckeystore", str(store),
                        "-srcstoretype", "JKS", "-srcstorepass", password,
                        "-destkeystore", str(pkcs12), "-deststoretype", "PKCS12",
                        "-deststorepass", password], check=True, capture_output=True)
    subprocess.run(["openssl", "pkcs12", "-in", str(pkcs12), "-passin", f"pass:{password}",
                    openssl_option, "-out", str(pem)], check=True, capture_output=True)


def _jaas_entry(kafka_opts):
    """The login module(s) of the ``KafkaServer`` section of the JVM's JAAS file, or ''."""
    option = JAAS_OPTION.search(kafka_opts)
    if option is None:
        return ""
    entry = KAFKA_SERVER_ENTRY.search(Path(option.group(1)).read_text())
    return entry.group(1).strip() if entry else ""


def _static_quorum(settings):
    """The one-voter dynamic quorum ``kafka-storage format --standalone`` formats, as the static
    quorum Samsa runs (see the module docstring); other settings are returned as they are."""
    servers = [s.strip() for s in settings.get("controller.quorum.bootstrap.servers", "").split(",")
               if s.strip()]
    if "controller.quorum.voters" not in settings and len(servers) == 1:
        settings["controller.quorum.voters"] = f"{settings['node.id']}@{servers[0]}"
    return settings
