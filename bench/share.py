"""Share groups (KIP-932, queues) beside a classic consumer group: ``python -m bench.share``.

One Samsa broker (``group.share.heartbeat.interval.ms=1000``, ``group.initial.rebalance
.delay.ms=0``), one topic of ``PARTITIONS`` (16) partitions filled once with ``--num-records``
(30,000) records of 100–1,000 B (sizes drawn at random, seeded) by librdkafka. Each round
(``bench.rounds``: rotated order, ``--rounds`` 5) reads all of them once in each mode, every
mode with a fresh group:

- ``classic``: one ``samsa.AsyncConsumer`` in a classic consumer group (``auto.offset.reset``
  earliest, no auto commit): ``poll()`` (up to 500 records), then ``commit()`` of the positions,
  awaited;
- ``share ×1``, ``share ×4``, ``share ×16``: that many ``samsa.AsyncShareConsumer`` members of a
  new share group (``share.auto.offset.reset=earliest``, explicit acknowledgement, the default
  ``max.poll.records`` 500), all in this process's one event loop: ``poll()``, ``acknowledge``
  each record ACCEPT, then ``commit_sync()`` (a ShareAcknowledge, awaited). Polling starts once
  the group shows every member with an assignment (``describe_share_groups``), so the members
  share the partitions from the first fetch;
- ``dead-letter accept`` and ``dead-letter reject``: one share member of a group whose
  ``samsa.share.dead.letter.topic`` names a fresh 16-partition topic; every record ACCEPTed, or
  every record REJECTed — each then appended by the broker to the dead-letter topic (acks=all)
  before it is archived. The reject run ends only when the dead-letter topic holds every record
  (its end offsets, polled every 10 ms), so the appends are inside the time.

Apache Kafka 4.3.1 (``bench.peers.start_kafka``; left out with ``--no-kafka`` or when Java is
missing) runs the classic and share modes beside Samsa — the same client, the same records,
its share groups on by default; ``group.initial.rebalance.delay.ms=0`` and a 1 s share heartbeat
interval as Samsa's — as the systems ``kafka: classic``, ``kafka: share ×1`` and so on
(``samsa.share.dead.letter.topic`` is Samsa's own: no dead-letter modes there). Before the
rounds each broker serves one classic and one share ×1 read that is not counted (the JVM's JIT,
Samsa's first share-partition loads).

Figures per mode and round: records/s from the first poll that returns records to the last
acknowledgement confirmed (so a group's join is outside the time), and the acknowledgement
latency of each record — from the ``poll()`` that returned it to the return of the
``commit_sync()`` (share) or ``commit()`` (classic) that confirmed it, i.e. the broker's answer
to the ShareAcknowledge / OffsetCommit; not the piggybacked acknowledgement of implicit mode,
which the client does not time — as p50 and p99 over the records; plus the CPU seconds the
broker and this process (the clients) used. Reported: median (min–max) over the rounds, and the
median (min–max) of the paired per-round ratios share ÷ classic (on each broker), dead-letter
reject ÷ accept (the cost of the move) and Samsa ÷ Kafka per mode. The classic consumer is the
reference line: the same broker serving the same records without per-record state. Writes ``bench/results/share-<date>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench import rounds

RESULTS = Path(__file__).parent / "results"
TOPIC = "bench-share"
PARTITIONS = 16
SEED = 20261126
SIZES = (100, 1000)  # record value sizes, bytes, drawn uniformly
DEADLINE_S = 120  # one mode's read of every record
CLASSIC = "classic"
SHARE_MEMBERS = (1, 4, 16)
ACCEPT = "dead-letter accept"
REJECT = "dead-letter reject"
BROKER_OVERRIDES = {"group.share.heartbeat.interval.ms": "1000",
                    "group.initial.rebalance.delay.ms": "0"}


def share_mode(members: int) -> str:
    return f"share ×{members}"


MODES = (CLASSIC, *(share_mode(members) for members in SHARE_MEMBERS), ACCEPT, REJECT)
KAFKA = "kafka: "  # the prefix of a mode run against Apache Kafka
KAFKA_MODES = (CLASSIC, *(share_mode(members) for members in SHARE_MEMBERS))  # no dead letters
KAFKA_CONFIGS = {"group.initial.rebalance.delay.ms": "0",
                 "group.share.heartbeat.interval.ms": "1000",
                 "group.share.min.heartbeat.interval.ms": "1000"}


def pairs(systems: Sequence[str]) -> list[tuple[str, str, str]]:
    """(numerator, denominator, what the ratio says) of every paired ratio ``systems`` allow:
    share ÷ classic and dead-letter reject ÷ accept on each broker, Samsa ÷ Kafka per mode."""
    found: list[tuple[str, str, str]] = []
    for prefix, broker in (("", "Samsa"), (KAFKA, "Kafka")):
        found += [(prefix + share_mode(members), prefix + CLASSIC,
                   f"{broker}: {members} share member(s) against one classic consumer")
                  for members in SHARE_MEMBERS]
    found.append((REJECT, ACCEPT, "Samsa: the dead-letter move, every record rejected and "
                                  "appended to the dead-letter topic, against every record "
                                  "accepted"))
    found += [(mode, KAFKA + mode, f"Samsa ÷ Kafka, {mode}") for mode in KAFKA_MODES]
    return [pair for pair in found if pair[0] in systems and pair[1] in systems]


@dataclass(frozen=True)
class Drained:
    """One mode's read of every record in one round."""

    mode: str
    records: int
    seconds: float  # first records returned → last acknowledgement confirmed
    ack_p50_s: float
    ack_p99_s: float
    broker_cpu_s: float
    client_cpu_s: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    def row(self) -> dict[str, Any]:
        return {"records": self.records, "seconds": round(self.seconds, 4),
                "records_per_s": round(self.records_per_s, 1),
                "ack_p50_ms": round(self.ack_p50_s * 1000, 3),
                "ack_p99_ms": round(self.ack_p99_s * 1000, 3),
                "broker_cpu_s": round(self.broker_cpu_s, 3),
                "client_cpu_s": round(self.client_cpu_s, 3)}


FIGURES: dict[str, Callable[[Drained], float]] = {
    "records_per_s": lambda d: d.records_per_s,
    "ack_p50_ms": lambda d: d.ack_p50_s * 1000,
    "ack_p99_ms": lambda d: d.ack_p99_s * 1000,
    "broker_cpu_ms_per_1000_records": lambda d: d.broker_cpu_s * 1e6 / d.records,
    "client_cpu_ms_per_1000_records": lambda d: d.client_cpu_s * 1e6 / d.records,
}


def percentile(samples: Sequence[tuple[float, int]], quantile: float) -> float:
    """The ``quantile`` of values given as (value, how many records had it): the smallest
    value with at least ``quantile`` of the records at or below it."""
    total = sum(count for _, count in samples)
    if total == 0:
        raise ValueError("a percentile of no records")
    wanted = quantile * total
    seen = 0
    for value, count in sorted(samples):
        seen += count
        if seen >= wanted:
            return value
    return max(value for value, _ in samples)


# -- the reads --------------------------------------------------------------------------------


class Clock:
    """The window of one read: the first records returned, the last acknowledgement confirmed,
    and each poll's (acknowledgement latency, records)."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.last = 0.0
        self.latencies: list[tuple[float, int]] = []
        self.records = 0

    def returned(self, count: int) -> float:
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        self.records += count
        return now

    def confirmed(self, since: float, count: int) -> None:
        self.last = time.perf_counter()
        self.latencies.append((self.last - since, count))

    def drained(self, mode: str, broker_cpu_s: float, client_cpu_s: float) -> Drained:
        if self.first is None:
            raise RuntimeError(f"{mode}: no records")
        return Drained(mode, self.records, self.last - self.first, percentile(self.latencies, 0.5),
                       percentile(self.latencies, 0.99), broker_cpu_s, client_cpu_s)


async def read_classic(bootstrap: str, total: int, group: str, clock: Clock) -> None:
    from samsa.consumer import AsyncConsumer

    consumer = AsyncConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while clock.records < total:
            if time.monotonic() > deadline:
                raise TimeoutError(f"classic: {clock.records} of {total} records")
            records = await consumer.poll(0.5, 500)
            if records:
                returned = clock.returned(len(records))
                await consumer.commit()
                clock.confirmed(returned, len(records))
    finally:
        await consumer.close()


async def prepare_share_group(admin: Any, group: str, dead_letters: str | None) -> None:
    from samsa.admin import ConfigResource, NewTopic

    configs = {"share.auto.offset.reset": "earliest"}
    if dead_letters is not None:
        await admin.create_topics([NewTopic(dead_letters, PARTITIONS, 1)])
        configs["samsa.share.dead.letter.topic"] = dead_letters
    await admin.alter_configs(ConfigResource("group", group), configs)


async def wait_for_assignment(admin: Any, group: str, members: int) -> None:
    """Until the group has ``members`` members, each with an assignment, and every partition
    is assigned (the heartbeats run from ``subscribe``; nothing is polled meanwhile)."""
    from samsa.errors import KafkaError

    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            found = (await admin.describe_share_groups([group]))[group].members
        except KafkaError:
            found = []
        assigned = sum(len(member.assignment) for member in found)
        if len(found) == members and all(m.assignment for m in found) \
                and assigned == PARTITIONS:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"share group {group}: {members} members never all assigned")


async def read_share(bootstrap: str, total: int, group: str, members: int, clock: Clock, *,
                     reject: bool = False) -> None:
    from samsa import AcknowledgeType
    from samsa.admin import AsyncAdminClient
    from samsa.share_consumer import AsyncShareConsumer

    kind = AcknowledgeType.REJECT if reject else AcknowledgeType.ACCEPT
    consumers = [AsyncShareConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group,
                                    share_acknowledgement_mode="explicit")
                 for _ in range(members)]
    deadline = time.monotonic() + DEADLINE_S

    async def drain(consumer: AsyncShareConsumer) -> None:
        while clock.records < total:
            if time.monotonic() > deadline:
                raise TimeoutError(f"share ×{members}: {clock.records} of {total} records")
            records = await consumer.poll(0.2)
            if not records:
                continue
            returned = clock.returned(len(records))
            for record in records:
                consumer.acknowledge(record, kind)
            errors = {tp: error for tp, error in (await consumer.commit_sync()).items()
                      if error is not None}
            if errors:
                raise RuntimeError(f"acknowledgements failed: {errors}")
            clock.confirmed(returned, len(records))

    try:
        async with AsyncAdminClient(bootstrap_servers=bootstrap) as admin:
            await wait_for_assignment(admin, group, members)
        await asyncio.gather(*(drain(consumer) for consumer in consumers))
    finally:
        await asyncio.gather(*(consumer.close() for consumer in consumers),
                             return_exceptions=True)
    if clock.records != total:
        raise AssertionError(f"share ×{members}: {clock.records} records read, {total} written")


async def wait_for_dead_letters(bootstrap: str, topic: str, total: int, clock: Clock) -> None:
    """Until ``topic`` holds ``total`` records; the clock's window ends there."""
    from samsa.admin import AsyncAdminClient
    from samsa.types import TopicPartition

    partitions = {TopicPartition(topic, number): "latest" for number in range(PARTITIONS)}
    deadline = time.monotonic() + DEADLINE_S
    async with AsyncAdminClient(bootstrap_servers=bootstrap) as admin:
        while True:
            ends = await admin.list_offsets(partitions)
            written = sum(found.offset for found in ends.values())
            if written >= total:
                clock.last = max(clock.last, time.perf_counter())
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{written} of {total} dead letters written")
            await asyncio.sleep(0.01)


async def read_mode(bootstrap: str, total: int, mode: str, round_index: int,
                    clock: Clock) -> None:
    from samsa.admin import AsyncAdminClient

    group = f"bench-{mode.replace(' ', '-').replace('×', 'x')}-{round_index}"
    if mode == CLASSIC:
        await read_classic(bootstrap, total, group, clock)
        return
    dead_letters = f"{group}-dlq" if mode in (ACCEPT, REJECT) else None
    async with AsyncAdminClient(bootstrap_servers=bootstrap) as admin:
        await prepare_share_group(admin, group, dead_letters)
    members = int(mode.split("×")[1]) if "×" in mode else 1
    await read_share(bootstrap, total, group, members, clock, reject=mode == REJECT)
    if mode == REJECT and dead_letters is not None:
        await wait_for_dead_letters(bootstrap, dead_letters, total, clock)


def measure(brokers: dict[str, Any], total: int, system: str, round_index: int) -> Drained:
    """One read of every record: ``system`` is a mode, or ``kafka: `` and a mode."""
    from samsa._loop import new_event_loop

    broker = brokers["kafka" if system.startswith(KAFKA) else "samsa"]
    mode = system.removeprefix(KAFKA)
    clock = Clock()
    broker_before, client_before = broker.cpu_seconds(), time.process_time()
    loop = new_event_loop()
    try:
        loop.run_until_complete(read_mode(broker.bootstrap, total, mode, round_index, clock))
    finally:
        loop.close()
    return clock.drained(system, broker.cpu_seconds() - broker_before,
                         time.process_time() - client_before)


# -- setup ------------------------------------------------------------------------------------


def fill(bootstrap: str, records: int) -> int:
    """Create the topic and write ``records`` records round-robin over its partitions; the
    bytes of values written."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    draw = random.Random(SEED)
    payload = bytes(draw.getrandbits(8) for _ in range(SIZES[1]))
    written = 0
    for number in range(records):
        size = draw.randint(*SIZES)
        written += size
        while True:
            try:
                producer.produce(TOPIC, value=payload[:size], key=b"%d" % number,
                                 partition=number % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError("the fill did not complete")
    return written


# -- the summary and the table ----------------------------------------------------------------


def summary(done: rounds.Rounds[Drained]) -> dict[str, Any]:
    """Each mode's figures, median (min–max) over the rounds, and the paired ratios ``pairs`` finds
    on records/s and the acknowledgement latencies."""
    modes = {mode: {name: rounds.spread_json(done.spread(mode, figure), 3)
                    for name, figure in FIGURES.items()} for mode in done.systems}
    ratios = [{"mode": mode, "against": against, "what": what,
               **{name: rounds.spread_json(done.ratio(mode, against, FIGURES[name]))
                  for name in ("records_per_s", "ack_p50_ms", "ack_p99_ms")}}
              for mode, against, what in pairs([name for name in done.systems if done.ok(name)])]
    return {"modes": modes, "ratios": ratios, "failures": done.failures}


def print_table(document: dict[str, Any], console: Console) -> None:
    result = document["summary"]
    table = Table(title=(f"{document['num_records']:,} records of {SIZES[0]}–{SIZES[1]} B on "
                         f"{PARTITIONS} partitions, read and acknowledged once per mode: median "
                         f"(min–max) of {document['rounds']} interleaved rounds"),
                  caption=rounds.caption(document["environment"]))
    for column in ("mode", "records/s", "ack p50 ms", "ack p99 ms", "broker CPU ms/1k rec",
                   "client CPU ms/1k rec"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for mode, figures in result["modes"].items():
        table.add_row(mode, rounds.cell(figures["records_per_s"]),
                      rounds.cell(figures["ack_p50_ms"], ",.1f"),
                      rounds.cell(figures["ack_p99_ms"], ",.1f"),
                      rounds.cell(figures["broker_cpu_ms_per_1000_records"], ",.0f"),
                      rounds.cell(figures["client_cpu_ms_per_1000_records"], ",.0f"))
    for pair in result["ratios"]:
        samsa_over_kafka = pair["against"] == KAFKA + pair["mode"]
        table.add_row(f"samsa ÷ kafka: {pair['mode']} (paired)" if samsa_over_kafka
                      else f"{pair['mode']} ÷ {pair['against']} (paired)",
                      rounds.ratio_cell(pair["records_per_s"]),
                      rounds.ratio_cell(pair["ack_p50_ms"]),
                      rounds.ratio_cell(pair["ack_p99_ms"]), "", "")
    console.print(table)
    console.print("acknowledgement latency: from the poll() returning a record to the return of "
                  "the commit_sync() (share) / commit() (classic) confirming it; all clients in "
                  "one Python process (one event loop), the broker in another")
    for mode, reason in result["failures"].items():
        console.print(f"[red]{mode} failed: {reason}[/red]")


def run(*, num_records: int, rounds_count: int, modes: Sequence[str] = MODES,
        kafka: bool = True) -> dict[str, Any]:
    from bench import peers

    # imported before the first round, so that no mode's client CPU includes the imports
    from samsa import admin, consumer, share_consumer  # noqa: F401

    console = rounds.console()
    environment = rounds.environment()
    systems = list(modes)
    kafka_version = kafka_unavailable = None
    with tempfile.TemporaryDirectory(prefix="samsa-share-bench-") as temp, \
            contextlib.ExitStack() as stack:
        brokers = {"samsa": peers.start_samsa(Path(temp) / "samsa-data",
                                              overrides=BROKER_OVERRIDES)}
        stack.callback(brokers["samsa"].stop)
        if kafka:
            try:
                brokers["kafka"] = peers.start_kafka(Path(temp), configs=KAFKA_CONFIGS)
                stack.callback(brokers["kafka"].stop)
                kafka_version = brokers["kafka"].version
                systems += [KAFKA + mode for mode in modes if mode in KAFKA_MODES]
            except peers.Unavailable as error:
                kafka_unavailable = str(error)
                console.print(f"[yellow]without Apache Kafka: {error}[/yellow]")
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task(f"writing {num_records:,} records", total=None)
            value_bytes = {name: fill(broker.bootstrap, num_records)
                           for name, broker in brokers.items()}["samsa"]
            progress.remove_task(task)
            for name in brokers:  # warm-up reads, not counted: a JVM's JIT
                task = progress.add_task(f"warming up {name}", total=None)
                for mode in (CLASSIC, share_mode(1)):
                    measure(brokers, num_records, (KAFKA if name == "kafka" else "") + mode, -1)
                progress.remove_task(task)
            done = rounds.run_rounds(
                systems, rounds_count,
                lambda system, index: measure(brokers, num_records, system, index),
                may_fail=[system for system in systems if system.startswith(KAFKA)],
                progress=progress, label="share: ")
    document = {
        "bench": "share", "environment": rounds.finish(environment),
        "num_records": num_records, "value_bytes": value_bytes, "partitions": PARTITIONS,
        "record_sizes": list(SIZES), "rounds": rounds_count, "broker_overrides": BROKER_OVERRIDES,
        "kafka": kafka_version, "kafka_configs": KAFKA_CONFIGS if kafka_version else None,
        "kafka_unavailable": kafka_unavailable,
        "ack_latency": "poll() returning the record → commit_sync() / commit() returning",
        "summary": summary(done),
        "by_round": rounds.rounds_json(done, Drained.row),
    }
    print_table(document, console)
    return document


def main(*, quick: bool = False, num_records: int | None = None,
         rounds_count: int = rounds.DEFAULT_ROUNDS, modes: Sequence[str] = MODES,
         kafka: bool = True, json_path: Path | None = None) -> dict[str, Any]:
    records = num_records or (5_000 if quick else 30_000)
    document = run(num_records=records, rounds_count=2 if quick else rounds_count, modes=modes,
                   kafka=kafka)
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    rounds.write_results(document, json_path or RESULTS / f"share-{date}.json", rounds.console())
    return document


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.share",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="5,000 records, 2 rounds: a smoke run")
    parser.add_argument("--num-records", type=int, default=None, help="default 30,000")
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS,
                        help="interleaved rounds (default 5)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated, of: {', '.join(MODES)} (default: all; "
                             f"'share x4' for 'share ×4')")
    parser.add_argument("--no-kafka", dest="kafka", action="store_false",
                        help="Samsa alone (by default Apache Kafka runs the modes it has)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    arguments = parser.parse_args(argv)
    arguments.modes = [mode.strip().replace("share x", "share ×")
                       for mode in arguments.modes.split(",") if mode.strip()]
    unknown = set(arguments.modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    return arguments


if __name__ == "__main__":
    arguments = parse_args()
    main(quick=arguments.quick, num_records=arguments.num_records, rounds_count=arguments.rounds,
         modes=arguments.modes, kafka=arguments.kafka, json_path=arguments.json)
