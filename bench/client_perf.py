"""Producer benchmark: Samsa's Python client against confluent-kafka and kafka-python.

The logic behind ``samsa perf produce`` (kafka-producer-perf-test's measurements) and the
``python -m bench.client_perf`` bench entry:

- ``produce(client, bootstrap, topic, ...)`` sends ``num_records`` values of ``record_size``
  random bytes (no key) with one client, optionally throttled to ``throughput`` records/s,
  with a delivery callback on every record as kafka-producer-perf-test has, and measures
  records/s, MB/s (value bytes), send → acknowledgement latency (avg, p50, p95, p99, max)
  and the client process's CPU time per record (all its threads: librdkafka's too).
- ``encode_rate()``: records/s of Samsa's batch encoder alone (``samsa._encoding``) for
  100-byte values, the producer's hot path, against ``protocol.records.encode_batch`` and
  kafka-python's record batch builder.
- The bench entry starts a Samsa broker and runs the three clients for 100-byte records, one
  after the other, ``--rounds`` times (interleaved, best of each: other load on the machine
  hits them alike), at each client's default configuration plus ``linger.ms=5``, and prints
  Samsa's records/s as a ratio to each: of the best rounds, and the median of the rounds'
  paired ratios, the steadier figure on a busy machine (the goal: >= kafka-python and >= 0.5x
  confluent-kafka). Writes ``bench/results/producer.json``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table

RESULTS = Path(__file__).parent / "results"
CLIENTS = ("samsa", "confluent-kafka", "kafka-python")
PROGRESS_MIN_RECORDS = 200_000  # smaller runs finish before a bar is worth drawing
BENCH_SETTINGS = {"linger.ms": "5"}


@dataclass(frozen=True)
class ProduceResult:
    client: str
    version: str
    records: int
    record_size: int
    seconds: float
    cpu_seconds: float
    errors: int
    first_error: str
    latency_ms: dict[str, float]

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.records * self.record_size / self.seconds / 1e6 if self.seconds else 0.0

    def row(self) -> dict[str, Any]:
        return {"client": self.client, "version": self.version, "records": self.records,
                "record_size": self.record_size, "records_per_s": round(self.records_per_s),
                "mb_per_s": round(self.mb_per_s, 2), "seconds": round(self.seconds, 3),
                "cpu_us_per_record": round(self.cpu_seconds / max(self.records, 1) * 1e6, 2),
                "errors": self.errors, "first_error": self.first_error,
                **{f"latency_{name}_ms": round(value, 2)
                   for name, value in self.latency_ms.items()}}


class _Deliveries:
    """Latency of every record (send → acknowledgement), filled in by delivery callbacks."""

    def __init__(self, count: int) -> None:
        self.latencies = array("d", bytes(8 * count))
        self.done = 0
        self.errors = 0
        self.first_error = ""

    def record(self, sent: float, error: object) -> None:
        if error is not None:
            self.errors += 1
            if not self.first_error:
                self.first_error = str(error)
            return
        self.latencies[self.done] = time.perf_counter() - sent
        self.done += 1

    # Each client's callback signature, bound to the send time with functools.partial:
    def samsa(self, sent: float, metadata: object, error: object) -> None:
        self.record(sent, error)

    def confluent(self, sent: float, error: object, message: object) -> None:
        self.record(sent, error)

    def kafka_python(self, sent: float, outcome: object) -> None:
        self.record(sent, outcome if isinstance(outcome, BaseException) else None)

    def summary(self) -> dict[str, float]:
        values = sorted(self.latencies[:self.done])
        if not values:
            return {"avg": 0.0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}

        def at(fraction: float) -> float:
            return values[min(int(len(values) * fraction), len(values) - 1)] * 1000

        return {"avg": sum(values) / len(values) * 1000, "p50": at(0.5), "p95": at(0.95),
                "p99": at(0.99), "max": values[-1] * 1000}


class _Throttle:
    """kafka-producer-perf-test's ThroughputThrottler: sleep when ahead of the target rate."""

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self.start = time.perf_counter()

    def pace(self, sent: int) -> None:
        if self.per_second <= 0:
            return
        ahead = sent / self.per_second - (time.perf_counter() - self.start)
        if ahead > 0.002:
            time.sleep(ahead)


Progressor = Callable[[int], object]


def _send_loop(send: Callable[[Callable[..., None]], None], handler: Callable[..., None],
               count: int, deliveries: _Deliveries, throughput: float,
               progress: Progressor | None, every: Callable[[], object] | None = None) -> None:
    """``send(callback)`` ``count`` times, the callback being ``handler`` bound to the send
    time (one partial per record, for every client alike); ``every`` each 1,000 records."""
    throttle = _Throttle(throughput)
    clock = time.perf_counter
    partial = functools.partial
    for sent in range(count):
        send(partial(handler, clock()))
        if sent % 1000 == 999:
            if every is not None:
                every()
            if progress is not None:
                progress(deliveries.done + deliveries.errors)
            throttle.pace(sent + 1)


def _samsa(bootstrap: str, topic: str, count: int, value: bytes, throughput: float,
           settings: Mapping[str, str], progress: Progressor | None,
           deliveries: _Deliveries) -> str:
    import samsa
    from samsa.producer import Producer

    with Producer({"bootstrap.servers": bootstrap, **settings}) as producer:
        producer.partitions_for(topic, wait=False)  # fail fast, saying why
        send = producer.send

        def one(callback: Callable[..., None]) -> None:
            send(topic, value, on_delivery=callback)

        _send_loop(one, deliveries.samsa, count, deliveries, throughput, progress)
        producer.flush()
    return samsa.__version__


def _confluent(bootstrap: str, topic: str, count: int, value: bytes, throughput: float,
               settings: Mapping[str, str], progress: Progressor | None,
               deliveries: _Deliveries) -> str:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **settings})
    produce, poll = producer.produce, producer.poll

    def one(callback: Callable[..., None]) -> None:
        while True:
            try:
                produce(topic, value, on_delivery=callback)
                return
            except BufferError:  # the local queue is full: serve callbacks, then retry
                poll(0.005)

    _send_loop(one, deliveries.confluent, count, deliveries, throughput, progress,
               every=lambda: poll(0))
    left = producer.flush(300)
    if left:
        raise RuntimeError(f"confluent-kafka: {left} records not delivered")
    return f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"


def _kafka_python(bootstrap: str, topic: str, count: int, value: bytes, throughput: float,
                  settings: Mapping[str, str], progress: Progressor | None,
                  deliveries: _Deliveries) -> str:
    import kafka

    logging.getLogger("kafka").setLevel(logging.ERROR)  # its event loop warns when it is busy
    options: dict[str, Any] = {key.replace(".", "_"): _typed(raw) for key, raw in settings.items()}
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, **options)
    send = producer.send

    def one(callback: Callable[..., None]) -> None:
        send(topic, value).add_both(callback)

    try:
        _send_loop(one, deliveries.kafka_python, count, deliveries, throughput, progress)
        producer.flush()
    finally:
        producer.close()
    return str(kafka.__version__)


def _typed(raw: str) -> Any:
    text = str(raw)
    if text.lstrip("-").isdigit():
        return int(text)
    return {"true": True, "false": False}.get(text.lower(), text)


_RUNNERS = {"samsa": _samsa, "confluent-kafka": _confluent, "kafka-python": _kafka_python}


def produce(client: str, bootstrap: str, topic: str, *, num_records: int, record_size: int,
            throughput: float = -1, settings: Mapping[str, str] | None = None,
            progress: Progressor | None = None) -> ProduceResult:
    """Run one client (see the module docstring)."""
    deliveries = _Deliveries(num_records)
    value = os.urandom(record_size)
    gc.collect()
    cpu, start = time.process_time(), time.perf_counter()
    version = _RUNNERS[client](bootstrap, topic, num_records, value, throughput,
                               dict(settings or {}), progress, deliveries)
    seconds = time.perf_counter() - start
    return ProduceResult(client, version, deliveries.done, record_size, seconds,
                         time.process_time() - cpu, deliveries.errors, deliveries.first_error,
                         deliveries.summary())


def run(bootstrap: str, topic: str, clients: list[str], *, num_records: int, record_size: int,
        throughput: float = -1, settings: Mapping[str, str] | None = None, rounds: int = 1,
        console: Console | None = None,
        history: dict[str, list[ProduceResult]] | None = None) -> list[ProduceResult]:
    """Each client ``rounds`` times, interleaved; the best round of each (by records/s).
    ``history`` (if given) receives every round's result, by client."""
    best: dict[str, ProduceResult] = {}
    show = console is not None and num_records * len(clients) * rounds >= PROGRESS_MIN_RECORDS
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeRemainingColumn(), console=console, transient=True, disable=not show) as bar:
        for round_number in range(rounds):
            for client in clients:
                label = f"{client} (round {round_number + 1}/{rounds})" if rounds > 1 else client
                task = bar.add_task(label, total=num_records)
                result = produce(client, bootstrap, topic, num_records=num_records,
                                 record_size=record_size, throughput=throughput,
                                 settings=settings,
                                 progress=functools.partial(_advance, bar, task))
                bar.remove_task(task)
                if history is not None:
                    history.setdefault(client, []).append(result)
                if client not in best or result.records_per_s > best[client].records_per_s:
                    best[client] = result
    return [best[client] for client in clients]


def _advance(bar: Progress, task: TaskID, done: int) -> None:
    bar.update(task, completed=done)


def ratios(results: list[ProduceResult]) -> dict[str, float]:
    """Samsa's records/s divided by each other client's."""
    ours = next((r for r in results if r.client == "samsa"), None)
    if ours is None:
        return {}
    return {r.client: round(ours.records_per_s / r.records_per_s, 3)
            for r in results if r.client != "samsa" and r.records_per_s}


def paired_ratios(history: Mapping[str, list[ProduceResult]]) -> dict[str, float]:
    """Median over rounds of Samsa's records/s divided by each other client's in the same
    round (they ran back to back, so load on the machine hits both alike)."""
    ours = history.get("samsa", [])
    found = {}
    for client, runs in history.items():
        if client == "samsa" or not runs:
            continue
        ratios_by_round = sorted(mine.records_per_s / theirs.records_per_s
                                 for mine, theirs in zip(ours, runs, strict=False)
                                 if theirs.records_per_s)
        if ratios_by_round:
            found[client] = round(statistics.median(ratios_by_round), 3)
    return found


def print_results(results: list[ProduceResult], console: Console, *, title: str = "",
                  history: Mapping[str, list[ProduceResult]] | None = None) -> None:
    table = Table(title=title or None)
    columns = ("client", "records/s", "MB/s", "avg ms", "p50 ms", "p95 ms", "p99 ms", "max ms",
               "CPU µs/rec", "errors")
    for column in columns:
        table.add_column(column, justify="left" if column == "client" else "right")
    for r in results:
        lat = r.latency_ms
        table.add_row(f"{r.client} {r.version}", f"{r.records_per_s:,.0f}", f"{r.mb_per_s:.2f}",
                      *(f"{lat[name]:.1f}" for name in ("avg", "p50", "p95", "p99", "max")),
                      f"{r.cpu_seconds / max(r.records, 1) * 1e6:.2f}", str(r.errors))
    found = ratios(results)
    if found:
        table.caption = "samsa records/s ÷ " + ", ".join(
            f"{client}: {ratio:.2f}x" for client, ratio in found.items())
        paired = paired_ratios(history or {})
        if paired and len(next(iter((history or {}).values()))) > 1:
            table.caption += "; median of the rounds' ratios: " + ", ".join(
                f"{client}: {ratio:.2f}x" for client, ratio in paired.items())
    console.print(table)


def encode_rate(record_size: int = 100, records: int = 200_000) -> dict[str, float]:
    """Records/s (CPU time) of encoding ``record_size``-byte values into 16 KiB batches, CRC
    included: Samsa's producer encoder, ``protocol.records.encode_batch`` from Record
    objects, and kafka-python's ``DefaultRecordBatchBuilder`` (its producer's encoder)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from protocol.records import Record, encode_batch
    from samsa._encoding import BatchBuilder

    value = os.urandom(record_size)
    now = int(time.time() * 1000)
    per_batch = 16_384 // (record_size + 10)

    def samsa_builder() -> None:
        batch = BatchBuilder(16_384)
        for _ in range(records):
            if not batch.append(now, None, value, None):
                batch.close()
                batch = BatchBuilder(16_384)
                batch.append(now, None, value, None)
        batch.close()

    def from_records() -> None:
        for start in range(0, records, per_batch):
            encode_batch([Record(offset, now, None, value)
                          for offset in range(min(per_batch, records - start))])

    def kafka_python() -> None:
        def new() -> DefaultRecordBatchBuilder:
            return DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 16_384)

        batch, offset = new(), 0
        for _ in range(records):
            if batch.append(offset, now, None, value, []) is None:
                batch.build()
                batch, offset = new(), 0
                batch.append(offset, now, None, value, [])
            offset += 1
        batch.build()

    rates: dict[str, float] = {}
    for name, action in (("samsa_batch_builder", samsa_builder),
                         ("protocol_encode_batch", from_records),
                         ("kafka_python_builder", kafka_python)):
        best = min(_cpu_seconds(action) for _ in range(3))
        rates[name] = round(records / best)
    return rates


def _cpu_seconds(action: Callable[[], None]) -> float:
    start = time.thread_time()
    action()
    return time.thread_time() - start


# --- the bench entry -------------------------------------------------------------------------


def main(*, num_records: int = 300_000, rounds: int = 3, json_path: Path | None = None) -> None:
    from bench import peers

    console = Console(width=None if sys.stdout.isatty() else 150)
    rates = encode_rate()
    with tempfile.TemporaryDirectory(prefix="samsa-client-bench-") as temp:
        broker = peers.start_samsa(Path(temp) / "samsa-data")
        history: dict[str, list[ProduceResult]] = {}
        try:
            results = run(broker.bootstrap, "bench-producer", list(CLIENTS),
                          num_records=num_records, record_size=100, settings=BENCH_SETTINGS,
                          rounds=rounds, console=console, history=history)
        finally:
            broker.stop()
    print_results(results, console, history=history,
                  title=f"{num_records:,} × 100 B records, linger.ms=5, each client's "
                        f"defaults otherwise, best of {rounds}")
    for client, runs in history.items():
        console.print(f"{client}: " + ", ".join(f"{r.records_per_s:,.0f}" for r in runs)
                      + " records/s per round")
    console.print(f"encoders alone (CPU time, 100 B values into 16 KiB batches): Samsa's "
                  f"BatchBuilder {rates['samsa_batch_builder']:,} records/s, "
                  f"protocol.records.encode_batch {rates['protocol_encode_batch']:,}, "
                  f"kafka-python's DefaultRecordBatchBuilder {rates['kafka_python_builder']:,}")
    document = {"bench": "producer", "cpus": os.cpu_count(), "load_average": os.getloadavg(),
                "settings": BENCH_SETTINGS, "rounds": rounds,
                "results": [r.row() for r in results], "ratios": ratios(results),
                "rounds_records_per_s": {client: [round(r.records_per_s) for r in runs]
                                         for client, runs in history.items()},
                "paired_ratios_median": paired_ratios(history),
                "encode_records_per_s": rates,
                "goal": {"vs_kafka_python": 1.0, "vs_confluent_kafka": 0.5}}
    target = json_path or RESULTS / "producer.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document, indent=2))
    console.print(f"results written to {target}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.client_perf",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--num-records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    main(num_records=arguments.num_records, rounds=arguments.rounds, json_path=arguments.json)

