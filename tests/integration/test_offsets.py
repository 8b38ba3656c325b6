"""Committed offsets against real broker processes: confluent-kafka and kafka-python commits,
a restart (SIGTERM) and a crash (SIGKILL), the cleaner compacting ``__consumer_offsets``, the
admin client listing a group's offsets, and a classic group's metadata surviving restarts."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.structs import OffsetAndMetadata as KafkaOffsetAndMetadata

from broker.group.offsets import OFFSETS_TOPIC, partition_for
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.find_coordinator_response import FindCoordinatorResponse
from protocol.messages.heartbeat_request import HeartbeatRequest
from protocol.messages.heartbeat_response import HeartbeatResponse
from protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_commit_response import OffsetCommitResponse
from tests.integration.conftest import BrokerProcess
from tests.integration.test_bad_input import Client

pytestmark = pytest.mark.integration

FAST = {"log.cleaner.backoff.ms": "100"}


def create_topic(broker, name: str, partitions: int = 2) -> None:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def consumer(broker, group_id: str) -> Consumer:  # type: ignore[no-untyped-def]
    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id,
                     "enable.auto.commit": False})


def commit(broker, group_id: str, offsets: dict[int, tuple[int, str]], topic: str = "t") -> None:  # type: ignore[no-untyped-def]
    c = consumer(broker, group_id)
    try:
        partitions = [TopicPartition(topic, p, o, metadata=m) for p, (o, m) in offsets.items()]
        c.assign(partitions)
        for answer in c.commit(offsets=partitions, asynchronous=False):
            assert answer.error is None, answer.error
    finally:
        c.close()


def committed(broker, group_id: str, partitions: list[int], topic: str = "t") -> dict[int, tuple[int, str]]:  # type: ignore[no-untyped-def]
    c = consumer(broker, group_id)
    try:
        found = c.committed([TopicPartition(topic, p) for p in partitions], timeout=15)
        return {tp.partition: (tp.offset, tp.metadata or "") for tp in found}
    finally:
        c.close()


def test_confluent_commit_and_committed_round_trip_with_metadata(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "t")
    commit(broker, "confluent-group", {0: (42, "hello"), 1: (7, "")})
    assert committed(broker, "confluent-group", [0, 1]) == {0: (42, "hello"), 1: (7, "")}
    assert committed(broker, "other-group", [0])[0][0] < 0  # nothing committed: OFFSET_INVALID


def test_kafka_python_assign_and_commit(broker) -> None:  # type: ignore[no-untyped-def]
    create_topic(broker, "t")
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-group",
                       enable_auto_commit=False)
    try:
        tp = KafkaTopicPartition("t", 1)
        kc.assign([tp])
        kc.commit({tp: KafkaOffsetAndMetadata(13, "kp-meta", -1)})
        assert kc.committed(tp) == 13
    finally:
        kc.close()
    assert committed(broker, "kp-group", [1]) == {1: (13, "kp-meta")}


def test_commits_survive_sigterm_and_sigkill(start_broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    create_topic(broker, "t")
    commit(broker, "durable", {0: (100, "a")})
    broker.restart()
    assert committed(broker, "durable", [0]) == {0: (100, "a")}
    commit(broker, "durable", {0: (200, "b"), 1: (5, "c")})
    assert broker.process is not None
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(10)
    again = BrokerProcess(log_dir=broker.log_dir, overrides=broker.overrides,
                          stderr_path=tmp_path / "after-kill.log").start()
    try:
        assert committed(again, "durable", [0, 1]) == {0: (200, "b"), 1: (5, "c")}
    finally:
        assert again.stop() == 0, again.log()


def _raw_commit(client: Client, group_id: str, offset: int) -> None:
    request = OffsetCommitRequest(group_id=group_id, topics=[OffsetCommitRequestTopic(
        name="t", partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])])
    deadline = time.monotonic() + 30
    while True:  # the first commit creates __consumer_offsets: retried as clients do
        response = client.call(8, 8, request, OffsetCommitResponse, flexible=True)
        code = response.topics[0].partitions[0].error_code
        if code != 14 or time.monotonic() > deadline:  # COORDINATOR_LOAD_IN_PROGRESS
            break
        time.sleep(0.05)
    assert code == 0


def _log_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def test_cleaner_keeps_consumer_offsets_small_under_a_commit_storm(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**FAST, **{"offsets.topic.segment.bytes": "16384",
                                     "offsets.topic.num.partitions": "4"})
    create_topic(broker, "t", partitions=1)
    client = Client(broker)
    found = client.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["storm"]),
                        FindCoordinatorResponse, flexible=True)  # creates __consumer_offsets
    assert found.coordinators[0].error_code == 0
    for offset in range(5000):
        _raw_commit(client, "storm", offset)
    directory = broker.log_dir / f"{OFFSETS_TOPIC}-{partition_for('storm', 4)}"
    uncompacted = 5000 * 100  # each commit is one batch of well over 100 bytes
    deadline = time.monotonic() + 30
    while _log_bytes(directory) > uncompacted // 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _log_bytes(directory) <= uncompacted // 10, sorted(p.name for p in directory.iterdir())
    assert committed(broker, "storm", [0]) == {0: (4999, "")}


def test_admin_list_consumer_group_offsets(broker) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import ConsumerGroupTopicPartitions

    create_topic(broker, "t")
    commit(broker, "listed", {0: (3, "x"), 1: (4, "")})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("listed")])["listed"]
    result = future.result(15)
    assert sorted((tp.topic, tp.partition, tp.offset) for tp in result.topic_partitions) == [
        ("t", 0, 3), ("t", 1, 4)]


def _heartbeat(broker, group_id: str, member_id: str, generation_id: int) -> int:  # type: ignore[no-untyped-def]
    """The Heartbeat's error code, retried while the group's partition loads after a restart."""
    request = HeartbeatRequest(group_id=group_id, generation_id=generation_id, member_id=member_id)
    client = Client(broker)
    deadline = time.monotonic() + 15
    while True:
        code = int(client.call(12, 4, request, HeartbeatResponse, flexible=True).error_code)
        if code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            return code


def _describe(broker, group_id: str):  # type: ignore[no-untyped-def]
    """librdkafka's DescribeConsumerGroups reports COORDINATOR_LOAD_IN_PROGRESS (just after a
    restart) to the caller instead of retrying, against Kafka too: retry it here."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    deadline = time.monotonic() + 15
    while True:
        try:
            return admin.describe_consumer_groups([group_id])[group_id].result(15)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                raise


def test_group_metadata_survives_restarts(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    create_topic(broker, "t", partitions=1)
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kept", "log_level": 3,
                       "enable.auto.commit": False, "heartbeat.interval.ms": 500})
    try:
        member.subscribe(["t"])
        deadline = time.monotonic() + 15
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.1)
        before = _describe(broker, "kept")
        (member_id,) = [m.member_id for m in before.members]
        assert _heartbeat(broker, "kept", member_id, 1) == 0  # one member: generation 1
        broker.restart()
        after = _describe(broker, "kept")  # Stable, from the record written at the leader's sync
        assert after.state is ConsumerGroupState.STABLE
        assert [(m.member_id, [(tp.topic, tp.partition) for tp in m.assignment.topic_partitions])
                for m in after.members] == [(member_id, [("t", 0)])]
        assert _heartbeat(broker, "kept", member_id, 1) == 0
        assert _heartbeat(broker, "kept", member_id, 2) == 22  # ILLEGAL_GENERATION
        member.committed([TopicPartition("t", 0)], timeout=15)  # it found its coordinator again
    finally:
        member.close()  # LeaveGroup: Empty in generation 2
    assert _describe(broker, "kept").state is ConsumerGroupState.EMPTY
    broker.restart()
    emptied = _describe(broker, "kept")
    assert (emptied.state, emptied.members) == (ConsumerGroupState.EMPTY, [])
