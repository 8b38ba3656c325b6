"""Consumer benchmark: Samsa's Python client against confluent-kafka and kafka-python.

The logic behind ``samsa perf consume`` (kafka-consumer-perf-test's measurements) and the
``python -m bench.consumer_perf`` bench entry:

- ``consume(client, bootstrap, topic, messages=N)`` reads the topic from the beginning of
  every partition (assigned, no group, nothing committed) with one client until it has N
  records or has reached the end offsets seen at the start, and measures records/s, MB/s
  (key + value bytes, as kafka-consumer-perf-test counts them) and the process's CPU time per
  record (all its threads: librdkafka's too). The clock runs from the consumer's creation,
  connecting included, as kafka-consumer-perf-test's does. Each client asks for up to 500
  records at a time (Samsa's and Java's ``max.poll.records``, kafka-python's too; confluent's
  ``consume(500)``).
- The bench entry starts a Samsa broker, writes ``--num-records`` 100-byte records to a
  one-partition topic with confluent-kafka, then runs the three clients and confluent-kafka
  without its fetch queue backoff (as ``bench.broker`` runs it) in ``--rounds`` (5)
  interleaved rounds, the order rotated each round (``bench.rounds``). Reported: each
  client's median (min–max) over the rounds, Samsa's records/s and CPU per record as a ratio
  to each other client's (the median (min–max) of the paired per-round ratios), and the
  records/s of the decoding alone (``decode_rate()``). Every client is closed inside its
  measurement. Writes ``bench/results/consumer.json`` with every round's figures, the date,
  the machine and the load before and after.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import os
import statistics
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from bench import rounds

RESULTS = Path(__file__).parent / "results"
CLIENTS = ("samsa", "confluent-kafka", "kafka-python")
BATCH = 500
IDLE_LIMIT_S = 30.0  # give up when no record came for this long
TUNED = "confluent-kafka, fetch.queue.backoff.ms=0"
# A system that is a client with settings of its own: librdkafka 2.x backs its fetch queue off
# for 1 s whenever its prefetch queue is full; the broker bench runs it without that backoff.
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    TUNED: ("confluent-kafka", {"fetch.queue.backoff.ms": "0"})}

Count = Callable[[int, int], None]  # (records, bytes) just read


@dataclass(frozen=True)
class ConsumeResult:
    client: str
    version: str
    records: int
    bytes: int
    seconds: float
    cpu_seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds else 0.0

    def row(self) -> dict[str, Any]:
        return {"client": self.client, "version": self.version, "records": self.records,
                "bytes": self.bytes, "seconds": round(self.seconds, 3),
                "records_per_s": round(self.records_per_s), "mb_per_s": round(self.mb_per_s, 2),
                "cpu_us_per_record": round(self.cpu_seconds / max(self.records, 1) * 1e6, 2)}


class _Tally:
    """Records and bytes read so far, and whether to stop."""

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted
        self.records = 0
        self.bytes = 0
        self.last_progress = time.monotonic()

    def add(self, records: int, size: int) -> None:
        if records:
            self.records += records
            self.bytes += size
            self.last_progress = time.monotonic()

    def done(self, at_end: Callable[[], bool]) -> bool:
        if self.records >= self.wanted or at_end():
            return True
        if time.monotonic() - self.last_progress > IDLE_LIMIT_S:
            raise RuntimeError(f"no record for {IDLE_LIMIT_S:.0f} s after {self.records}")
        return False


def _size(data: bytes | None) -> int:
    return 0 if data is None else len(data)


def _samsa(bootstrap: str, topic: str, tally: _Tally, settings: Mapping[str, str]) -> str:
    import samsa
    from samsa.consumer import Consumer
    from samsa.types import TopicPartition

    with Consumer(config={"bootstrap.servers": bootstrap, "enable.auto.commit": "false",
                          "auto.offset.reset": "earliest", **settings}) as consumer:
        partitions = [TopicPartition(topic, p.partition) for p in consumer.partitions_for(topic)]
        if not partitions:
            raise RuntimeError(f"unknown topic {topic!r}")
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(partitions)
        position = consumer.position

        def at_end() -> bool:
            return all(position(tp) >= end for tp, end in ends.items())

        poll = consumer.poll
        while not tally.done(at_end):
            records = poll(1.0, BATCH)
            tally.add(len(records), sum([_size(r.key) + _size(r.value) for r in records]))
    return samsa.__version__


def _confluent(bootstrap: str, topic: str, tally: _Tally, settings: Mapping[str, str]) -> str:
    import confluent_kafka
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"perf-{uuid.uuid4()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", **settings})
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        if metadata.error is not None:
            raise RuntimeError(f"topic {topic!r}: {metadata.error}")
        partitions = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in metadata.partitions]
        ends = {p.partition: consumer.get_watermark_offsets(p, timeout=30)[1] for p in partitions}
        consumer.assign(partitions)
        last: dict[int, int] = {}

        def at_end() -> bool:
            return all(last.get(p, -1) + 1 >= end for p, end in ends.items())

        consume = consumer.consume
        while not tally.done(at_end):
            messages = [m for m in consume(BATCH, 1.0) if m.error() is None]
            for message in messages:  # in offset order within each partition
                last[message.partition() or 0] = message.offset() or 0
            tally.add(len(messages), sum([_size(m.key()) + _size(m.value()) for m in messages]))
    finally:
        consumer.close()
    return f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"


def _kafka_python(bootstrap: str, topic: str, tally: _Tally, settings: Mapping[str, str]) -> str:
    import kafka
    from kafka import TopicPartition

    options = {key.replace(".", "_"): _typed(raw) for key, raw in settings.items()}
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   auto_offset_reset="earliest", **options)
    try:
        numbers = consumer.partitions_for_topic(topic)
        if not numbers:
            raise RuntimeError(f"unknown topic {topic!r}")
        partitions = [TopicPartition(topic, p) for p in sorted(numbers)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)

        def at_end() -> bool:
            return all(consumer.position(tp) >= end for tp, end in ends.items())

        while not tally.done(at_end):
            batches = consumer.poll(timeout_ms=1000, max_records=BATCH)
            for records in batches.values():
                tally.add(len(records), sum([max(r.serialized_key_size, 0)
                                             + max(r.serialized_value_size, 0) for r in records]))
    finally:
        consumer.close()
    return str(kafka.__version__)


def _typed(raw: str) -> Any:
    text = str(raw)
    if text.lstrip("-").isdigit():
        return int(text)
    return {"true": True, "false": False}.get(text.lower(), text)


_RUNNERS = {"samsa": _samsa, "confluent-kafka": _confluent, "kafka-python": _kafka_python}
# Imported before the first round: a first import inside a measurement (samsa's consumer and
# kafka-python take ~0.1–0.3 s) would be charged to whichever client runs first.
MODULES = {"samsa": ("samsa.consumer", "samsa.types"), "confluent-kafka": ("confluent_kafka",),
           "kafka-python": ("kafka",)}


def consume(client: str, bootstrap: str, topic: str, *, messages: int,
            settings: Mapping[str, str] | None = None) -> ConsumeResult:
    """Run one client (see the module docstring)."""
    tally = _Tally(messages)
    gc.collect()
    cpu, start = time.process_time(), time.perf_counter()
    version = _RUNNERS[client](bootstrap, topic, tally, dict(settings or {}))
    seconds = time.perf_counter() - start
    return ConsumeResult(client, version, tally.records, tally.bytes, seconds,
                         time.process_time() - cpu)


def run(bootstrap: str, topic: str, clients: list[str], *, messages: int,
        settings: Mapping[str, str] | None = None, rounds_count: int = 1,
        console: Console | None = None) -> rounds.Rounds[ConsumeResult]:
    """Each client (or ``VARIANTS`` entry) once per round, the order rotated each round."""

    for name in clients:
        for module in MODULES[VARIANTS.get(name, (name, {}))[0]]:
            importlib.import_module(module)

    def measure(name: str, round_index: int) -> ConsumeResult:
        client, extra = VARIANTS.get(name, (name, {}))
        result = consume(client, bootstrap, topic, messages=messages,
                         settings={**(settings or {}), **extra})
        return dataclasses.replace(result, client=name)

    with Progress(console=console, transient=True, disable=console is None) as bar:
        return rounds.run_rounds(clients, rounds_count, measure, progress=bar, label="consume: ")


FIGURES: dict[str, Callable[[ConsumeResult], float]] = {
    "records_per_s": lambda r: r.records_per_s,
    "mb_per_s": lambda r: r.mb_per_s,
    "cpu_us_per_record": lambda r: r.cpu_seconds / max(r.records, 1) * 1e6,
}
COLUMNS = [("records_per_s", "records/s", ",.0f"), ("cpu_us_per_record", "CPU µs/rec", ".2f")]


def summarize(done: rounds.Rounds[ConsumeResult]) -> dict[str, Any]:
    """Every client's median (min–max) of each figure, Samsa ÷ each other client paired, the
    versions and every round's figures."""
    return {**rounds.summarize(done, FIGURES),
            "versions": {name: next((r.version for r in results if r is not None), "")
                         for name, results in done.results.items()},
            "rounds": rounds.rounds_json(done, ConsumeResult.row)}


def print_results(summary: dict[str, Any], console: Console, *, title: str = "",
                  caption: str = "") -> None:
    names = {}
    for name, version in summary["versions"].items():
        client, _, variant = name.partition(", ")
        names[name] = f"{client} {version}" + (f", {variant}" if variant else "")
    console.print(rounds.comparison_table(title or "consumer: median (min–max) of the rounds",
                                          summary, COLUMNS, label="client", caption=caption,
                                          names=names))


def fill(bootstrap: str, topic: str, *, records: int, record_size: int,
         partitions: int = 1) -> None:
    """Create ``topic`` and write ``records`` random values of ``record_size`` bytes."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = os.urandom(record_size)
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.005)
    if producer.flush(300):
        raise RuntimeError("the records were not all written")


def decode_rate(record_size: int = 100, records: int = 100_000) -> dict[str, float]:
    """Records/s (CPU time, median of 5) of the consumer's decoding alone (``samsa._decoding``:
    batches of 16 KiB, as producers send them, into ConsumerRecords, 500 per take) and of
    ``protocol.records.decode_batch`` (Record objects) over the same bytes."""
    from protocol.records import Record, decode_batch, encode_batch
    from samsa._decoding import CompletedFetch, Decoders, parse_batches
    from samsa._positions import PartitionState
    from samsa.config import parse_config
    from samsa.types import TopicPartition

    per_batch = 16_384 // (record_size + 10)
    now = int(time.time() * 1000)
    data = b"".join(
        encode_batch([Record(first + i, now + i // 50, None, os.urandom(record_size))
                      for i in range(min(per_batch, records - first))])
        for first in range(0, records, per_batch))
    view = memoryview(data)
    decoders = Decoders(parse_config("consumer", {}))

    def consumer_decoding() -> None:
        fetch = CompletedFetch(TopicPartition("t", 0), 0, view, parse_batches(view), None)
        state = PartitionState(position=0, fetch_offset=0)
        while not fetch.exhausted:
            fetch.take(state, 500, decoders, [])

    def protocol_decoding() -> None:
        position = 0
        while position < len(data):
            position += decode_batch(view, position).size_in_bytes

    rates: dict[str, float] = {}
    for name, action in (("samsa_consumer", consumer_decoding),
                         ("protocol_decode_batch", protocol_decoding)):
        rates[name] = round(records / statistics.median(_cpu_seconds(action) for _ in range(5)))
    return rates


def _cpu_seconds(action: Callable[[], None]) -> float:
    start = time.thread_time()
    action()
    return time.thread_time() - start


# --- the bench entry -------------------------------------------------------------------------


def main(*, num_records: int = 500_000, rounds_count: int = rounds.DEFAULT_ROUNDS,
         json_path: Path | None = None) -> None:
    from bench import peers

    console = rounds.console()
    environment = rounds.environment()
    rates = decode_rate()
    with peers.temporary_samsa("samsa-consumer-bench-") as broker:
        fill(broker.bootstrap, "bench-consumer", records=num_records, record_size=100)
        done = run(broker.bootstrap, "bench-consumer", [*CLIENTS, TUNED], messages=num_records,
                   rounds_count=rounds_count, console=console)
    environment = rounds.finish(environment)
    summary = summarize(done)
    print_results(summary, console, caption=rounds.caption(environment),
                  title=f"{num_records:,} × 100 B records, one partition, each client's "
                        f"defaults: median (min–max) of {rounds_count} interleaved rounds")
    console.print(f"decoding alone (CPU time, 100 B values, median of 5): the consumer's "
                  f"{rates['samsa_consumer']:,} records/s, protocol.records.decode_batch "
                  f"{rates['protocol_decode_batch']:,} records/s")
    document = {"bench": "consumer", "environment": environment, "num_records": num_records,
                "record_size": 100, "rounds": rounds_count, **summary,
                "decode_records_per_s": rates}
    rounds.write_results(document, json_path or RESULTS / "consumer.json", console)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.consumer_perf",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--num-records", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS,
                        help="interleaved rounds (default 5)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    main(num_records=arguments.num_records, rounds_count=arguments.rounds,
         json_path=arguments.json)
