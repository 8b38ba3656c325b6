"""The fault harness's cluster: N combined-mode Samsa node processes whose node-to-node traffic
all goes through ``tests.faults.network.LinkProxies``, with process faults (kill -9, SIGSTOP /
SIGCONT, SIGTERM, restart, wipe) and the cluster's state read through the Kafka protocol.

Addressing (all on 127.0.0.1; every real port reserved up front, since
``controller.quorum.voters`` and the proxies need them before any process starts): node ``i``
has listeners

- ``CLIENT``: what tests and clients use, advertised at its real port (never proxied);
- ``CONTROLLER``: the real Raft port. Node ``i``'s ``controller.quorum.voters`` names itself
  at that port and each other voter ``j`` at the proxy of link ``(i -> j, controller)``, which
  forwards to ``j``'s CONTROLLER port (voters are matched by id, so the addresses may differ
  from node to node). Raft, forwarding, broker heartbeats and AlterPartition take this path;
- ``FROMj`` for every node ``j``: node ``i`` advertises ``FROMj`` at the proxy of link
  ``(j -> i, broker)``, which forwards to ``i``'s real ``FROMj`` port, and its own
  ``inter.broker.listener.name`` is ``FROMi``: so node ``i`` finds every leader's ``FROMi``
  endpoint at the proxy of link ``(i -> leader)``. Replica fetches and transaction markers take
  this path. (``FROMi`` on node ``i`` itself is advertised at its real port: never used.)

A node talking to itself (the active controller's own broker, a leader's own FROM listener)
uses its real ports: no link, nothing to fault.

Node ids are 1..size. Node ``i``'s files: ``root/node-i.properties`` (its config),
``root/node-i.log`` (stdout and stderr), ``root/node-i/data`` (``log.dirs``, metadata log
included). Every data dir is formatted (``meta.properties``: the cluster's id and the node's)
before its first start and again after ``wipe``. ``wipe`` of a combined node also loses its
Raft state (the ``quorum-state`` vote included): Kafka's static quorum has the same hazard (a
wiped voter could vote twice in one epoch; KIP-853's directory ids are Kafka's answer).

Reading the state: ``describe`` / ``live_brokers`` / ``controller_id`` send Metadata to one
node itself (``via``), never through a client's routing, so an isolated node's stale view can be
read as such; without ``via``, ``describe`` takes the active controller's view and
``wait_healthy`` waits for every running, unpaused node to agree. They use ``asyncio.run``:
call them from a thread with no running event loop.

State: a ``FaultCluster`` belongs to the thread that made it (the harness's main thread); only
``network`` (the proxies) is safe to drive from other threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, TypeVar

from broker.config import BrokerConfig
from broker.meta_properties import META_PROPERTIES, random_uuid
from broker.node_client import NodeClient, NodeClientError
from broker.storage_format import format_storage
from compat.samsa_cluster import free_ports
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.metadata_response import MetadataResponse
from tests.faults.network import KINDS, Link, LinkProxies
from tests.integration.cluster_nodes import wait_until as integration_wait_until

__all__ = ["FaultCluster", "PartitionState", "wait_until"]

ROOT = Path(__file__).resolve().parents[2]
STARTED = "Samsa broker started on "
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
T = TypeVar("T")


def wait_until(condition: Callable[[], T | None], timeout_s: float = 30, what: str = "") -> T:
    """``tests.integration.cluster_nodes.wait_until`` with the deadline as a positional."""
    return integration_wait_until(condition, timeout_s=timeout_s, what=what)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition as the cluster's metadata describes it."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def healthy(self) -> bool:
        """A leader and every replica in the ISR."""
        return self.leader >= 0 and set(self.isr) == set(self.replicas)


@dataclass
class _Node:
    node_id: int
    client_port: int
    controller_port: int
    from_ports: dict[int, int]  # source node -> this node's real FROM<source> port
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    paused: bool = False


class FaultCluster:
    """``size`` combined-mode nodes behind ``LinkProxies`` (see the module docstring).
    ``config`` is added to every node's configuration, ``env`` to its environment (``{node}``
    in a value becomes the node's id)."""

    def __init__(self, root: Path, size: int = 3, config: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None, *, seed: int = 0) -> None:
        self.root = root
        self.size = size
        self.config = dict(config or {})
        self.cluster_id = random_uuid()
        root.mkdir(parents=True, exist_ok=True)
        self.node_ids = list(range(1, size + 1))
        ports = iter(free_ports(size * (size + 2)))
        self._nodes = {node_id: _Node(node_id, next(ports), next(ports),
                                      {source: next(ports) for source in self.node_ids},
                                      env={key: value.replace("{node}", str(node_id))
                                           for key, value in (env or {}).items()})
                       for node_id in self.node_ids}
        self.network = LinkProxies(self._upstreams(), seed=seed)
        self._closed = False

    def _upstreams(self) -> dict[Link, tuple[str, int]]:
        upstreams = {}
        for src in self.node_ids:
            for dst in self.node_ids:
                if src == dst:
                    continue
                upstreams[Link(src, dst, "broker")] = ("127.0.0.1",
                                                       self._nodes[dst].from_ports[src])
                upstreams[Link(src, dst, "controller")] = ("127.0.0.1",
                                                           self._nodes[dst].controller_port)
        assert {link.kind for link in upstreams} <= set(KINDS)
        return upstreams

    # -- configuration ----------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Every node's CLIENT listener (direct, never proxied)."""
        return ",".join(self.address(node_id) for node_id in self.node_ids)

    def address(self, node_id: int) -> str:
        """``host:port`` of node ``node_id``'s CLIENT listener."""
        return f"127.0.0.1:{self._nodes[node_id].client_port}"

    def data_dir(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}" / "data"

    def log_path(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}.log"

    def properties(self, node_id: int) -> dict[str, str]:
        """Node ``node_id``'s configuration (``config`` over the addressing)."""
        node = self._nodes[node_id]
        names = ["CLIENT", "CONTROLLER", *(f"FROM{source}" for source in self.node_ids)]
        listeners = [f"CLIENT://127.0.0.1:{node.client_port}",
                     f"CONTROLLER://127.0.0.1:{node.controller_port}",
                     *(f"FROM{source}://127.0.0.1:{port}"
                       for source, port in node.from_ports.items())]
        advertised = [f"CLIENT://127.0.0.1:{node.client_port}"]
        for source in self.node_ids:
            port = node.from_ports[source] if source == node_id else self.network.port(
                Link(source, node_id, "broker"))
            advertised.append(f"FROM{source}://127.0.0.1:{port}")
        voters = [f"{voter}@127.0.0.1:" + str(node.controller_port if voter == node_id else
                                              self.network.port(Link(node_id, voter, "controller")))
                  for voter in self.node_ids]
        return {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "log.dirs": str(self.data_dir(node_id)),
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(f"{name}:PLAINTEXT" for name in names),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": f"FROM{node_id}",
            "controller.quorum.voters": ",".join(voters),
            **self.config,
        }

    def set_env(self, node_id: int, key: str, value: str) -> None:
        """``key=value`` in node ``node_id``'s environment from its next start."""
        self._nodes[node_id].env[key] = value

    # -- processes --------------------------------------------------------------------------

    def start_all(self, *, ready_timeout_s: float | None = 60.0) -> FaultCluster:
        """Start the proxies and every node that is not running (in parallel); then, unless
        ``ready_timeout_s`` is None, wait until every node sees all of them unfenced."""
        self.network.start()
        down = [node_id for node_id in self.node_ids if not self.alive(node_id)]
        for node_id in down:
            self._spawn(node_id)
        for node_id in down:
            self._await_started(node_id)
        if ready_timeout_s is not None:
            self.wait_ready(ready_timeout_s)
        return self

    def start(self, node_id: int) -> None:
        """Start node ``node_id`` (returns once its listeners are open)."""
        assert not self.alive(node_id), f"node {node_id} is running"
        self.network.start()
        self._spawn(node_id)
        self._await_started(node_id)

    def _spawn(self, node_id: int) -> None:
        node = self._nodes[node_id]
        config_path = self.root / f"node-{node_id}.properties"
        config_path.write_text("".join(f"{key}={value}\n"
                                       for key, value in self.properties(node_id).items()))
        if not (self.data_dir(node_id) / META_PROPERTIES).exists():
            self._format(node_id, config_path)
        log = self.log_path(node_id).open("a")
        log.write(f"--- harness: starting node {node_id} at {time.time():.3f}\n")
        log.flush()
        node.process = subprocess.Popen(
            [sys.executable, "-m", "tools.cli", "broker", "start", "--config", str(config_path)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **node.env})
        log.close()  # the child has its own descriptor
        node.paused = False

    def _format(self, node_id: int, config_path: Path) -> None:
        """``samsa storage format`` with the cluster's id, in this process."""
        self.data_dir(node_id).mkdir(parents=True, exist_ok=True)
        format_storage(BrokerConfig.load(config_path), self.cluster_id, ignore_formatted=False)
        ledger = self._nodes[node_id].env.get("SAMSA_FSYNC_LEDGER")
        if ledger:  # `samsa storage format` fsyncs what it writes: durable before any start
            from tests.faults.power import record_durable

            record_durable(self.data_dir(node_id), Path(ledger))

    def _await_started(self, node_id: int) -> None:
        process = self._nodes[node_id].process
        assert process is not None and process.stdout is not None
        line = _read_line(process.stdout, START_TIMEOUT_S)
        if not line.startswith(STARTED):
            process.kill()
            process.wait()
            raise AssertionError(f"node {node_id} did not start: {line!r}\n"
                                 f"{self.log(node_id)[-4000:]}")
        threading.Thread(target=_copy_rest, args=(process.stdout, self.log_path(node_id)),
                         daemon=True, name=f"node-{node_id}-stdout").start()

    def kill(self, node_id: int) -> None:
        """kill -9: no flush, no clean-shutdown marker, no resignation."""
        process = self._process(node_id)
        process.kill()
        process.wait()
        self._nodes[node_id].paused = False

    def kill_all(self) -> None:
        """kill -9 of every running node at once (every signal sent before any wait)."""
        running = [self._process(node_id) for node_id in self.node_ids if self.alive(node_id)]
        for process in running:
            process.kill()
        for process in running:
            process.wait()
        for node in self._nodes.values():
            node.paused = False

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process keeps its sockets and state but does nothing (a zombie)."""
        self._process(node_id).send_signal(signal.SIGSTOP)
        self._nodes[node_id].paused = True

    def resume(self, node_id: int) -> None:
        self._process(node_id).send_signal(signal.SIGCONT)
        self._nodes[node_id].paused = False

    def stop(self, node_id: int, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (controlled shutdown) and wait; the exit code (killed after ``timeout_s``)."""
        process = self._process(node_id)
        process.send_signal(signal.SIGTERM)
        if self._nodes[node_id].paused:
            self.resume(node_id)
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise

    def restart(self, node_id: int) -> None:
        """Stop (SIGTERM) if running, then start."""
        if self.alive(node_id):
            self.stop(node_id)
        self.start(node_id)

    def wipe(self, node_id: int) -> None:
        """Broker replacement: node ``node_id`` (down) loses its data dir, metadata log included,
        and is formatted again with the same cluster and node id, to rejoin empty."""
        assert not self.alive(node_id), f"wipe node {node_id}: it is running"
        shutil.rmtree(self.root / f"node-{node_id}", ignore_errors=True)
        config_path = self.root / f"node-{node_id}.properties"
        config_path.write_text("".join(f"{key}={value}\n"
                                       for key, value in self.properties(node_id).items()))
        self._format(node_id, config_path)

    def alive(self, node_id: int) -> bool:
        process = self._nodes[node_id].process
        return process is not None and process.poll() is None

    def paused(self, node_id: int) -> bool:
        return self.alive(node_id) and self._nodes[node_id].paused

    def pid(self, node_id: int) -> int | None:
        process = self._nodes[node_id].process
        return process.pid if process is not None else None

    def _process(self, node_id: int) -> subprocess.Popen[str]:
        process = self._nodes[node_id].process
        assert process is not None and process.poll() is None, f"node {node_id} is not running"
        return process

    def log(self, node_id: int) -> str:
        path = self.log_path(node_id)
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self, tail: int = 4000) -> str:
        return "\n".join(f"--- node {node_id} ---\n{self.log(node_id)[-tail:]}"
                         for node_id in self.node_ids)

    def close(self) -> dict[int, int]:
        """Heal the network, stop every running node (SIGTERM — and SIGCONT, for a paused one —
        then SIGKILL for those still running ``STOP_TIMEOUT_S`` later) and the proxies; the exit
        codes of the nodes that were running. Idempotent."""
        if self._closed:
            return {}
        self.network.heal()  # a clean shutdown needs the controller
        running = {node_id: process for node_id in self.node_ids
                   if (process := self._nodes[node_id].process) is not None
                   and process.poll() is None}
        for process in running.values():
            process.send_signal(signal.SIGTERM)
            process.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        codes: dict[int, int] = {}
        for node_id, process in running.items():
            try:
                codes[node_id] = process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                codes[node_id] = process.wait()
        self.network.stop()
        self._closed = True
        return codes

    def __enter__(self) -> FaultCluster:
        return self.start_all()

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- the cluster's state, through the Kafka protocol ------------------------------------

    def metadata(self, topics: list[str] | None = None, *, via: int | None = None,
                 timeout_s: float = 5.0) -> MetadataResponse:
        """A Metadata response from node ``via`` itself (default: the first running, unpaused
        node that answers): no client-side routing, so an isolated node's own view can be read."""
        candidates = [via] if via is not None else [
            node_id for node_id in self.node_ids
            if self.alive(node_id) and not self._nodes[node_id].paused]
        last_error: Exception = AssertionError("no node is running")
        for node_id in candidates:
            try:
                return asyncio.run(self._ask_metadata(node_id, topics, timeout_s))
            except (NodeClientError, OSError) as error:
                last_error = error
        raise last_error

    async def _ask_metadata(self, node_id: int, topics: list[str] | None,
                            timeout_s: float) -> MetadataResponse:
        timeout_ms = int(timeout_s * 1000)
        client = NodeClient("127.0.0.1", self._nodes[node_id].client_port,
                            client_id="fault-cluster", request_timeout_ms=timeout_ms,
                            connect_timeout_ms=timeout_ms)
        request = MetadataRequest(topics=None if topics is None else [
            MetadataRequestTopic(name=name) for name in topics])
        try:
            response = await client.send(request)
        finally:
            await client.close()
        assert isinstance(response, MetadataResponse)
        return response

    def describe(self, topic: str, *, via: int | None = None,
                 timeout_s: float = 5.0) -> dict[int, PartitionState]:
        """Each partition of ``topic`` (leader, leader epoch, replicas, ISR) by partition, as
        node ``via`` sees it — by default the active controller, as most running nodes name
        it (an isolated node's view is stale); empty while the node does not know the topic."""
        if via is not None:
            return _partitions(topic, self.metadata([topic], via=via, timeout_s=timeout_s))
        views = self.views(topic, timeout_s=timeout_s)
        if not views:
            raise AssertionError("no running node answers Metadata")
        named = Counter(view.controller_id for view in views.values() if view.controller_id >= 0)
        controller = named.most_common(1)[0][0] if named else -1
        return _partitions(topic, views.get(controller) or next(iter(views.values())))

    def views(self, topic: str, *, timeout_s: float = 5.0) -> dict[int, MetadataResponse]:
        """The Metadata of ``topic`` from every running, unpaused node that answers."""
        views = {}
        for node_id in self.node_ids:
            if self.alive(node_id) and not self._nodes[node_id].paused:
                with contextlib.suppress(NodeClientError, OSError):
                    views[node_id] = self.metadata([topic], via=node_id, timeout_s=timeout_s)
        return views

    def live_brokers(self, *, via: int | None = None, timeout_s: float = 5.0) -> set[int]:
        """The registered, unfenced brokers node ``via`` (default: any) knows of, provided it
        knows an active controller; empty otherwise."""
        response = self.metadata([], via=via, timeout_s=timeout_s)
        if response.controller_id < 0:
            return set()
        return {broker.node_id for broker in response.brokers}

    def controller_id(self, *, via: int | None = None, timeout_s: float = 5.0) -> int:
        """The active controller as node ``via`` (default: any) knows it; -1 for none."""
        return self.metadata([], via=via, timeout_s=timeout_s).controller_id

    def wait_ready(self, timeout_s: float = 60.0, *, nodes: list[int] | None = None) -> None:
        """Wait until each of ``nodes`` (default: the running ones) knows a controller and
        sees every running node as an unfenced broker."""
        running = {node_id for node_id in self.node_ids if self.alive(node_id)}
        for node_id in sorted(running if nodes is None else nodes):
            wait_until(partial(self._sees, node_id, running), timeout_s,
                       f"node {node_id} to see brokers {sorted(running)} unfenced")

    def _sees(self, node_id: int, brokers: set[int]) -> bool:
        return self.live_brokers(via=node_id) >= brokers

    def wait_healthy(self, topic: str, timeout_s: float = 30.0, *,
                     via: int | None = None) -> dict[int, PartitionState]:
        """Wait until every partition of ``topic`` has a leader and its full ISR, as node
        ``via`` sees it — by default as every running, unpaused node sees it, all alike (a
        healed node's stale view must have caught up too); the partitions then."""
        def healthy() -> dict[int, PartitionState] | None:
            if via is not None:
                views = [self.describe(topic, via=via)]
            else:
                running = [node_id for node_id in self.node_ids if self.alive(node_id)
                           and not self._nodes[node_id].paused]
                views = [self.describe(topic, via=node_id) for node_id in running]
            first = views[0]
            if not first or not all(state.healthy for state in first.values()):
                return None
            return first if all(_same(first, view) for view in views[1:]) else None

        return wait_until(healthy, timeout_s,
                          f"every partition of {topic} with a leader and a full ISR")


def _partitions(topic: str, response: MetadataResponse) -> dict[int, PartitionState]:
    return {partition.partition_index: PartitionState(
                topic, partition.partition_index, partition.leader_id, partition.leader_epoch,
                tuple(partition.replica_nodes), tuple(partition.isr_nodes))
            for found in response.topics if found.name == topic and not found.error_code
            for partition in found.partitions}


def _same(one: dict[int, PartitionState], other: dict[int, PartitionState]) -> bool:
    """The same leaders, epochs and ISRs (as sets: the order of an ISR is not meaningful)."""
    def key(states: dict[int, PartitionState]) -> dict[int, tuple[int, int, frozenset[int]]]:
        return {index: (state.leader, state.leader_epoch, frozenset(state.isr))
                for index, state in states.items()}
    return key(one) == key(other)


def _read_line(stream: IO[str], timeout_s: float) -> str:
    """The first line of a child's stdout, or what it wrote before ending or the deadline."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            return ""
    return stream.readline()


def _copy_rest(stream: IO[str], path: Path) -> None:
    """Keep draining a node's stdout into its log, so the pipe never fills."""
    with path.open("a") as log:
        for line in stream:
            log.write(line)
            log.flush()
