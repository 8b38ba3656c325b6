"""Replicated against unreplicated produce and consume on one three-node cluster, in
interleaved rounds (``bench.rounds``), with the nodes' CPU and the followers' lag.

Systems (Kafka's 2014 comparison, "three producers, 3x async replication" against "no
replication", here on one machine):

- ``replicated``: a topic of ``PARTITIONS`` partitions, replication factor 3,
  ``min.insync.replicas=2``, produced with ``acks=all``;
- ``unreplicated``: a topic of ``PARTITIONS`` partitions, replication factor 1, ``acks=1``.

The cluster (``bench.cluster_nodes``: combined nodes, default settings) is started once and
every round runs on the same processes: a round creates its own two topics (``rep-rR`` /
``norep-rR``), waits until every node's Metadata names the same leader for every partition,
then produces
``count`` × ``VALUE_BYTES``-byte values with one confluent-kafka producer (``linger.ms=5`` as
``bench.broker``; no partition given, so librdkafka's sticky partitioner spreads keyless
records over the partitions), then reads them all back with one consumer assigned every
partition at offset 0. Each phase is timed with the CPU of the three node processes (their
process trees: ``bench.cpu``) and of this process.

While the replicated topic is produced, ``bench.replication_lag.LagSampler`` reads every
replica's log end offset from its files every 100 ms; each round keeps the lag distribution
in records and milliseconds. MB are of values (``count × VALUE_BYTES / 1e6``), not of the
bytes on the wire.

State: the cluster belongs to ``run``, stopped before it returns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.progress import Progress

from bench import cluster_requests, rounds
from bench.cluster_nodes import BenchCluster, wait_until, work_dir
from bench.cluster_topics import formed_leader
from bench.replication_lag import LagSampler, follower_lags, summarize_lags

PARTITIONS = 6
VALUE_BYTES = 100
LINGER_MS = 5
CLIENT_TIMEOUT_S = 300.0
QUIET = {"log_level": 3}
SYSTEMS = ("replicated", "unreplicated")


@dataclass(frozen=True)
class Case:
    replication_factor: int
    acks: str
    configs: dict[str, str]
    prefix: str


CASES = {"replicated": Case(3, "all", {"min.insync.replicas": "2"}, "rep"),
         "unreplicated": Case(1, "1", {}, "norep")}


@dataclass(frozen=True)
class Phase:
    """One timed client action: wall time, the three nodes' CPU, this process's CPU."""

    seconds: float
    broker_cpu_seconds: float
    client_cpu_seconds: float


@dataclass(frozen=True)
class ThroughputRound:
    """One system in one round."""

    topic: str
    count: int
    produce: Phase
    consume: Phase
    leaders: dict[int, int]  # partition -> leader when the round started
    lag: dict[str, Any] | None  # summarize_lags of the produce (replicated only)

    @property
    def megabytes(self) -> float:
        return self.count * VALUE_BYTES / 1e6

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "count": self.count, "leaders": self.leaders,
                **{f"{name}_{key}": round(getattr(getattr(self, name), key), 4)
                   for name in ("produce", "consume")
                   for key in ("seconds", "broker_cpu_seconds", "client_cpu_seconds")},
                **{figure: round(value(self), 3) for figure, value in FIGURES.items()},
                "lag": self.lag}


def _per_second(phase: str, unit: str) -> Callable[[ThroughputRound], float]:
    def figure(done: ThroughputRound) -> float:
        amount = done.count if unit == "records" else done.megabytes
        return amount / getattr(done, phase).seconds
    return figure


def _cpu_per_mb(phase: str) -> Callable[[ThroughputRound], float]:
    return lambda done: getattr(done, phase).broker_cpu_seconds / done.megabytes


FIGURES: dict[str, Callable[[ThroughputRound], float]] = {
    "produce_records_s": _per_second("produce", "records"),
    "produce_mb_s": _per_second("produce", "mb"),
    "produce_cpu_s_per_mb": _cpu_per_mb("produce"),
    "consume_records_s": _per_second("consume", "records"),
    "consume_mb_s": _per_second("consume", "mb"),
    "consume_cpu_s_per_mb": _cpu_per_mb("consume"),
}


# -- topics and clients -----------------------------------------------------------------------


def bootstrap(cluster: BenchCluster) -> str:
    return ",".join(f"127.0.0.1:{port}" for port in cluster.client_ports.values())


def create_topic(cluster: BenchCluster, topic: str, case: Case) -> dict[int, tuple[int, list[int]]]:
    """Create ``topic``; once Metadata names a leader for every partition, each partition's
    leader and replicas."""
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster), **QUIET})
    new = NewTopic(topic, PARTITIONS, case.replication_factor, config=case.configs)
    for future in admin.create_topics([new]).values():
        future.result(60)
    return wait_until(lambda: asyncio.run(placement(cluster, topic)), timeout_s=60,
                      what=f"leaders for every partition of {topic}")


async def placement(cluster: BenchCluster, topic: str) -> dict[int, tuple[int, list[int]]] | None:
    """Each partition's (leader, replicas) once every live node's Metadata names the same
    leader for every partition (so no first produce meets a node that does not know yet);
    None until then."""
    views = [await _placement_on(port, topic) for port in cluster.client_ports.values()]
    first = views[0]
    if len(first) < PARTITIONS or any(leader < 0 for leader, _ in first.values()):
        return None
    return first if all(view == first for view in views) else None


async def _placement_on(port: int, topic: str) -> dict[int, tuple[int, list[int]]]:
    node = cluster_requests.client(port)
    try:
        response = await cluster_requests.metadata_for(node, [topic])
    finally:
        await node.close()
    return {partition.partition_index: (partition.leader_id, list(partition.replica_nodes))
            for described in response.topics if described.error_code == 0
            for partition in described.partitions}


def produce(servers: str, topic: str, count: int, acks: str) -> Producer:
    """Send ``count`` values and wait for every ack; the producer is returned open."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": LINGER_MS, "acks": acks,
                         **QUIET})
    value, send, failed = bytes(VALUE_BYTES), producer.produce, []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(error)

    for _ in range(count):
        while True:
            try:
                send(topic, value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.005)
    left = producer.flush(CLIENT_TIMEOUT_S)
    if left or failed:
        producer.close()
        raise RuntimeError(f"{left} records not delivered, {len(failed)} failed "
                           f"({failed[0] if failed else ''})")
    return producer


def consume(servers: str, topic: str, count: int) -> Consumer:
    """Read every partition from offset 0 until ``count`` records are in."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "samsa-bench-replication",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 0, **QUIET})
    consumer.assign([TopicPartition(topic, index, 0) for index in range(PARTITIONS)])
    received, deadline = 0, time.monotonic() + CLIENT_TIMEOUT_S
    while received < count and time.monotonic() < deadline:
        for message in consumer.consume(min(10_000, count - received), 1.0):
            if message.error() is None:
                received += 1
    if received < count:
        consumer.close()
        raise RuntimeError(f"consumed {received} of {count} records from {topic}")
    return consumer


def timed(cluster: BenchCluster, action: Callable[[], Producer | Consumer]) -> Phase:
    """Wall time of ``action``; its client is closed before the CPU readings."""
    def cpu() -> float:
        return sum(node.cpu_seconds() for node in cluster.nodes.values())

    broker_cpu, client_cpu = cpu(), time.process_time()
    start = time.perf_counter()
    client = action()
    seconds = time.perf_counter() - start
    client.close()
    return Phase(seconds, cpu() - broker_cpu, time.process_time() - client_cpu)


# -- one round --------------------------------------------------------------------------------


def measure(cluster: BenchCluster, system: str, round_index: int, count: int) -> ThroughputRound:
    case = CASES[system]
    topic = f"{case.prefix}-r{round_index}"
    partitions = create_topic(cluster, topic, case)
    servers = bootstrap(cluster)
    sampler = None
    if case.replication_factor > 1:
        sampler = LagSampler({index: {node: cluster.root / f"node-{node}" / f"{topic}-{index}"
                                      for node in replicas}
                              for index, (_, replicas) in partitions.items()}).start()
    try:
        produced = timed(cluster, lambda: produce(servers, topic, count, case.acks))
    finally:
        samples = sampler.stop() if sampler is not None else {}
    lag = None
    if sampler is not None:
        lags = [lag for index, (leader, _) in partitions.items()
                for lag in follower_lags(index, leader, samples[index])]
        lag = summarize_lags(lags)
    consumed = timed(cluster, lambda: consume(servers, topic, count))
    return ThroughputRound(topic, count, produced, consumed,
                           {index: leader for index, (leader, _) in partitions.items()}, lag)


def run(*, count: int, rounds_count: int, progress: Progress,
        keep: Path | None = None) -> dict[str, Any]:
    with work_dir("samsa-bench-replication-", keep) as work:
        cluster = BenchCluster(work / "cluster")
        try:
            cluster.start_all()
            wait_until(lambda: formed_leader(cluster), what="a formed cluster")
            done = rounds.run_rounds(
                list(SYSTEMS), rounds_count,
                lambda system, round_index: measure(cluster, system, round_index, count),
                progress=progress, label="replication throughput: ")
        finally:
            cluster.stop_all()
    return summarize(done, count, rounds_count)


def summarize(done: rounds.Rounds[ThroughputRound], count: int,
              rounds_count: int) -> dict[str, Any]:
    lag_rounds = [result.lag for result in done.results["replicated"]
                  if result is not None and result.lag is not None]
    return {"count": count, "value_bytes": VALUE_BYTES, "partitions": PARTITIONS,
            "linger_ms": LINGER_MS, "rounds": rounds_count,
            "cases": {system: {"replication_factor": case.replication_factor,
                               "acks": case.acks, "configs": case.configs}
                      for system, case in CASES.items()},
            "summary": rounds.summarize(done, FIGURES, ours="replicated"),
            "lag": merge_lags(lag_rounds),
            "by_round": rounds.rounds_json(done, ThroughputRound.to_json)}


def merge_lags(per_round: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds' lag distributions side by side: medians of their medians, p99s, maxes."""
    known = [lag for lag in per_round if lag.get("samples")]
    if not known:
        return {"rounds": 0}

    def spread(unit: str, statistic: str) -> dict[str, float] | None:
        return rounds.spread_json(rounds.spread_of([lag[unit][statistic] for lag in known]), 1)

    return {"rounds": len(known), "samples": sum(lag["samples"] for lag in known),
            **{f"{unit}_{statistic}": spread(unit, statistic)
               for unit in ("records", "ms") for statistic in ("median", "p99", "max")}}
