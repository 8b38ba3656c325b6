"""``samsa share-groups --redrive``: send a share group's dead letters back where they came from.

    samsa share-groups --redrive (--dead-letter-topic DLQ | --group G) [--to-topic T]
                       [--dry-run | --execute] [--json]

The dead-letter topic is ``--dead-letter-topic``, or the group's ``samsa.share.dead.letter.topic``
config (``--group``). Each of its records carries the headers the broker added when it
dead-lettered it (``broker.share.dead_letters``): ``samsa.dlq.topic`` and
``samsa.dlq.partition`` say where it came from. Redriving produces it again:

- to ``--to-topic`` if given (the partition chosen by the producer's partitioner, by key),
  else to its source topic and source partition (so a key stays in its partition);
- with the same key, value and headers, minus the ``samsa.dlq.*`` ones, and a new timestamp
  (the original one would make a record dead-lettered as ``expired`` expire again at once);
- a record with no ``samsa.dlq.topic`` header and no ``--to-topic`` is skipped (counted).

Progress is the committed offsets of a classic consumer group named
``samsa-redrive.<DLQ>`` (``samsa-redrive.<DLQ>.to.<T>`` with ``--to-topic``): each poll's
records are produced (acks=all, idempotent producer) and flushed, then the group's offsets
committed, so a rerun starts after what was already redriven. A crash between the flush and
the commit redrives those records again on the next run: at least once. Only the records
present when the command starts are redriven (up to the end offsets it read then), so a
letter dead-lettered again during the run waits for the next run.

``--dry-run`` (the default) only counts what would be redriven, per source partition, and
changes nothing; ``--execute`` redrives. A progress bar on stderr (interactive terminals,
not with ``--json``); ``--json`` prints one document.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from samsa.types import ConsumerRecord, TopicPartition
from tools.admin_support import admin_config, open_admin, usage_error

if TYPE_CHECKING:
    from samsa.consumer import Consumer
    from samsa.producer import Producer

__all__ = ["DLQ_HEADER_PREFIX", "RedrivePlan", "progress_group", "redrive_target", "run_redrive"]

DLQ_HEADER_PREFIX = "samsa.dlq."
DEAD_LETTER_TOPIC_CONFIG = "samsa.share.dead.letter.topic"
POLL_TIMEOUT_S = 1.0
IDLE_LIMIT_S = 30.0  # no record for this long although the end is not reached: give up


def progress_group(dead_letter_topic: str, to_topic: str | None) -> str:
    """The classic consumer group whose committed offsets are the redrive's progress."""
    return f"samsa-redrive.{dead_letter_topic}" + ("" if to_topic is None else f".to.{to_topic}")


def redrive_target(record: ConsumerRecord, to_topic: str | None
                   ) -> tuple[str, int | None, list[tuple[str, bytes | None]]] | None:
    """Where ``record`` goes (topic, partition or None for the partitioner) and its headers
    without the ``samsa.dlq.*`` ones; None when it names no source and no ``to_topic``."""
    found = dict(record.headers)
    headers = [(key, value) for key, value in record.headers if not key.startswith(DLQ_HEADER_PREFIX)]
    if to_topic is not None:
        return to_topic, None, headers
    source = found.get(DLQ_HEADER_PREFIX + "topic")
    partition = found.get(DLQ_HEADER_PREFIX + "partition")
    if not source:
        return None
    return source.decode(), int(partition) if partition else None, headers


@dataclass
class RedrivePlan:
    """What a run found: per DLQ partition, where it starts (the committed offset or the log
    start) and ends (the end offset at the start); what it did."""

    dead_letter_topic: str
    group: str
    start: dict[int, int]
    end: dict[int, int]
    redriven: Counter[tuple[str, int | None]] = field(default_factory=Counter)
    skipped: int = 0

    @property
    def total(self) -> int:
        return sum(max(self.end[p] - self.start[p], 0) for p in self.end)

    def document(self, executed: bool) -> dict[str, Any]:
        return {
            "dead_letter_topic": self.dead_letter_topic, "progress_group": self.group,
            "executed": executed, "records": self.total,
            "redriven": sum(self.redriven.values()), "skipped": self.skipped,
            "by_source": [{"topic": topic, "partition": partition, "records": count}
                          for (topic, partition), count in sorted(self.redriven.items(),
                                                                  key=lambda item: (item[0][0], item[0][1] or -1))],
            "partitions": [{"partition": p, "start_offset": self.start[p], "end_offset": self.end[p]}
                           for p in sorted(self.end)],
        }


def run_redrive(args: argparse.Namespace) -> int:
    if args.dead_letter_topic is None and not args.group_ids:
        return usage_error(args, "--redrive needs --dead-letter-topic DLQ or --group G")
    if args.group_ids and len(args.group_ids) != 1:
        return usage_error(args, "give at most one --group")
    dead_letter_topic = args.dead_letter_topic or _configured_dead_letter_topic(args, args.group_ids[0])
    if dead_letter_topic is None:
        return usage_error(args, f"share group {args.group_ids[0]!r} has no {DEAD_LETTER_TOPIC_CONFIG}: "
                                 f"give --dead-letter-topic")
    from samsa.consumer import Consumer
    from samsa.producer import Producer

    group = progress_group(dead_letter_topic, args.to_topic)
    consumer = Consumer(config={**admin_config(args), "group.id": group, "enable.auto.commit": False,
                                "auto.offset.reset": "earliest"})
    try:
        plan = _plan(consumer, dead_letter_topic, group)
        if args.execute and plan.total:
            with Producer(config={**admin_config(args), "acks": "all", "enable.idempotence": True}) as producer, \
                    _progress(args, plan) as advance:
                _redrive(consumer, producer, plan, args.to_topic, advance)
        elif plan.total:
            _count(consumer, plan, args.to_topic)
    finally:
        consumer.close()
    _report(args, plan)
    return 0


def _configured_dead_letter_topic(args: argparse.Namespace, group_id: str) -> str | None:
    from samsa.admin import ConfigResource

    resource = ConfigResource("group", group_id)
    with open_admin(args) as admin:
        entries = admin.describe_configs([resource])[resource]
    entry = entries.get(DEAD_LETTER_TOPIC_CONFIG)
    return entry.value if entry is not None and entry.value else None


def _plan(consumer: Consumer, topic: str, group: str) -> RedrivePlan:
    infos = consumer.partitions_for(topic)
    if not infos:
        raise ValueError(f"the dead-letter topic {topic!r} does not exist")
    partitions = [TopicPartition(topic, info.partition) for info in infos]
    consumer.assign(partitions)
    committed = consumer.committed(partitions)
    start: dict[int, int] = {}
    for tp in partitions:
        found = committed.get(tp)
        if found is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, found.offset)
        start[tp.partition] = consumer.position(tp)
    consumer.seek_to_end(*partitions)
    end = {tp.partition: consumer.position(tp) for tp in partitions}
    for tp in partitions:
        consumer.seek(tp, start[tp.partition])
    return RedrivePlan(topic, group, start, end)


def _records(consumer: Consumer, plan: RedrivePlan) -> Iterator[list[ConsumerRecord]]:
    """Each poll's records below the plan's end offsets, until every partition reached its end."""
    position = dict(plan.start)
    for partition, end in plan.end.items():
        if position[partition] >= end:
            consumer.pause(TopicPartition(plan.dead_letter_topic, partition))
    idle_since = time.monotonic()
    while any(position[p] < plan.end[p] for p in plan.end):
        polled = [r for r in consumer.poll(POLL_TIMEOUT_S) if r.offset < plan.end[r.partition]]
        if not polled:
            if time.monotonic() - idle_since > IDLE_LIMIT_S:
                raise TimeoutError(f"no record of {plan.dead_letter_topic} came for {IDLE_LIMIT_S:.0f} s "
                                   f"before its end offsets {plan.end} (at {position})")
            continue
        idle_since = time.monotonic()
        for record in polled:
            position[record.partition] = record.offset + 1
            if position[record.partition] >= plan.end[record.partition]:
                consumer.pause(TopicPartition(plan.dead_letter_topic, record.partition))
        yield polled


def _count(consumer: Consumer, plan: RedrivePlan, to_topic: str | None) -> None:
    for polled in _records(consumer, plan):
        for record in polled:
            target = redrive_target(record, to_topic)
            if target is None:
                plan.skipped += 1
            else:
                plan.redriven[target[0], target[1]] += 1


def _redrive(consumer: Consumer, producer: Producer, plan: RedrivePlan, to_topic: str | None,
             advance: Any) -> None:
    """Produce each poll's records, flush, check every one was acknowledged, then commit."""
    for polled in _records(consumer, plan):
        futures = []
        for record in polled:
            target = redrive_target(record, to_topic)
            if target is None:
                plan.skipped += 1
                continue
            topic, partition, headers = target
            futures.append(producer.send(topic, value=record.value, key=record.key,
                                         partition=partition, headers=headers))
            plan.redriven[topic, partition] += 1
        producer.flush()
        for future in futures:
            future.result()  # raises the first record not delivered: nothing is committed
        next_offsets: dict[TopicPartition, int] = {}
        for record in polled:
            next_offsets[TopicPartition(record.topic, record.partition)] = record.offset + 1
        consumer.commit(next_offsets)
        advance(len(polled))


@contextlib.contextmanager
def _progress(args: argparse.Namespace, plan: RedrivePlan) -> Iterator[Any]:
    """``advance(n)``: a rich progress bar on stderr (interactive, not --json), else nothing."""
    if args.json or not sys.stderr.isatty():
        yield lambda count: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("redriving {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=Console(stderr=True)) as progress:
        task = progress.add_task(plan.dead_letter_topic, total=plan.total)
        yield lambda count: progress.advance(task, count)


def _report(args: argparse.Namespace, plan: RedrivePlan) -> None:
    document = plan.document(bool(args.execute))
    if args.json:
        print(json.dumps(document, indent=2))
        return
    from tools.client_options import print_table

    verb = "Redrove" if args.execute else "Would redrive"
    print(f"{verb} {document['redriven']} of {plan.total} record(s) of {plan.dead_letter_topic} "
          f"(progress: consumer group {plan.group}); skipped {plan.skipped} with no source.")
    if document["by_source"]:
        print_table(document["by_source"], ["topic", "partition", "records"])
    if not args.execute:
        print("Dry run: nothing was produced or committed; add --execute to redrive.", file=sys.stderr)
