"""Samsa's ``Consumer`` against a real broker, with records written by confluent-kafka
(librdkafka): every codec, groups of Samsa consumers, groups shared with librdkafka members,
commits, seek/pause/resume, offsets for times, ``auto.offset.reset``, listeners, static
membership."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.consumer import Consumer, ConsumerRebalanceListener
from samsa.errors import FencedInstanceIdError, NoOffsetForPartitionError
from samsa.types import ConsumerRecord, OffsetAndMetadata, TopicPartition

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}
TIMEOUT = 30.0
GROUP_TIMING = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 200}


@pytest.fixture
def broker(start_broker):  # type: ignore[no-untyped-def]
    return start_broker(group_initial_rebalance_delay_ms="0")


def create_topic(broker, name: str, partitions: int) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)


def produce(broker, topic: str, count: int, *, start: int = 0,  # type: ignore[no-untyped-def]
            **config: object) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET, **config})
    for i in range(start, start + count):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(TIMEOUT) == 0


def consumer(broker, *topics: str, **settings: object) -> Consumer:  # type: ignore[no-untyped-def]
    return Consumer(*topics, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                    **settings)


def poll_until(condition: Callable[[list[Any]], bool], *consumers: object,
               timeout: float = TIMEOUT) -> list[Any]:
    """Poll every consumer (ours and librdkafka's) in turn until ``condition(records so far)``;
    the records."""
    seen: list[Any] = []
    deadline = time.monotonic() + timeout
    while not condition(seen):
        assert time.monotonic() < deadline, "condition not reached in time"
        for member in consumers:
            if isinstance(member, Consumer):
                seen += member.poll(0.05)
            else:
                messages = member.consume(1000, 0.05)  # type: ignore[attr-defined]
                seen += [m for m in messages if m.error() is None]
    return seen


def values(records: Iterable[object]) -> Counter[bytes]:
    return Counter(r.value() if callable(r.value) else r.value for r in records)  # type: ignore[attr-defined]


# --- reading what librdkafka wrote ------------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_records_from_confluent_kafka_in_every_codec(broker, codec: str) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "codecs", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                         "linger.ms": 20, **QUIET})
    for i in range(2000):
        producer.produce("codecs", key=None if i % 7 == 0 else b"key-%d" % i,
                         value=b"value-%d-" % i + bytes(i % 50), partition=i % 2,
                         timestamp=1_700_000_000_000 + i,
                         headers=[("n", b"%d" % i), ("empty", None)] if i % 3 == 0 else None)
    assert producer.flush(TIMEOUT) == 0
    with consumer(broker) as ours:
        ours.assign([TopicPartition("codecs", 0), TopicPartition("codecs", 1)])
        records = poll_until(lambda got: len(got) >= 2000, ours)
        assert ours.position(TopicPartition("codecs", 0)) == 1000
    assert len(records) == 2000
    by_number = {int(r.value.split(b"-")[1]): r for r in records}
    assert sorted(by_number) == list(range(2000))
    for i, record in by_number.items():
        assert record.partition == i % 2 and record.offset == i // 2
        assert record.key == (None if i % 7 == 0 else b"key-%d" % i)
        assert record.value == b"value-%d-" % i + bytes(i % 50)
        assert record.timestamp == 1_700_000_000_000 + i and record.timestamp_type == 0
        assert record.headers == ((("n", b"%d" % i), ("empty", None)) if i % 3 == 0 else ())
        assert record.serialized_value_size == len(record.value)


# --- groups ---------------------------------------------------------------------------------


def test_two_members_split_four_partitions_and_read_every_record_once(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "split", 4)
    settings = {"group_id": "split-group", "enable_auto_commit": False, **GROUP_TIMING}
    with consumer(broker, "split", **settings) as first, \
            consumer(broker, "split", **settings) as second:
        poll_until(lambda _: len(first.assignment()) == 2 and len(second.assignment()) == 2,
                   first, second)
        assert first.assignment() | second.assignment() == {
            TopicPartition("split", p) for p in range(4)}
        produce(broker, "split", 4000)
        seen = poll_until(lambda got: len(got) >= 4000, first, second)
        seen += first.poll(0.2) + second.poll(0.2)
    assert values(seen) == Counter(b"v%d" % i for i in range(4000))


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
@pytest.mark.parametrize("samsa_first", [True, False], ids=["samsa-leads", "librdkafka-leads"])
def test_a_group_shared_with_librdkafka_members(broker, strategy: str, samsa_first: bool) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "shared", 6)
    group = f"shared-{strategy}-{samsa_first}"
    members: list[object] = []

    def add_samsa() -> None:
        members.append(consumer(broker, "shared", group_id=group, enable_auto_commit=False,
                                partition_assignment_strategy=strategy, **GROUP_TIMING))

    def add_librdkafka() -> None:
        member = KafkaConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                "partition.assignment.strategy": strategy,
                                "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                **GROUP_TIMING, **QUIET})
        member.subscribe(["shared"])
        members.append(member)

    order = [add_samsa, add_librdkafka, add_samsa, add_librdkafka]
    for add in order if samsa_first else order[1:] + order[:1]:
        add()
        poll_until(lambda _: _owned(members) == 6 and all(_assigned(m) for m in members),
                   *members)
    try:
        produce(broker, "shared", 3000)
        seen = poll_until(lambda got: len(got) >= 3000, *members)
        for member in members:
            seen += _drain(member)
        assert values(seen) == Counter(b"v%d" % i for i in range(3000))
    finally:
        for member in members:
            member.close()  # type: ignore[attr-defined]


def _assigned(member: object) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in member.assignment()}  # type: ignore[attr-defined]


def _owned(members: list[object]) -> int:
    owned = [tp for member in members for tp in _assigned(member)]
    return len(owned) if len(owned) == len(set(owned)) else -1


def _drain(member: object) -> list[object]:
    if isinstance(member, Consumer):
        return list(member.poll(0.3))
    messages = member.consume(1000, 0.3)  # type: ignore[attr-defined]
    return [m for m in messages if m.error() is None]


def test_commits_survive_and_the_next_member_resumes_from_them(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "resume", 1)
    produce(broker, "resume", 100)
    with consumer(broker, "resume", group_id="resume", enable_auto_commit=False,
                  **GROUP_TIMING) as first:
        taken: list[ConsumerRecord] = []
        deadline = time.monotonic() + TIMEOUT
        while len(taken) < 40 and time.monotonic() < deadline:
            taken += first.poll(0.5, max_records=40 - len(taken))
        assert [r.offset for r in taken] == list(range(40))
        first.commit()
        first.commit({TopicPartition("resume", 0): OffsetAndMetadata(40, "checkpoint")})
    with consumer(broker, "resume", group_id="resume", **GROUP_TIMING) as second:
        committed = second.committed([TopicPartition("resume", 0)])
        assert committed == {TopicPartition("resume", 0): OffsetAndMetadata(40, "checkpoint", -1)}
        rest = poll_until(lambda got: len(got) >= 60, second)
        assert [r.offset for r in rest] == list(range(40, 100))
    # auto-commit on close: a third member has nothing left
    with consumer(broker, "resume", group_id="resume", **GROUP_TIMING) as third:
        assert third.committed([TopicPartition("resume", 0)])[TopicPartition("resume", 0)] \
            == OffsetAndMetadata(100, "", 0)


class Recorder(ConsumerRebalanceListener):
    def __init__(self, owner: list[Consumer]) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []
        self.threads: set[threading.Thread] = set()
        self.owner = owner

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.threads.add(threading.current_thread())
        self.events.append(("revoked", revoked))
        self.owner[0].commit()  # a blocking call from inside poll(), on poll()'s thread

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.threads.add(threading.current_thread())
        self.events.append(("assigned", assigned))


def test_listener_runs_in_poll_on_the_callers_thread_and_may_commit(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "listened", 2)
    produce(broker, "listened", 10)
    holder: list[Consumer] = []
    recorder = Recorder(holder)
    everything = {TopicPartition("listened", 0), TopicPartition("listened", 1)}
    settings = {"group_id": "listened", "enable_auto_commit": False, **GROUP_TIMING}
    with consumer(broker, **settings) as first:
        holder.append(first)
        first.subscribe(["listened"], listener=recorder)
        assert len(poll_until(lambda got: len(got) >= 10, first)) == 10
        assert recorder.events == [("assigned", everything)]
        with consumer(broker, "listened", **settings) as second:
            poll_until(lambda _: len(first.assignment()) == 1 and len(second.assignment()) == 1,
                       first, second)
    # eager (range): everything revoked, committed from the callback, then one reassigned
    assert recorder.events[1] == ("revoked", everything)
    assert recorder.events[2][0] == "assigned" and len(recorder.events[2][1]) == 1
    assert recorder.threads == {threading.main_thread()}
    with consumer(broker, group_id="listened") as reader:
        assert set(reader.committed(sorted(everything)).values()) != {None}


def test_static_member_fenced_by_a_newer_instance_fails(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "static", 1)
    settings = {"group_id": "static", "group_instance_id": "instance-1", **GROUP_TIMING}
    old = consumer(broker, "static", **settings)
    try:
        poll_until(lambda _: bool(old.assignment()), old)
        with consumer(broker, "static", **settings) as new:
            poll_until(lambda _: bool(new.assignment()), new)
            with pytest.raises(FencedInstanceIdError):
                poll_until(lambda _: False, old)
    finally:
        old.close()


# --- positions -------------------------------------------------------------------------------


def test_seek_pause_and_resume(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "moves", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(20):
        producer.produce("moves", value=b"%d" % i, partition=i % 2)
    assert producer.flush(TIMEOUT) == 0
    zero, one = TopicPartition("moves", 0), TopicPartition("moves", 1)
    with consumer(broker) as ours:
        ours.assign([zero, one])
        ours.seek(zero, 7)
        ours.pause(one)
        assert ours.paused() == {one}
        got = poll_until(lambda got: len(got) >= 3, ours)
        got += ours.poll(0.5)
        assert [(r.partition, r.offset) for r in got] == [(0, 7), (0, 8), (0, 9)]
        ours.resume(one)
        later = poll_until(lambda got: len(got) >= 10, ours)
        assert [(r.partition, r.offset) for r in later] == [(1, o) for o in range(10)]
        ours.seek_to_beginning(zero)
        assert ours.position(zero) == 0
        ours.seek_to_end()
        assert ours.position(zero) == 10 and ours.position(one) == 10
        assert ours.poll(0.3) == []


def test_offsets_for_times_and_beginning_and_end_offsets(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "times", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(10):
        producer.produce("times", value=b"%d" % i, timestamp=1_000_000 + 100 * i)
    assert producer.flush(TIMEOUT) == 0
    tp = TopicPartition("times", 0)
    with consumer(broker) as ours:
        found = ours.offsets_for_times({tp: 1_000_250})
        assert found[tp] is not None
        assert (found[tp].offset, found[tp].timestamp) == (3, 1_000_300)
        assert ours.offsets_for_times({tp: 2_000_000}) == {tp: None}
        assert ours.beginning_offsets([tp]) == {tp: 0}
        assert ours.end_offsets([tp]) == {tp: 10}


def test_auto_offset_reset(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "resets", 1)
    produce(broker, "resets", 5)
    tp = TopicPartition("resets", 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="latest") as latest:
        latest.assign([tp])
        assert latest.position(tp) == 5
        produce(broker, "resets", 2, start=5)
        got = poll_until(lambda got: len(got) >= 2, latest)
        assert [r.value for r in got] == [b"v5", b"v6"]
    with Consumer("resets", bootstrap_servers=broker.bootstrap, group_id="no-reset",
                  auto_offset_reset="none", **GROUP_TIMING) as strict, \
            pytest.raises(NoOffsetForPartitionError):
        poll_until(lambda _: False, strict)


class Events(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", revoked))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", assigned))


def test_cooperative_rebalance_moves_only_what_it_must(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "coop", 4)
    settings = {"group_id": "coop", "partition_assignment_strategy": "cooperative-sticky",
                "enable_auto_commit": False, **GROUP_TIMING}
    everything = {TopicPartition("coop", p) for p in range(4)}
    first_events, second_events = Events(), Events()
    with consumer(broker, **settings) as first:
        first.subscribe(["coop"], listener=first_events)
        poll_until(lambda _: first.assignment() == everything, first)
        with consumer(broker, **settings) as second:
            second.subscribe(["coop"], listener=second_events)
            overlaps = []

            def settled(_: object) -> bool:
                overlaps.append(first.assignment() & second.assignment())
                return len(first.assignment()) == 2 and len(second.assignment()) == 2

            poll_until(settled, first, second)
            kept = first.assignment()
    assert not any(overlaps), "a partition had two owners"
    moved = everything - kept
    # first: everything, then two revoked (never all of them), nothing new
    assert first_events.events[0] == ("assigned", everything)
    assert ("revoked", moved) in first_events.events
    assert all(len(p) < 4 for kind, p in first_events.events[1:] if kind == "revoked")
    # second: only the moved partitions, once they were given up
    assert [p for kind, p in second_events.events if kind == "assigned" and p] == [moved]


def test_pattern_subscription_follows_new_topics(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "pat-a", 1)
    create_topic(broker, "other", 1)
    with consumer(broker, group_id="patterns", metadata_max_age_ms=300,
                  **GROUP_TIMING) as ours:
        ours.subscribe(pattern=r"pat-.*")
        poll_until(lambda _: ours.assignment() == {TopicPartition("pat-a", 0)}, ours)
        create_topic(broker, "pat-b", 2)
        poll_until(lambda _: ours.assignment() == {TopicPartition("pat-a", 0),
                                                   TopicPartition("pat-b", 0),
                                                   TopicPartition("pat-b", 1)}, ours)


class Lost(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.lost: list[set[TopicPartition]] = []

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.lost.append(lost)


def test_a_member_that_stops_polling_leaves_and_rejoins_with_its_partitions_lost(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "slow", 1)
    listener = Lost()
    with consumer(broker, group_id="slow", max_poll_interval_ms=1000, **GROUP_TIMING) as ours:
        ours.subscribe(["slow"], listener=listener)
        poll_until(lambda _: bool(ours.assignment()), ours)
        time.sleep(2.5)  # the application is busy for longer than max.poll.interval.ms
        produce(broker, "slow", 3)
        got = poll_until(lambda got: len(got) >= 3, ours)
    assert listener.lost == [{TopicPartition("slow", 0)}]
    assert [r.value for r in got] == [b"v0", b"v1", b"v2"]
