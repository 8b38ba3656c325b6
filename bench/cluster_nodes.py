"""Samsa node processes for the cluster bench: a KRaft cluster of combined nodes
(``process.roles=broker,controller``) on 127.0.0.1, and a single node beside it.

The same settings as the integration tests' ``tests/integration/cluster_nodes.py`` (which the
tests keep: tests never import bench), with what a bench needs on top: a node can be killed
(SIGKILL) and started again on its reserved ports, many times over, and its log carries the
quorum's and the broker lifecycle's INFO lines.

Ports: ``controller.quorum.voters`` names every voter's port before any process starts, so
ports are reserved up front (bound to port 0, read, released); a node started again binds the
same client and controller ports.

Logs: each node's log (``ROOT/node-N.log``, appended to across restarts) carries the daemon's
INFO lines (``samsa.*``): ``metadata quorum epoch E: leader L``, ``controller N leads epoch E``,
``broker N unfenced``, each with a millisecond timestamp of ``time.time()`` — the clock the
bench reads at a kill, which is what lets ``bench.cluster_failover`` split a failover into its
parts.

State: a ``BenchCluster`` belongs to the thread that made it; it starts and stops only the
processes it started.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bench import peers
from compat.samsa_cluster import free_ports

T = TypeVar("T")



def wait_until(condition: Callable[[], T | None], *, timeout_s: float = 60.0,
               interval_s: float = 0.05, what: str = "") -> T:
    """Poll ``condition`` until it returns a truthy value, and return that value; an exception
    from it counts as "not yet". TimeoutError at the deadline, naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if value := condition():
                return value
        except Exception as error:  # the cluster is still settling: try again
            last_error = error
        time.sleep(interval_s)
    raise TimeoutError(f"no {what or condition} within {timeout_s} s"
                       + (f" (last error: {last_error!r})" if last_error else ""))


@contextlib.contextmanager
def work_dir(prefix: str, keep: Path | None) -> Iterator[Path]:
    """``keep`` (created, left in place) or a temporary directory removed at the end."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as temp:
        yield Path(temp)


def start_single(root: Path) -> peers.BrokerProcess:
    """One node with ``process.roles`` unset: its own LocalController, an fsync per commit."""
    root.mkdir(parents=True, exist_ok=True)
    return peers.start_samsa(root / "single")


@dataclass
class BenchCluster:
    """``size`` combined nodes, ids 1..size, each with a reserved client and controller port."""

    root: Path
    size: int = 3
    extra: dict[str, str] = field(default_factory=dict)
    nodes: dict[int, peers.BrokerProcess] = field(default_factory=dict)
    client_ports: dict[int, int] = field(default_factory=dict)
    controller_ports: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        ports = free_ports(2 * self.size)
        for index, node_id in enumerate(self.node_ids):
            self.client_ports[node_id] = ports[2 * index]
            self.controller_ports[node_id] = ports[2 * index + 1]

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.size + 1))

    @property
    def voters(self) -> str:
        return ",".join(f"{node_id}@127.0.0.1:{port}"
                        for node_id, port in sorted(self.controller_ports.items()))

    def settings(self, node_id: int) -> dict[str, str]:
        client, controller = self.client_ports[node_id], self.controller_ports[node_id]
        return {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": f"PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{client}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            **self.extra,
        }

    def log_path(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}.log"  # where peers.start_samsa puts it

    def start(self, node_id: int) -> peers.BrokerProcess:
        node = peers.start_samsa(self.root / f"node-{node_id}", overrides=self.settings(node_id))
        self.nodes[node_id] = node
        return node

    def start_all(self) -> BenchCluster:
        for node_id in self.node_ids:
            self.start(node_id)
        return self

    def kill(self, node_id: int) -> None:
        """kill -9: no flush, no clean-shutdown marker, no resignation."""
        node = self.nodes.pop(node_id)
        node.process.send_signal(signal.SIGKILL)
        node.process.wait()
        node.stop()  # closes the pipe and the log file; the process has already ended

    def alive(self) -> list[int]:
        return sorted(self.nodes)

    def stop_all(self) -> dict[int, int]:
        codes = {}
        for node_id in list(self.nodes):
            try:
                codes[node_id] = self.nodes.pop(node_id).stop()
            except subprocess.SubprocessError:
                codes[node_id] = -1
        return codes
