"""Kafka's own load tools against Samsa and against Apache Kafka: ``kafka-producer-perf-test``
and ``kafka-consumer-perf-test`` (Apache Kafka 4.3.1, ``compat.apache_kafka``), the same
record size and count against both brokers, in interleaved rounds (``bench.rounds``).

Per round and broker (both started once and kept running; ``bench.peers``): a new
one-partition topic (``bench-perf-R``, created through the AdminClient), then

- ``kafka-producer-perf-test --num-records N --record-size 100 --throughput -1`` with the Java
  producer's defaults (``acks=all``, ``linger.ms=5``, ``batch.size`` 16384: on one node acks=all
  waits for no follower); its summary line gives records/s, MB/s and the latencies;
- ``kafka-consumer-perf-test --num-records N`` (a classic consumer group; its own defaults);
  its CSV row gives ``nMsg.sec`` (from the tool's start, the group join included: both brokers
  delay a new group's first rebalance by ``group.initial.rebalance.delay.ms``, 3 s, Kafka's
  default and Samsa's) and ``fetch.nMsg.sec`` (after the join: the fetching alone).

Each tool runs as ``bin/kafka-*-perf-test.sh`` runs it: ``-Xmx512M`` and Kafka's
``KAFKA_JVM_PERFORMANCE_OPTS`` (G1, the full JIT; not the short-lived tools' client-compiler
JVM of ``compat.apache_kafka.TOOL_JVM``, which would make the client the bottleneck). The
broker's CPU (its process tree: ``bench.cpu``) is read around each tool run, so it includes the
tool's connecting and leaving, and divided by N.

Reported: the median (min–max) of each figure and Samsa ÷ Kafka, the median (min–max) of the
paired per-round ratios. ``--quick``: 50,000 records, 2 rounds. Writes
``bench/results/kafka_perf.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from bench import peers, rounds
from bench.broker_clients import create_topic
from bench.storage import RESULTS
from compat.apache_kafka import BROKER_JVM, KAFKA_VERSION, TOOLS, java_command

RECORD_BYTES = 100
PERF_TEST_JVM = ("-Xmx512M", *BROKER_JVM)  # kafka-run-class.sh's defaults for the perf tests
TOOL_TIMEOUT_S = 600.0
PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<records_s>[\d.]+) records/sec \((?P<mb_s>[\d.]+) MB/sec\), "
    r"(?P<avg_ms>[\d.]+) ms avg latency, (?P<max_ms>[\d.]+) ms max latency, (?P<p50_ms>\d+) ms "
    r"50th, (?P<p95_ms>\d+) ms 95th, (?P<p99_ms>\d+) ms 99th, (?P<p999_ms>\d+) ms 99.9th")


@dataclass(frozen=True)
class PerfRound:
    """One broker in one round: the two tools' own figures and the broker's CPU meanwhile."""

    producer: dict[str, float]  # parse_producer_summary
    consumer: dict[str, float]  # parse_consumer_summary
    produce_cpu_seconds: float
    consume_cpu_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"producer": self.producer, "consumer": self.consumer,
                "produce_broker_cpu_seconds": round(self.produce_cpu_seconds, 4),
                "consume_broker_cpu_seconds": round(self.consume_cpu_seconds, 4)}


def parse_producer_summary(output: str) -> dict[str, float]:
    """The last summary line of ``kafka-producer-perf-test`` (``N records sent, X records/sec
    (Y MB/sec), A ms avg latency, M ms max latency, P ms 50th, ...``) as numbers."""
    found = list(PRODUCER_SUMMARY.finditer(output))
    if not found:
        raise ValueError(f"no summary line in kafka-producer-perf-test's output: {output[-500:]!r}")
    return {key: float(value) for key, value in found[-1].groupdict().items()}


def parse_consumer_summary(output: str) -> dict[str, float]:
    """``kafka-consumer-perf-test``'s CSV header and row (``start.time, end.time,
    data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms,
    fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec``): the numeric columns."""
    lines = [line for line in output.splitlines() if line.strip()]
    for at, line in enumerate(lines[:-1]):
        if line.startswith("start.time"):
            header = [name.strip() for name in line.split(",")]
            values = [value.strip() for value in lines[at + 1].split(",")]
            row = dict(zip(header, values, strict=True))
            return {name: float(value) for name, value in row.items()
                    if name not in ("start.time", "end.time")}
    raise ValueError(f"no CSV summary in kafka-consumer-perf-test's output: {output[-500:]!r}")


def perf_tool(tool: str, *args: str) -> str:
    command = java_command(TOOLS[tool], args, jvm=PERF_TEST_JVM)
    done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{tool} exited {done.returncode}: {done.stderr[-1500:]}")
    return done.stdout


def measure(broker: peers.BrokerProcess, topic: str, count: int) -> PerfRound:
    create_topic(broker.bootstrap, topic)
    cpu = broker.cpu_seconds()
    produced = perf_tool("kafka-producer-perf-test", "--topic", topic, "--num-records",
                         str(count), "--record-size", str(RECORD_BYTES), "--throughput", "-1",
                         "--command-property", f"bootstrap.servers={broker.bootstrap}")
    middle = broker.cpu_seconds()
    consumed = perf_tool("kafka-consumer-perf-test", "--bootstrap-server", broker.bootstrap,
                         "--topic", topic, "--num-records", str(count), "--timeout", "60000",
                         "--group", f"perf-{topic}")
    done = PerfRound(parse_producer_summary(produced), parse_consumer_summary(consumed),
                     middle - cpu, broker.cpu_seconds() - middle)
    if done.producer["records"] != count or done.consumer["data.consumed.in.nMsg"] < count:
        raise RuntimeError(f"{broker.name}: produced {done.producer['records']:.0f} and consumed "
                           f"{done.consumer['data.consumed.in.nMsg']:.0f} of {count}")
    return done


def _cpu_us(phase: str, count: int) -> Callable[[PerfRound], float]:
    return lambda done: getattr(done, f"{phase}_cpu_seconds") / count * 1e6


def figures(count: int) -> dict[str, Callable[[PerfRound], float]]:
    return {
        "produce_records_s": lambda done: done.producer["records_s"],
        "produce_p99_ms": lambda done: done.producer["p99_ms"],
        "produce_cpu_us_per_msg": _cpu_us("produce", count),
        "consume_msgs_s": lambda done: done.consumer["nMsg.sec"],
        "consume_fetch_msgs_s": lambda done: done.consumer["fetch.nMsg.sec"],
        "consume_cpu_us_per_msg": _cpu_us("consume", count),
    }


COLUMNS = (("produce_records_s", "producer-perf-test records/s", ",.0f"),
           ("produce_p99_ms", "p99 ms", ",.0f"),
           ("produce_cpu_us_per_msg", "broker CPU µs/msg", ".2f"),
           ("consume_msgs_s", "consumer-perf-test nMsg.sec", ",.0f"),
           ("consume_fetch_msgs_s", "fetch.nMsg.sec", ",.0f"),
           ("consume_cpu_us_per_msg", "broker CPU µs/msg", ".2f"))


def run(work: Path, *, count: int, rounds_count: int, console: Console) -> dict[str, Any]:
    with contextlib.ExitStack() as stack, Progress(console=console, transient=True) as progress:
        brokers = {"samsa": peers.start_samsa(work / "samsa-data")}
        stack.callback(brokers["samsa"].stop)
        brokers["kafka"] = peers.start_kafka(work)
        stack.callback(brokers["kafka"].stop)
        done = rounds.run_rounds(
            list(brokers), rounds_count,
            lambda name, round_index: measure(brokers[name], f"bench-perf-{round_index}", count),
            progress=progress, label="Kafka's perf tests: ")
    return {"count": count, "record_bytes": RECORD_BYTES, "rounds": rounds_count,
            "tools": f"Apache Kafka {KAFKA_VERSION}",
            **rounds.summarize(done, figures(count)),
            "by_round": rounds.rounds_json(done, PerfRound.to_json)}


def print_table(result: dict[str, Any], console: Console) -> None:
    console.print(rounds.comparison_table(
        f"Kafka's own perf tools ({result['tools']}): {result['count']:,} × "
        f"{result['record_bytes']} B records, 1 partition, the tools' defaults; median "
        f"(min–max) of {result['rounds']} interleaved rounds", result, COLUMNS, label="broker",
        caption=rounds.caption(result["environment"]),
        names={"samsa": "Samsa", "kafka": f"Apache Kafka {KAFKA_VERSION}"}))


def main(*, quick: bool = False, count: int | None = None, rounds_count: int | None = None,
         json_path: Path | None = None) -> dict[str, Any]:
    console = rounds.console()
    environment = rounds.environment()
    count = count or (50_000 if quick else 500_000)
    rounds_count = rounds_count or (2 if quick else rounds.DEFAULT_ROUNDS)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="samsa-bench-kafka-perf-") as temp:
        result = run(Path(temp), count=count, rounds_count=rounds_count, console=console)
    result = {"bench": "kafka_perf", "environment": rounds.finish(environment),
              "wall_seconds": round(time.monotonic() - started, 1), **result}
    print_table(result, console)
    rounds.write_results(result, json_path or RESULTS / "kafka_perf.json", console)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_perf",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="50,000 records, 2 rounds")
    parser.add_argument("--count", type=int, help="records per round and broker (500,000)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (5)")
    parser.add_argument("--json", type=Path, help="write the results here")
    arguments = parser.parse_args()
    main(quick=arguments.quick, count=arguments.count, rounds_count=arguments.rounds,
         json_path=arguments.json)
