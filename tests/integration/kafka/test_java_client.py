"""The Java client (``kafka-clients`` 4.3.1) against a real Samsa broker, driven through Kafka's
own tools as Kafka's system tests drive it: ``kafka-verifiable-producer`` and
``kafka-verifiable-consumer`` (one JSON event per line), ``kafka-producer-perf-test`` and
``kafka-consumer-perf-test``; and the KIP-848 consumer (``group.protocol=consumer``), which
Samsa does not serve yet: the Java client must fail at once with its clear
UnsupportedVersionException (ApiVersions does not list ConsumerGroupHeartbeat), not hang."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from compat.apache_kafka import run_tool
from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.tools import create_topics, kafka, samsa_broker, table

pytestmark = pytest.mark.integration

TIMEOUT = 30
RECORDS = 2000
# What the Java consumer reports when the cluster lacks the KIP-848 protocol (README text).
KIP_848_REFUSED = ("The cluster does not support the new CONSUMER group protocol. Set "
                   "group.protocol=classic on the consumer configs to revert to the CLASSIC "
                   "protocol until the cluster is upgraded.")


@pytest.fixture(scope="module")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with samsa_broker(tmp_path_factory.mktemp("samsa")) as broker:
        yield broker


def events(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def watermarks(samsa: BrokerProcess, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": f"{topic}-check"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), TIMEOUT)
                for p in range(partitions)}
    finally:
        consumer.close()


def test_verifiable_producer_idempotent_acks_all_then_verifiable_consumer_reads_all(
        samsa: BrokerProcess, tmp_path: Path) -> None:
    create_topics(samsa.bootstrap, ("verified", 2))
    config = tmp_path / "producer.properties"
    # The tool sets retries=0; an idempotent producer needs them (Kafka's system tests set both).
    config.write_text("enable.idempotence=true\nretries=2147483647\n"
                      "max.in.flight.requests.per.connection=5\n")
    produced = events(kafka("kafka-verifiable-producer", "--bootstrap-server", samsa.bootstrap,
                            "--topic", "verified", "--max-messages", "500", "--acks", "-1",
                            "--repeating-keys", "10", "--command-config", str(config)))
    acked = [e for e in produced if e["name"] == "producer_send_success"]
    assert [e for e in produced if e["name"] == "producer_send_error"] == []
    assert sorted(int(e["value"]) for e in acked) == list(range(500))
    assert len({(e["partition"], e["offset"]) for e in acked}) == 500  # no offset twice
    [summary] = [e for e in produced if e["name"] == "tool_data"]
    assert (summary["sent"], summary["acked"]) == (500, 500)
    per_partition = {p: sum(e["partition"] == p for e in acked) for p in (0, 1)}
    assert watermarks(samsa, "verified", 2) == {p: (0, n) for p, n in per_partition.items()}
    producers = table(kafka("kafka-transactions", "--bootstrap-server", samsa.bootstrap,
                            "describe-producers", "--topic", "verified", "--partition", "0"))
    assert [int(p["LastSequence"]) for p in producers] == [per_partition[0] - 1]  # idempotent

    consumed = events(kafka("kafka-verifiable-consumer", "--bootstrap-server", samsa.bootstrap,
                            "--topic", "verified", "--group-id", "verifiers", "--max-messages",
                            "500", "--group-protocol", "classic"))
    names = [e["name"] for e in consumed]
    assert names[0] == "startup_complete" and "partitions_assigned" in names
    assert sum(e["count"] for e in consumed if e["name"] == "records_consumed") == 500
    commits = [e for e in consumed if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits)
    final = {o["partition"]: o["offset"] for e in commits for o in e["offsets"]}
    assert final == per_partition
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": "verifiers"})
    try:
        committed = consumer.committed([TopicPartition("verified", p) for p in (0, 1)], TIMEOUT)
        assert {tp.partition: tp.offset for tp in committed} == per_partition
    finally:
        consumer.close()


def test_the_kip_848_consumer_fails_clearly(samsa: BrokerProcess) -> None:
    create_topics(samsa.bootstrap, ("next-gen", 1))
    result = run_tool("kafka-verifiable-consumer", "--bootstrap-server", samsa.bootstrap,
                      "--topic", "next-gen", "--group-id", "next-gen", "--max-messages", "1",
                      "--group-protocol", "consumer", timeout=60)
    assert "The node does not support CONSUMER_GROUP_HEARTBEAT" in result.stderr
    assert f"UnsupportedVersionException: {KIP_848_REFUSED}" in result.stderr
    assert "records_consumed" not in result.stdout


def test_producer_and_consumer_perf_tests(samsa: BrokerProcess) -> None:
    create_topics(samsa.bootstrap, ("perf", 1))
    produced = kafka("kafka-producer-perf-test", "--topic", "perf", "--num-records", str(RECORDS),
                     "--record-size", "100", "--throughput", "-1", "--command-property",
                     f"bootstrap.servers={samsa.bootstrap}", "acks=all")
    assert produced.splitlines()[-1].startswith(f"{RECORDS} records sent, ")
    assert watermarks(samsa, "perf", 1) == {0: (0, RECORDS)}

    consumed = kafka("kafka-consumer-perf-test", "--bootstrap-server", samsa.bootstrap,
                     "--topic", "perf", "--num-records", str(RECORDS))
    header, row = consumed.splitlines()[-2:]
    stats = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in row.split(",")),
                     strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == RECORDS
    assert float(stats["data.consumed.in.MB"]) == pytest.approx(RECORDS * 100 / 1024 / 1024, abs=1e-4)
