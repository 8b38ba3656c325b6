"""A log directory belongs to one broker process at a time (Kafka's ``.lock``): a second
``samsa broker start`` on it stops with one line naming the directory, exit code 1, and the
first broker serves on, its data untouched. The lock goes with the process, however it ends."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.conftest import ROOT, BrokerProcess

QUIET = {"log_level": 3}


def start_second(broker: BrokerProcess) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", "broker", "start", "--override",
         "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={broker.log_dir}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_a_second_broker_on_the_same_log_dir_is_refused(broker: BrokerProcess) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    producer.produce("locked", b"before")
    assert producer.flush(30) == 0

    second = start_second(broker)

    assert second.returncode == 1
    assert second.stderr.strip().endswith(
        f"samsa: error: cannot lock {broker.log_dir / '.lock'}: another broker process is "
        f"using the log directory {broker.log_dir} (stop it, or give this broker its own "
        f"log.dirs)"), second.stderr
    assert "started on" not in second.stdout
    producer.produce("locked", b"after")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                         "enable.auto.commit": False, **QUIET})
    consumer.assign([TopicPartition("locked", 0, 0)])
    values = []
    while len(values) < 2:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        values.append(message.value())
    consumer.close()
    assert values == [b"before", b"after"]


def test_the_lock_goes_with_a_killed_process(broker: BrokerProcess) -> None:
    broker.kill()
    broker.start()  # the same directory, at once: the kernel released the lock
    assert broker.alive()
