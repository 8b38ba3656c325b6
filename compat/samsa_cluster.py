"""Three combined-mode Samsa nodes for one suite (``python -m compat.run --brokers 3``).

The nodes are configured as ``make cluster``'s (``conf/cluster/node-*.properties``: KRaft
combined mode, ``broker.rack`` per node, replication factors 3), with what must differ for a
harness run put over them: Kafka's default ``min.insync.replicas`` (1, where ``make cluster``
has 2: the suites' own test clusters run Kafka's defaults, and their tests create topics with
replication factor 1 and produce with acks=all, which min.insync 2 refuses as Kafka would), node ids 0, 1, 2 (kafka-python's tests
assume a broker 0, as its own fixture always starts one), ``broker.rack=RACK<id>`` (the racks
of librdkafka's trivup clusters: test 0101 names its ``client.rack`` after them), ports reserved up front (every
``controller.quorum.voters`` entry needs its port before any process starts: bound to port 0,
read, released; another process taking one in between fails the start loudly) and explicitly
advertised, a temporary data dir each (``SamsaBroker``), and the suite's own settings on top.
Each node's log goes to ``<log_dir>/<label>-node-<id>.log``.

``start`` returns once every node answers Metadata listing all the brokers (registered and
unfenced) and a controller, polled against a deadline. The cluster offers what the suites use of
a ``SamsaBroker``: ``bootstrap`` (all nodes, comma-separated), ``address(listener)``,
``alive``, ``stop`` and ``facts``; ``facts`` adds ``brokers`` and ``replicates_data``, which
``replicates_data()`` probes: a one-partition topic with a replica on every node, one record
produced with acks=all, then DescribeLogDirs on every node until two report a non-empty log
(the leader's and a follower's: the data plane) or ``REPLICATION_PROBE_SECONDS`` pass with only
the leader's (followers hold empty logs; none at all fails the probe). The harness's process owns every node process; nothing here is shared between threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.config import parse_properties
from compat.fault_proxy import Fault
from compat.samsa_broker import ROOT, SamsaBroker
from compat.skips import Facts
from protocol.frames import encode_request
from protocol.messages.describe_log_dirs_request import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
)
from protocol.messages.describe_log_dirs_response import DescribeLogDirsResponse
from protocol.messages.request_header import RequestHeader
from samsa.testing.ports import free_ports

CLUSTER_CONF = ROOT / "conf" / "cluster"
# Keys of make cluster's node files that the harness sets per node itself.
PER_NODE_KEYS = ("node.id", "listeners", "advertised.listeners", "controller.quorum.voters",
                 "log.dirs")
FORMED_TIMEOUT_SECONDS = 60
REPLICATION_PROBE_SECONDS = 10
PROBE_TOPIC = "samsa-compat-replication-probe"
SUITE_MIN_INSYNC_REPLICAS = "1"  # Kafka's default (see the module docstring)
DESCRIBE_LOG_DIRS_VERSION = 1  # not flexible: response header v0
T = TypeVar("T")


def cluster_template(directory: Path = CLUSTER_CONF) -> list[dict[str, str]]:
    """make cluster's node settings, by node id, without the per-node keys set here."""
    files = sorted(directory.glob("node-*.properties"),
                   key=lambda path: int(parse_properties(path.read_text())["node.id"]))
    return [{key: value for key, value in parse_properties(path.read_text()).items()
             if key not in PER_NODE_KEYS} for path in files]


def node_settings(template: Mapping[str, str], node_id: int, voters: str, controller_port: int,
                  listeners: Mapping[str, int], suite_settings: Mapping[str, str]
                  ) -> dict[str, str]:
    """One node's overrides. ``listeners``: ``{name: port}`` of its client listeners, first
    one first (the suite's settings name the names in ``listeners``; PLAINTEXT by default);
    the CONTROLLER listener is added."""
    client = ",".join(f"{name}://127.0.0.1:{port}" for name, port in listeners.items())
    protocols = {name: name for name in listeners} | {"CONTROLLER": "PLAINTEXT"}
    return {**template, "min.insync.replicas": SUITE_MIN_INSYNC_REPLICAS,
            **{key: value for key, value in suite_settings.items() if key != "listeners"},
            "node.id": str(node_id), "controller.quorum.voters": voters,
            "broker.rack": f"RACK{node_id}",
            "listeners": f"{client},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": client,
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocols.items())}


def listener_names(suite_settings: Mapping[str, str]) -> list[str]:
    """The client listener names of a suite's ``listeners`` setting (PLAINTEXT without one)."""
    listeners = suite_settings.get("listeners", "PLAINTEXT://127.0.0.1:0")
    return [endpoint.split("://", 1)[0] for endpoint in listeners.split(",")]


@dataclass
class SamsaCluster:
    log_dir: Path
    label: str
    overrides: dict[str, str] = field(default_factory=dict)
    size: int = 3
    nodes: list[SamsaBroker] = field(default_factory=list)
    _ports: list[dict[str, int]] = field(default_factory=list)  # per node: {listener: port}

    @property
    def bootstrap(self) -> str:
        return self.address(listener_names(self.overrides)[0])

    def address(self, listener_name: str) -> str:
        """Every node's ``host:port`` of the listener ``listener_name``, comma-separated."""
        return ",".join(f"127.0.0.1:{ports[listener_name.upper()]}" for ports in self._ports)

    def start(self) -> SamsaCluster:
        template = cluster_template()
        if len(template) < self.size:
            raise ValueError(f"{CLUSTER_CONF} describes {len(template)} nodes, not {self.size}")
        names = listener_names(self.overrides)
        ports = free_ports(self.size * (len(names) + 1))
        voters = ",".join(f"{node_id}@127.0.0.1:{ports[node_id]}" for node_id in range(self.size))
        client = iter(ports[self.size:])
        self._ports = [{name: next(client) for name in names} for _ in range(self.size)]
        try:
            for node_id in range(self.size):
                settings = node_settings(template[node_id], node_id, voters, ports[node_id],
                                         self._ports[node_id], self.overrides)
                self.nodes.append(SamsaBroker(
                    self.log_dir / f"{self.label}-node-{node_id}.log", settings).start())
            self._wait_until_formed()
        except Exception:
            self.stop()
            raise
        return self

    def _wait_until_formed(self) -> None:
        first = listener_names(self.overrides)[0]
        for node_id in range(self.size):
            address = f"127.0.0.1:{self._ports[node_id][first]}"
            admin = AdminClient({"bootstrap.servers": address, "client.id": "samsa-compat"})
            wait_until(partial(_formed, admin, self.size), FORMED_TIMEOUT_SECONDS,
                       f"node {node_id} to list {self.size} brokers and a controller; see "
                       f"{self.log_dir}/{self.label}-node-*.log")

    def alive(self) -> bool:
        return bool(self.nodes) and all(node.alive() for node in self.nodes)

    def stop(self) -> int | None:
        """Stop every node (SIGTERM, each waited for); the first non-zero exit code, None if
        one had to be killed, else 0."""
        codes = [node.stop() for node in self.nodes]
        self.nodes = []
        return next((code for code in codes if code != 0), 0)

    def facts(self, *, quick_mode: bool = False, java_tools: bool = False) -> Facts:
        facts = self.nodes[0].facts(quick_mode=quick_mode, java_tools=java_tools)
        return replace(facts, brokers=self.size, replicates_data=self.replicates_data())

    def replicates_data(self) -> bool:
        """True if a record produced with acks=all to a partition with a replica on every
        node reaches a second node's log (the leader's and a follower's) within
        ``REPLICATION_PROBE_SECONDS``."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "client.id": "samsa-compat"})
        for future in admin.create_topics([NewTopic(PROBE_TOPIC, 1, self.size)]).values():
            future.result(30)
        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                                 "client.id": "samsa-compat"})
            producer.produce(PROBE_TOPIC, b"replicated?", partition=0)
            if producer.flush(30) != 0:
                raise RuntimeError(f"the replication probe's record to {PROBE_TOPIC} was not "
                                   "acked")
            holding = partial(self._nodes_holding_data, PROBE_TOPIC)
            wait_until(lambda: holding() >= 2, REPLICATION_PROBE_SECONDS,
                       "a follower with the probe's record")
        except TimeoutError:
            if holding() != 1:  # not even the leader: the probe itself is broken
                raise
            return False
        finally:  # the suites see a cluster without it (some list every topic)
            for future in admin.delete_topics([PROBE_TOPIC]).values():
                future.result(30)
        return True

    def _nodes_holding_data(self, topic: str) -> int:
        return sum(1 for node in self.nodes if _partition_size(node, topic) > 0)


def _formed(admin: AdminClient, size: int) -> bool:
    metadata = admin.list_topics(timeout=5)
    return len(metadata.brokers) == size and metadata.controller_id >= 0


def _partition_size(node: SamsaBroker, topic: str) -> int:
    """The size in bytes of partition 0 of ``topic`` on ``node`` (0 if it holds none)."""
    request = DescribeLogDirsRequest(topics=[DescribableLogDirTopic(topic, [0])])
    body = node.exchange(encode_request(RequestHeader(
        DescribeLogDirsRequest.API_KEY, DESCRIBE_LOG_DIRS_VERSION, 1, "samsa-compat"), request))
    response = DescribeLogDirsResponse.decode(memoryview(body)[4:], DESCRIBE_LOG_DIRS_VERSION)
    return sum(partition.partition_size for result in response.results
               for entry in result.topics if entry.name == topic for partition in entry.partitions)


def wait_until(condition: Callable[[], T | None], timeout_seconds: float, what: str) -> T:
    """Poll ``condition`` (errors count as not yet) until it returns a truthy value;
    TimeoutError naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_seconds
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as error:  # the cluster is still settling
            last_error = error
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout_seconds}s waiting for {what}"
                       + (f" (last error: {last_error!r})" if last_error else ""))


def start_brokers(log_dir: Path, label: str, settings: Mapping[str, str], *, brokers: int = 1,
                  faults: tuple[Fault, ...] = ()) -> SamsaBroker | SamsaCluster:
    """One ``SamsaBroker`` (log ``<log_dir>/<label>.log``) or a cluster of ``brokers`` nodes;
    ``faults`` need one broker (the fault proxy fronts one listener)."""
    if brokers == 1:
        return SamsaBroker(log_dir / f"{label}.log", dict(settings), faults=faults).start()
    if faults:
        raise ValueError("--fault needs one broker: the fault proxy fronts one listener")
    return SamsaCluster(log_dir, label, dict(settings), size=brokers).start()
