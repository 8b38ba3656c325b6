"""One Samsa broker process for one suite: ephemeral port, temporary log dir, SIGTERM to stop.

Started exactly as ``tests/integration/conftest.py`` does (``python -m tools.cli broker start``),
reading the ``Samsa broker started on HOST:PORT`` line (its first listener) from stdout; the
broker's log (stderr) is appended to a file next to the suite's results, and ``address(name)``
reads any listener's bound address from the ``serving on`` line this start wrote there.
``api_versions()`` asks the running broker which APIs it serves (ApiVersions v0, request header
v1); with ``gather_facts`` (plus the listener protocols and SASL mechanisms the broker's own
config validation accepts) that is what the reviewed skip table (``compat/skips.py``) is checked
against on every run. ``faults``: the broker starts behind a ``compat.fault_proxy.FaultProxy``
that answers the chosen APIs with an error, and advertises the proxy's address, which
``bootstrap`` then is. ``AUTHORIZER``: the settings of a Kafka test cluster's authorizer, for the
suites that test ACLs. ``create_scram_users``: SCRAM credentials through AlterUserScramCredentials
(confluent-kafka's admin client) on a PLAINTEXT listener, for the suites' SASL brokers.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from broker.config import BrokerConfig, ConfigError
from compat.fault_proxy import Fault, FaultProxy
from compat.skips import Facts
from protocol.frames import encode_request
from protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from protocol.messages.produce_response import ProduceResponse
from protocol.messages.request_header import RequestHeader

ROOT = Path(__file__).resolve().parents[1]
STARTED = "Samsa broker started on "
STOP_TIMEOUT_SECONDS = 30
API_VERSIONS_KEY = 18
PRODUCE_KEY = 0
UNSUPPORTED_VERSION = 35
ADMIN_TIMEOUT_SECONDS = 30
SERVING = re.compile(r" serving on (.*) \(")
# A Kafka test cluster's authorizer settings, which the suites' brokers start with: ACLs are
# enforced, and a resource with no ACL is open to everyone.
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


@dataclass
class SamsaBroker:
    log_path: Path
    overrides: dict[str, str] = field(default_factory=dict)
    host: str = ""
    port: int = 0
    _process: subprocess.Popen[str] | None = None
    _log_offset: int = 0  # where this start's lines begin in the (appended) log file
    _data_dir: tempfile.TemporaryDirectory[str] | None = None
    faults: tuple[Fault, ...] = ()
    _proxy: FaultProxy | None = None
    _upstream: tuple[str, int] = ("", 0)  # the broker's own address (the proxy's upstream)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> SamsaBroker:
        self._data_dir = tempfile.TemporaryDirectory(prefix="samsa-compat-")
        settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": self._data_dir.name,
                    **self.overrides}
        if self.faults:
            self._proxy = FaultProxy(self.faults)
            if not settings["listeners"].startswith("PLAINTEXT://") or "," in settings["listeners"]:
                raise ValueError("faults need a broker with one PLAINTEXT listener")
            settings["advertised.listeners"] = f"PLAINTEXT://{self._proxy.bootstrap}"
        arguments = [str(ROOT / ".venv" / "bin" / "python"), "-m", "tools.cli", "broker", "start"]
        for key, value in settings.items():
            arguments += ["--override", f"{key}={value}"]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "a") as log:
            self._process = subprocess.Popen(
                arguments, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert self._process.stdout is not None
        line = self._process.stdout.readline()  # blocks until the line or the process's end
        if not line.startswith(STARTED):
            self._process.kill()
            self._process.wait()
            raise RuntimeError(f"Samsa broker did not start: {line!r}; see {self.log_path}")
        host, port = line[len(STARTED):].strip().rsplit(":", 1)
        self._upstream = (host, int(port))
        self.host, self.port = self._upstream
        if self._proxy is not None:
            self._proxy.start(host, int(port))
            self.host, self.port = "127.0.0.1", self._proxy.port
        return self

    def address(self, listener_name: str) -> str:
        """``host:port`` the listener named ``listener_name`` is bound to (it may have been
        given port 0), from the ``serving on NAME://HOST:PORT, ...`` line the broker logged
        before it printed the started line."""
        with open(self.log_path, errors="replace") as log:
            log.seek(self._log_offset)
            match = SERVING.search(log.read())
        for endpoint in (match.group(1).split(", ") if match else ()):
            name, _, address = endpoint.partition("://")
            if name == listener_name.upper():
                return address
        raise RuntimeError(f"the broker logged no {listener_name} listener; see {self.log_path}")

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> int | None:
        """SIGTERM and wait; returns the exit code (None if it had to be killed)."""
        if self._proxy is not None:
            self._proxy.stop()
            self._proxy = None
        if self._process is None:
            return None
        code: int | None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
        try:
            code = self._process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            code = None
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._process = None
        if self._data_dir is not None:
            self._data_dir.cleanup()
            self._data_dir = None
        return code

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """``{api_key: (min_version, max_version)}`` as the broker advertises them."""
        client_id = b"samsa-compat"
        header = struct.pack(">hhih", API_VERSIONS_KEY, 0, 1, len(client_id)) + client_id
        body = self.exchange(struct.pack(">i", len(header)) + header)
        _correlation_id, error_code, count = struct.unpack_from(">ihi", body, 0)
        if error_code != 0:
            raise RuntimeError(f"ApiVersions failed with error code {error_code}")
        entries = struct.iter_unpack(">hhh", body[10:10 + 6 * count])
        return {key: (low, high) for key, low, high in entries}

    def facts(self, *, quick_mode: bool = False, java_tools: bool = False) -> Facts:
        """What the skip table is checked against on this run (``gather_facts``)."""
        return gather_facts(self.api_versions(),
                            message_format_v1=self.serves_message_format_v1(),
                            quick_mode=quick_mode, java_tools=java_tools)

    def serves_message_format_v1(self) -> bool:
        """Whether a Produce v2 request (message format v1; Kafka 4.0 lists v0-v2 in
        ApiVersions but refuses them, KIP-896/KAFKA-18659) is served: one empty partition is
        sent and the answer is anything but UNSUPPORTED_VERSION or a closed connection."""
        version = 2
        request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[TopicProduceData(
            "samsa-compat-probe", [PartitionProduceData(0, b"")])])
        try:
            body = self.exchange(encode_request(
                RequestHeader(PRODUCE_KEY, version, 1, "samsa-compat"), request))
        except ConnectionError:
            return False
        response = ProduceResponse.decode(memoryview(body)[4:], version)  # after the header v0
        return all(partition.error_code != UNSUPPORTED_VERSION
                   for topic in response.responses for partition in topic.partition_responses)

    def exchange(self, frame: bytes) -> bytes:
        """One request frame to the broker itself (not through a fault proxy) and the body of
        its response frame."""
        with socket.create_connection(self._upstream, timeout=10) as connection:
            connection.sendall(frame)
            (size,) = struct.unpack(">i", _receive(connection, 4))
            return _receive(connection, size)


# Kafka's listener security protocols and SASL mechanisms, each probed against the broker's config.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def gather_facts(api_versions: dict[int, tuple[int, int]], *, message_format_v1: bool = False,
                 quick_mode: bool = False, java_tools: bool = False) -> Facts:
    """What ``compat/skips.py`` is checked against: the broker's ApiVersions, the Kafka version
    kafka-python infers from them, what the broker's configuration accepts, and what the run
    found out itself (``SamsaBroker.serves_message_format_v1``, the mode, Java)."""
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    protocols = frozenset(protocol for protocol in SECURITY_PROTOCOLS if _config_accepts(
        "listeners", {"listeners": "PROBE://127.0.0.1:0",
                      "listener.security.protocol.map": f"PROBE:{protocol}",
                      "sasl.enabled.mechanisms": "SCRAM-SHA-512"}))
    mechanisms = frozenset(mechanism for mechanism in SASL_MECHANISMS if _config_accepts(
        "sasl.enabled.mechanisms", {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                    "sasl.enabled.mechanisms": mechanism}))
    return Facts(api_versions=api_versions,
                 kafka_version=tuple(infer_broker_version_from_api_versions(api_versions)),
                 security_protocols=protocols, sasl_mechanisms=mechanisms,
                 message_format_v1=message_format_v1, quick_mode=quick_mode,
                 java_tools=java_tools)


def _config_accepts(key: str, properties: dict[str, str]) -> bool:
    """False if the broker's config validation refuses ``key`` in ``properties`` (an error
    about another key, e.g. a JAAS file a mechanism needs, still means ``key`` is accepted)."""
    try:
        BrokerConfig.from_properties({"log.dirs": "/nonexistent", **properties})
    except ConfigError as error:
        return error.key != key
    return True


@dataclass(frozen=True)
class ScramUser:
    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    name: str
    password: str
    iterations: int = 4096


def create_scram_users(bootstrap: str, users: Iterable[ScramUser]) -> None:
    """Upsert each user's SCRAM credential (AlterUserScramCredentials) through the PLAINTEXT
    listener at ``bootstrap``; raises the broker's error if one is refused."""
    upsertions: list[UserScramCredentialAlteration] = [UserScramCredentialUpsertion(
        user.name, ScramCredentialInfo(ScramMechanism[user.mechanism.replace("-", "_")],
                                       user.iterations), user.password.encode())
        for user in users]
    if not upsertions:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "samsa-compat"})
    for future in admin.alter_user_scram_credentials(upsertions).values():
        future.result(ADMIN_TIMEOUT_SECONDS)


def _receive(connection: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = connection.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection during ApiVersions")
        chunks += chunk
    return bytes(chunks)
