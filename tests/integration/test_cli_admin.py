"""The admin commands (``samsa topics|configs|cluster|groups``) through the installed ``samsa``
executable against a real broker: output for people, ``--json`` for programs, exit codes 0 /
1 (one line, no traceback) / 2 (usage)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

pytestmark = pytest.mark.integration

SAMSA = str(Path(sys.executable).with_name("samsa"))
QUIET = {"log_level": 3}
TIMEOUT = 15


def samsa(broker, *args: str, stdin: str | None = None  # type: ignore[no-untyped-def]
          ) -> subprocess.CompletedProcess[str]:
    """Run ``samsa ARGS`` with ``SAMSA_BOOTSTRAP_SERVER`` pointing at ``broker``."""
    env = {**os.environ, "SAMSA_BOOTSTRAP_SERVER": broker.bootstrap if broker else "unused:1"}
    return subprocess.run([SAMSA, *args], capture_output=True, text=True, timeout=60,
                          check=False, env=env, input=stdin)


def ok(broker, *args: str, stdin: str | None = None) -> str:  # type: ignore[no-untyped-def]
    result = samsa(broker, *args, stdin=stdin)
    assert result.returncode == 0, result.stderr
    return result.stdout


def as_json(broker, *args: str) -> Any:  # type: ignore[no-untyped-def]
    return json.loads(ok(broker, *args, "--json"))


def produce(broker, topic: str, counts: dict[int, int]) -> None:  # type: ignore[no-untyped-def]
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, value=b"%d" % i, partition=partition)
    assert producer.flush(TIMEOUT) == 0


def join(broker, group: str, topic: str) -> Consumer:  # type: ignore[no-untyped-def]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "client.id": "cli-test", "enable.auto.commit": False, **QUIET})
    consumer.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT
    while not consumer.assignment():
        assert time.monotonic() < deadline, "no assignment"
        consumer.poll(0.1)
    return consumer


def lag(broker, group: str) -> dict[int, tuple[int | None, int | None, int | None]]:  # type: ignore[no-untyped-def]
    described = as_json(broker, "groups", "describe", group)
    return {row["partition"]: (row["current_offset"], row["log_end_offset"], row["lag"])
            for row in described["partitions"] if row["topic"] is not None}


def test_topics_and_configs(broker) -> None:  # type: ignore[no-untyped-def]
    assert ok(broker, "topics", "create", "orders", "--partitions", "2",
              "--config", "retention.ms=5000") == "Created topic orders.\n"
    assert as_json(broker, "topics", "list") == [
        {"name": "orders", "partitions": 2, "replicas": 1, "internal": False}]
    listed = ok(broker, "topics", "list").splitlines()
    assert listed[0].split() == ["NAME", "PARTITIONS", "REPLICAS"]
    assert listed[1].split() == ["orders", "2", "1"]
    described = ok(broker, "topics", "describe", "orders")
    assert "PartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=5000" in described
    assert described.splitlines()[1].split() == ["PARTITION", "LEADER", "REPLICAS", "ISR"]
    assert described.splitlines()[2].split() == ["0", "1", "1", "1"]
    [document] = as_json(broker, "topics", "describe")
    assert document["configs"] == {"retention.ms": "5000"}
    assert [p["isr"] for p in document["partitions"]] == [[1], [1]]

    assert ok(broker, "topics", "alter-config", "orders", "--set", "segment.bytes=1048576",
              "--delete", "retention.ms") == "Completed updating config for topic orders.\n"
    rows = ok(broker, "configs", "describe", "--topic", "orders").splitlines()
    assert [row.split() for row in rows] == [
        ["NAME", "VALUE", "SOURCE"], ["segment.bytes", "1048576", "DYNAMIC_TOPIC_CONFIG"]]
    every = as_json(broker, "configs", "describe", "--topic", "orders", "--all")
    values = {row["name"]: (row["value"], row["source"]) for row in every["configs"]}
    assert values["retention.ms"] == ("604800000", "DEFAULT_CONFIG")
    ok(broker, "configs", "alter", "--broker", "1", "--set", "log.retention.ms=7200000")
    broker_rows = as_json(broker, "configs", "describe", "--broker", "1")["configs"]
    assert [(r["name"], r["value"], r["source"]) for r in broker_rows] == [
        ("log.retention.ms", "7200000", "DYNAMIC_BROKER_CONFIG")]

    info = as_json(broker, "cluster", "info")
    assert info["controller_id"] == 1 and info["brokers"][0]["port"] == broker.port
    assert "Cluster ID: " + info["cluster_id"] in ok(broker, "cluster", "info")

    assert ok(broker, "topics", "create", "orders", "--if-not-exists") == (
        "Topic orders exists already.\n")
    assert ok(broker, "topics", "delete", "orders", "ghost", "--if-exists") == (
        "Deleted topic orders.\n")
    assert as_json(broker, "topics", "list") == []


def test_groups_describe_lag_and_reset_offsets(broker) -> None:  # type: ignore[no-untyped-def]
    ok(broker, "topics", "create", "orders", "--partitions", "2")
    produce(broker, "orders", {0: 5, 1: 3})
    member = join(broker, "billing", "orders")
    member.commit(offsets=[KafkaTopicPartition("orders", 0, 2),
                           KafkaTopicPartition("orders", 1, 3)], asynchronous=False)
    try:
        described = as_json(broker, "groups", "describe", "billing")
        assert (described["state"], described["protocol"]) == ("Stable", "range")
        [only] = described["members"]
        assert only["client_id"] == "cli-test" and len(only["assignment"]) == 2
        assert lag(broker, "billing") == {0: (2, 5, 3), 1: (3, 3, 0)}
        table = ok(broker, "groups", "describe", "billing").splitlines()
        assert table[3].split()[:5] == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                                        "LAG"]
        assert table[4].split()[:5] == ["orders", "0", "2", "5", "3"]
        assert table[4].split()[-1] == "cli-test"
        refused = samsa(broker, "groups", "reset-offsets", "billing", "--topic", "orders",
                        "--to-earliest", "--execute")
        assert refused.returncode == 1
        assert refused.stderr == (
            "samsa: error: Assignments can only be reset if the group 'billing' is inactive, "
            "but the current state is Stable.\n")
    finally:
        member.close()
    assert {g["group"]: g["state"] for g in as_json(broker, "groups", "list")} == {
        "billing": "Empty"}

    dry = ok(broker, "groups", "reset-offsets", "billing", "--topic", "orders:0",
             "--to-earliest").splitlines()
    assert [line.split() for line in dry] == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
        ["billing", "orders", "0", "2", "0"]]
    assert lag(broker, "billing") == {0: (2, 5, 3), 1: (3, 3, 0)}  # a dry run changes nothing

    done = as_json(broker, "groups", "reset-offsets", "billing", "--topic", "orders",
                   "--shift-by", "-1", "--execute")
    assert done["executed"] is True
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in done["offsets"]] == [
        (0, 2, 1), (1, 3, 2)]
    assert lag(broker, "billing") == {0: (1, 5, 4), 1: (2, 3, 1)}
    ok(broker, "groups", "reset-offsets", "billing", "--all-topics", "--to-offset", "99",
       "--execute")
    assert lag(broker, "billing") == {0: (5, 5, 0), 1: (3, 3, 0)}  # clamped to the log end
    ok(broker, "groups", "reset-offsets", "billing", "--topic", "orders",
       "--to-datetime", "2000-01-01T00:00:00Z", "--execute")
    assert lag(broker, "billing") == {0: (0, 5, 5), 1: (0, 3, 3)}

    assert ok(broker, "groups", "delete", "billing") == (
        "Deletion of requested consumer groups ('billing') was successful.\n")
    assert as_json(broker, "groups", "list") == []


def test_end_to_end_produce_consume_lag_reset_consume_again(broker) -> None:  # type: ignore[no-untyped-def]
    """The issue's CLI path: topics create -> produce from stdin -> consume --group -> groups
    describe shows lag 0 -> reset-offsets --to-earliest --execute -> consume gets it all again."""
    lines = [f"key-{i}:value-{i}" for i in range(30)]
    ok(broker, "topics", "create", "journey", "--partitions", "3")
    ok(broker, "produce", "journey", "--key-separator", ":", stdin="\n".join(lines) + "\n")
    consume = ("consume", "journey", "--group", "travellers", "--max-messages", "30",
               "--timeout-ms", "10000", "--format", "{key}:{value}")
    first = ok(broker, *consume, "--from-beginning").splitlines()
    assert sorted(first) == sorted(lines)
    rows = lag(broker, "travellers")
    assert sorted(rows) == [0, 1, 2]
    assert all(lag_value == 0 for _, _, lag_value in rows.values())
    assert sum(end for _, end, _ in rows.values() if end is not None) == 30
    ok(broker, "groups", "reset-offsets", "travellers", "--topic", "journey", "--to-earliest",
       "--execute")
    assert {p: current for p, (current, _, _) in lag(broker, "travellers").items()} == {
        0: 0, 1: 0, 2: 0}
    again = ok(broker, *consume).splitlines()  # no --from-beginning: the committed offsets
    assert sorted(again) == sorted(lines)
    assert all(lag_value == 0 for _, _, lag_value in lag(broker, "travellers").values())


def test_errors_are_one_line_with_exit_code_1(broker) -> None:  # type: ignore[no-untyped-def]
    for args, message in [
        (("topics", "describe", "nope"), "unknown topic 'nope'"),
        (("topics", "delete", "nope"), "unknown topic 'nope'"),
        (("configs", "describe", "--topic", "nope"), "unknown topic 'nope'"),
        (("groups", "describe", "nobody"), "consumer group 'nobody' does not exist"),
        (("groups", "reset-offsets", "g", "--topic", "nope", "--to-latest"),
         "unknown topic 'nope'"),
        (("topics", "create", "bad", "--partitions", "0"),
         "topic 'bad': Number of partitions was set to an invalid non-positive value."),
    ]:
        result = samsa(broker, *args)
        assert (result.returncode, result.stderr, result.stdout) == (
            1, f"samsa: error: {message}\n", ""), args
    ok(broker, "topics", "create", "dup")
    result = samsa(broker, "topics", "create", "dup")
    assert (result.returncode, result.stderr) == (1, "samsa: error: topic 'dup' already exists\n")
    debug = samsa(broker, "--debug", "topics", "describe", "nope")
    assert debug.returncode == 1 and "Traceback" in debug.stderr


@pytest.mark.parametrize("args", [
    ("topics", "create"),
    ("topics", "frobnicate"),
    ("groups", "reset-offsets", "g", "--topic", "t"),
    ("topics", "alter-config", "t"),
    ("configs", "describe"),
])
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    result = samsa(None, *args)
    assert result.returncode == 2 and "error:" in result.stderr and "Traceback" not in result.stderr


def test_an_unreachable_broker_names_the_address_and_fails_fast() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    result = subprocess.run([SAMSA, "topics", "list", "--bootstrap-server", f"127.0.0.1:{port}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert result.stderr.startswith("samsa: error: no broker answered (tried 127.0.0.1:")
    assert f"127.0.0.1:{port}" in result.stderr and result.stderr.count("\n") == 1
    assert time.monotonic() - started < 10
