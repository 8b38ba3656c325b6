"""Three Samsa nodes against three Apache Kafka nodes: ``acks=all``, replication factor 3, on
this one machine, the same workload, in interleaved rounds (``bench.rounds``).

The clusters, each started once and kept for every round:

- Samsa: ``bench.cluster_nodes.BenchCluster``, three combined nodes (broker + controller, one
  KRaft quorum), default settings — the replication bench's cluster;
- Apache Kafka 4.3.1: ``compat.apache_kafka.ApacheKafkaCluster``, three combined nodes of one
  static 3-voter quorum, each with Kafka's shipped JVM settings (``-Xmx1G -Xms1G``, G1) and
  its defaults but for the ports and directories (three 1 GiB heaps fit this 24 GiB machine;
  the two cores are the limit, for both clusters alike).

Per round and cluster: a new topic of ``PARTITIONS`` (6) partitions, replication factor 3,
``min.insync.replicas=2`` (``rf3-rR``); once every node's Metadata names a leader and three
in-sync replicas for every partition, one confluent-kafka producer (``acks=all``,
``linger.ms=5``, 100-byte values, no key: the sticky partitioner spreads them) writes
``count`` records and waits for every ack, then one consumer assigned every partition at offset
0 reads them all (``bench.replication_throughput``'s clients). Each phase is timed with the CPU
of the three nodes' process trees (``bench.cpu``); the three nodes' resident memory
(``bench.memory``) is read after the consume.

Before the first round each cluster takes one untimed round of the same workload (topic
``rf3-warmup``): a JVM's first records run before its JIT compiler has caught up, and a broker
in service is warm (``bench.broker`` does the same).

Reported: records/s, CPU µs per record (three nodes), RSS (three nodes), the median (min–max)
of the rounds, and Samsa ÷ Kafka, the median (min–max) of the paired per-round ratios.
``--quick``: 200,000 records, 2 rounds. Writes ``bench/results/kafka_cluster.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import Progress

from bench import replication_throughput, rounds
from bench.cluster_nodes import BenchCluster, wait_until, work_dir
from bench.cluster_topics import formed_leader
from bench.cpu import tree_cpu_seconds
from bench.memory import MIB, tree_rss_bytes
from bench.storage import RESULTS
from compat.apache_kafka import KAFKA_VERSION, ApacheKafkaCluster

PARTITIONS = replication_throughput.PARTITIONS
REPLICATION_FACTOR = 3
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
QUIET = {"log_level": 3}


@dataclass(frozen=True)
class Running:
    """A started cluster as the bench sees it: its bootstrap servers and its node processes."""

    bootstraps: list[str]
    pids: Callable[[], list[int]]

    @property
    def servers(self) -> str:
        return ",".join(self.bootstraps)

    def cpu_seconds(self) -> float:
        return sum(tree_cpu_seconds(pid) for pid in self.pids())

    def rss_bytes(self) -> int:
        return sum(tree_rss_bytes(pid) for pid in self.pids())


@dataclass(frozen=True)
class Phase:
    seconds: float
    cpu_seconds: float  # the three nodes' process trees


@dataclass(frozen=True)
class ClusterRound:
    count: int
    produce: Phase
    consume: Phase
    rss_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "rss_mib": round(self.rss_bytes / MIB, 1),
                **{f"{name}_{key}": round(getattr(getattr(self, name), key), 4)
                   for name in ("produce", "consume") for key in ("seconds", "cpu_seconds")}}


def _records_s(phase: str) -> Callable[[ClusterRound], float]:
    return lambda done: done.count / getattr(done, phase).seconds


def _cpu_us(phase: str) -> Callable[[ClusterRound], float]:
    return lambda done: getattr(done, phase).cpu_seconds / done.count * 1e6


FIGURES: dict[str, Callable[[ClusterRound], float]] = {
    "produce_records_s": _records_s("produce"),
    "produce_cpu_us_per_msg": _cpu_us("produce"),
    "consume_records_s": _records_s("consume"),
    "consume_cpu_us_per_msg": _cpu_us("consume"),
    "rss_mib": lambda done: done.rss_bytes / MIB,
}
COLUMNS = (("produce_records_s", "produce records/s", ",.0f"),
           ("produce_cpu_us_per_msg", "CPU µs/msg (3 nodes)", ".2f"),
           ("consume_records_s", "consume records/s", ",.0f"),
           ("consume_cpu_us_per_msg", "CPU µs/msg (3 nodes)", ".2f"),
           ("rss_mib", "RSS MiB (3 nodes)", ",.0f"))


# -- topics -----------------------------------------------------------------------------------


def create_topic(cluster: Running, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.servers, **QUIET})
    new = NewTopic(topic, PARTITIONS, REPLICATION_FACTOR, config=TOPIC_CONFIGS)
    for future in admin.create_topics([new]).values():
        future.result(60)
    wait_until(lambda: all(fully_replicated(server, topic) for server in cluster.bootstraps),
               timeout_s=60, what=f"leaders and 3 in-sync replicas for every partition of {topic}")


def fully_replicated(server: str, topic: str) -> bool:
    """Whether ``server``'s Metadata names a leader and ``REPLICATION_FACTOR`` in-sync
    replicas for each of the topic's ``PARTITIONS`` partitions."""
    admin = AdminClient({"bootstrap.servers": server, **QUIET})
    described = admin.list_topics(topic, timeout=10).topics.get(topic)
    if described is None or described.error is not None:
        return False
    partitions = described.partitions.values()
    return len(partitions) == PARTITIONS and all(
        partition.leader >= 0 and len(partition.isrs) == REPLICATION_FACTOR
        for partition in partitions)


# -- one round --------------------------------------------------------------------------------


def timed(cluster: Running, action: Callable[[], Any]) -> Phase:
    """Wall time of ``action``; the client it returns is closed before the CPU reading."""
    cpu = cluster.cpu_seconds()
    start = time.perf_counter()
    client = action()
    seconds = time.perf_counter() - start
    client.close()
    return Phase(seconds, cluster.cpu_seconds() - cpu)


def measure(cluster: Running, topic: str, count: int) -> ClusterRound:
    create_topic(cluster, topic)
    produced = timed(cluster, lambda: replication_throughput.produce(cluster.servers, topic,
                                                                     count, "all"))
    consumed = timed(cluster, lambda: replication_throughput.consume(cluster.servers, topic,
                                                                     count))
    return ClusterRound(count, produced, consumed, cluster.rss_bytes())


# -- the clusters -----------------------------------------------------------------------------


def start_samsa(root: Path, stack: contextlib.ExitStack) -> Running:
    cluster = BenchCluster(root)
    stack.callback(cluster.stop_all)
    cluster.start_all()
    wait_until(lambda: formed_leader(cluster), what="a formed Samsa cluster")
    return Running([f"127.0.0.1:{port}" for port in cluster.client_ports.values()],
                   lambda: [node.pid for node in cluster.nodes.values()])


def start_kafka(root: Path, stack: contextlib.ExitStack) -> Running:
    cluster = ApacheKafkaCluster(root)
    stack.callback(cluster.stop)
    cluster.start()
    return Running([node.bootstrap for node in cluster.nodes],
                   lambda: [node.process.pid for node in cluster.nodes
                            if node.process is not None])


def run(*, count: int, rounds_count: int, console: Console,
        keep: Path | None = None) -> dict[str, Any]:
    with (work_dir("samsa-bench-kafka-cluster-", keep) as work, contextlib.ExitStack() as stack,
          Progress(console=console, transient=True) as progress):
        task = progress.add_task("starting three Samsa nodes and three Kafka nodes", total=None)
        clusters = {"samsa": start_samsa(work / "samsa", stack),
                    "kafka": start_kafka(work / "kafka", stack)}
        progress.remove_task(task)
        for cluster in clusters.values():  # untimed: JIT-compiled JVMs, as in service
            measure(cluster, "rf3-warmup", count)
        done = rounds.run_rounds(
            list(clusters), rounds_count,
            lambda name, round_index: measure(clusters[name], f"rf3-r{round_index}", count),
            progress=progress, label="acks=all RF 3: ")
    return {"count": count, "value_bytes": replication_throughput.VALUE_BYTES,
            "partitions": PARTITIONS, "replication_factor": REPLICATION_FACTOR,
            "topic_configs": TOPIC_CONFIGS, "linger_ms": replication_throughput.LINGER_MS,
            "rounds": rounds_count, "kafka": f"Apache Kafka {KAFKA_VERSION}",
            **rounds.summarize(done, FIGURES),
            "by_round": rounds.rounds_json(done, ClusterRound.to_json)}


def print_table(result: dict[str, Any], console: Console) -> None:
    console.print(rounds.comparison_table(
        f"acks=all, RF 3, min.insync.replicas 2: {result['count']:,} × {result['value_bytes']} B "
        f"values, {result['partitions']} partitions, linger.ms={result['linger_ms']}, three "
        f"combined nodes each on this machine; median (min–max) of {result['rounds']} "
        "interleaved rounds", result, COLUMNS, label="cluster",
        caption=rounds.caption(result["environment"]),
        names={"samsa": "3 × Samsa", "kafka": f"3 × {result['kafka']}"}))
    for name, why in result["failures"].items():
        console.print(f"[yellow]{name}: {why[:300]}[/]")


def main(*, quick: bool = False, count: int | None = None, rounds_count: int | None = None,
         keep: Path | None = None, json_path: Path | None = None) -> dict[str, Any]:
    console = rounds.console()
    environment = rounds.environment()
    result = run(count=count or (200_000 if quick else 1_000_000),
                 rounds_count=rounds_count or (2 if quick else rounds.DEFAULT_ROUNDS),
                 console=console, keep=keep)
    result = {"bench": "kafka_cluster", "environment": rounds.finish(environment), **result}
    print_table(result, console)
    rounds.write_results(result, json_path or RESULTS / "kafka_cluster.json", console)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_cluster",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200,000 records, 2 rounds")
    parser.add_argument("--count", type=int, help="records per cluster and round (1,000,000)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (5)")
    parser.add_argument("--keep", type=Path, help="keep the nodes' data and logs here")
    parser.add_argument("--json", type=Path, help="write the results here")
    arguments = parser.parse_args()
    main(quick=arguments.quick, count=arguments.count, rounds_count=arguments.rounds,
         keep=arguments.keep, json_path=arguments.json)
