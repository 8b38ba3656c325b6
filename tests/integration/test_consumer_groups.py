"""Consumer groups over the wire: librdkafka (confluent-kafka) and kafka-python consumers in
classic groups against a real broker process, with ``group.initial.rebalance.delay.ms=0``.

No offsets are committed here (``enable.auto.commit=False``): every member starts from the
earliest offset, so the records are produced only once the group is stable.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer as _Consumer
from confluent_kafka import ConsumerGroupState, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}
TOPIC = "events"
PARTITIONS = 6
ALL_PARTITIONS = set(range(PARTITIONS))
TIMEOUT_SECONDS = 30.0
CONSUMER = {"enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


@pytest.fixture
def group_broker(start_broker):  # type: ignore[no-untyped-def]
    broker = start_broker(group_initial_rebalance_delay_ms="0")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(TIMEOUT_SECONDS)
    return broker


def consumer(broker, group: str, **config) -> _Consumer:  # type: ignore[no-untyped-def]
    member = _Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                        **CONSUMER, **QUIET, **config})
    member.subscribe([TOPIC])
    return member


def owned(member: _Consumer) -> set[int]:
    return {tp.partition for tp in member.assignment()}


def covered(members: list[_Consumer]) -> bool:
    """Every member owns partitions, no partition twice, all partitions owned."""
    owned_sets = [owned(member) for member in members]
    return (all(owned_sets) and sum(map(len, owned_sets)) == PARTITIONS
            and set().union(*owned_sets) == ALL_PARTITIONS)


def poll_until(members: list[_Consumer], done: Callable[[], bool],
               records: list[list[tuple[int, int]]] | None = None) -> None:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not done():
        assert time.monotonic() < deadline, [owned(member) for member in members]
        for index, member in enumerate(members):
            for message in member.consume(num_messages=1000, timeout=0.05):
                if message.error():
                    raise KafkaException(message.error())
                if records is not None:
                    records[index].append((message.partition(), message.offset()))


def produce(broker, count: int) -> None:  # type: ignore[no-untyped-def]
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for index in range(count):
        producer.produce(TOPIC, value=b"%d" % index, partition=index % PARTITIONS)
    assert producer.flush(TIMEOUT_SECONDS) == 0


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_members_split_the_partitions_and_rebalance_when_one_leaves(group_broker, strategy: str) -> None:  # type: ignore[no-untyped-def]
    members = [consumer(group_broker, "split", **{"partition.assignment.strategy": strategy})
               for _ in range(3)]
    try:
        _split_and_rebalance(group_broker, members, strategy)
    finally:
        for member in members:
            member.close()


def _split_and_rebalance(broker, members: list[_Consumer], strategy: str) -> None:  # type: ignore[no-untyped-def]
    poll_until(members, lambda: covered(members))
    produce(broker, 300)
    records: list[list[tuple[int, int]]] = [[], [], []]
    poll_until(members, lambda: sum(map(len, records)) >= 300, records)
    consumed = [record for each in records for record in each]
    assert len(consumed) == len(set(consumed)) == 300  # each record once across the members
    for member, received in zip(members, records, strict=True):
        assert {partition for partition, _ in received} <= owned(member)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    listed = admin.list_consumer_groups().result(TIMEOUT_SECONDS)
    assert "split" in {group.group_id for group in listed.valid}
    described = admin.describe_consumer_groups(["split"])["split"].result(TIMEOUT_SECONDS)
    assert described.state is ConsumerGroupState.STABLE
    assert described.partition_assignor == strategy
    assigned = [{tp.partition for tp in m.assignment.topic_partitions} for m in described.members]
    assert sorted(map(sorted, assigned)) == sorted(sorted(owned(member)) for member in members)

    members.pop(0).close()  # LeaveGroup: the other two take over at once
    poll_until(members, lambda: covered(members))


CRASHING_MEMBER = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    member = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "crash", "log_level": 3,
                       "enable.auto.commit": False, "session.timeout.ms": 6000,
                       "heartbeat.interval.ms": 500})
    member.subscribe([sys.argv[2]])
    announced = False
    while True:
        member.poll(0.1)
        if member.assignment() and not announced:
            print("assigned", flush=True)
            announced = True
""")


def test_a_crashed_member_is_expired_after_its_session_timeout(group_broker) -> None:  # type: ignore[no-untyped-def]
    crashing = subprocess.Popen(
        [sys.executable, "-c", CRASHING_MEMBER, group_broker.bootstrap, TOPIC],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    members = [consumer(group_broker, "crash") for _ in range(2)]
    announced = Announced(crashing)
    try:
        # Three members: the two here own two partitions each, the third the other two. (The
        # members here must keep polling: librdkafka rejoins a rebalance from poll.)
        poll_until(members, lambda: announced() and all(map(owned, members))
                   and len(owned(members[0]) | owned(members[1])) == 4)
        crashing.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        poll_until(members, lambda: covered(members))
        assert time.monotonic() - killed_at > 4  # taken over by session expiry, not a leave
    finally:
        for member in members:
            member.close()
        crashing.kill()
        crashing.wait()
        assert crashing.stdout is not None
        crashing.stdout.close()


class Announced:
    """True once the process has printed "assigned" (its stdout read without blocking)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        self.stdout = process.stdout
        self.seen = False

    def __call__(self) -> bool:
        if not self.seen and select.select([self.stdout], [], [], 0)[0]:
            self.seen = self.stdout.readline() == "assigned\n"
        return self.seen


def test_kafka_python_consumer_joins_a_group_and_consumes(group_broker) -> None:  # type: ignore[no-untyped-def]
    produce(group_broker, 60)
    member = KafkaConsumer(TOPIC, bootstrap_servers=group_broker.bootstrap, group_id="python",
                           enable_auto_commit=False, auto_offset_reset="earliest",
                           consumer_timeout_ms=int(TIMEOUT_SECONDS * 1000))
    try:
        values = set()
        for message in member:
            values.add(message.value)
            if len(values) == 60:
                break
        assert values == {b"%d" % index for index in range(60)}
        assert {tp.partition for tp in member.assignment()} == ALL_PARTITIONS
    finally:
        member.close()
