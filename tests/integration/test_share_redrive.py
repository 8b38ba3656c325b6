"""``samsa share-groups --redrive`` against a real broker: records a share consumer rejected
are dead-lettered by the broker (the group's ``samsa.share.dead.letter.topic``), then the CLI
counts them (``--dry-run``: nothing produced), produces them back to their source partitions
(``--execute``: same key, value and headers, no ``samsa.dlq.*`` header) and, run again,
redrives nothing (its progress is committed)."""

from __future__ import annotations

import contextlib
import io
import json
import time
from typing import Any

import pytest

from samsa import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
from samsa.admin import AdminClient, ConfigResource, NewTopic
from tests.integration.conftest import BrokerProcess
from tools.cli import main as samsa_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # ~12 s: a share consumer joins, three CLI runs

SOURCE, DEAD_LETTERS, GROUP = "orders", "orders.dlq", "redrive-workers"


def cli(bootstrap: str, *args: str) -> Any:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = samsa_cli(["share-groups", "--bootstrap-server", bootstrap, *args, "--json"])
    assert code == 0, out.getvalue()
    return json.loads(out.getvalue())


def read_all(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every record of ``topic`` up to its end offsets now."""
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        chosen = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(chosen)
        consumer.seek_to_end(*chosen)
        end = {tp.partition: consumer.position(tp) for tp in chosen}
        consumer.seek_to_beginning(*chosen)
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < sum(end.values()):
            assert time.monotonic() < deadline, got
            got += consumer.poll(0.5)
    return sorted(got, key=lambda r: (r.partition, r.offset))


def test_redrive_sends_dead_letters_back_once(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = start_broker(**{"group.share.heartbeat.interval.ms": "1000"})
    bootstrap = broker.bootstrap
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(SOURCE, 2, 1), NewTopic(DEAD_LETTERS, 1, 1)])
        admin.alter_configs(ConfigResource("group", GROUP), {
            "share.auto.offset.reset": "earliest", "samsa.share.dead.letter.topic": DEAD_LETTERS})
    with Producer(bootstrap_servers=bootstrap) as producer:
        for index in range(4):
            producer.send(SOURCE, key=b"k%d" % index, value=b"v%d" % index, partition=index % 2,
                          headers=[("trace", b"t%d" % index)])
        producer.flush()
    with ShareConsumer(SOURCE, bootstrap_servers=bootstrap, group_id=GROUP,
                       share_acknowledgement_mode="explicit", fetch_max_wait_ms=200) as consumer:
        rejected = 0
        deadline = time.monotonic() + 30
        while rejected < 4:
            assert time.monotonic() < deadline
            for record in consumer.poll(0.5):
                consumer.acknowledge(record, AcknowledgeType.REJECT)
                rejected += 1
        consumer.commit_sync()
    letters = read_all(bootstrap, DEAD_LETTERS, 1)
    deadline = time.monotonic() + 10
    while len(letters) < 4:  # each is appended once its rejection is persisted
        assert time.monotonic() < deadline, letters
        letters = read_all(bootstrap, DEAD_LETTERS, 1)

    planned = cli(bootstrap, "--redrive", "--group", GROUP, "--dry-run")
    assert (planned["executed"], planned["records"], planned["redriven"], planned["skipped"]) == (False, 4, 4, 0)
    assert planned["by_source"] == [{"topic": SOURCE, "partition": 0, "records": 2},
                                    {"topic": SOURCE, "partition": 1, "records": 2}]
    assert len(read_all(bootstrap, SOURCE, 2)) == 4  # a dry run produces nothing

    done = cli(bootstrap, "--redrive", "--dead-letter-topic", DEAD_LETTERS, "--execute")
    assert (done["executed"], done["redriven"], done["progress_group"]) == (True, 4, "samsa-redrive.orders.dlq")
    records = read_all(bootstrap, SOURCE, 2)
    assert len(records) == 8
    copies = [r for r in records if r.offset >= 2]
    assert sorted((r.partition, r.key, r.value, r.headers) for r in copies) == [
        (index % 2, b"k%d" % index, b"v%d" % index, (("trace", b"t%d" % index),)) for index in (0, 2, 1, 3)]

    again = cli(bootstrap, "--redrive", "--dead-letter-topic", DEAD_LETTERS, "--execute")
    assert (again["records"], again["redriven"]) == (0, 0)
    assert len(read_all(bootstrap, SOURCE, 2)) == 8
