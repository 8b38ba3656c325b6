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
- The bench entry starts a Samsa broker and runs the three clients for 100-byte records,
  ``--rounds`` (5) interleaved rounds, the order rotated each round (``bench.rounds``), at
  each client's default configuration plus ``linger.ms=5``. Reported: each client's median
  (min–max) over the rounds, and Samsa's records/s and CPU per record as a ratio to each other
  client's: the median (min–max) of the paired per-round ratios (the goal: >= kafka-python
  and >= 0.5x confluent-kafka). Every client is closed inside its measurement (confluent-kafka's
  ``Producer.close()`` joins librdkafka's threads), so none runs on into the next. Writes
  ``bench/results/producer.json`` with every round's figures, the date, the machine and the
  load before and after.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import logging
import os
import statistics
import time
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from bench import rounds

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

    try:
        _send_loop(one, deliveries.confluent, count, deliveries, throughput, progress,
                   every=lambda: poll(0))
        left = producer.flush(300)
    finally:
        producer.close()  # librdkafka's threads joined: none of them runs into the next client
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
# Imported before the first round: a first import inside a measurement (samsa's producer and
# kafka-python take ~0.1–0.3 s) would be charged to whichever client runs first.
MODULES = {"samsa": ("samsa.producer",), "confluent-kafka": ("confluent_kafka",),
           "kafka-python": ("kafka",)}


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
        throughput: float = -1, settings: Mapping[str, str] | None = None,
        rounds_count: int = 1, console: Console | None = None) -> rounds.Rounds[ProduceResult]:
    """Each client once per round, ``rounds_count`` rounds, the order rotated each round."""
    for client in clients:
        for module in MODULES[client]:
            importlib.import_module(module)
    show = console is not None and num_records * len(clients) * rounds_count >= PROGRESS_MIN_RECORDS
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeRemainingColumn(), console=console, transient=True, disable=not show) as bar:

        def measure(client: str, round_index: int) -> ProduceResult:
            task = bar.add_task(f"  {client}: records", total=num_records)
            try:
                return produce(client, bootstrap, topic, num_records=num_records,
                               record_size=record_size, throughput=throughput, settings=settings,
                               progress=functools.partial(_advance, bar, task))
            finally:
                bar.remove_task(task)

        return rounds.run_rounds(clients, rounds_count, measure, progress=bar, label="produce: ")


def _advance(bar: Progress, task: TaskID, done: int) -> None:
    bar.update(task, completed=done)


def _latency(name: str) -> Callable[[ProduceResult], float]:
    return lambda result: result.latency_ms[name]


FIGURES: dict[str, Callable[[ProduceResult], float]] = {
    "records_per_s": lambda r: r.records_per_s,
    "mb_per_s": lambda r: r.mb_per_s,
    "cpu_us_per_record": lambda r: r.cpu_seconds / max(r.records, 1) * 1e6,
    **{f"latency_{name}_ms": _latency(name) for name in ("avg", "p50", "p95", "p99", "max")},
}
COLUMNS = [("records_per_s", "records/s", ",.0f"), ("cpu_us_per_record", "CPU µs/rec", ".2f"),
           ("latency_p50_ms", "p50 ms", ".1f"), ("latency_p99_ms", "p99 ms", ".1f")]


def summarize(done: rounds.Rounds[ProduceResult]) -> dict[str, Any]:
    """Every client's median (min–max) of each figure, Samsa ÷ each other client paired, the
    versions, the delivery errors and every round's figures."""
    return {**rounds.summarize(done, FIGURES),
            "versions": {client: next((r.version for r in results if r is not None), "")
                         for client, results in done.results.items()},
            "errors": {client: sum(r.errors for r in results if r is not None)
                       for client, results in done.results.items()},
            "rounds": rounds.rounds_json(done, ProduceResult.row)}


def failures(done: rounds.Rounds[ProduceResult]) -> list[ProduceResult]:
    """The rounds in which some record was not delivered."""
    return [r for results in done.results.values() for r in results if r is not None and r.errors]


def print_results(summary: dict[str, Any], console: Console, *, title: str = "",
                  caption: str = "") -> None:
    names = {client: f"{client} {version}" for client, version in summary["versions"].items()}
    console.print(rounds.comparison_table(title or "producer: median (min–max) of the rounds",
                                          summary, COLUMNS, label="client", caption=caption,
                                          names=names))


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
        rates[name] = round(records / statistics.median(_cpu_seconds(action) for _ in range(3)))
    return rates


def _cpu_seconds(action: Callable[[], None]) -> float:
    start = time.thread_time()
    action()
    return time.thread_time() - start


# --- the bench entry -------------------------------------------------------------------------


def main(*, num_records: int = 300_000, rounds_count: int = rounds.DEFAULT_ROUNDS,
         json_path: Path | None = None) -> None:
    from bench import peers

    console = rounds.console()
    environment = rounds.environment()
    rates = encode_rate()
    with peers.temporary_samsa("samsa-client-bench-") as broker:
        done = run(broker.bootstrap, "bench-producer", list(CLIENTS), num_records=num_records,
                   record_size=100, settings=BENCH_SETTINGS, rounds_count=rounds_count,
                   console=console)
    environment = rounds.finish(environment)
    summary = summarize(done)
    print_results(summary, console, caption=rounds.caption(environment),
                  title=f"{num_records:,} × 100 B records, linger.ms=5, each client's defaults "
                        f"otherwise: median (min–max) of {rounds_count} interleaved rounds")
    console.print(f"encoders alone (CPU time, 100 B values into 16 KiB batches, median of 3): "
                  f"Samsa's BatchBuilder {rates['samsa_batch_builder']:,} records/s, "
                  f"protocol.records.encode_batch {rates['protocol_encode_batch']:,}, "
                  f"kafka-python's DefaultRecordBatchBuilder {rates['kafka_python_builder']:,}")
    document = {"bench": "producer", "environment": environment, "settings": BENCH_SETTINGS,
                "num_records": num_records, "record_size": 100, "rounds": rounds_count,
                **summary, "encode_records_per_s": rates,
                "goal": {"vs_kafka_python": 1.0, "vs_confluent_kafka": 0.5}}
    rounds.write_results(document, json_path or RESULTS / "producer.json", console)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.client_perf",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--num-records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS,
                        help="interleaved rounds (default 5)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    main(num_records=arguments.num_records, rounds_count=arguments.rounds,
         json_path=arguments.json)

