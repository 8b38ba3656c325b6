"""Consumer workloads: a group member that polls and commits, and the final read after a run.

History written (see ``tests.faults.history``), all with ``process`` and ``group``:

- ``assign`` ok (partitions) from the rebalance callback, before the polls that follow it;
- ``poll`` ok (records, isolation) for every non-empty poll, records in the order polled;
- ``commit`` invoke (offsets: the consumer's positions) then ok, ``fail`` when the
  coordinator refused it (stale generation, rebalance in progress: nothing written) or ``info``
  (timeouts, lost connections: unknown);
- ``offsets`` invoke then ok (offsets: what OffsetFetch returned for the assignment) or
  ``fail`` (the read failed; it observed nothing). The invoke is written so that a checker can
  order the read after the commits that completed before it began.

``final_read`` writes one ``final`` ok per partition (see its docstring).

Stopping: a synchronous commit blocks while the group has no coordinator, until librdkafka
gives up (``_WAIT_COORD`` after about 35 s, written ``info``), so ``stop()`` with the cluster
down can take that long; there is no extra commit at stop.

Threads: a ``GroupConsumer``'s librdkafka client is used only on its workload thread, where the
rebalance callbacks run too (inside ``consume``).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from tests.faults.history import History
from tests.faults.workload_base import (
    COMMIT_REFUSED,
    Pacer,
    Workload,
    error_code,
    is_definite_failure,
    new_rng,
    rdkafka_config,
    record_of,
)

__all__ = ["GroupConsumer", "final_read"]

log = logging.getLogger("tests.faults.workloads")

OFFSET_REQUEST_TIMEOUT_S = 10.0


def offsets_of(partitions: Iterable[TopicPartition]) -> list[list[Any]]:
    """``[[topic, partition, offset], ...]`` for the partitions that have an offset."""
    return [[tp.topic, tp.partition, tp.offset] for tp in partitions if tp.offset >= 0]


def log_assign(history: History, process: str, group: str, partitions: list[TopicPartition]
               ) -> None:
    history.ok("assign", process=process, group=group,
               partitions=[[tp.topic, tp.partition] for tp in partitions])


class GroupConsumer(Workload):
    """A member of ``group`` subscribed to ``topics`` (auto commit off): polls up to
    ``max_records`` at ``rate_per_second``, commits its positions synchronously every
    ``commit_every`` polls on average (the seed varies the interval) and reads the group's
    committed offsets back every ``offsets_every`` polls."""

    def __init__(self, bootstrap: str, history: History, process: str, topics: list[str],
                 seed: random.Random | int | None = None, *, group: str,
                 isolation: str = "read_committed", rate_per_second: float = 20.0,
                 max_records: int = 100, commit_every: int = 5, offsets_every: int = 10,
                 config: dict[str, Any] | None = None) -> None:
        super().__init__(history, process)
        self.bootstrap = bootstrap
        self.topics = list(topics)
        self.rng = new_rng(seed)
        self.group = group
        self.isolation = isolation
        self.rate_per_second = rate_per_second
        self.max_records = max_records
        self.commit_every = commit_every
        self.offsets_every = offsets_every
        self.extra_config = dict(config or {})
        self.polls = 0

    def run(self) -> None:
        consumer = confluent_kafka.Consumer(rdkafka_config(self.bootstrap, **{
            "group.id": self.group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": self.isolation,
            **self.extra_config}))
        consumer.subscribe(self.topics, on_assign=self._assigned)
        pacer = Pacer(self.rate_per_second, self._stopping)
        next_commit = self._next_interval(self.commit_every)
        try:
            while pacer.wait():
                self._poll(consumer)
                if self.polls >= next_commit:
                    self._commit(consumer)
                    next_commit = self.polls + self._next_interval(self.commit_every)
                if self.polls % self.offsets_every == 0:
                    self._read_offsets(consumer)
        finally:
            started = time.monotonic()
            consumer.close()
            log.info("%s: closed in %.1f s", self.process, time.monotonic() - started)

    def _next_interval(self, mean: int) -> int:
        return self.rng.randint(1, max(1, 2 * mean - 1))

    def _assigned(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]
                  ) -> None:
        log_assign(self.history, self.process, self.group, partitions)

    def _poll(self, consumer: confluent_kafka.Consumer) -> None:
        self.polls += 1
        try:
            messages = consumer.consume(num_messages=self.max_records, timeout=0.2)
        except KafkaException as error:
            log.info("%s: consume: %s", self.process, error)
            return
        records = []
        for message in messages:
            if message.error() is None:
                records.append(record_of(message))
            else:
                log.debug("%s: consume error %s", self.process, message.error())
        if records:
            self.history.ok("poll", process=self.process, group=self.group,
                            isolation=self.isolation, records=records)

    def _commit(self, consumer: confluent_kafka.Consumer) -> None:
        try:
            positions = offsets_of(consumer.position(consumer.assignment()))
        except KafkaException as error:
            log.info("%s: position: %s", self.process, error)
            return
        if not positions:
            return
        fields = {"process": self.process, "group": self.group, "offsets": positions}
        self.history.invoke("commit", **fields)
        try:
            results = consumer.commit(
                offsets=[TopicPartition(t, p, o) for t, p, o in positions], asynchronous=False)
        except KafkaException as error:
            self._commit_failed(fields, error_code(error), str(error))
            return
        errors = [tp.error for tp in results or [] if tp.error is not None]
        if errors:
            self._commit_failed(fields, int(errors[0].code()), str(errors[0]))
        else:
            self.history.ok("commit", **fields)

    def _commit_failed(self, fields: dict[str, Any], code: int | None, error: str) -> None:
        refused = code is not None and is_definite_failure(code, COMMIT_REFUSED)
        self.history.write("fail" if refused else "info", "commit", **fields, error=error)

    def _read_offsets(self, consumer: confluent_kafka.Consumer) -> None:
        assignment = consumer.assignment()
        if not assignment:
            return
        fields = {"process": self.process, "group": self.group}
        self.history.invoke("offsets", **fields)
        try:
            committed = consumer.committed(assignment, timeout=OFFSET_REQUEST_TIMEOUT_S)
        except KafkaException as error:
            self.history.fail("offsets", **fields, error=str(error))
            return
        self.history.ok("offsets", **fields, offsets=offsets_of(committed))


# --- the final read -----------------------------------------------------------------------


def final_read(bootstrap: str, history: History, topics: Iterable[str],
               isolation: str = "read_uncommitted", *,
               compacted: Iterable[str] = (), deadline_s: float = 60.0,
               process: str = "final") -> dict[tuple[str, int], list[list[Any]]]:
    """After a run: read every partition of ``topics`` from its log start (ListOffsets
    earliest) to its end (ListOffsets latest: the high watermark, or for ``read_committed``
    the last stable offset, which librdkafka asks for at that isolation level) with a fresh
    consumer (assigned, no group), and write one ``final`` ok per partition (topic, partition,
    log_start, high_watermark, isolation, records; ``compacted: true`` for the topics in
    ``compacted``). Returns the records by (topic, partition).

    Raises ``TimeoutError`` naming every partition whose end was not reached by
    ``deadline_s`` (nothing is written then)."""
    compacted_topics = set(compacted)
    deadline = time.monotonic() + deadline_s
    consumer = confluent_kafka.Consumer(rdkafka_config(bootstrap, **{
        "group.id": f"{process}-reader", "enable.auto.commit": False,
        "enable.partition.eof": True, "isolation.level": isolation}))
    try:
        bounds = _bounds(consumer, list(topics), deadline)
        records = _read_to_end(consumer, bounds, deadline)
    finally:
        consumer.close()
    for (topic, partition), (log_start, end) in sorted(bounds.items()):
        fields: dict[str, Any] = {
            "process": process, "topic": topic, "partition": partition,
            "log_start": log_start, "high_watermark": end, "isolation": isolation,
            "records": records[topic, partition]}
        if topic in compacted_topics:
            fields["compacted"] = True
        history.ok("final", **fields)
    return records


def _bounds(consumer: confluent_kafka.Consumer, topics: list[str], deadline: float
            ) -> dict[tuple[str, int], tuple[int, int]]:
    """(log start, end offset) of every partition of the topics, asked until the deadline."""
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    for topic in topics:
        metadata = _retry(lambda topic=topic: consumer.list_topics(topic, timeout=5), deadline,
                          f"metadata of {topic}")
        described = metadata.topics[topic]
        if described.error is not None or not described.partitions:
            raise RuntimeError(f"final read: topic {topic} not found: {described.error}")
        for partition in sorted(described.partitions):
            tp = TopicPartition(topic, partition)
            low, high = _retry(
                lambda tp=tp: consumer.get_watermark_offsets(tp, timeout=5, cached=False),
                deadline, f"offsets of {topic}-{partition}")
            bounds[topic, partition] = (int(low), int(high))
    return bounds


def _retry(call: Any, deadline: float, what: str) -> Any:
    while True:
        try:
            result = call()
            if result is not None:
                return result
            error: Exception = RuntimeError("no answer")
        except KafkaException as raised:
            error = raised
        if time.monotonic() > deadline:
            raise TimeoutError(f"final read: no {what} before the deadline: {error}")
        log.info("final read: retrying %s after %s", what, error)


def _read_to_end(consumer: confluent_kafka.Consumer,
                 bounds: dict[tuple[str, int], tuple[int, int]], deadline: float
                 ) -> dict[tuple[str, int], list[list[Any]]]:
    records: dict[tuple[str, int], list[list[Any]]] = {key: [] for key in bounds}
    unfinished = {key for key, (low, high) in bounds.items() if high > low}
    positions = {key: low for key, (low, _) in bounds.items()}
    consumer.assign([TopicPartition(t, p, bounds[t, p][0]) for t, p in sorted(unfinished)])
    while unfinished:
        if time.monotonic() > deadline:
            missing = ", ".join(f"{t}-{p} at {positions[t, p]} of {bounds[t, p][1]}"
                                for t, p in sorted(unfinished))
            raise TimeoutError(f"final read did not reach the end of: {missing}")
        for message in consumer.consume(num_messages=1000, timeout=0.5):
            key = (message.topic(), message.partition())
            if key not in bounds:
                continue
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                log.info("final read: %s", error)
                continue
            end, offset = bounds[key][1], int(message.offset() or 0)
            if error is None and offset < end:
                records[key].append(record_of(message))
            # an EOF event's offset is the end it reached; a record's is its own
            positions[key] = max(positions[key], offset + (error is None))
            if positions[key] >= end:
                unfinished.discard(key)
    return records
