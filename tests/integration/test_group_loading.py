"""``__consumer_offsets`` is loaded in the background after a restart: the listener opens
first, groups whose partition is still loading are answered COORDINATOR_LOAD_IN_PROGRESS,
groups in partitions already loaded are served, and a client (confluent-kafka) that asks for
its committed offsets meanwhile retries until it gets them.

The group ``big`` owns a large partition (``BIG_RECORDS`` offset commits, distinct keys so
nothing is compacted away, about a second or more to load); ``small`` lives in another,
tiny partition, which loads first (smallest first).
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.group.offsets import partition_for
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.find_coordinator_response import FindCoordinatorResponse
from protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_commit_response import OffsetCommitResponse
from protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from protocol.messages.offset_fetch_response import OffsetFetchResponse
from tests.integration.test_bad_input import Client

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}
BIG_RECORDS = 100_000
PER_REQUEST = 2_000
TIMEOUT_SECONDS = 30.0


def _find_coordinator(client: Client, group_id: str) -> None:
    response = client.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id]),
                           FindCoordinatorResponse, flexible=True)
    assert [found.error_code for found in response.coordinators] == [0]


def _commit_many(client: Client, group_id: str, first: int) -> None:
    """One OffsetCommit of ``PER_REQUEST`` partitions of topic "t" (their indexes need not
    exist: the broker checks the topic only, as Kafka)."""
    request = OffsetCommitRequest(group_id=group_id, topics=[OffsetCommitRequestTopic(name="t", partitions=[
        OffsetCommitRequestPartition(partition_index=index, committed_offset=index)
        for index in range(first, first + PER_REQUEST)])])
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:  # the first commit creates __consumer_offsets: retried as clients do
        response = client.call(8, 8, request, OffsetCommitResponse, flexible=True)
        codes = {p.error_code for p in response.topics[0].partitions}
        if codes != {14} or time.monotonic() > deadline:  # COORDINATOR_LOAD_IN_PROGRESS
            break
        time.sleep(0.05)
    assert codes == {0}


def _fetch_errors(client: Client, *group_ids: str) -> dict[str, tuple[int, int | None]]:
    """OffsetFetch v8 of partition 0 of "t": per group, (error code, committed offset)."""
    request = OffsetFetchRequest(groups=[
        OffsetFetchRequestGroup(group_id=group_id, topics=[OffsetFetchRequestTopics(name="t", partition_indexes=[0])])
        for group_id in group_ids])
    response = client.call(9, 8, request, OffsetFetchResponse, flexible=True)
    return {group.group_id: (group.error_code, group.topics[0].partitions[0].committed_offset
                             if group.topics else None)
            for group in response.groups}


def _commit_with_confluent(broker, group_id: str, offset: int) -> None:  # type: ignore[no-untyped-def]
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id,
                       "enable.auto.commit": False, **QUIET})
    try:
        partitions = [TopicPartition("t", 0, offset, metadata=f"{group_id}!")]
        member.assign(partitions)
        assert all(p.error is None for p in member.commit(offsets=partitions, asynchronous=False))
    finally:
        member.close()


def test_offsets_load_in_the_background_and_clients_retry(start_broker) -> None:  # type: ignore[no-untyped-def]
    assert partition_for("big", 50) != partition_for("small", 50)
    broker = start_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(TIMEOUT_SECONDS)
    client = Client(broker)
    _find_coordinator(client, "big")  # as a client does first: creates __consumer_offsets
    for first in range(0, BIG_RECORDS, PER_REQUEST):
        _commit_many(client, "big", first)
    _commit_with_confluent(broker, "big", 42)  # the last commit of (t, 0) wins
    _commit_with_confluent(broker, "small", 7)
    client.sock.close()

    broker.restart()
    client = Client(broker)
    deadline = time.monotonic() + TIMEOUT_SECONDS
    answers = _fetch_errors(client, "big", "small")
    while answers["small"][0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:  # the small partitions load first
        assert time.monotonic() < deadline
        answers = _fetch_errors(client, "big", "small")
    assert answers == {"big": (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None), "small": (0, 7)}

    # Still loading "big" when it asks: librdkafka retries until the partition is loaded.
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "big", **QUIET})
    asked_at = time.time()
    try:
        (found,) = member.committed([TopicPartition("t", 0)], timeout=TIMEOUT_SECONDS)
    finally:
        member.close()
    assert (found.error, found.offset, found.metadata) == (None, 42, "big!")
    assert asked_at < _loaded_at(broker.log(), partition_for("big", 50), BIG_RECORDS + 1)
    assert _fetch_errors(client, "big")["big"] == (0, 42)


def _loaded_at(log: str, partition: int, records: int) -> float:
    """When the broker logged that it had loaded the partition (its log's local time, ms)."""
    line = f"loaded __consumer_offsets-{partition}: {records} record(s)"
    (found,) = [each for each in log.splitlines() if line in each]
    stamp = datetime.strptime(found[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp() + 0.001  # the stamp is truncated to the millisecond
