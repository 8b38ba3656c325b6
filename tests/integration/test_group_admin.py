"""The admin APIs of kafka-python (``KafkaAdminClient``) and confluent-kafka (``AdminClient``)
against a live group: list it, describe it with its members and their assignments, list its
committed offsets, and compute each partition's lag (end offset by ListOffsets latest, minus
the committed offset), which must equal the records the test left unconsumed. Each committed
offset carries its committer's client id as metadata, so the offsets tie back to the members.

The group ``watched`` has two confluent-kafka members (range assignor) on a 3-partition topic
holding 10, 20 and 30 records; the owner of each partition commits a known offset. A second
group, ``standalone``, only commits (manual assignment, no members): a simple consumer group.
kafka-python's admin also deletes offsets (OffsetDelete): refused for the topic the live group
consumes (GROUP_SUBSCRIBED_TO_TOPIC), done for the standalone group.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka import errors as Errors
from kafka.admin import OffsetSpec as KafkaOffsetSpec

from tests.integration.test_consumer_groups import close_all

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}
TOPIC = "lagging"
RECORDS = {0: 10, 1: 20, 2: 30}  # records produced per partition
COMMITTED = {0: 4, 1: 7, 2: 30}  # committed offset per partition
LAG = {p: RECORDS[p] - COMMITTED[p] for p in RECORDS}
STANDALONE_COMMITTED = {0: 9, 2: 1}
TIMEOUT_SECONDS = 30.0


@pytest.fixture
def watched(start_broker) -> Iterator[tuple[object, list[Consumer]]]:  # type: ignore[no-untyped-def]
    """A broker with the ``watched`` group live (Stable, offsets committed) and ``standalone``."""
    broker = start_broker(group_initial_rebalance_delay_ms="0")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(TOPIC, len(RECORDS), 1)])[TOPIC].result(TIMEOUT_SECONDS)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for partition, count in RECORDS.items():
        for index in range(count):
            producer.produce(TOPIC, value=b"%d" % index, partition=partition)
    assert producer.flush(TIMEOUT_SECONDS) == 0
    members = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watched",
                         "client.id": f"member-{name}", "enable.auto.commit": False,
                         "partition.assignment.strategy": "range", **QUIET})
               for name in ("a", "b")]
    try:
        for member in members:
            member.subscribe([TOPIC])
        _await_split(members)
        for name, member in zip("ab", members, strict=True):
            offsets = [TopicPartition(TOPIC, tp.partition, COMMITTED[tp.partition], metadata=f"member-{name}")
                       for tp in member.assignment()]
            for answer in member.commit(offsets=offsets, asynchronous=False):
                assert answer.error is None, answer.error
        _commit_standalone(broker)
        yield broker, members
    finally:
        close_all(members)


def _await_split(members: list[Consumer]) -> None:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not (all(m.assignment() for m in members)
               and sum(len(m.assignment()) for m in members) == len(RECORDS)):
        assert time.monotonic() < deadline, [m.assignment() for m in members]
        for member in members:
            member.poll(0.05)


def _commit_standalone(broker) -> None:  # type: ignore[no-untyped-def]
    simple = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "standalone",
                       "enable.auto.commit": False, **QUIET})
    try:
        offsets = [TopicPartition(TOPIC, p, o) for p, o in STANDALONE_COMMITTED.items()]
        simple.assign(offsets)
        for answer in simple.commit(offsets=offsets, asynchronous=False):
            assert answer.error is None, answer.error
    finally:
        simple.close()


def _assignments(members: list[Consumer]) -> dict[str, set[int]]:
    return {f"member-{name}": {tp.partition for tp in member.assignment()}
            for name, member in zip("ab", members, strict=True)}


def test_confluent_admin_lists_describes_and_lags(watched) -> None:  # type: ignore[no-untyped-def]
    broker, members = watched
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})

    listed = {g.group_id: g for g in admin.list_consumer_groups().result(TIMEOUT_SECONDS).valid}
    assert set(listed) == {"watched", "standalone"}
    assert (listed["watched"].state, listed["watched"].is_simple_consumer_group) == (
        ConsumerGroupState.STABLE, False)
    assert (listed["standalone"].state, listed["standalone"].is_simple_consumer_group) == (
        ConsumerGroupState.EMPTY, True)

    described = admin.describe_consumer_groups(["watched", "standalone"])
    group = described["watched"].result(TIMEOUT_SECONDS)
    assert (group.state, group.partition_assignor, group.is_simple_consumer_group) == (
        ConsumerGroupState.STABLE, "range", False)
    assert (group.coordinator.host, group.coordinator.port) == (broker.host, broker.port)
    assert {m.client_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in group.members} == _assignments(members)
    assert all(m.host == "/127.0.0.1" and m.member_id.startswith(m.client_id) for m in group.members)
    assert {tp.topic for m in group.members for tp in m.assignment.topic_partitions} == {TOPIC}
    standalone = described["standalone"].result(TIMEOUT_SECONDS)
    assert (standalone.state, standalone.members, standalone.is_simple_consumer_group) == (
        ConsumerGroupState.EMPTY, [], True)

    request = [ConsumerGroupTopicPartitions("watched")]
    offsets = admin.list_consumer_group_offsets(request)["watched"].result(TIMEOUT_SECONDS)
    committed = {tp.partition: tp.offset for tp in offsets.topic_partitions if tp.topic == TOPIC}
    assert committed == COMMITTED
    assert {tp.partition: tp.metadata for tp in offsets.topic_partitions} == {
        p: client_id for client_id, owned in _assignments(members).items() for p in owned}
    latest = admin.list_offsets({TopicPartition(TOPIC, p): OffsetSpec.latest() for p in RECORDS})
    ends = {tp.partition: future.result(TIMEOUT_SECONDS).offset for tp, future in latest.items()}
    assert ends == RECORDS
    assert {p: ends[p] - committed[p] for p in RECORDS} == LAG

    request = [ConsumerGroupTopicPartitions("standalone")]
    offsets = admin.list_consumer_group_offsets(request)["standalone"].result(TIMEOUT_SECONDS)
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == STANDALONE_COMMITTED


def test_kafka_python_admin_lists_describes_and_lags(watched) -> None:  # type: ignore[no-untyped-def]
    broker, members = watched
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert set(listed) == {"watched", "standalone"}
        assert (listed["watched"]["protocol_type"], listed["watched"]["group_state"]) == (
            "consumer", "Stable")
        assert (listed["standalone"]["protocol_type"], listed["standalone"]["group_state"]) == (
            "", "Empty")

        described = admin.describe_groups(["watched", "standalone"])
        group = described["watched"]
        assert (group["error"], group["group_state"], group["protocol_type"], group["protocol_data"]) == (
            None, "Stable", "consumer", "range")
        assigned = {m["client_id"]: {p for t in m["member_assignment"]["assigned_partitions"]
                                     for p in t["partitions"] if t["topic"] == TOPIC}
                    for m in group["members"]}
        assert assigned == _assignments(members)
        assert all(m["member_metadata"]["topics"] == [TOPIC] and m["client_host"] == "/127.0.0.1"
                   for m in group["members"])
        assert (described["standalone"]["group_state"], described["standalone"]["members"]) == ("Empty", [])

        offsets = admin.list_group_offsets(["watched", "standalone"])
        committed = {tp.partition: o.offset for tp, o in offsets["watched"].items() if tp.topic == TOPIC}
        assert committed == COMMITTED
        assert {tp.partition: o.offset for tp, o in offsets["standalone"].items()} == STANDALONE_COMMITTED
        latest = admin.list_partition_offsets(
            {KafkaTopicPartition(TOPIC, p): KafkaOffsetSpec.LATEST for p in RECORDS})
        ends = {tp.partition: found.offset for tp, found in latest.items()}
        assert ends == RECORDS
        assert {p: ends[p] - committed[p] for p in RECORDS} == LAG

        # OffsetDelete (KIP-496): the live group keeps the offsets of a topic it consumes.
        deleted = admin.delete_group_offsets("watched", [KafkaTopicPartition(TOPIC, 0)])
        assert deleted == {KafkaTopicPartition(TOPIC, 0): Errors.GroupSubscribedToTopicError}
        deleted = admin.delete_group_offsets("standalone", [KafkaTopicPartition(TOPIC, 0)])
        assert deleted == {KafkaTopicPartition(TOPIC, 0): Errors.NoError}
        assert {tp.partition for tp in admin.list_group_offsets("standalone")["standalone"]} == {2}
    finally:
        admin.close()
