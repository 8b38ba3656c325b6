"""What every fault workload shares: the thread it runs on, its pacing, the sorting of client
errors into ``fail`` (definitely not written) and ``info`` (unknown), and topic creation.

A workload owns its clients: they are created, used and closed on the workload's own thread
(``Workload.run``), except Samsa's producer, whose delivery callbacks run on its loop thread —
which is why :class:`Pending` takes a lock. ``History`` is shared by every workload of a run
(it locks per line).

Outcome rules (Jepsen's): a client error is a ``fail`` only when Kafka documents that the
request left nothing behind *whatever happened to earlier attempts* — the broker rejects the
record itself (too large, invalid topic, not authorised), or librdkafka never transmitted it
(``_PURGE_QUEUE``, an unknown topic in its metadata). Everything else — timeouts, lost
connections, NOT_LEADER after a retry, fatal idempotence errors — is ``info``: librdkafka
retries internally, so an earlier attempt may have been written.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from tests.faults.history import History

__all__ = [
    "DEFINITELY_NOT_WRITTEN",
    "Pacer",
    "Pending",
    "TopicSpec",
    "Workload",
    "create_topics",
    "is_definite_failure",
    "rdkafka_config",
    "record_of",
    "running",
]

log = logging.getLogger("tests.faults.workloads")
RDKAFKA_LOG = logging.getLogger("tests.faults.rdkafka")

# Kafka error codes meaning "this record was not written, nor any earlier attempt of it":
# rejections of the record or request itself, the same on every retry.
DEFINITELY_NOT_WRITTEN = frozenset({
    KafkaError.MSG_SIZE_TOO_LARGE,  # MESSAGE_TOO_LARGE (10), also librdkafka's local check
    KafkaError.TOPIC_EXCEPTION,  # INVALID_TOPIC_EXCEPTION (17)
    KafkaError.RECORD_LIST_TOO_LARGE,  # 18
    KafkaError.INVALID_REQUIRED_ACKS,  # 21
    KafkaError.TOPIC_AUTHORIZATION_FAILED,  # 29
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,  # 31
    KafkaError.INVALID_TIMESTAMP,  # 32
    KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT,  # 43
    KafkaError.INVALID_RECORD,  # 87
    # librdkafka's own: the message never left the client
    KafkaError._PURGE_QUEUE,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._INVALID_ARG,
    KafkaError._QUEUE_FULL,
})

# OffsetCommit errors that mean the coordinator refused the commit (nothing written).
COMMIT_REFUSED = frozenset({
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.FENCED_INSTANCE_ID,
    KafkaError.OFFSET_METADATA_TOO_LARGE,
    KafkaError.INVALID_COMMIT_OFFSET_SIZE,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError._NO_OFFSET,
    KafkaError._ASSIGNMENT_LOST,
})


def is_definite_failure(code: int, refused: frozenset[int] = DEFINITELY_NOT_WRITTEN) -> bool:
    """``True`` when an error with this code leaves nothing behind (log ``fail``), ``False``
    when the outcome is unknown (log ``info``)."""
    return code in refused


def error_code(error: BaseException | KafkaError) -> int | None:
    """The Kafka (or librdkafka) error code of a client error, ``None`` if it has none."""
    if isinstance(error, KafkaError):
        return int(error.code())
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0],
                                                                      KafkaError):
        return int(error.args[0].code())
    code = getattr(error, "code", None)  # Samsa's KafkaError family carries Kafka's code
    return int(code) if isinstance(code, int) else None


def rdkafka_config(bootstrap: str, **settings: Any) -> dict[str, Any]:
    """librdkafka settings for a fault run: its logs go to Python logging (quiet unless the
    harness configures ``tests.faults.rdkafka``), not to stderr, where every refused connection
    of a killed node would otherwise be printed. ``SAMSA_FAULTS_RDKAFKA_DEBUG`` (librdkafka's
    ``debug`` contexts, e.g. ``cgrp,protocol,broker``) sends the clients' debug logs to stderr
    instead: straight from librdkafka's threads, so a client blocked in a call still logs (a
    ``logger`` is only served by the client's own poll)."""
    debug = os.environ.get("SAMSA_FAULTS_RDKAFKA_DEBUG")
    if debug:  # straight to stderr from librdkafka's threads: a blocked client still logs
        return {"bootstrap.servers": bootstrap, "debug": debug, "error_cb": _log_client_error,
                **settings}
    return {"bootstrap.servers": bootstrap, "logger": RDKAFKA_LOG,
            "error_cb": _log_client_error, **settings}


def _log_client_error(error: KafkaError) -> None:
    RDKAFKA_LOG.debug("client error: %s", error)


def text(data: bytes | str | None) -> str | None:
    """A key or value as the history writes it: the workloads send UTF-8 strings."""
    if data is None or isinstance(data, str):
        return data
    return data.decode("utf-8", errors="backslashreplace")


def record_of(message: Any) -> list[Any]:
    """``[topic, partition, offset, key, value]`` of a confluent-kafka message."""
    return [message.topic(), message.partition(), message.offset(), text(message.key()),
            text(message.value())]


class Pacer:
    """Paces a loop to ``rate_per_second`` iterations; ``wait()`` returns ``False`` once the
    stop event is set (it waits on the event, so stopping never waits out a period). After a
    stall it does not burst to catch up."""

    def __init__(self, rate_per_second: float, stopping: threading.Event) -> None:
        if rate_per_second <= 0:
            raise ValueError(f"rate_per_second must be positive, not {rate_per_second}")
        self.period = 1.0 / rate_per_second
        self._stopping = stopping
        self._next = time.monotonic()

    def wait(self) -> bool:
        now = time.monotonic()
        self._next = max(self._next + self.period, now - self.period)
        delay = self._next - now
        if delay > 0:
            return not self._stopping.wait(delay)
        return not self._stopping.is_set()


class Workload:
    """A client workload on a thread of its own: ``start()``, then ``stop()`` finishes what is
    in flight, records its outcomes and closes the clients. Subclasses implement ``run()``,
    which loops until ``self.stopping`` is set. An exception escaping ``run()`` (a bug in the
    harness, not a fault's effect) is re-raised by ``stop()``."""

    def __init__(self, history: History, process: str) -> None:
        self.history = history
        self.process = process
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def start(self) -> Workload:
        if self._thread is not None:
            raise RuntimeError(f"{self.process} already started")
        self._thread = threading.Thread(target=self._main, name=self.process, daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> None:
        self._stopping.set()
        if self._thread is None:
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"workload {self.process} did not stop within {timeout} s")
        if self.error is not None:
            raise RuntimeError(f"workload {self.process} failed: {self.error!r}") from self.error

    def run(self) -> None:
        raise NotImplementedError

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as error:  # kept for stop() to raise in the harness's thread
            log.exception("workload %s failed", self.process)
            self.error = error


@contextmanager
def running(*workloads: Workload, timeout: float = 120.0) -> Iterator[tuple[Workload, ...]]:
    """Start the workloads; on leaving the block (also by an exception) stop each, in the
    order given, and then raise the first workload's failure if the block itself did not
    fail. Stopping one already stopped is a no-op, so the block may stop some early."""
    started: list[Workload] = []
    try:
        for workload in workloads:
            started.append(workload.start())
        yield workloads
    except BaseException:
        for workload in started:
            with suppress(Exception):
                workload.stop(timeout)
        raise
    failures = []
    for workload in started:
        try:
            workload.stop(timeout)
        except Exception as error:
            failures.append(error)
    if failures:
        raise failures[0]


class Pending:
    """The invoked operations still waiting for an outcome, by operation number. Every
    ``invoke`` written through it gets exactly one ``ok``/``fail``/``info``: ``abandon()`` writes
    ``info`` for whatever is left when a client is dropped."""

    def __init__(self, history: History) -> None:
        self.history = history
        self._lock = threading.Lock()
        self._ops: dict[int, dict[str, Any]] = {}

    def invoke(self, number: int, f: str, **fields: Any) -> None:
        with self._lock:
            self._ops[number] = {"f": f, **fields}
        self.history.invoke(f, **fields)

    def complete(self, number: int, type: str, **result: Any) -> None:
        with self._lock:
            op = self._ops.pop(number, None)
        if op is None:  # a second outcome for one op (e.g. after abandon): the first stands
            log.warning("second outcome %s %s for op %d ignored", type, result, number)
            return
        f = op.pop("f")
        self.history.write(type, f, **op, **result)

    def abandon(self, reason: str) -> int:
        with self._lock:
            numbers = sorted(self._ops)
        for number in numbers:
            self.complete(number, "info", error=reason)
        return len(numbers)

    def __len__(self) -> int:
        with self._lock:
            return len(self._ops)


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create before a run: Kafka's topic configs by their names."""

    name: str
    partitions: int = 1
    replication_factor: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)
    # the node ids of each partition's replicas, the first its preferred leader (else Kafka's)
    replica_assignment: tuple[tuple[int, ...], ...] | None = None


def create_topics(bootstrap: str, specs: Iterable[TopicSpec], *, timeout_s: float = 60.0
                  ) -> None:
    """Create the topics (an existing one is accepted as it is) and wait until every
    partition has a leader and a full ISR, retrying errors until ``timeout_s``."""
    admin = AdminClient(rdkafka_config(bootstrap))
    deadline = time.monotonic() + timeout_s
    waiting = {spec.name: spec for spec in specs}
    for spec in waiting.values():
        _create_one(admin, spec, deadline)
    while waiting:
        metadata = admin.list_topics(timeout=max(1.0, deadline - time.monotonic()))
        for name in [name for name, spec in waiting.items() if _ready(metadata, spec)]:
            del waiting[name]
        if waiting and time.monotonic() > deadline:
            raise TimeoutError(f"topics not ready within {timeout_s} s: {sorted(waiting)}")
        if waiting:
            time.sleep(0.1)  # metadata has no push: ask again


def _create_one(admin: AdminClient, spec: TopicSpec, deadline: float) -> None:
    while True:
        if spec.replica_assignment is None:
            new = NewTopic(spec.name, spec.partitions, spec.replication_factor,
                           config=dict(spec.configs))
        else:
            new = NewTopic(spec.name, len(spec.replica_assignment), replica_assignment=[
                list(r) for r in spec.replica_assignment], config=dict(spec.configs))
        future = admin.create_topics([new], operation_timeout=10)[spec.name]
        try:
            future.result(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as error:
            if error_code(error) == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            retriable = error.args[0].retriable() if error.args else False
            if not retriable and error_code(error) not in _CREATE_RETRIED:
                raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not create {spec.name}: {error}") from error
            log.info("retrying creation of %s after %s", spec.name, error)
            time.sleep(0.2)


# Errors a cluster under faults answers CreateTopics with that go away on their own.
_CREATE_RETRIED = frozenset({
    KafkaError.NOT_CONTROLLER, KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT, KafkaError.INVALID_REPLICATION_FACTOR,  # too few brokers up yet
})


def _ready(metadata: Any, spec: TopicSpec) -> bool:
    topic = metadata.topics.get(spec.name)
    if topic is None or topic.error is not None or len(topic.partitions) != spec.partitions:
        return False
    return all(partition.leader >= 0 and len(partition.isrs) >= spec.replication_factor
               for partition in topic.partitions.values())


def new_rng(seed: random.Random | int | None) -> random.Random:
    """The workload's own generator: a ``random.Random`` is used as given (the campaign's
    seeded one, or one derived from it), an int seeds a new one."""
    return seed if isinstance(seed, random.Random) else random.Random(seed)
