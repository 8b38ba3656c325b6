"""FaultCluster with real node processes: every node-to-node path through the link proxies, and
the faults the campaigns use (isolate, pause, kill/restart, wipe) doing what they say.

Timeouts are shortened (``FAST``) so that fencing, ISR shrinking and elections take seconds;
every wait is for a condition observed through the Kafka protocol, with a deadline.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from broker.node_client import NodeClient, NodeClientError
from protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from protocol.messages.produce_response import ProduceResponse
from protocol.records import Record, encode_batch
from samsa.admin import AdminClient, NewTopic
from tests.faults.cluster import FaultCluster, PartitionState, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

SESSION_TIMEOUT_MS = 3000
FAST = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "replica.socket.timeout.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.request.timeout.ms": "1500",
    "offsets.topic.replication.factor": "3",
}
QUIET = {"log_level": 0}
PRODUCE_VERSION = 9  # topics by name; flexible


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FaultCluster]:
    made = FaultCluster(tmp_path / "cluster", 3, FAST)
    try:
        yield made.start_all()
    except BaseException:
        print(made.logs())
        raise
    finally:
        made.close()


def create_topic(cluster: FaultCluster, name: str, partitions: int = 1) -> dict[int, PartitionState]:
    with AdminClient(bootstrap_servers=cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3,
                                      configs={"min.insync.replicas": "2"})])
    return cluster.wait_healthy(name)


def produce_all(bootstrap: str, topic: str, values: list[bytes], timeout_s: float = 20) -> list[int]:
    """acks=all; the offsets acknowledged, in order (asserts every send was acknowledged)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": int(timeout_s * 1000),
                         **QUIET})
    results: list[tuple[KafkaError | None, int | None]] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, message: results.append(
            (error, message.offset())))
    producer.flush(timeout_s + 5)
    assert len(results) == len(values) and all(error is None for error, _ in results), results
    return [offset for _, offset in results if offset is not None]


def read_all(bootstrap: str, topic: str, partitions: int = 1) -> list[bytes]:
    """Every value of ``topic`` up to each partition's high watermark (partition order)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                         "enable.partition.eof": True, "enable.auto.commit": False, **QUIET})
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)
                     for partition in range(partitions)])
    values: dict[int, list[bytes]] = {partition: [] for partition in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition() or 0)
            elif error is None:
                values[message.partition() or 0].append(message.value() or b"")
    finally:
        consumer.close()
    assert len(at_end) == partitions, "did not reach the end of every partition"
    return [value for partition in range(partitions) for value in values[partition]]


def raw_produce(address: str, topic: str, value: bytes, timeout_ms: int) -> int:
    """One acks=all Produce sent to exactly this node (no metadata, no redirection): its
    partition error code, or -1 when no response came (the client's timeout)."""
    host, port = address.rsplit(":", 1)
    request = ProduceRequest(acks=-1, timeout_ms=timeout_ms, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=0, records=encode_batch(
            [Record(offset=0, timestamp=int(time.time() * 1000), key=None, value=value)]))])])

    async def send() -> int:
        client = NodeClient(host, int(port), client_id="zombie-writer",
                            request_timeout_ms=timeout_ms + 3000)
        try:
            response = await client.send(request, version=PRODUCE_VERSION)
        except NodeClientError:
            return -1
        finally:
            await client.close()
        assert isinstance(response, ProduceResponse)
        return response.responses[0].partition_responses[0].error_code

    return asyncio.run(send())


def partition_if(cluster: FaultCluster, topic: str, via: int,
                 condition: Callable[[PartitionState], bool]) -> PartitionState | None:
    """Partition 0 of ``topic`` as node ``via`` sees it, when it meets ``condition``."""
    state = cluster.describe(topic, via=via).get(0)
    return state if state is not None and condition(state) else None


def describe_ports(cluster: FaultCluster, ports: set[int]) -> list[str]:
    return [f"node {node_id} {entry}" for node_id in cluster.node_ids
            for entry in cluster.properties(node_id)["listeners"].split(",")
            if int(entry.rsplit(":", 1)[1]) in ports]


def remote_ports(pid: int) -> set[int]:
    """Remote ports of the established TCP connections process ``pid`` holds."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
            ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


def test_nodes_behind_proxies_replicate_and_never_connect_directly(
        cluster: FaultCluster) -> None:
    create_topic(cluster, "plain", partitions=3)
    values = [f"value-{index}".encode() for index in range(60)]
    produce_all(cluster.bootstrap, "plain", values)
    assert sorted(read_all(cluster.bootstrap, "plain", 3)) == sorted(values)
    # Every node's connections to another node go to a proxy, never to a real port (a node
    # talking to itself, as the active controller does, uses its own real port: no link).
    real_ports = {node_id: {int(entry.rsplit(":", 1)[1])
                            for entry in cluster.properties(node_id)["listeners"].split(",")}
                  for node_id in cluster.node_ids}
    for node_id in cluster.node_ids:
        pid = cluster.pid(node_id)
        assert pid is not None
        others = set().union(*(ports for other, ports in real_ports.items() if other != node_id))
        direct = remote_ports(pid) & others
        assert not direct, f"node {node_id} connects directly to {describe_ports(cluster, direct)}"
    forwarded = {link: counts[0] for link, counts in cluster.network.stats().items()}
    assert any(link.kind == "broker" and count for link, count in forwarded.items())
    assert any(link.kind == "controller" and count for link, count in forwarded.items())
    # Every node killed at once and started again: the acknowledged writes are all there.
    cluster.kill_all()
    assert not any(cluster.alive(node_id) for node_id in cluster.node_ids)
    cluster.start_all()
    cluster.wait_healthy("plain")
    assert sorted(read_all(cluster.bootstrap, "plain", 3)) == sorted(values)


def test_isolated_leader_loses_leadership_and_acknowledges_nothing(
        cluster: FaultCluster) -> None:
    old = create_topic(cluster, "isolated")[0]
    others = [node_id for node_id in cluster.node_ids if node_id != old.leader]
    change = cluster.network.isolate(old.leader)
    assert change["name"] == "isolate" and change["nodes"] == [old.leader]
    started = time.monotonic()
    moved = wait_until(lambda: partition_if(cluster, "isolated", others[0],
                                            lambda state: state.leader in others),
                       4 * SESSION_TIMEOUT_MS / 1000, "leadership to move off the isolated node")
    assert moved.leader_epoch > old.leader_epoch
    print(f"leadership moved in {time.monotonic() - started:.1f} s")
    # A write sent straight to the old leader is never acknowledged...
    error_code = raw_produce(cluster.address(old.leader), "isolated", b"zombie", timeout_ms=2000)
    print(f"the isolated old leader answered error code {error_code}")
    assert error_code != 0, "the isolated old leader acknowledged an acks=all write"
    # ...while the rest of the cluster takes writes.
    majority = ",".join(cluster.address(node_id) for node_id in others)
    produce_all(majority, "isolated", [b"majority-1", b"majority-2"])
    cluster.network.heal()
    healed = cluster.wait_healthy("isolated", timeout_s=30, via=others[0])
    assert old.leader in healed[0].isr
    # The zombie's write was truncated away when it rejoined as a follower.
    assert read_all(cluster.bootstrap, "isolated") == [b"majority-1", b"majority-2"]
    wait_until(lambda: replicas_identical(cluster, "isolated"), 30,
               "the old leader's log truncated to the others'")


def test_paused_controller_is_fenced_alone_then_rejoins(cluster: FaultCluster) -> None:
    """The paused node is the active controller (and a replica): a new controller is elected
    and fences it — only it: the others' heartbeats must not stay stuck on the paused one."""
    create_topic(cluster, "paused")
    paused = cluster.controller_id()
    others = [node_id for node_id in cluster.node_ids if node_id != paused]
    cluster.pause(paused)
    assert cluster.paused(paused)
    wait_until(lambda: cluster.controller_id(via=others[0]) in others, 10, "a new controller")
    wait_until(lambda: paused not in cluster.live_brokers(via=others[0]), 10,
               f"node {paused} fenced")
    shrunk = wait_until(lambda: partition_if(cluster, "paused", others[0],
                                             lambda state: paused not in state.isr),
                        10, "ISR shrunk")
    assert sorted(shrunk.isr) == others and shrunk.leader in others, shrunk
    assert cluster.live_brokers(via=others[0]) == set(others)
    produce_all(",".join(cluster.address(node_id) for node_id in others), "paused", [b"while"])
    cluster.resume(paused)
    cluster.wait_healthy("paused", timeout_s=30, via=others[0])
    assert cluster.alive(paused) and not cluster.paused(paused)


def test_killed_and_wiped_nodes_catch_up(cluster: FaultCluster) -> None:
    state = create_topic(cluster, "wiped")[0]
    victim = next(node_id for node_id in state.replicas if node_id != state.leader)
    produce_all(cluster.bootstrap, "wiped", [b"before-%d" % index for index in range(20)])
    cluster.kill(victim)
    assert not cluster.alive(victim)
    produce_all(cluster.bootstrap, "wiped", [b"while-down-%d" % index for index in range(20)])
    cluster.start(victim)
    cluster.wait_healthy("wiped", timeout_s=30)
    assert cluster.stop(victim) == 0  # controlled shutdown
    cluster.wipe(victim)
    assert not any((cluster.data_dir(victim)).glob("wiped-*"))
    cluster.start(victim)
    cluster.wait_healthy("wiped", timeout_s=30)
    wait_until(lambda: replicas_identical(cluster, "wiped"), 30, "every replica's log the same")
    assert log_bytes(cluster, victim, "wiped").count(b"while-down-") == 20


def log_bytes(cluster: FaultCluster, node_id: int, topic: str) -> bytes:
    """Partition 0's log segments in node ``node_id``'s data dir, concatenated in order."""
    return b"".join(path.read_bytes() for path in sorted(
        (cluster.data_dir(node_id) / f"{topic}-0").glob("*.log")))


def replicas_identical(cluster: FaultCluster, topic: str) -> bool:
    return len({log_bytes(cluster, node_id, topic) for node_id in cluster.node_ids}) == 1


def node_environment(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().partition("=")[::2] for entry in entries if entry)


def test_env_per_node_and_close_is_idempotent_and_kills_a_paused_node(tmp_path: Path) -> None:
    made = FaultCluster(tmp_path / "closing", 1, FAST,
                        env={"SAMSA_FAULT_EVENTS": str(tmp_path / "events-{node}.jsonl")})
    made.start_all()
    pid = made.pid(1)
    assert pid is not None
    assert node_environment(pid)["SAMSA_FAULT_EVENTS"] == str(tmp_path / "events-1.jsonl")
    made.set_env(1, "SAMSA_CLOCK_OFFSET_MS", "250")
    made.restart(1)
    pid = made.pid(1)
    assert pid is not None
    assert node_environment(pid)["SAMSA_CLOCK_OFFSET_MS"] == "250"
    made.pause(1)
    codes = made.close()
    assert set(codes) == {1}
    assert made.close() == {}
    assert not made.alive(1)
