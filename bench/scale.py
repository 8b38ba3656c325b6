"""Scaling bench (issue 18): one Samsa node holding 1k, 10k and 50k partitions, and one
Apache Kafka 4.3.1 node holding 1k and 10k beside it.

Per scale, on a fresh data directory, with confluent-kafka as the client:

- create time per 1,000 partitions (topics of 1,000 partitions, one CreateTopics each, timed
  until the broker's Metadata names a leader for each new partition; the mean over the topics,
  and the last topic's, which shows whether creation grows with what exists);
- open files (``/proc/<pid>/fd``) and RSS (``VmRSS``) once they exist;
- produce p99 (ms) of a producer sending one 100-byte record at a time (acks=1) while a
  CreateTopics of ``LARGE_CREATE`` partitions runs (and its p50 before, for reference);
- start-up after a clean stop (SIGTERM) and after ``kill -9``: from the process start to the
  "started" line, to the first acknowledged produce (time to first produce), and until Metadata
  names a leader for every partition (every partition served: above
  ``samsa.log.background.load.above`` Samsa listens before its logs are loaded);
- produce / consume throughput (records/s, 100-byte records) spread over 1, 100 and 10,000
  active partitions (fewer when the scale has fewer).

Apache Kafka on the same machine is the yardstick (issues 14 and 18): the same measures on
one KRaft node (``compat.apache_kafka``, Kafka's shipped JVM settings, ``-Xmx1G -Xms1G``, and
defaults but for the ports and directories; its storage formatted before the start-up clock
starts), right after Samsa at each scale. Its start-up clock stops at its log line ``Kafka
Server started``; its open files and RSS are the JVM's. Kafka runs at ``KAFKA_SCALES`` only:
at 50k partitions it would keep ~50,000 segment files open (one per partition, its indexes
being mmapped), above this machine's limit of 20,000 open files per process; a scale it does
not run reads n/a, and so does a throughput step that would take it past 18,000 partitions
(at 10k: the 10,000 active partitions, a topic of its own on top of the 15,001 there).

Prints a rich table and writes ``bench/results/scale.json``. ``--quick`` runs 1k and 5k
partitions with smaller counts (Kafka at both).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from rich.progress import Progress
from rich.table import Table

from bench import rounds
from bench.memory import MIB, tree_rss_bytes
from bench.peers import KAFKA_DEFAULTS_BACK
from bench.storage import RESULTS
from compat.apache_kafka import KAFKA_VERSION, ApacheKafka

ROOT = Path(__file__).resolve().parents[1]
QUIET = {"log_level": 3}
TOPIC_PARTITIONS = 1_000
START_TIMEOUT_SECONDS = 600.0
# One CreateTopics / CreatePartitions makes at most 10,000 metadata records in Kafka (and
# Samsa): POLICY_VIOLATION "excessively large batch operation" above. Larger topics grow in steps.
MAX_PER_OPERATION = 5_000
KAFKA_SCALES = (1_000, 5_000, 10_000)  # see the module docstring for 50k
# Kafka keeps a file open per partition; the limit here is 20,000 per process (sockets and
# jars need some): a throughput step that would cross this budget is left out for Kafka.
KAFKA_PARTITIONS_BUDGET = 18_000


@dataclass
class ScaleResult:
    partitions: int
    system: str = "samsa"
    create_s_per_1000: float = 0.0
    create_s_per_1000_last: float = 0.0
    open_files: int = 0
    rss_mib: float = 0.0
    produce_p50_before_ms: float = 0.0
    produce_p99_during_create_ms: float = 0.0
    produce_max_during_create_ms: float = 0.0
    large_create_partitions: int = 0
    large_create_s: float = 0.0
    start_clean_s: float = 0.0
    first_produce_clean_s: float = 0.0
    all_served_clean_s: float = 0.0
    start_killed_s: float = 0.0
    first_produce_killed_s: float = 0.0
    all_served_killed_s: float = 0.0
    produce_records_per_s: dict[int, float] = field(default_factory=dict)
    consume_records_per_s: dict[int, float] = field(default_factory=dict)


# -- the broker process -------------------------------------------------------------------------


class Node:
    def __init__(self, data: Path) -> None:
        self.data = data
        self.port = 0
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> tuple[float, float, float]:
        """Start; seconds to the started line, to the first acknowledged produce, and until
        every partition is served."""
        listen = f"PLAINTEXT://127.0.0.1:{self.port}"
        samsa = Path(sys.executable).parent / "samsa"
        began = time.perf_counter()
        with open(self.data / "broker.log", "a") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [str(samsa), "broker", "start", "--config",
                 str(ROOT / "conf" / "server.properties"), "--override",
                 f"log.dirs={self.data / 'logs'}", "--override", f"listeners={listen}"],
                stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if "started on" not in line:
            raise RuntimeError(f"the broker did not start: {line!r}; see {self.data / 'broker.log'}")
        started = time.perf_counter() - began
        self.port = int(line.rsplit(":", 1)[1])
        produce_one(self.bootstrap, "first-produce")
        first = time.perf_counter() - began
        every_partition_served(self.bootstrap)
        return started, first, time.perf_counter() - began

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        assert self.process is not None
        self.process.send_signal(sig)
        self.process.wait(300)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def open_files(self) -> int:
        assert self.process is not None
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def rss_mib(self) -> float:
        assert self.process is not None  # the process tree, as Kafka's column is measured
        return tree_rss_bytes(self.process.pid) / MIB


class KafkaNode:
    """Apache Kafka as ``Node`` is Samsa: the same start, stop and readings."""

    def __init__(self, data: Path) -> None:
        self.kafka = ApacheKafka(data / "kafka", configs=KAFKA_DEFAULTS_BACK)

    def start(self) -> tuple[float, float, float]:
        self.kafka.format_storage()  # once: later starts find it formatted
        began = time.perf_counter()
        self.kafka.launch()
        self.kafka.wait_ready(START_TIMEOUT_SECONDS)
        started = time.perf_counter() - began
        produce_one(self.bootstrap, "first-produce")
        first = time.perf_counter() - began
        every_partition_served(self.bootstrap)
        return started, first, time.perf_counter() - began

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if sig == signal.SIGKILL:
            self.kafka.kill()
        else:
            self.kafka.stop(timeout_s=300)

    def open_files(self) -> int:
        assert self.kafka.process is not None
        return len(os.listdir(f"/proc/{self.kafka.process.pid}/fd"))

    def rss_mib(self) -> float:
        assert self.kafka.process is not None
        return tree_rss_bytes(self.kafka.process.pid) / MIB


def produce_one(bootstrap: str, topic: str) -> None:
    """One record, retried until acknowledged (the topic is auto-created or being loaded)."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 600_000, **QUIET})
    errors: list[object] = []
    producer.produce(topic, b"x", on_delivery=lambda error, _: errors.append(error))
    producer.flush(600)
    if errors != [None]:
        raise RuntimeError(f"first produce failed: {errors}")


# -- the measures ---------------------------------------------------------------------------------


def create(admin: AdminClient, name: str, partitions: int) -> float:
    """Seconds from the CreateTopics to the broker's Metadata naming a leader for every new
    partition: Kafka's CreateTopics returns once the controller committed the topic, and its
    broker serves the partitions only after it applied that (creating every log), seconds
    later under thousands of partitions — a producer that starts at once meets an unknown
    topic (librdkafka gives up after ``topic.metadata.propagation.max.ms``, 30 s)."""
    started = time.perf_counter()
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                        operation_timeout=600, request_timeout=900)[name].result(900)
    deadline = started + START_TIMEOUT_SECONDS
    while not served(admin, name, partitions):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{name}: {partitions} partitions not served in "
                               f"{START_TIMEOUT_SECONDS:.0f} s")
        time.sleep(0.05)  # the broker's metadata: no event to await but a Metadata request
    return time.perf_counter() - started


def every_partition_served(bootstrap: str) -> None:
    """Wait until the broker's Metadata names a leader for every partition of every topic."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    deadline = time.perf_counter() + START_TIMEOUT_SECONDS
    while True:
        asked = time.perf_counter()
        topics = admin.list_topics(timeout=30).topics.values()
        took = time.perf_counter() - asked
        if all(topic.error is None and all(p.leader >= 0 and p.error is None
                                           for p in topic.partitions.values())
               for topic in topics):
            return
        if time.perf_counter() > deadline:
            raise TimeoutError(f"not every partition served in {START_TIMEOUT_SECONDS:.0f} s")
        # The broker's metadata: no event to await but a Metadata request. Asked again after as
        # long as the last answer took (50 ms at least), so the probe never holds a broker's
        # loop more than half the time: one answer naming 50,000 partitions takes Samsa's
        # loop ~0.3 s, and asking every 50 ms kept it busy answering instead of loading.
        time.sleep(max(0.05, took))


def grow(admin: AdminClient, name: str, partitions: int) -> None:
    """CreatePartitions up to ``partitions``, until the broker serves them all."""
    admin.create_partitions([NewPartitions(name, partitions)], operation_timeout=600,
                            request_timeout=900)[name].result(900)
    deadline = time.perf_counter() + START_TIMEOUT_SECONDS
    while not served(admin, name, partitions):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{name}: {partitions} partitions not served")
        time.sleep(0.05)  # the broker's metadata: no event to await but a Metadata request


def served(admin: AdminClient, name: str, partitions: int) -> bool:
    described = admin.list_topics(name, timeout=30).topics.get(name)
    return (described is not None and described.error is None
            and len(described.partitions) == partitions
            and all(partition.leader >= 0 for partition in described.partitions.values()))


def produce_latencies(bootstrap: str, topic: str, stop: threading.Event) -> list[float]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1, **QUIET})
    latencies: list[float] = []
    while not stop.is_set():
        sent = time.perf_counter()
        done: list[float] = []
        producer.produce(topic, b"x" * 100, on_delivery=_record_time(done))
        producer.flush(30)
        if done:
            latencies.append((done[0] - sent) * 1000)
        time.sleep(0.002)
    return latencies


def _record_time(done: list[float]) -> Callable[[object, object], None]:
    return lambda error, message: done.append(time.perf_counter())


def _idle(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] if ordered else 0.0


def during(bootstrap: str, action: Callable[[], float]) -> tuple[float, list[float]]:
    stop = threading.Event()
    latencies: list[float] = []
    thread = threading.Thread(
        target=lambda: latencies.extend(produce_latencies(bootstrap, "steady", stop)))
    thread.start()
    try:
        took = action()
    finally:
        stop.set()
        thread.join()
    return took, latencies


def throughput(bootstrap: str, admin: AdminClient, active: int, records: int) -> tuple[float, float]:
    topic = f"throughput-{active}"
    create(admin, topic, min(active, MAX_PER_OPERATION))
    for total in range(2 * MAX_PER_OPERATION, active + MAX_PER_OPERATION, MAX_PER_OPERATION):
        grow(admin, topic, min(total, active))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    payload = b"x" * 100
    failed: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failed.append(error)

    started = time.perf_counter()
    for index in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=index % active, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(600)
    produced = records / (time.perf_counter() - started)
    if left or failed:
        raise RuntimeError(f"{topic}: {left} records not delivered, {len(failed)} failed "
                           f"({failed[0] if failed else ''})")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, **QUIET})
    consumer.assign([TopicPartition(topic, index, 0) for index in range(active)])
    seen, started = 0, time.perf_counter()
    deadline = started + 600
    while seen < records and time.perf_counter() < deadline:
        seen += sum(1 for m in consumer.consume(10_000, 0.5) if not m.error())
    consumed = seen / (time.perf_counter() - started)
    consumer.close()
    return produced, consumed


def measure(partitions: int, *, large_create: int, records: int, work: Path,
            progress: Callable[[str], None], system: str = "samsa") -> ScaleResult:
    result = ScaleResult(partitions, system, large_create_partitions=large_create)
    node: Node | KafkaNode = Node(work) if system == "samsa" else KafkaNode(work)
    node.start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap, **QUIET})
        create(admin, "steady", 1)
        times = []
        for index in range(max(1, partitions // TOPIC_PARTITIONS)):
            progress(f"{system} {partitions:,}: creating {(index + 1) * TOPIC_PARTITIONS:,}")
            times.append(create(admin, f"scale-{index}", TOPIC_PARTITIONS))
        result.create_s_per_1000 = sum(times) / len(times)
        result.create_s_per_1000_last = times[-1]
        result.open_files, result.rss_mib = node.open_files(), node.rss_mib()
        progress(f"{partitions:,}: produce latency during a CreateTopics of {large_create:,}")
        _, before = during(node.bootstrap, lambda: _idle(2.0))
        result.produce_p50_before_ms = percentile(before, 0.5)
        took, latencies = during(node.bootstrap, lambda: create(admin, "large", large_create))
        result.large_create_s = took
        result.produce_p99_during_create_ms = percentile(latencies, 0.99)
        result.produce_max_during_create_ms = max(latencies, default=0.0)
        existing = partitions + large_create + 1
        for active in (1, 100, 10_000):
            if system == "kafka" and existing + active > KAFKA_PARTITIONS_BUDGET:
                continue
            existing += active
            if active <= partitions:
                progress(f"{partitions:,}: throughput over {active:,} partitions")
                produced, consumed = throughput(node.bootstrap, admin, active, records)
                result.produce_records_per_s[active] = produced
                result.consume_records_per_s[active] = consumed
        progress(f"{partitions:,}: restart after a clean stop")
        node.stop()
        (result.start_clean_s, result.first_produce_clean_s,
         result.all_served_clean_s) = node.start()
        progress(f"{partitions:,}: restart after kill -9")
        node.stop(signal.SIGKILL)
        (result.start_killed_s, result.first_produce_killed_s,
         result.all_served_killed_s) = node.start()
    finally:
        with contextlib.suppress(Exception):
            node.stop()
    return result


# -- output ---------------------------------------------------------------------------------------


def table(results: list[ScaleResult], env: dict[str, Any]) -> Table:
    """A column per Samsa scale, then per Kafka scale (n/a where Kafka did not run)."""
    view = Table(title=f"One node at scale: Samsa and Apache Kafka {KAFKA_VERSION}",
                 caption=rounds.caption(env))
    view.add_column("figure")
    samsa = [result for result in results if result.system == "samsa"]
    kafka = {result.partitions: result for result in results if result.system == "kafka"}
    columns: list[ScaleResult | None] = [*samsa, *(kafka.get(r.partitions) for r in samsa)]
    for result in samsa:
        view.add_column(f"Samsa {result.partitions:,}", justify="right")
    for result in samsa:
        view.add_column(f"Kafka {result.partitions:,}", justify="right")

    def row(name: str, value: Callable[[ScaleResult], str]) -> None:
        view.add_row(name, *("n/a" if result is None else value(result) for result in columns))

    row("create s / 1,000 (mean)", lambda r: f"{r.create_s_per_1000:.2f}")
    row("create s / 1,000 (last)", lambda r: f"{r.create_s_per_1000_last:.2f}")
    row("open files", lambda r: f"{r.open_files:,}")
    row("RSS MiB", lambda r: f"{r.rss_mib:,.0f}")
    row("produce p50 before, ms", lambda r: f"{r.produce_p50_before_ms:.1f}")
    row("produce p99 during CreateTopics, ms",
        lambda r: f"{r.produce_p99_during_create_ms:.1f} ({r.large_create_partitions:,} "
                  f"in {r.large_create_s:.1f} s)")
    row("produce max during CreateTopics, ms", lambda r: f"{r.produce_max_during_create_ms:.1f}")
    row("start-up, clean stop, s", lambda r: f"{r.start_clean_s:.1f}")
    row("first produce, clean stop, s", lambda r: f"{r.first_produce_clean_s:.1f}")
    row("every partition served, clean stop, s", lambda r: f"{r.all_served_clean_s:.1f}")
    row("start-up, kill -9, s", lambda r: f"{r.start_killed_s:.1f}")
    row("first produce, kill -9, s", lambda r: f"{r.first_produce_killed_s:.1f}")
    row("every partition served, kill -9, s", lambda r: f"{r.all_served_killed_s:.1f}")
    for active in (1, 100, 10_000):
        row(f"produce rec/s, {active:,} active", _rate(active, produce=True))
        row(f"consume rec/s, {active:,} active", _rate(active, produce=False))
    return view


def _rate(active: int, *, produce: bool) -> Callable[[ScaleResult], str]:
    def cell(result: ScaleResult) -> str:
        rates = result.produce_records_per_s if produce else result.consume_records_per_s
        return f"{rates[active]:,.0f}" if active in rates else "-"
    return cell


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="samsa-bench-scale-") as directory:
        yield Path(directory)


def main(*, quick: bool = False, json_path: Path | None = None,
         kafka: bool = True) -> list[ScaleResult]:
    console = rounds.console()
    scales = (1_000, 5_000) if quick else (1_000, 10_000, 50_000)
    env = rounds.environment()
    results = []
    runs = [(partitions, system) for partitions in scales
            for system in ("samsa", "kafka")
            if system == "samsa" or (kafka and partitions in KAFKA_SCALES)]
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("scale", total=len(runs))
        for partitions, system in runs:
            with scratch() as work:
                results.append(measure(
                    partitions, large_create=2_000 if quick else 5_000,
                    records=20_000 if quick else 200_000, work=work, system=system,
                    progress=lambda text: bar.update(task, description=text)))
            bar.advance(task)
    env = rounds.finish(env)
    console.print(table(results, env))
    document = {"environment": env, "results": [asdict(result) for result in results],
                "apache_kafka": f"Apache Kafka {KAFKA_VERSION}" if kafka else None}
    rounds.write_results(document, json_path or RESULTS / "scale.json", console)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1k and 5k partitions, fewer records")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--no-kafka", action="store_true", help="Samsa alone")
    arguments = parser.parse_args()
    main(quick=arguments.quick, json_path=arguments.json, kafka=not arguments.no_kafka)
