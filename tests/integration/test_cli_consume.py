"""``samsa consume`` through the installed ``samsa`` executable against a real broker, reading
what confluent-kafka produced: formats, JSON, start offsets, groups that resume from their
commits, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

SAMSA = str(Path(sys.executable).with_name("samsa"))
QUIET = {"log_level": 3}
TIMEOUT = 30
# Runs the rest of its command line with SIGINT's default disposition. A shell's background
# job (a suite launched with ``&``) starts with SIGINT ignored, every child inherits that, and
# Python then installs no KeyboardInterrupt handler: Ctrl-C would not reach the CLI.
WITH_SIGINT = [sys.executable, "-c", "import os, signal, sys; "
               "signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"]


@pytest.fixture
def broker(start_broker):  # type: ignore[no-untyped-def]
    broker = start_broker(group_initial_rebalance_delay_ms="0")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic("lines", 2, 1)])["lines"].result(TIMEOUT)
    produce(broker, 0, 10)
    return broker


def produce(broker, start: int, count: int) -> None:  # type: ignore[no-untyped-def]
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(start, start + count):
        producer.produce("lines", key=b"k%d" % i, value=b"line %d" % i, partition=i % 2,
                         timestamp=1_700_000_000_000 + i, headers=[("n", b"%d" % i)])
    assert producer.flush(TIMEOUT) == 0


def samsa(broker, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    env = {**os.environ, "SAMSA_BOOTSTRAP_SERVER": broker.bootstrap}
    return subprocess.run([SAMSA, "consume", *args], capture_output=True, text=True,
                          timeout=60, check=False, env=env)


def lines(broker, *args: str) -> list[str]:  # type: ignore[no-untyped-def]
    result = samsa(broker, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_from_beginning_with_a_format(broker) -> None:  # type: ignore[no-untyped-def]
    got = lines(broker, "lines", "--from-beginning", "--max-messages", "10", "--format",
                "{partition}\\t{offset}\\t{key}\\t{value}\\t{headers}\\t{timestamp}")
    expected = {f"{i % 2}\t{i // 2}\tk{i}\tline {i}\tn:{i}\t{1_700_000_000_000 + i}"
                for i in range(10)}
    assert len(got) == 10 and set(got) == expected


def test_default_format_json_and_a_partition_offset(broker) -> None:  # type: ignore[no-untyped-def]
    result = samsa(broker, "lines", "--from-beginning", "--max-messages", "3")
    assert result.returncode == 0
    assert len(result.stdout.splitlines()) == 3
    assert all(line.startswith("line ") for line in result.stdout.splitlines())
    assert "Processed a total of 3 messages" in result.stderr
    documents = [json.loads(line) for line in
                 lines(broker, "lines", "--partition", "1", "--offset", "3", "--max-messages",
                       "2", "--json")]
    assert [(d["partition"], d["offset"], d["key"], d["value"]) for d in documents] == [
        (1, 3, "k7", "line 7"), (1, 4, "k9", "line 9")]
    assert documents[0]["headers"] == [["n", "7"]]


def test_the_default_start_is_the_end(broker) -> None:  # type: ignore[no-untyped-def]
    assert lines(broker, "lines", "--timeout-ms", "1500") == []
    assert lines(broker, "lines", "--offset", "latest", "--timeout-ms", "1000") == []


def test_a_group_resumes_from_its_commits(broker) -> None:  # type: ignore[no-untyped-def]
    first = lines(broker, "lines", "--group", "cli", "--from-beginning", "--max-messages", "4",
                  "--format", "{value}")
    assert len(first) == 4
    rest = lines(broker, "lines", "--group", "cli", "--from-beginning", "--timeout-ms", "2000")
    assert sorted(first + rest) == sorted(f"line {i}" for i in range(10))
    produce(broker, 10, 4)
    assert sorted(lines(broker, "lines", "--group", "cli", "--timeout-ms", "2000")) == sorted(
        f"line {i}" for i in range(10, 14))


def test_errors_are_one_line_with_exit_codes(broker) -> None:  # type: ignore[no-untyped-def]
    unknown = samsa(broker, "missing", "--from-beginning")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "samsa: error: unknown topic 'missing'"
    usage = samsa(broker, "lines", "--offset", "3")
    assert usage.returncode == 2 and "--offset N needs --partition" in usage.stderr
    bad_format = samsa(broker, "lines", "--format", "{nope}")
    assert bad_format.returncode == 2 and "bad --format" in bad_format.stderr
    no_partition = samsa(broker, "lines", "--partition", "7", "--from-beginning")
    assert no_partition.returncode == 1 and "no partition 7" in no_partition.stderr
    env = {**os.environ, "SAMSA_BOOTSTRAP_SERVER": "127.0.0.1:1"}
    unreachable = subprocess.run([SAMSA, "consume", "lines"], capture_output=True, text=True,
                                 timeout=60, check=False, env=env)
    assert unreachable.returncode == 1
    assert "127.0.0.1:1" in unreachable.stderr and "Traceback" not in unreachable.stderr


def test_ctrl_c_stops_cleanly_and_commits(broker) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "SAMSA_BOOTSTRAP_SERVER": broker.bootstrap}
    process = subprocess.Popen([*WITH_SIGINT, SAMSA, "consume", "lines", "--group",
                                "interrupted", "--from-beginning"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    got = [process.stdout.readline() for _ in range(10)]  # blocks until they are printed
    assert sorted(line.strip() for line in got) == sorted(f"line {i}" for i in range(10))
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 130
    assert "Traceback" not in stderr and "Processed a total of 10 messages" in stderr
    # its offsets were committed on the way out: the group has nothing left to read
    started = time.monotonic()
    assert lines(broker, "lines", "--group", "interrupted", "--timeout-ms", "1500") == []
    assert time.monotonic() - started < TIMEOUT


def test_key_prints_one_keys_records_then_follows(broker) -> None:  # type: ignore[no-untyped-def]
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    producer.produce("lines", key=b"k1", value=b"again", partition=1)
    assert producer.flush(TIMEOUT) == 0
    assert lines(broker, "lines", "--key", "k1", "--partition", "1", "--timeout-ms", "1000",
                 "--format", "{offset} {key} {value}") == ["0 k1 line 1", "5 k1 again"]
    assert lines(broker, "lines", "--key", "k1", "--partition", "1", "--offset", "1",
                 "--max-messages", "1", "--format", "{offset}") == ["5"]
    env = {**os.environ, "SAMSA_BOOTSTRAP_SERVER": broker.bootstrap}
    with subprocess.Popen([SAMSA, "consume", "lines", "--key", "k1", "--partition", "1",
                           "--max-messages", "3", "--format", "{value}"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as follower:
        assert follower.stdout is not None
        assert [follower.stdout.readline(), follower.stdout.readline()] == [
            "line 1\n", "again\n"]  # caught up: what comes next is live
        producer.produce("lines", key=b"k1", value=b"live", partition=1)
        assert producer.flush(TIMEOUT) == 0
        assert follower.stdout.readline() == "live\n"
        assert follower.wait(TIMEOUT) == 0


def test_key_needs_no_group(broker) -> None:  # type: ignore[no-untyped-def]
    result = samsa(broker, "lines", "--key", "k1", "--group", "g")
    assert result.returncode != 0 and "--key cannot be combined with --group" in result.stderr
