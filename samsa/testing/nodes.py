"""Real Samsa brokers for tests: ``Broker`` (one process) and ``Cluster`` (KRaft nodes).

Each node is a ``samsa broker start`` process (``python -m`` the CLI of this installation, see
``samsa._cli``) on 127.0.0.1 with its data in a directory the caller owns (pytest's
``tmp_path``); its log (stderr) goes to ``<directory>/broker.log``. Nothing is mocked: the
clients under test (Samsa's, confluent-kafka, kafka-python, aiokafka) speak the Kafka protocol
to it.

Invariants:
- ``start`` returns once the node is listening (its ``Samsa broker started on HOST:PORT`` line
  on stdout) — for a ``Cluster``, once every node is listening *and* every broker is registered
  and unfenced with a controller elected (Metadata through the client); a node that exits first
  or a deadline passing raises ``BrokerStartError`` carrying the tail of the node's log.
- A node keeps its port across ``kill``/``restart``, so clients' bootstrap strings stay valid.
- ``pause`` stops a node with SIGSTOP (the process holds its sockets and answers nothing, as a
  long GC pause or a hung VM would); ``resume`` continues it; ``stop`` of a paused node resumes
  it first, so SIGTERM can be handled.
- ``stop`` is SIGTERM and a wait (``BrokerStopError`` when the node does not exit in time: it is
  then killed); ``kill`` is SIGKILL (no flush, no clean-shutdown marker).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from samsa._cli import server_module
from samsa.testing.ports import free_ports

STARTED = "Samsa broker started on "
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 60.0
LOG_TAIL_CHARACTERS = 4_000
T = TypeVar("T")

# A single node answers in tests' time scales: topics of one partition, one replica, offsets and
# transaction logs that fit a test (Kafka's defaults are 50 partitions, 3 replicas).
SINGLE_NODE_DEFAULTS = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


class BrokerStartError(RuntimeError):
    """A node did not come up; the message carries the end of its log."""


class BrokerStopError(RuntimeError):
    """A node did not exit within the stop timeout after SIGTERM (it was then killed)."""


def wait_until(condition: Callable[[], T], *, timeout_s: float = 30.0, what: str = "") -> T:
    """Poll ``condition`` (every 20 ms) until it returns a truthy value, and return that value;
    ``TimeoutError`` naming ``what`` and the last exception ``condition`` raised at the
    deadline."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as error:  # not there yet: the cluster is still settling
            last_error = error
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what or condition}"
                               + (f" (last error: {last_error!r})" if last_error else ""))
        time.sleep(0.02)


class _Helpers:
    """What tests do with a running broker or cluster, through Samsa's client at
    ``bootstrap``."""

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    @property
    def _answering(self) -> str:
        """Where the helpers send their requests (a cluster leaves out paused nodes)."""
        return self.bootstrap

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                     config: Mapping[str, str] | None = None, timeout_s: float = 30.0) -> str:
        """Create ``name`` and return it once every partition has a leader."""
        return create_topic(self._answering, name, partitions, replication_factor, config,
                            timeout_s)

    def produce(self, topic: str, values: Sequence[bytes | str], *,
                key: bytes | str | None = None, partition: int | None = None) -> list[int]:
        """Append ``values`` (acks=all) and return their offsets."""
        return produce(self._answering, topic, values, key=key, partition=partition)

    def read(self, topic: str, *, partitions: Sequence[int] | None = None,
             timeout_s: float = 30.0) -> list[Any]:
        """Every record of ``topic`` from its start to the end it has when called
        (``samsa.ConsumerRecord``s, partition by partition in offset order)."""
        return read(self._answering, topic, partitions=partitions, timeout_s=timeout_s)



class Broker(_Helpers):
    """One Samsa broker process: ``Broker(directory, config={...}).start()``.

    ``config`` holds broker settings by Kafka's names (``log.retention.ms``, …) over
    ``SINGLE_NODE_DEFAULTS``; ``listeners``/``log.dirs`` are set here. Also a context manager
    (started on enter, stopped on exit)."""

    def __init__(self, directory: Path | str, config: Mapping[str, str] | None = None, *,
                 port: int = 0, defaults: Mapping[str, str] = SINGLE_NODE_DEFAULTS) -> None:
        self.directory = Path(directory)
        self.config = {**defaults, **(config or {})}
        self.host = "127.0.0.1"
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self.paused = False  # stopped with SIGSTOP (still alive, answering nothing)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._log: Any = None

    # -- life cycle -------------------------------------------------------------------------

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Broker:
        """Start the process and return once it listens (``BrokerStartError`` otherwise)."""
        self.launch()
        return self.wait_listening(timeout_s)

    def launch(self) -> None:
        """Start the process without waiting (``wait_listening`` waits): a cluster's nodes
        start side by side."""
        if self.alive:
            raise RuntimeError(f"the broker on {self.bootstrap} is already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        settings = {"log.dirs": str(self.directory / "data"), **self.config,
                    "listeners": self._listeners()}
        arguments = [sys.executable, "-m", server_module("tools.cli"), "broker", "start"]
        for key, value in settings.items():
            arguments += ["--override", f"{key}={value}"]
        self._log = open(self.log_path, "a")  # noqa: SIM115 - closed when the process ends
        self.process = subprocess.Popen(
            arguments, stdout=subprocess.PIPE, stderr=self._log, text=True, cwd=self.directory,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._lines = queue.Queue()
        threading.Thread(target=self._read_stdout, args=(self.process, self._lines),
                         name=f"samsa-testing-stdout-{self.process.pid}", daemon=True).start()

    def wait_listening(self, timeout_s: float = START_TIMEOUT_S) -> Broker:
        """Until the launched process prints that it listens (``BrokerStartError`` if it
        exits first or ``timeout_s`` passes: it is then killed)."""
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            line = ""
        if not line or not line.startswith(STARTED):
            self._end(signal.SIGKILL)
            raise BrokerStartError(
                f"the broker in {self.directory} did not start within {timeout_s:g} s "
                f"(stdout: {line!r}); its log ends:\n{self.log_tail()}")
        self.host, port = line[len(STARTED):].strip().rsplit(":", 1)
        self.port = int(port)
        return self

    def _listeners(self) -> str:
        return f"PLAINTEXT://127.0.0.1:{self.port}"

    @staticmethod
    def _read_stdout(process: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait; the exit code (0 after a clean shutdown)."""
        self.terminate()
        return self.wait_stopped(timeout_s)

    def terminate(self) -> None:
        """Send SIGTERM (after SIGCONT: a paused node must run to handle it); ``wait_stopped``
        waits for the exit."""
        process = self._running()
        process.send_signal(signal.SIGCONT)
        process.send_signal(signal.SIGTERM)
        self.paused = False

    def wait_stopped(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """The exit code of a node told to stop (killed after ``timeout_s``: BrokerStopError)."""
        process = self.process
        if process is None:
            raise RuntimeError(f"the broker in {self.directory} was never started")
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._end(signal.SIGKILL)
            raise BrokerStopError(f"the broker on {self.bootstrap} did not stop within "
                                  f"{timeout_s:g} s of SIGTERM and was killed") from None
        finally:
            self._close_log()

    def kill(self) -> None:
        """SIGKILL: the files stay as a crash leaves them; ``restart`` reuses the port."""
        self._end(signal.SIGKILL)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and answers nothing until ``resume``."""
        self._running().send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._running().send_signal(signal.SIGCONT)
        self.paused = False

    def restart(self, timeout_s: float = START_TIMEOUT_S) -> Broker:
        """Stop (SIGTERM) if running, then start on the same port with the same data."""
        if self.alive:
            self.stop()
        return self.start(timeout_s)

    def _running(self) -> subprocess.Popen[str]:
        if self.process is None or self.process.poll() is not None:
            raise RuntimeError(f"the broker in {self.directory} is not running")
        return self.process

    def _end(self, signal_number: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal_number)
            self.process.wait()
        self.paused = False
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def bootstrap(self) -> str:
        """``host:port``, for ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    def log_tail(self, characters: int = LOG_TAIL_CHARACTERS) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-characters:]
        except OSError:
            return "(no log)"

    def __enter__(self) -> Broker:
        return self if self.alive else self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.alive:
            self.stop()


class Cluster(_Helpers):
    """``size`` combined-mode KRaft nodes (broker and controller each), ids 1..size.

    ``config`` applies to every node. Topics are created with ``replication.factor`` 3 (or
    ``size``) and ``min.insync.replicas`` 2 by default, as a production cluster would be; a
    node that stops heartbeating is fenced after 3 s (``broker.session.timeout.ms``; Kafka's
    default, 9 s, would make every failover test wait that long)."""

    def __init__(self, directory: Path | str, size: int = 3,
                 config: Mapping[str, str] | None = None) -> None:
        self.directory = Path(directory)
        self.size = size
        replicas = str(min(3, size))
        defaults = {
            "default.replication.factor": replicas,
            "min.insync.replicas": str(min(2, size)),
            "offsets.topic.num.partitions": "1",
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.num.partitions": "1",
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": str(min(2, size)),
            "group.initial.rebalance.delay.ms": "0",
            # A killed node is fenced, and its leaderships moved, after 3 s (Kafka: 9 s).
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
        }
        ports = free_ports(2 * size)
        client_ports = {node_id: ports[2 * index] for index, node_id in enumerate(self.node_ids)}
        controller_ports = {node_id: ports[2 * index + 1]
                            for index, node_id in enumerate(self.node_ids)}
        voters = ",".join(f"{node_id}@127.0.0.1:{controller_ports[node_id]}"
                          for node_id in self.node_ids)
        self.nodes: dict[int, Broker] = {}
        for node_id in self.node_ids:
            node_config = {
                **defaults, **(config or {}),
                "process.roles": "broker,controller",
                "node.id": str(node_id),
                "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{client_ports[node_id]}",
            }
            self.nodes[node_id] = _ClusterNode(self.directory / f"node-{node_id}", node_config,
                                               port=client_ports[node_id], defaults={},
                                               controller_port=controller_ports[node_id])

    @property
    def node_ids(self) -> range:
        return range(1, self.size + 1)

    @property
    def bootstrap(self) -> str:
        """Every node's ``host:port``, comma-separated."""
        return ",".join(node.bootstrap for node in self.nodes.values())

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> Cluster:
        """Start every node; return once all brokers are registered and unfenced with a
        controller elected."""
        try:
            launched = [node for node in self.nodes.values() if not node.alive]
            for node in launched:
                node.launch()
            for node in launched:
                node.wait_listening()
            self.wait_until_ready(timeout_s=timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_until_ready(self, nodes: Sequence[int] | None = None,
                         timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until the running ``nodes`` (default: all running) are registered brokers in every
        running node's Metadata, with a controller."""
        expected = set(nodes if nodes is not None else
                       [node_id for node_id, node in self.nodes.items() if node.alive])

        def ready() -> bool:
            for node_id in expected:
                description = _describe_cluster(self.nodes[node_id].bootstrap)
                if (description.controller_id < 0
                        or not expected <= {broker.node_id for broker in description.brokers}):
                    return False
            return True

        try:
            wait_until(ready, timeout_s=timeout_s, what=f"nodes {sorted(expected)} to be ready")
        except TimeoutError as error:
            raise BrokerStartError(f"{error}\n{self.log_tails()}") from None

    def node(self, node_id: int) -> Broker:
        return self.nodes[node_id]

    def kill(self, node_id: int) -> None:
        """SIGKILL node ``node_id``."""
        self.nodes[node_id].kill()

    def pause(self, node_id: int) -> None:
        """SIGSTOP node ``node_id`` (``resume`` continues it)."""
        self.nodes[node_id].pause()

    def resume(self, node_id: int) -> None:
        self.nodes[node_id].resume()

    def restart(self, node_id: int, timeout_s: float = READY_TIMEOUT_S) -> Broker:
        """(Re)start node ``node_id`` on its ports; return once it is a registered broker."""
        node = self.nodes[node_id].restart()
        self.wait_until_ready([node_id], timeout_s=timeout_s)
        return node

    def stop(self) -> dict[int, int]:
        """SIGTERM every running node (all at once, then wait); their exit codes."""
        running = {node_id: node for node_id, node in self.nodes.items() if node.alive}
        for node in running.values():
            node.terminate()
        return {node_id: node.wait_stopped() for node_id, node in running.items()}

    @property
    def _answering(self) -> str:
        answering = [node.bootstrap for node in self.nodes.values()
                     if node.alive and not node.paused]
        if not answering:
            raise RuntimeError("no node is running and unpaused to ask")
        return ",".join(answering)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The node id leading ``topic``'s ``partition`` now (-1 when none), as the running
        nodes that are not paused see it."""
        admin = _admin(self._answering)
        try:
            description = admin.describe_topics([topic])[topic]
        finally:
            admin.close()
        for info in description.partitions:
            if info.partition == partition:
                return int(info.leader)
        return -1

    def log_tails(self) -> str:
        return "\n".join(f"--- node {node_id} ---\n{node.log_tail()}"
                         for node_id, node in self.nodes.items())

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()


class _ClusterNode(Broker):
    """A cluster node: a client listener and a controller listener on fixed ports."""

    def __init__(self, directory: Path, config: Mapping[str, str], *, port: int,
                 defaults: Mapping[str, str], controller_port: int) -> None:
        super().__init__(directory, config, port=port, defaults=defaults)
        self.controller_port = controller_port

    def _listeners(self) -> str:
        return (f"PLAINTEXT://127.0.0.1:{self.port},"
                f"CONTROLLER://127.0.0.1:{self.controller_port}")


# -- client helpers ----------------------------------------------------------------------------

def _admin(bootstrap: str) -> Any:
    from samsa.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "request.timeout.ms": 5_000})


def _describe_cluster(bootstrap: str) -> Any:
    admin = _admin(bootstrap)
    try:
        return admin.describe_cluster()
    finally:
        admin.close()


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication_factor: int = -1,
                 config: Mapping[str, str] | None = None, timeout_s: float = 30.0) -> str:
    """Create topic ``name`` and return it once every partition has a leader."""
    from samsa.admin import NewTopic

    admin = _admin(bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, replication_factor, dict(config or {}))])

        def led() -> bool:
            description = admin.describe_topics([name])[name]
            return (len(description.partitions) == partitions
                    and all(info.leader >= 0 for info in description.partitions))

        wait_until(led, timeout_s=timeout_s, what=f"every partition of {name} to have a leader")
    finally:
        admin.close()
    return name


def _bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def produce(bootstrap: str, topic: str, values: Sequence[bytes | str], *,
            key: bytes | str | None = None, partition: int | None = None) -> list[int]:
    """Append ``values`` to ``topic`` with acks=all; their offsets, in order."""
    from samsa.producer import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    try:
        futures = [producer.send(topic, _bytes(value), key=_bytes(key), partition=partition)
                   for value in values]
        producer.flush()
        return [future.result().offset for future in futures]
    finally:
        producer.close()


def read(bootstrap: str, topic: str, *, partitions: Sequence[int] | None = None,
         timeout_s: float = 30.0) -> list[Any]:
    """Every record of ``topic`` (or of ``partitions``) from the start to the end offsets the
    partitions have when called."""
    from samsa.consumer import Consumer
    from samsa.types import TopicPartition

    consumer = Consumer(config={"bootstrap.servers": bootstrap, "enable.auto.commit": False})
    try:
        if partitions is None:
            partitions = [info.partition for info in consumer.partitions_for(topic)]
        assigned = [TopicPartition(topic, number) for number in partitions]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        ends = consumer.end_offsets(assigned)
        records: dict[TopicPartition, list[Any]] = {tp: [] for tp in assigned}

        def caught_up() -> bool:
            for record in consumer.poll(0.2):
                records[TopicPartition(record.topic, record.partition)].append(record)
            return all(consumer.position(tp) >= end for tp, end in ends.items())

        wait_until(caught_up, timeout_s=timeout_s, what=f"{topic} read to its end offsets {ends}")
        return [record for tp in assigned for record in records[tp] if record.offset < ends[tp]]
    finally:
        consumer.close()


@contextlib.contextmanager
def running_broker(directory: Path | str, config: Mapping[str, str] | None = None
                   ) -> Iterator[Broker]:
    """``with running_broker(tmp_path) as broker:`` — started, then stopped (exit code 0
    asserted)."""
    broker = Broker(directory, config).start()
    try:
        yield broker
    finally:
        if broker.alive:
            code = broker.stop()
            if code != 0:
                raise BrokerStopError(f"the broker exited with {code}; its log ends:\n"
                                      f"{broker.log_tail()}")
