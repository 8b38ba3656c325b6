"""The Java client (``kafka-clients`` 4.3.1) against a real Samsa broker, driven through Kafka's
own tools as Kafka's system tests drive it: ``kafka-verifiable-producer`` and
``kafka-verifiable-consumer`` (one JSON event per line), ``kafka-producer-perf-test`` and
``kafka-consumer-perf-test``, the transactional producer through
``TransactionalMessageCopier`` (consume-transform-produce with random aborts); and the KIP-848 consumer (``group.protocol=consumer``), which
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


def committed_values(samsa: BrokerProcess, topic: str, partitions: int) -> list[bytes]:
    """Every value of ``topic`` a read_committed consumer sees, up to its end."""
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": f"{topic}-reader",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    try:
        while len(at_end) < partitions:
            message = consumer.poll(TIMEOUT)
            assert message is not None, f"no end of {topic} in {TIMEOUT} s"
            if message.error() is not None:
                assert message.error().code() == -191, message.error()  # _PARTITION_EOF
                at_end.add(message.partition())
                continue
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_the_java_transactional_producer_copies_exactly_once_through_random_aborts(
        samsa: BrokerProcess) -> None:
    """Kafka's ``TransactionalMessageCopier`` (its system tests' exactly-once check): a Java
    transactional producer and read_committed consumer copy a partition in transactions of 50,
    sending the consumed offsets with the group metadata, aborting some at random and
    redoing them; what read_committed sees downstream is every input value exactly once."""
    from confluent_kafka import Producer

    create_topics(samsa.bootstrap, ("copy-in", 1), ("copy-out", 2))
    producer = Producer({"bootstrap.servers": samsa.bootstrap})
    inputs = [b"record-%04d" % n for n in range(1000)]
    for value in inputs:
        producer.produce("copy-in", value=value)
    assert producer.flush(TIMEOUT) == 0
    output = kafka("transactional-message-copier", "--broker-list", samsa.bootstrap,
                   "--input-topic", "copy-in", "--input-partition", "0",
                   "--output-topic", "copy-out", "--transactional-id", "java-copier",
                   "--consumer-group", "java-copier", "--transaction-size", "50",
                   "--max-messages", str(len(inputs)), "--enable-random-aborts",
                   "--use-group-metadata", timeout=180)
    progress = events(output)
    assert progress and progress[-1]["remaining"] == 0, output[-2000:]
    assert sorted(committed_values(samsa, "copy-out", 2)) == inputs
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": "java-copier"})
    try:
        [committed] = consumer.committed([TopicPartition("copy-in", 0)], TIMEOUT)
    finally:
        consumer.close()
    assert committed.offset == len(inputs)  # the offsets went in the transactions
