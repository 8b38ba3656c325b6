"""Consumer-group benchmark: time from ``subscribe()`` to the first record, and commits/s.

Against a Samsa broker started with ``group.initial.rebalance.delay.ms=0`` (the goal is under
1 s for a new group; Kafka's default delay of 3 s would dominate otherwise):

- a new group of 1 and of 3 confluent-kafka consumers subscribes to a 6-partition topic that
  already holds records; the time runs from the first ``subscribe()`` until every member has
  received a record;
- one member commits offsets synchronously (``commit(asynchronous=False)``) in a loop: commits/s.

Prints a table (rich) and writes ``bench/results/groups.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from bench import peers

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


def run(work: Path, *, commit_seconds: float) -> dict[str, Any]:
    broker = peers.start_samsa(work / "samsa-groups",
                               overrides={"group.initial.rebalance.delay.ms": "0"})
    try:
        prepare_topic(broker.bootstrap, "bench-groups")
        one = first_record_seconds(broker.bootstrap, "bench-groups", 1, "bench-group-1")
        three = first_record_seconds(broker.bootstrap, "bench-groups", 3, "bench-group-3")
        commits = commits_per_second(broker.bootstrap, "bench-groups", commit_seconds)
    finally:
        broker.stop()
    return {"subscribe_to_first_record_s": {"1 member": round(one, 3), "3 members": round(three, 3)},
            "sync_commits_per_s": round(commits, 1), "goal_first_record_s": 1.0}


def print_table(result: dict[str, Any], console: Console) -> None:
    table = Table(title="Samsa consumer groups (confluent-kafka, group.initial.rebalance.delay.ms=0)")
    for column in ("case", "value", "goal"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for members, seconds in result["subscribe_to_first_record_s"].items():
        table.add_row(f"subscribe → first record, new group of {members}", f"{seconds:.3f} s",
                      "< 1 s")
    table.add_row("synchronous commits, one member", f"{result['sync_commits_per_s']:.0f} /s", "")
    console.print(table)


def main(*, quick: bool = False, json_path: Path | None = None) -> dict[str, Any]:
    console = Console()
    with tempfile.TemporaryDirectory(prefix="samsa-bench-groups-") as temp:
        result = run(Path(temp), commit_seconds=2.0 if quick else 5.0)
    print_table(result, console)
    target = json_path or RESULTS / "groups.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"bench": "groups", **result}, indent=2))
    console.print(f"results written to {target}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    main(quick=parser.parse_args().quick)
