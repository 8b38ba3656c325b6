"""Per-key reads against a full scan: ``python -m bench.keys``.

One Samsa broker, one partition holding ``--num-records`` (1,000,000) records of 100 B over
``--keys`` (10,000) keys, drawn at random (seeded) so each key's records are spread over the
whole partition and every segment (``segment.bytes`` 16 MiB: several sealed segments and the
active one), written by librdkafka with Java's default ``batch.size`` (16 KiB, ~140 records a
batch): the key index names batches, so a key read reads (and the client decodes) every batch
holding one of the key's records. Two ways to read every record of one key, measured in interleaved rounds
(``bench.rounds``):

- ``read_key``: ``samsa.Consumer.read_key`` (SamsaReadKey: the leader's key indexes) for
  ``--samples`` (200) keys drawn at random each round; each read is checked against the key's
  count written. Figures: p50 and p99 latency of one key's read.
- ``full_scan``: what one key costs without the index: Samsa's consumer reads the partition from
  the start to the end, keeping that key's records (the count is checked). Figure: the scan's
  time.

The ratio reported is full scan ÷ read_key p50, paired per round. The first key read after the
fill is timed on its own (it builds every segment's key index: the one-off cost a partition
pays at its first key read), and so is the first after a broker restart (indexes loaded from
the ``.keyindex`` files). Writes ``bench/results/keys.json`` with every round's figures.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress
from rich.table import Table

from bench import rounds

RESULTS = Path(__file__).parent / "results"
TOPIC = "bench-keys"
SEGMENT_BYTES = 16 * 1024 * 1024
RECORD_SIZE = 100
SEED = 20261126
BATCH_SIZE = 16384


@dataclass(frozen=True)
class KeyRound:
    """One system's figures in one round (seconds)."""

    p50_s: float
    p99_s: float
    reads: int

    def row(self) -> dict[str, Any]:
        return {"p50_ms": round(self.p50_s * 1000, 3), "p99_ms": round(self.p99_s * 1000, 3),
                "reads": self.reads}


def key_of(number: int) -> bytes:
    return b"key-%05d" % number


def fill(bootstrap: str, *, records: int, keys: int) -> Counter[bytes]:
    """Create the topic and write ``records`` records with random keys; the count per key."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)})])[
        TOPIC].result(30)
    # Java's default batch.size (16 KiB), not librdkafka's 1 MB: the key index points at
    # batches, and a batch that holds every key makes any key read a full read.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": BATCH_SIZE})
    draw = random.Random(SEED)
    value = bytes(draw.getrandbits(8) for _ in range(RECORD_SIZE))
    counts: Counter[bytes] = Counter()
    for _ in range(records):
        key = key_of(draw.randrange(keys))
        counts[key] += 1
        while True:
            try:
                producer.produce(TOPIC, key=key, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError("the fill did not complete")
    return counts


def time_key_read(consumer: Any, key: bytes, expected: int) -> float:
    began = time.perf_counter()
    found = consumer.read_key(TOPIC, 0, key)
    elapsed = time.perf_counter() - began
    if len(found) != expected:
        raise AssertionError(f"read_key({key!r}) found {len(found)} records, {expected} written")
    return elapsed


def full_scan(bootstrap: str, key: bytes, expected: int) -> float:
    """Seconds for Samsa's consumer to read the partition from the start, keeping ``key``."""
    from samsa.consumer import Consumer
    from samsa.types import TopicPartition

    tp = TopicPartition(TOPIC, 0)
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        began = time.perf_counter()
        consumer.seek_to_beginning(tp)
        found = 0
        while consumer.position(tp) < end:
            found += sum(record.key == key for record in consumer.poll(1.0, 10_000))
        elapsed = time.perf_counter() - began
    if found != expected:
        raise AssertionError(f"the scan found {found} records of {key!r}, {expected} written")
    return elapsed


def measure(bootstrap: str, consumer: Any, counts: Counter[bytes], samples: int, keys: int,
            system: str, round_index: int) -> KeyRound:
    draw = random.Random(SEED + round_index)
    if system == "full_scan":
        key = key_of(draw.randrange(keys))
        elapsed = full_scan(bootstrap, key, counts[key])
        return KeyRound(elapsed, elapsed, 1)
    chosen = [key_of(draw.randrange(keys)) for _ in range(samples)]
    latencies = sorted(time_key_read(consumer, key, counts[key]) for key in chosen)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return KeyRound(statistics.median(latencies), p99, len(latencies))


def run(*, num_records: int, keys: int, samples: int, rounds_count: int) -> dict[str, Any]:
    from bench import peers
    from samsa.consumer import Consumer

    console = rounds.console()
    environment = rounds.environment()
    with tempfile.TemporaryDirectory(prefix="samsa-keys-bench-") as temp:
        broker = peers.start_samsa(Path(temp) / "samsa-data")
        try:
            with Progress(console=console, transient=True) as progress:
                task = progress.add_task(f"writing {num_records:,} records", total=None)
                counts = fill(broker.bootstrap, records=num_records, keys=keys)
                progress.remove_task(task)
                first = key_of(0)
                with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
                    cold_s = time_key_read(consumer, first, counts[first])
                broker.stop()
                broker = peers.start_samsa(Path(temp) / "samsa-data")
                with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
                    restarted_s = time_key_read(consumer, key_of(1), counts[key_of(1)])
                    done = rounds.run_rounds(
                        ["read_key", "full_scan"], rounds_count,
                        lambda system, index: measure(broker.bootstrap, consumer, counts,
                                                      samples, keys, system, index),
                        progress=progress, label="keys: ")
            segments = len(list((Path(temp) / "samsa-data" / f"{TOPIC}-0").glob("*.log")))
        finally:
            broker.stop()
    environment = rounds.finish(environment)
    ratio = rounds.ratio_spread(done.values("full_scan", lambda r: r.p50_s),
                                done.values("read_key", lambda r: r.p50_s))
    document = {
        "bench": "keys", "environment": environment, "num_records": num_records, "keys": keys,
        "record_size": RECORD_SIZE, "segment_bytes": SEGMENT_BYTES, "segments": segments,
        "producer_batch_size": BATCH_SIZE,
        "samples_per_round": samples, "rounds": rounds_count,
        "first_key_read_ms": round(cold_s * 1000, 1),
        "first_key_read_after_restart_ms": round(restarted_s * 1000, 1),
        "read_key_p50_ms": rounds.spread_json(done.spread("read_key", lambda r: r.p50_s * 1000)),
        "read_key_p99_ms": rounds.spread_json(done.spread("read_key", lambda r: r.p99_s * 1000)),
        "full_scan_ms": rounds.spread_json(done.spread("full_scan", lambda r: r.p50_s * 1000)),
        "full_scan_over_read_key_p50": rounds.spread_json(ratio),
        "by_round": rounds.rounds_json(done, KeyRound.row),
    }
    print_table(document, console)
    return document


def print_table(document: dict[str, Any], console: Any) -> None:
    table = Table(
        title=(f"{document['num_records']:,} × {RECORD_SIZE} B records over {document['keys']:,} "
               f"keys, one partition, {document['segments']} segments: one key's records, "
               f"median (min–max) of {document['rounds']} interleaved rounds"),
        caption=rounds.caption(document["environment"]))
    table.add_column("read")
    table.add_column("p50 ms", justify="right")
    table.add_column("p99 ms", justify="right")
    table.add_row(f"Consumer.read_key ({document['samples_per_round']} random keys a round)",
                  rounds.cell(document["read_key_p50_ms"], ",.2f"),
                  rounds.cell(document["read_key_p99_ms"], ",.2f"))
    table.add_row("full scan from the start, filtered (Samsa's consumer)",
                  rounds.cell(document["full_scan_ms"], ",.0f"), "")
    table.add_row("full scan ÷ read_key p50 (paired)",
                  rounds.ratio_cell(document["full_scan_over_read_key_p50"]), "")
    console.print(table)
    console.print(f"first key read after the fill (builds every key index): "
                  f"{document['first_key_read_ms']:,} ms; first after a restart (loads the "
                  f".keyindex files): {document['first_key_read_after_restart_ms']:,} ms")


def main(*, num_records: int = 1_000_000, keys: int = 10_000, samples: int = 200,
         rounds_count: int = rounds.DEFAULT_ROUNDS, json_path: Path | None = None) -> None:
    document = run(num_records=num_records, keys=keys, samples=samples,
                   rounds_count=rounds_count)
    rounds.write_results(document, json_path or RESULTS / "keys.json", rounds.console())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.keys",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--num-records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=200, help="key reads per round")
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS,
                        help="interleaved rounds (default 5)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    main(num_records=arguments.num_records, keys=arguments.keys, samples=arguments.samples,
         rounds_count=arguments.rounds, json_path=arguments.json)
