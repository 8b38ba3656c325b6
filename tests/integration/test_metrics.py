"""``metrics.port``: a real broker serves Prometheus metrics that match what a client did."""

from __future__ import annotations

import socket
import time
import urllib.request
from typing import Any

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


@pytest.mark.slow  # ~11 s: a share consumer joins and polls twice
def test_share_partition_metrics_are_scraped(start_broker) -> None:  # type: ignore[no-untyped-def]
    """A share group's partition after some traffic: 4 records, #0 accepted, #1 rejected (to
    the group's dead-letter topic), #2 and #3 released and then held by the member again
    (delivery count 2, acquired) when the broker is scraped; ``samsa share-groups --describe``
    (Samsa's DescribeSharePartitions) shows the same window."""
    from samsa import AcknowledgeType, ShareConsumer
    from samsa import Producer as SamsaProducer
    from samsa.admin import AdminClient as SamsaAdmin
    from samsa.admin import ConfigResource
    from samsa.admin import NewTopic as SamsaTopic

    port = free_port()
    broker = start_broker(**{"metrics.port": str(port), "group.share.heartbeat.interval.ms": "1000"})
    with SamsaAdmin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([SamsaTopic("queued", 1, 1), SamsaTopic("queued.dlq", 1, 1)])
        admin.alter_configs(ConfigResource("group", "metered"), {
            "share.auto.offset.reset": "earliest", "samsa.share.dead.letter.topic": "queued.dlq"})
    with SamsaProducer(bootstrap_servers=broker.bootstrap) as producer:
        for index in range(4):
            producer.send("queued", value=b"job-%d" % index, partition=0)
        producer.flush()
    outcome = [AcknowledgeType.ACCEPT, AcknowledgeType.REJECT, AcknowledgeType.RELEASE, AcknowledgeType.RELEASE]
    with ShareConsumer("queued", bootstrap_servers=broker.bootstrap, group_id="metered",
                       share_acknowledgement_mode="explicit", fetch_max_wait_ms=200) as consumer:
        first: list = []  # type: ignore[type-arg]
        while len(first) < 4:
            for record in consumer.poll(0.5):
                first.append(record)
                consumer.acknowledge(record, outcome[record.offset])
        consumer.commit_sync()
        again: list = []  # type: ignore[type-arg]
        while len(again) < 2:
            again += consumer.poll(0.5)
        assert sorted((r.offset, r.delivery_count) for r in again) == [(2, 2), (3, 2)]
        labels = {"group": "metered", "topic": "queued", "partition": "0"}

        def share(name: str) -> float:
            return total(samples, f"samsa_share_partition_{name}", **labels)

        samples = scrape(port)
        deadline = time.monotonic() + 10
        while share("dead_lettered_records_total") < 1:  # the append confirms it a moment later
            assert time.monotonic() < deadline, samples
            samples = scrape(port)
        assert (share("start_offset"), share("end_offset"), share("in_flight_records")) == (2, 4, 2)
        assert (share("acquired_records"), share("max_delivery_count")) == (2, 2)
        assert (share("dead_lettered_records_total"), share("dead_lettering_records")) == (1, 0)
        assert (share("archived_records_total"), share("expired_records_total")) == (0, 0)
        described = share_groups_cli(broker.bootstrap, "--describe", "--group", "metered")
        [row] = described["offsets"]  # what the CLI shows agrees with the scrape
        assert (row["start_offset"], row["in_flight"], row["acquired"], row["max_delivery_count"]) == (2, 2, 2, 2)
        in_flight = share_groups_cli(broker.bootstrap, "--describe", "--group", "metered", "--in-flight")
        [held] = in_flight["in_flight"]
        assert (held["first_offset"], held["last_offset"], held["state"], held["delivery_count"]) == (
            2, 3, "ACQUIRED", 2)
        for record in again:
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)


def share_groups_cli(bootstrap: str, *args: str) -> Any:
    """``samsa share-groups ARGS --json`` in this process; the JSON it printed."""
    import contextlib
    import io
    import json

    from tools.cli import main as samsa_cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = samsa_cli(["share-groups", "--bootstrap-server", bootstrap, *args, "--json"])
    assert code == 0, out.getvalue()
    return json.loads(out.getvalue())
