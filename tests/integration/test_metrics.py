"""``metrics.port``: a real broker serves Prometheus metrics that match what a client did."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}
RECORDS = 5


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample, keyed by (sample name, sorted labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(samples: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    """The sum of ``name`` over the samples that carry ``labels`` (any other labels)."""
    return sum(value for (sample, sample_labels), value in samples.items()
               if sample == name and set(labels.items()) <= set(sample_labels))


def test_produce_requests_and_log_end_offset_are_scraped(start_broker) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    broker = start_broker(**{"metrics.port": str(port)})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic("metered", 1, 1)])["metered"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, **QUIET})
    for index in range(RECORDS):  # one ProduceRequest each: flush before the next record
        producer.produce("metered", value=b"value-%d" % index, partition=0)
        assert producer.flush(30) == 0

    samples = scrape(port)

    assert total(samples, "samsa_requests_total", api="Produce") == RECORDS
    assert total(samples, "samsa_request_latency_seconds_count", api="Produce") == RECORDS
    assert total(samples, "samsa_request_latency_seconds_bucket", api="Produce", le="+Inf") == RECORDS
    assert total(samples, "samsa_requests_total", api="CreateTopics") == 1
    partition = {"topic": "metered", "partition": "0"}
    assert total(samples, "samsa_partition_log_end_offset", **partition) == RECORDS
    assert total(samples, "samsa_partition_high_watermark", **partition) == RECORDS
    assert total(samples, "samsa_partition_log_start_offset", **partition) == 0
    assert total(samples, "samsa_partition_size_bytes", **partition) > 0
    assert total(samples, "samsa_network_received_bytes_total") > 0
    assert total(samples, "samsa_network_sent_bytes_total") > 0
    assert total(samples, "samsa_connections") >= 1
