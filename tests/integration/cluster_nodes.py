"""Real multi-node Samsa clusters for integration tests: N combined-mode node processes
(``process.roles=broker,controller``) on 127.0.0.1.

``controller.quorum.voters`` must name every voter's port before any process starts, so ports
are reserved up front (bound to port 0, read, released: another process could take one in the
instant between, which would fail that test's start-up loudly, never silently). Each node's log
goes to a file in the test's temp dir; ``wait_until`` polls a condition with a deadline (the
cluster's state is observed through the Kafka protocol, never by sleeping a fixed time).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from compat.samsa_cluster import free_ports

if TYPE_CHECKING:  # the integration conftest imports this module's fixture: no import cycle
    from tests.integration.conftest import BrokerProcess

__all__ = ["ClusterNodes", "cluster_nodes", "free_ports", "wait_until"]

T = TypeVar("T")


def wait_until(condition: Callable[[], T], *, timeout_s: float = 30, what: str = "") -> T:
    """Poll ``condition`` until it returns a truthy value; its value (AssertionError at the
    deadline, naming ``what``)."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as error:  # the cluster is still settling: try again
            last_error = error
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what or condition}"
                         + (f" (last error: {last_error!r})" if last_error else ""))


@dataclass
class ClusterNodes:
    root: Path
    size: int = 3
    extra: dict[str, str] = field(default_factory=dict)
    nodes: dict[int, BrokerProcess] = field(default_factory=dict)
    client_ports: dict[int, int] = field(default_factory=dict)
    controller_ports: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        ports = free_ports(2 * self.size)
        for index, node_id in enumerate(range(1, self.size + 1)):
            self.client_ports[node_id] = ports[2 * index]
            self.controller_ports[node_id] = ports[2 * index + 1]

    @property
    def voters(self) -> str:
        return ",".join(f"{node_id}@127.0.0.1:{port}"
                        for node_id, port in sorted(self.controller_ports.items()))

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.client_ports.values())

    def overrides(self, node_id: int) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": (f"PLAINTEXT://127.0.0.1:{self.client_ports[node_id]},"
                          f"CONTROLLER://127.0.0.1:{self.controller_ports[node_id]}"),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.client_ports[node_id]}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "broker.rack": f"rack-{node_id}",
            **self.extra,
        }

    def start(self, node_id: int) -> BrokerProcess:
        from tests.integration.conftest import BrokerProcess

        node = BrokerProcess(log_dir=self.root / f"node-{node_id}", overrides=self.overrides(node_id),
                             stderr_path=self.root / f"node-{node_id}.log")
        self.nodes[node_id] = node.start()
        return node

    def start_all(self) -> ClusterNodes:
        for node_id in range(1, self.size + 1):
            self.start(node_id)
        return self

    def kill(self, node_id: int) -> None:
        """kill -9: no flush, no clean-shutdown marker, no resignation."""
        process = self.nodes[node_id].process
        assert process is not None
        process.kill()
        process.wait()

    def stop_all(self) -> dict[int, int]:
        return {node_id: node.stop() for node_id, node in self.nodes.items() if node.alive()}

    def logs(self) -> str:
        return "\n".join(f"--- node {node_id} ---\n{node.log()[-6000:]}"
                         for node_id, node in self.nodes.items())


@pytest.fixture
def cluster_nodes(tmp_path: Path) -> Iterator[Callable[..., ClusterNodes]]:
    """A factory: ``cluster_nodes(size=3, **extra_config)`` (every node stopped at the end)."""
    made: list[ClusterNodes] = []

    def make(size: int = 3, **extra: str) -> ClusterNodes:
        cluster = ClusterNodes(tmp_path / f"cluster-{len(made)}", size,
                               {key.replace("_", "."): value for key, value in extra.items()})
        made.append(cluster)
        return cluster.start_all()

    yield make
    for cluster in made:
        codes = cluster.stop_all()
        assert all(code == 0 for code in codes.values()), f"{codes}\n{cluster.logs()}"
