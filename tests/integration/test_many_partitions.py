"""A broker with more partitions than its descriptor limit (issue 18): it starts, serves produce
and fetch, creates more, and starts again after kill -9, all under ``ulimit -n``.

Defaults: 20,000 partitions under a limit of 4,096 (the issue's proof). Creating 20,000
partitions costs minutes until creation is O(what changes) everywhere, so the test is ``slow``;
``SAMSA_SCALE_PARTITIONS`` / ``SAMSA_SCALE_NOFILE`` shrink it for a quick run (the ratio is what
matters: more partitions than descriptors).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa._admin_types import NewTopic
from samsa.admin import AdminClient
from samsa.consumer import Consumer
from samsa.producer import Producer
from samsa.types import TopicPartition
from tests.integration.conftest import ROOT, STARTED

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = int(os.environ.get("SAMSA_SCALE_PARTITIONS", "20000"))
NOFILE = int(os.environ.get("SAMSA_SCALE_NOFILE", "4096"))
PER_TOPIC = int(os.environ.get("SAMSA_SCALE_PER_TOPIC", "2000"))
START_TIMEOUT_SECONDS = 600


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


class LimitedBroker:
    """A broker process started under ``RLIMIT_NOFILE`` = ``NOFILE`` (soft and hard)."""

    def __init__(self, log_dir: Path, stderr_path: Path) -> None:
        self.log_dir, self.stderr_path = log_dir, stderr_path
        self.port = 0
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> float:
        """Start and wait for the listening line; returns the seconds it took."""
        arguments = [sys.executable, "-m", "tools.cli", "broker", "start",
                     "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                     "--override", f"log.dirs={self.log_dir}"]
        began = time.monotonic()
        with open(self.stderr_path, "a") as stderr:
            self.process = subprocess.Popen(
                arguments, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=_limit_descriptors,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith(STARTED), f"{line!r}\n{self.stderr_path.read_text()[-3000:]}"
        self.port = int(line.rsplit(":", 1)[1])
        return time.monotonic() - began

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def open_descriptors(self) -> int:
        assert self.process is not None
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        assert self.process is not None and self.process.stdout is not None
        self.process.send_signal(sig)
        code = self.process.wait(START_TIMEOUT_SECONDS)
        self.process.stdout.close()
        return code


@pytest.fixture
def limited_broker(tmp_path: Path) -> Iterator[LimitedBroker]:
    broker = LimitedBroker(tmp_path / "logs", tmp_path / "broker.log")
    broker.start()
    yield broker
    if broker.process is not None and broker.process.poll() is None:
        broker.stop(signal.SIGKILL)


def _round_trip(bootstrap: str, topics: list[str], tag: bytes) -> None:
    """Produce one record to partition 0 and the last partition of each topic, read it back."""
    targets = [TopicPartition(topic, p) for topic in topics for p in (0, PER_TOPIC - 1)]
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for target in targets:
            producer.send(target.topic, tag, partition=target.partition)
        producer.flush(60)
    with Consumer(config={"bootstrap.servers": bootstrap, "enable.auto.commit": False,
                          "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign(targets)
        seen: dict[TopicPartition, list[bytes]] = {}
        deadline = time.monotonic() + 60
        while sum(map(len, seen.values())) < len(targets) and time.monotonic() < deadline:
            for record in consumer.poll(1.0):
                key = TopicPartition(record.topic, record.partition)
                seen.setdefault(key, []).append(record.value)
    assert all(tag in seen.get(target, []) for target in targets), seen


def test_more_partitions_than_descriptors(limited_broker: LimitedBroker) -> None:
    topics = [f"many-{n}" for n in range(PARTITIONS // PER_TOPIC)]
    with AdminClient({"bootstrap.servers": limited_broker.bootstrap}) as admin:
        for topic in topics:
            admin.create_topics([NewTopic(topic, PER_TOPIC, 1)], timeout=START_TIMEOUT_SECONDS)
    assert limited_broker.open_descriptors() < NOFILE
    _round_trip(limited_broker.bootstrap, topics, b"first")
    with AdminClient({"bootstrap.servers": limited_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic("more", 100, 1)], timeout=60)  # and creates more
    assert limited_broker.open_descriptors() < NOFILE

    assert limited_broker.stop(signal.SIGKILL) == -signal.SIGKILL
    limited_broker.start()  # recovers every log after kill -9, under the same limit
    assert limited_broker.open_descriptors() < NOFILE
    _round_trip(limited_broker.bootstrap, topics, b"after-kill")
    assert limited_broker.stop() == 0
    assert "could not be loaded" not in limited_broker.stderr_path.read_text()
