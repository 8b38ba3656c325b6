"""The broker bench's clients and what they measure: confluent-kafka (librdkafka) in this
process producing and consuming against one broker, timed, with the broker's CPU meanwhile.

``timed`` reads the broker's CPU (its process tree, threads and children that ended included:
``bench.cpu``) and this process's (``time.process_time``: every thread, librdkafka's too,
joined ones included) around one action. The client an action returns is closed after the
wall clock stops and before the CPU readings: nothing of it (librdkafka's threads, its
connections) runs on into the next measurement, and the broker's work for the disconnect is
counted where it belongs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench import peers
from bench.rounds import DEFAULT_ROUNDS
from bench.storage import MIB

CLIENT_TIMEOUT_SECONDS = 180.0
QUIET = {"log_level": 3}  # librdkafka: errors only


@dataclass(frozen=True)
class Workload:
    count: int
    value_bytes: int
    producer: dict[str, Any]
    consumer: dict[str, Any]


SMALL_PRODUCER = {"linger.ms": 5, "acks": 1}
SMALL_CONSUMER = {"fetch.queue.backoff.ms": 0}
LARGE_CONSUMER = {**SMALL_CONSUMER, "max.partition.fetch.bytes": 8 * MIB}


@dataclass(frozen=True)
class Phase:
    """One timed action: its wall time, and the CPU of the broker and of this process."""

    seconds: float
    cpu_seconds: float  # the broker's process tree (bench.cpu), nanosecond clock
    client_cpu_seconds: float  # this process, every thread (librdkafka's too)


@dataclass(frozen=True)
class ClientRound:
    """One broker's small-record round: the produce and the consume of ``count`` records."""

    count: int
    value_bytes: int
    produce: Phase
    consume: Phase
    peak_rss_bytes: int = 0  # the broker's, sampled during both phases (bench.memory.PeakRss)


# -- the clients ------------------------------------------------------------------------------


class Closable(Protocol):
    def close(self) -> Any: ...


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, workload: Workload) -> Producer:
    """Send every record and wait for the acks; the producer is returned still connected
    (``timed`` closes it after the clock stops)."""
    producer = Producer({"bootstrap.servers": bootstrap, **QUIET, **workload.producer})
    value = os.urandom(workload.value_bytes)
    send = producer.produce
    try:
        for _ in range(workload.count):
            while True:
                try:
                    send(topic, value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.005)
        left = producer.flush(CLIENT_TIMEOUT_SECONDS)
        if left:
            raise RuntimeError(f"{left} records not delivered")
    except BaseException:
        producer.close()
        raise
    return producer


def consume(bootstrap: str, topic: str, workload: Workload) -> Consumer:
    """Read until every record is in; the consumer is returned open (``timed`` closes it)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "samsa-bench",
                         "enable.auto.commit": False, **QUIET, **workload.consumer})
    consumer.assign([TopicPartition(topic, 0, 0)])
    received, deadline = 0, time.monotonic() + CLIENT_TIMEOUT_SECONDS
    while received < workload.count and time.monotonic() < deadline:
        # consume(n, timeout) waits for n messages or the timeout: never ask for more than
        # are left, or the last call idles for the whole timeout.
        for message in consumer.consume(min(10_000, workload.count - received), 1.0):
            if message.error() is None:
                received += 1
    if received < workload.count:
        consumer.close()
        raise RuntimeError(f"consumed {received} of {workload.count} records")
    return consumer


def timed(broker: peers.BrokerProcess, action: Callable[[], Closable | None]) -> Phase:
    """Wall time of ``action``, then the client it returns is closed, then the CPU readings:
    the broker's (its process tree, threads that ended included) and this process's."""
    cpu, client_cpu = broker.cpu_seconds(), time.process_time()
    start = time.perf_counter()
    client = action()
    seconds = time.perf_counter() - start
    if client is not None:
        client.close()
    return Phase(seconds, broker.cpu_seconds() - cpu, time.process_time() - client_cpu)


def client_round(broker: peers.BrokerProcess, topic: str, workload: Workload) -> ClientRound:
    create_topic(broker.bootstrap, topic)
    produced = timed(broker, lambda: produce(broker.bootstrap, topic, workload))
    consumed = timed(broker, lambda: consume(broker.bootstrap, topic, workload))
    return ClientRound(workload.count, workload.value_bytes, produced, consumed)



@dataclass(frozen=True)
class Settings:
    count: int = 500_000
    large_count: int = 20_000
    ingest_batches: int = 256
    rounds: int = DEFAULT_ROUNDS

    @classmethod
    def quick(cls) -> Settings:
        """A tenth of the records, for smoke runs."""
        return cls(count=50_000, large_count=2_000, ingest_batches=32)
