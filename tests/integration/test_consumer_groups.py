"""Consumer groups over the wire: librdkafka (confluent-kafka) and kafka-python consumers in
classic groups against a real broker process, with ``group.initial.rebalance.delay.ms=0``.

The split tests commit nothing (``enable.auto.commit=False``): every member starts from the
earliest offset, so the records are produced only once the group is stable. The exactly-once
test commits every record synchronously before counting it (``group_member``), while records
keep being produced, across a member leaving and a member being SIGKILLed.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Set
from pathlib import Path

import pytest
from confluent_kafka import Consumer as _Consumer
from confluent_kafka import ConsumerGroupState, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer

from tests.integration.conftest import ROOT
from tests.integration.group_member import ExactlyOnceMember, member_config

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
def test_members_split_the_partitions_and_describe_shows_the_split(group_broker, strategy: str) -> None:  # type: ignore[no-untyped-def]
    members = [consumer(group_broker, "split", **{"partition.assignment.strategy": strategy})
               for _ in range(3)]
    try:
        _split_and_describe(group_broker, members, strategy)
    finally:
        close_all(members)


def close_all(members: list[_Consumer]) -> None:
    """Unsubscribe (LeaveGroup) and serve the revocations before closing: librdkafka can hang
    in ``close()`` when an assignment reaches it while closing (see ``group_member.leave``)."""
    for member in members:
        member.unsubscribe()
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while any(member.assignment() for member in members) and time.monotonic() < deadline:
        for member in members:
            member.poll(0.05)
    for member in members:
        member.close()


def _split_and_describe(broker, members: list[_Consumer], strategy: str) -> None:  # type: ignore[no-untyped-def]
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


# ---- every record exactly once across a leave and a crash ---------------------------------

SESSION_MS = 1000  # the broker's group.min.session.timeout.ms is lowered to allow it


class Production:
    """Records produced in the background, one per partition every 20 ms, until ``stop``;
    ``delivered`` is the (partition, offset) of each acknowledged record."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **QUIET})
        self.delivered: list[tuple[int, int]] = []
        self.errors: list[object] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        index = 0
        while not self._stop.is_set():
            for partition in range(PARTITIONS):
                self.producer.produce(TOPIC, value=b"%d" % index, partition=partition,
                                      on_delivery=self._on_delivery)
                index += 1
            self.producer.poll(0)
            self._stop.wait(0.02)  # the pace of production, not a wait for a condition
        self.producer.flush(TIMEOUT_SECONDS)

    def _on_delivery(self, error: object, message: object) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.delivered.append((message.partition(), message.offset()))  # type: ignore[attr-defined]

    def stop(self) -> list[tuple[int, int]]:
        self._stop.set()
        self._thread.join(TIMEOUT_SECONDS)
        assert not self._thread.is_alive() and not self.errors, self.errors
        return list(self.delivered)


class MemberProcess:
    """``group_member`` in a subprocess: its assignment from its stdout, its consumed records
    from its file."""

    def __init__(self, broker, group: str, strategy: str, path: Path) -> None:  # type: ignore[no-untyped-def]
        self.path = path
        path.touch()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.group_member", broker.bootstrap, group,
             TOPIC, strategy, str(SESSION_MS), str(path)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.assigned: set[int] = set()
        self._pending = b""
        self._lines: list[str] = []

    def owned(self) -> set[int]:
        for line in self._read_lines():
            if line.startswith("assigned"):
                self.assigned = {int(p) for p in line.removeprefix("assigned ").split(",") if p}
            self._lines.append(line)
        return self.assigned

    def records(self) -> list[tuple[int, int]]:
        text = self.path.read_text(encoding="ascii")
        complete = text[: text.rfind("\n") + 1]
        return [(int(p), int(o)) for p, o in (line.split() for line in complete.splitlines())]

    def pause(self) -> None:
        """Ask it to stop consuming, and wait until it has (no record half-processed)."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"pause\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while "paused" not in self._lines:
            assert time.monotonic() < deadline and self.process.poll() is None, self._lines
            self.owned()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(TIMEOUT_SECONDS)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()

    def _read_lines(self) -> list[str]:
        assert self.process.stdout is not None
        descriptor = self.process.stdout.fileno()
        while select.select([descriptor], [], [], 0)[0]:
            chunk = os.read(descriptor, 65536)
            if not chunk:
                break
            self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        return [line.decode() for line in lines]


class Progress:
    """Woken by the member threads after each record and assignment change; the test waits on
    it for its conditions (re-checked at least every ``RECHECK_SECONDS`` for those that depend
    on the member process alone)."""

    RECHECK_SECONDS = 0.1

    def __init__(self) -> None:
        self._condition = threading.Condition()

    def notify(self) -> None:
        with self._condition:
            self._condition.notify_all()

    def wait_until(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        with self._condition:
            while not self._condition.wait_for(done, timeout=self.RECHECK_SECONDS):
                assert time.monotonic() < deadline, f"timed out waiting until {what}"


def partitions_of(records: list[tuple[int, int]]) -> set[int]:
    return {partition for partition, _ in records}


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_every_record_is_consumed_exactly_once_across_a_leave_and_a_crash(
    start_broker, tmp_path: Path, strategy: str,  # type: ignore[no-untyped-def]
) -> None:
    broker = start_broker(group_initial_rebalance_delay_ms="0", group_min_session_timeout_ms="100")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(TIMEOUT_SECONDS)
    config = member_config(broker.bootstrap, "once", strategy, SESSION_MS)
    leaver: list[tuple[int, int]] = []
    stayer: list[tuple[int, int]] = []
    progress = Progress()
    production = Production(broker.bootstrap)
    crashing = MemberProcess(broker, "once", strategy, tmp_path / "crashing.txt")
    leaving = ExactlyOnceMember(config, TOPIC, lambda p, o: leaver.append((p, o)), on_progress=progress.notify)
    staying = ExactlyOnceMember(config, TOPIC, lambda p, o: stayer.append((p, o)), on_progress=progress.notify)
    running = [leaving.start(), staying.start()]  # one consumer per thread
    try:
        progress.wait_until(lambda: bool(leaver and stayer and crashing.records()) and _covers(
            leaving.assigned, staying.assigned, crashing.owned()), "three members share the partitions")

        running.remove(leaving)
        leaving.leave()  # (a) LeaveGroup, then close(): the other two take over at once
        stayed, crashed, produced_at_leave = len(stayer), len(crashing.records()), len(production.delivered)
        progress.wait_until(lambda: _covers(staying.assigned, crashing.owned()) and partitions_of(
            stayer[stayed:] + crashing.records()[crashed:]) == ALL_PARTITIONS,
            "two members consume every partition after the leave")

        crashing.pause()  # (b) nothing half-processed, then SIGKILL: no LeaveGroup
        orphaned = crashing.owned()
        assert orphaned and len(production.delivered) > produced_at_leave
        crashing.kill()
        killed_at, stayed = time.monotonic(), len(stayer)
        progress.wait_until(lambda: staying.assigned == ALL_PARTITIONS
                            and partitions_of(stayer[stayed:]) >= orphaned,
                            "the last member takes over the crashed member's partitions")
        assert time.monotonic() - killed_at >= 0.8 * SESSION_MS / 1000  # by session expiry

        produced = production.stop()
        assert len(produced) > len(stayer[:stayed]) + len(leaver)  # production went on throughout
        progress.wait_until(lambda: len(leaver) + len(stayer) + len(crashing.records()) >= len(produced),
                            "every produced record is consumed")
        consumed = leaver + stayer + crashing.records()
        duplicates = {record: n for record, n in Counter(consumed).items() if n > 1}
        assert not duplicates, _sources(duplicates, leaver=leaver, stayer=stayer, crashing=crashing.records())
        assert set(consumed) == set(produced), sorted(set(produced) - set(consumed))[:20]
    finally:
        production.stop()
        crashing.close()
        for member in running:
            member.leave()


def _sources(duplicates: dict[tuple[int, int], int], **consumed: list[tuple[int, int]]) -> str:
    """Who consumed each of the first duplicates, and at which position of its list."""
    lines = []
    for record in sorted(duplicates)[:5]:
        found = {name: [i for i, each in enumerate(records) if each == record]
                 for name, records in consumed.items()}
        lines.append(f"{record}: {found}")
    return "\n".join(lines) + f"\n{len(duplicates)} duplicates"


def _covers(*owned_sets: Set[int]) -> bool:
    """Every member owns partitions, no partition twice, all partitions owned."""
    return (all(owned_sets) and sum(map(len, owned_sets)) == PARTITIONS
            and set().union(*owned_sets) == ALL_PARTITIONS)
