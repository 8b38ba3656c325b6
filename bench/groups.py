"""Consumer-group benchmark: time from ``subscribe()`` to the first record, and commits/s.

Against a Samsa broker started with ``group.initial.rebalance.delay.ms=0`` (the goal is under
1 s for a new group; Kafka's default delay of 3 s would dominate otherwise):

- a new group of 1 and of 3 confluent-kafka consumers subscribes to a 6-partition topic that
  already holds records; the time runs from the first ``subscribe()`` until every member has
  received a record;
- one member commits offsets synchronously (``commit(asynchronous=False)``) in a loop: commits/s.

Each round (``--rounds``, 5) runs all three with new groups; reported: the median (min–max) of
the rounds (``bench.rounds``). Prints a table (rich) and writes ``bench/results/groups.json``
with every round's figures, the date, the machine and the load before and after.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench import peers, rounds

RESULTS = Path(__file__).parent / "results"
PARTITIONS = 6


def prepare_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for number in range(PARTITIONS * 50):
        producer.produce(topic, value=b"%d" % number, partition=number % PARTITIONS)
    producer.flush(30)


def first_record_seconds(bootstrap: str, topic: str, members: int, group: str) -> float:
    """Seconds from the first subscribe until every member of a new group has a record."""
    consumers = [
        Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        for _ in range(members)
    ]
    arrived = [threading.Event() for _ in consumers]
    stop = threading.Event()

    def poll(consumer: Consumer, event: threading.Event) -> None:
        while not stop.is_set():
            message = consumer.poll(0.05)
            if message is not None and not message.error():
                event.set()

    start = time.perf_counter()
    threads = []
    for consumer, event in zip(consumers, arrived, strict=True):
        consumer.subscribe([topic])
        threads.append(threading.Thread(target=poll, args=(consumer, event), daemon=True))
        threads[-1].start()
    try:
        for event in arrived:
            if not event.wait(60):
                raise RuntimeError("a member received nothing within 60 s")
        return time.perf_counter() - start
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for consumer in consumers:
            consumer.close()


def commits_per_second(bootstrap: str, topic: str, seconds: float) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-commits",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        offset, count = 0, 0
        deadline = time.perf_counter() + seconds
        start = time.perf_counter()
        while time.perf_counter() < deadline:
            offset += 1
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            count += 1
        return count / (time.perf_counter() - start)
    finally:
        consumer.close()


@dataclass(frozen=True)
class GroupRound:
    one_member_s: float
    three_members_s: float
    commits_per_s: float


FIGURES: dict[str, Callable[[GroupRound], float]] = {
    "subscribe_to_first_record_1_member_s": lambda r: r.one_member_s,
    "subscribe_to_first_record_3_members_s": lambda r: r.three_members_s,
    "sync_commits_per_s": lambda r: r.commits_per_s,
}


def run(work: Path, *, commit_seconds: float, rounds_count: int,
        console: Console) -> dict[str, Any]:
    broker = peers.start_samsa(work / "samsa-groups",
                               overrides={"group.initial.rebalance.delay.ms": "0"})

    def measure(_: str, round_index: int) -> GroupRound:
        return GroupRound(
            first_record_seconds(broker.bootstrap, "bench-groups", 1, f"bench-1-{round_index}"),
            first_record_seconds(broker.bootstrap, "bench-groups", 3, f"bench-3-{round_index}"),
            commits_per_second(broker.bootstrap, "bench-groups", commit_seconds))

    try:
        prepare_topic(broker.bootstrap, "bench-groups")
        with Progress(console=console, transient=True) as progress:
            done = rounds.run_rounds(["samsa"], rounds_count, measure, progress=progress,
                                     label="groups: ")
    finally:
        broker.stop()
    summary = rounds.summarize(done, FIGURES)
    return {"rounds": rounds_count, **summary["systems"]["samsa"], "goal_first_record_s": 1.0,
            "by_round": rounds.rounds_json(done, lambda r: {
                name: round(figure(r), 3) for name, figure in FIGURES.items()})}


def print_table(result: dict[str, Any], console: Console) -> None:
    table = Table(title="Samsa consumer groups (confluent-kafka, group.initial.rebalance.delay.ms"
                        f"=0): median (min–max) of {result['rounds']} rounds",
                  caption=rounds.caption(result["environment"]))
    for column in ("case", "value", "goal"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for members in ("1 member", "3 members"):
        key = f"subscribe_to_first_record_{members.replace(' ', '_')}_s"
        table.add_row(f"subscribe → first record, new group of {members}",
                      rounds.cell(result[key], ".3f", " s"), "< 1 s")
    table.add_row("synchronous commits, one member",
                  rounds.cell(result["sync_commits_per_s"], ",.0f", " /s"), "")
    console.print(table)


def main(*, quick: bool = False, json_path: Path | None = None,
         rounds_count: int = rounds.DEFAULT_ROUNDS) -> dict[str, Any]:
    console = rounds.console()
    environment = rounds.environment()
    with tempfile.TemporaryDirectory(prefix="samsa-bench-groups-") as temp:
        result = run(Path(temp), commit_seconds=0.5 if quick else 1.0, rounds_count=rounds_count,
                     console=console)
    result = {"bench": "groups", "environment": rounds.finish(environment), **result}
    print_table(result, console)
    rounds.write_results(result, json_path or RESULTS / "groups.json", console)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS)
    arguments = parser.parse_args()
    main(quick=arguments.quick, rounds_count=arguments.rounds)
