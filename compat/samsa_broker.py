"""One Samsa broker process for one suite: ephemeral port, temporary log dir, SIGTERM to stop.

Started exactly as ``tests/integration/conftest.py`` does (``python -m tools.cli broker start``),
reading the ``Samsa broker started on HOST:PORT`` line (its first listener) from stdout; the
broker's log (stderr) is appended to a file next to the suite's results, and ``address(name)``
reads any listener's bound address from the ``serving on`` line this start wrote there.
``api_versions()`` asks the running broker which APIs it serves (ApiVersions v0, request header
v1), so a suite can skip the tests that need an API Samsa does not have yet and pick them up by
itself once it does. ``AUTHORIZER``: the settings of a Kafka test cluster's authorizer, for the
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

ROOT = Path(__file__).resolve().parents[1]
STARTED = "Samsa broker started on "
STOP_TIMEOUT_SECONDS = 30
API_VERSIONS_KEY = 18
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

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> SamsaBroker:
        self._data_dir = tempfile.TemporaryDirectory(prefix="samsa-compat-")
        settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": self._data_dir.name,
                    **self.overrides}
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
        self.host, port = line[len(STARTED):].strip().rsplit(":", 1)
        self.port = int(port)
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
        with socket.create_connection((self.host, self.port), timeout=10) as connection:
            connection.sendall(struct.pack(">i", len(header)) + header)
            (size,) = struct.unpack(">i", _receive(connection, 4))
            body = _receive(connection, size)
        _correlation_id, error_code, count = struct.unpack_from(">ihi", body, 0)
        if error_code != 0:
            raise RuntimeError(f"ApiVersions failed with error code {error_code}")
        entries = struct.iter_unpack(">hhh", body[10:10 + 6 * count])
        return {key: (low, high) for key, low, high in entries}


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
