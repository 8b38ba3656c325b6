"""``samsa produce`` through the installed ``samsa`` executable against a real broker, checked
by consuming with confluent-kafka: lines from stdin, keys, headers, partitions, compression,
the one-line errors with exit code 1, and conditional appends (exit code 3 on a conflict)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

SAMSA = str(Path(sys.executable).with_name("samsa"))
QUIET = {"log_level": 3}


def produce(bootstrap: str, *args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([SAMSA, "produce", *args, "--bootstrap-server", bootstrap],
                          input=stdin, capture_output=True, timeout=60, check=False)


def consume(bootstrap: str, topic: str, count: int, partitions: int = 1) -> list:  # type: ignore[type-arg]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}",
                         "enable.auto.commit": False, **QUIET})
    consumer.assign([ConfluentTopicPartition(topic, p, 0) for p in range(partitions)])
    messages: list = []  # type: ignore[type-arg]
    deadline = time.monotonic() + 30
    try:
        while len(messages) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                messages.append(message)
        # nothing more than expected
        messages += [m for m in consumer.consume(num_messages=1000, timeout=0.5)
                     if not m.error()]
    finally:
        consumer.close()
    return messages


def test_lines_become_records(broker) -> None:  # type: ignore[no-untyped-def]
    lines = b"".join(b"line %d\n" % i for i in range(100)) + b"last, without a newline"
    result = produce(broker.bootstrap, "plain", stdin=lines)
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().strip() == "101 record(s) produced to plain"
    assert result.stdout == b""
    messages = consume(broker.bootstrap, "plain", 101)
    assert [m.value() for m in messages] == [b"line %d" % i for i in range(100)] + [
        b"last, without a newline"]
    assert all(m.key() is None and m.headers() is None for m in messages)


def test_keys_headers_partition_and_compression(broker) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic("keyed", 3, 1)])["keyed"].result(30)
    stdin = b"user-1::hello\r\nuser-2::a::b\n::empty key\nuser-3::\n"
    result = produce(broker.bootstrap, "keyed", "--key-separator", "::", "--header", "source=cli",
                     "--header", "trace=", "--partition", "2", "--compression", "zstd",
                     stdin=stdin)
    assert result.returncode == 0, result.stderr
    messages = consume(broker.bootstrap, "keyed", 4, partitions=3)
    assert [(m.partition(), m.key(), m.value()) for m in messages] == [
        (2, b"user-1", b"hello"), (2, b"user-2", b"a::b"), (2, b"", b"empty key"),
        (2, b"user-3", b"")]
    assert {tuple(m.headers()) for m in messages} == {(("source", b"cli"), ("trace", b""))}


def test_producer_configs_with_x(broker) -> None:  # type: ignore[no-untyped-def]
    result = produce(broker.bootstrap, "configured", "-X", "acks=1", "-X", "linger.ms=0",
                     stdin=b"a\nb\n")
    assert result.returncode == 0, result.stderr
    assert [m.value() for m in consume(broker.bootstrap, "configured", 2)] == [b"a", b"b"]
    bad = produce(broker.bootstrap, "configured", "-X", "linger.ms=soon", stdin=b"a\n")
    assert bad.returncode == 1
    assert bad.stderr.decode().strip() == (
        "samsa: error: invalid config linger.ms='soon': must be an integer")


def test_a_line_without_the_key_separator_is_an_error(broker) -> None:  # type: ignore[no-untyped-def]
    result = produce(broker.bootstrap, "separated", "--key-separator", "=",
                     stdin=b"k=v\nno separator here\nk2=v2\n")
    assert result.returncode == 1
    errors = result.stderr.decode().strip().splitlines()
    assert errors[-1] == "samsa: error: no key separator '=' on line 2: 'no separator here'"
    assert errors[0] == "1 record(s) produced to separated"
    assert [m.value() for m in consume(broker.bootstrap, "separated", 1)] == [b"v"]


def test_an_unreachable_broker_names_the_address() -> None:
    result = produce("127.0.0.1:1", "anything", stdin=b"x\n")
    assert result.returncode == 1
    error = result.stderr.decode().strip()
    assert error.count("\n") == 0
    assert error.startswith("samsa: error: no broker answered (tried 127.0.0.1:1)")


def test_an_unknown_topic_without_auto_creation(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(auto_create_topics_enable="false")
    result = produce(broker.bootstrap, "missing", stdin=b"x\n")
    assert result.returncode == 1
    assert result.stderr.decode().strip() == (
        "samsa: error: unknown topic 'missing' (the broker did not create it: "
        "auto.create.topics.enable is false?)")


def test_a_partition_that_does_not_exist(broker) -> None:  # type: ignore[no-untyped-def]
    result = produce(broker.bootstrap, "one-partition", "--partition", "5", stdin=b"x\n")
    assert result.returncode == 1
    assert result.stderr.decode().strip() == (
        "samsa: error: topic 'one-partition' has partitions 0..0, not 5")


def test_usage_errors_exit_2(broker) -> None:  # type: ignore[no-untyped-def]
    result = produce(broker.bootstrap, "t", "--header", "novalue", stdin=b"")
    assert result.returncode == 2
    assert b"expected KEY=VALUE" in result.stderr


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def test_expect_offset_appends_from_n_and_a_conflict_names_the_actual_offset(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "ledger", 1)
    first = produce(broker.bootstrap, "ledger", "--expect-offset", "0", stdin=b"a\nb\n")
    assert (first.returncode, first.stderr.decode().strip()) == (
        0, "2 record(s) produced to ledger")
    stale = produce(broker.bootstrap, "ledger", "--expect-offset", "1", stdin=b"lost\n")
    assert stale.returncode == 3
    assert stale.stderr.decode().strip().splitlines() == [
        "0 record(s) produced to ledger",
        "samsa: error: offset conflict: ledger-0: expected end offset 1, the log end offset is "
        "2; the actual offset is 2"]
    again = produce(broker.bootstrap, "ledger", "--expect-offset", "2", stdin=b"c\n")
    assert again.returncode == 0
    assert [m.value() for m in consume(broker.bootstrap, "ledger", 3)] == [b"a", b"b", b"c"]


def test_expect_key_offset_chains_the_records_of_a_key(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "carts", 1)
    args = ("--key-separator", ":", "--expect-key-offset", "-1")
    assert produce(broker.bootstrap, "carts", *args, stdin=b"c1:add\nc1:remove\nc2:add\n").returncode == 0
    stale = produce(broker.bootstrap, "carts", *args, stdin=b"c1:add\n")
    assert stale.returncode == 3
    assert stale.stderr.decode().strip().splitlines()[-1] == (
        "samsa: error: offset conflict: carts-0: expected no record with the key, the last one "
        "is at offset 1; the actual offset is 1")
    no_key = produce(broker.bootstrap, "carts", "--expect-key-offset", "-1", stdin=b"x\n")
    assert no_key.returncode == 1
    assert b"--expect-key-offset needs --key-separator" in no_key.stderr
    assert [m.value() for m in consume(broker.bootstrap, "carts", 3)] == [b"add", b"remove", b"add"]


def test_expect_offset_needs_a_partition_of_a_topic_with_several(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker.bootstrap, "wide", 3)
    result = produce(broker.bootstrap, "wide", "--expect-offset", "0", stdin=b"x\n")
    assert result.returncode == 1
    assert result.stderr.decode().strip().splitlines()[-1] == (
        "samsa: error: --expect-offset needs --partition: topic 'wide' has 3 partitions")
    assert produce(broker.bootstrap, "wide", "--expect-offset", "0", "--partition", "2",
                   stdin=b"x\n").returncode == 0
