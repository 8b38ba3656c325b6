"""The share coordinator on one broker, through its broker-to-broker APIs (KIP-932): real
Initialize/Write/Read/ReadSummary/DeleteShareGroupState requests from Samsa's node client,
FindCoordinator key type SHARE, the fences, and the state surviving a restart (replayed from
``__share_group_state``), and a deleted topic's share state deleted with it."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from broker.node_client import NodeClient
from broker.share.coordinator_key import coordinator_key
from broker.share.state_records import SharePartitionKey
from protocol.errors import ErrorCode
from protocol.messages import delete_share_group_state_request as delete
from protocol.messages import initialize_share_group_state_request as initialize
from protocol.messages import read_share_group_state_request as read
from protocol.messages import read_share_group_state_summary_request as summary
from protocol.messages import write_share_group_state_request as write
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.delete_topics_request import DeleteTopicsRequest
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from tests.integration.conftest import BrokerProcess

GROUP = "share-group"
TOPIC_ID = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1122_3344_5566_7788)
RETRIABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.NOT_COORDINATOR)


def send(broker: BrokerProcess, request: Any, version: int) -> Any:
    async def exchange() -> Any:
        client = NodeClient(broker.host, broker.port, client_id="share-test", request_timeout_ms=10000)
        try:
            return await client.send(request, version=version)
        finally:
            await client.close()

    return asyncio.run(exchange())


def first_partition(response: Any) -> Any:
    return response.results[0].partitions[0]


def until_settled(call: Callable[[], Any], *, timeout_s: float = 20) -> Any:
    """``call()``'s answer once it is not a retriable coordinator error (the topic being
    created or loaded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = call()
        if first_partition(response).error_code not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def initialize_state(broker: BrokerProcess, partition: int, state_epoch: int, start_offset: int,
                     topic_id: uuid.UUID = TOPIC_ID) -> Any:
    return send(broker, initialize.InitializeShareGroupStateRequest(group_id=GROUP, topics=[
        initialize.InitializeStateData(topic_id=topic_id, partitions=[initialize.PartitionData(
            partition=partition, state_epoch=state_epoch, start_offset=start_offset)])]), 0)


def write_state(broker: BrokerProcess, partition: int, *, leader_epoch: int, start_offset: int,
                batches: list[tuple[int, int, int, int]], count: int = -1) -> Any:
    return send(broker, write.WriteShareGroupStateRequest(group_id=GROUP, topics=[
        write.WriteStateData(topic_id=TOPIC_ID, partitions=[write.PartitionData(
            partition=partition, state_epoch=1, leader_epoch=leader_epoch, start_offset=start_offset,
            delivery_complete_count=count,
            state_batches=[write.StateBatch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                           for f, last, s, c in batches])])]), 1)


def read_state(broker: BrokerProcess, partition: int, leader_epoch: int,
               topic_id: uuid.UUID = TOPIC_ID) -> Any:
    return send(broker, read.ReadShareGroupStateRequest(group_id=GROUP, topics=[
        read.ReadStateData(topic_id=topic_id, partitions=[read.PartitionData(
            partition=partition, leader_epoch=leader_epoch)])]), 0)


def read_summary(broker: BrokerProcess, partition: int) -> Any:
    return send(broker, summary.ReadShareGroupStateSummaryRequest(group_id=GROUP, topics=[
        summary.ReadStateSummaryData(topic_id=TOPIC_ID, partitions=[summary.PartitionData(
            partition=partition, leader_epoch=0)])]), 1)


def delete_state(broker: BrokerProcess, partition: int) -> Any:
    return send(broker, delete.DeleteShareGroupStateRequest(group_id=GROUP, topics=[
        delete.DeleteStateData(topic_id=TOPIC_ID, partitions=[delete.PartitionData(partition=partition)])]), 0)


def batches_of(response: Any) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in first_partition(response).state_batches]


@pytest.mark.slow  # the state APIs run in make test through the share groups' own tests
def test_state_is_written_read_fenced_and_survives_a_restart(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**{"share.coordinator.state.topic.num.partitions": "3",
                             "share.coordinator.snapshot.update.records.per.snapshot": "2"})
    key = coordinator_key(SharePartitionKey(GROUP, TOPIC_ID, 0))
    found = send(broker, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6).coordinators[0]
    assert (found.error_code, found.port) == (0, broker.port)
    malformed = send(broker, FindCoordinatorRequest(key_type=2, coordinator_keys=["no-colons"]), 6)
    assert malformed.coordinators[0].error_code == ErrorCode.INVALID_REQUEST

    assert first_partition(until_settled(lambda: read_state(broker, 0, 0))).error_code == ErrorCode.INVALID_REQUEST
    assert first_partition(until_settled(lambda: initialize_state(broker, 0, 1, 10))).error_code == 0
    for leader_epoch, start, batches in ((3, 10, [(10, 14, 2, 1)]), (3, 12, [(15, 19, 0, 2)]),
                                         (3, 12, [(20, 20, 4, 5)]), (4, 12, [(21, 22, 2, 1)])):
        answer = first_partition(write_state(broker, 0, leader_epoch=leader_epoch, start_offset=start,
                                             batches=batches, count=7))
        assert answer.error_code == 0, answer
    fenced = first_partition(write_state(broker, 0, leader_epoch=2, start_offset=12, batches=[]))
    assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
    expected = [(12, 14, 2, 1), (15, 19, 0, 2), (20, 20, 4, 5), (21, 22, 2, 1)]
    state = read_state(broker, 0, 4)
    assert (first_partition(state).error_code, first_partition(state).state_epoch,
            first_partition(state).start_offset) == (0, 1, 12)
    assert batches_of(state) == expected
    described = first_partition(read_summary(broker, 0))
    assert (described.state_epoch, described.leader_epoch, described.start_offset,
            described.delivery_complete_count) == (1, 4, 12, 7)

    assert first_partition(read_state(broker, 0, 6)).error_code == 0  # a new leader's read: persisted

    broker.restart()
    state = until_settled(lambda: read_state(broker, 0, 6))
    assert first_partition(state).error_code == 0 and batches_of(state) == expected
    assert first_partition(read_state(broker, 0, 5)).error_code == ErrorCode.FENCED_LEADER_EPOCH
    fenced = first_partition(write_state(broker, 0, leader_epoch=5, start_offset=12, batches=[]))
    assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH

    assert first_partition(delete_state(broker, 0)).error_code == 0
    assert first_partition(read_state(broker, 0, 6)).error_code == ErrorCode.INVALID_REQUEST
    gone = first_partition(read_summary(broker, 0))
    assert (gone.error_code, gone.start_offset, gone.delivery_complete_count) == (0, -1, -1)

    # A deleted topic's share state is deleted with it (Kafka's maybeCleanupShareState).
    created = send(broker, CreateTopicsRequest(timeout_ms=5000, topics=[CreatableTopic(
        name="share-state-topic", num_partitions=1, replication_factor=1)]), 7).topics[0]
    assert created.error_code == 0
    topic_id = created.topic_id
    assert first_partition(initialize_state(broker, 0, 1, 0, topic_id)).error_code == 0
    assert first_partition(read_state(broker, 0, 0, topic_id)).error_code == 0
    deleted = send(broker, DeleteTopicsRequest(timeout_ms=5000, topic_names=["share-state-topic"]), 5)
    assert deleted.responses[0].error_code == 0
    deadline = time.monotonic() + 10
    while first_partition(read_state(broker, 0, 0, topic_id)).error_code == 0:
        assert time.monotonic() < deadline, "the deleted topic's share state is still there"
        time.sleep(0.05)
    assert first_partition(read_state(broker, 0, 0, topic_id)).error_code == ErrorCode.INVALID_REQUEST
