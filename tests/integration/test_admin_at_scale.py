"""Admin work at scale (issue 18) against a real broker process: a CreateTopics of 5,000
partitions while a confluent-kafka producer runs keeps that producer's latency low (the logs are
created on the storage worker, not on the event loop), and the created partitions all serve.

The bound here is generous (shared CI machines); ``bench/scale.py`` measures it precisely.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUIET = {"log_level": 3}
P99_BOUND_MS = 250.0
PARTITIONS = 5_000


def produce_latencies(bootstrap: str, stop: threading.Event) -> list[float]:
    """Produce one record at a time (acks=1) until ``stop``; each one's latency in ms."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1, **QUIET})
    latencies: list[float] = []
    while not stop.is_set():
        sent = time.perf_counter()
        delivered: list[float] = []
        producer.produce("steady", b"x" * 100,
                         on_delivery=lambda error, _, done=delivered: done.append(time.perf_counter()))
        producer.flush(10)
        if delivered:
            latencies.append((delivered[0] - sent) * 1000)
        time.sleep(0.002)
    return latencies


def test_a_large_create_topics_does_not_stall_a_running_producer(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic("steady", num_partitions=1, replication_factor=1)])[
        "steady"].result(30)
    stop = threading.Event()
    before: list[float] = []
    warm = threading.Thread(target=lambda: before.extend(produce_latencies(broker.bootstrap, stop)))
    warm.start()
    time.sleep(1.0)
    stop.set()
    warm.join()
    stop.clear()
    during: list[float] = []
    running = threading.Thread(target=lambda: during.extend(produce_latencies(broker.bootstrap, stop)))
    running.start()
    try:
        started = time.perf_counter()
        admin.create_topics([NewTopic("big", num_partitions=PARTITIONS, replication_factor=1)],
                            operation_timeout=120, request_timeout=180)["big"].result(240)
        took = time.perf_counter() - started
    finally:
        stop.set()
        running.join()
    during.sort()
    p99 = during[int(len(during) * 0.99)]
    assert len(during) > 50, during
    assert p99 < P99_BOUND_MS, (f"produce p99 {p99:.1f} ms during a CreateTopics of {PARTITIONS} "
                                f"partitions ({took:.1f} s); max {during[-1]:.1f} ms")
    metadata = admin.list_topics("big", timeout=30)
    assert len(metadata.topics["big"].partitions) == PARTITIONS
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    errors: list[object] = []
    for index in (0, PARTITIONS // 2, PARTITIONS - 1):
        producer.produce("big", b"v", partition=index,
                         on_delivery=lambda error, _: errors.append(error))
    producer.flush(30)
    assert errors == [None, None, None]
