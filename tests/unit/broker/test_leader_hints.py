"""KIP-951 leader hints in-process: once a committed PartitionChangeRecord hands t-0 to another
node, a Produce (v10+) or a Fetch (v16+) sent here names that node and its leader epoch in
``current_leader`` (a Fetch when fenced: a v11+ consumer may read a follower); older versions, which do not carry the field, answer only the error. On a
single node no other broker is alive, so no endpoint is given (the cluster test checks those)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import fetch, produce
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.leader_hints import CurrentLeader, LeaderHints
from protocol.codec import ZERO_UUID
from protocol.errors import ErrorCode
from protocol.frames import encode_response_message
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.fetch_response import FetchResponse
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.produce_response import ProduceResponse
from protocol.records import Record, encode_batch
from replication.controller.local import LocalController
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic
from tests.unit.broker.test_transaction_apis import context

OTHER_NODE = 2


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    started = Broker.create(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}),
                            clock=ManualClock(1000))
    started.startup()
    yield started
    started.shutdown()


def change_leader(broker: Broker, leader: int) -> None:
    """Create t and commit a PartitionChangeRecord naming ``leader`` (epoch 0 -> 1)."""
    plan = create_topic(broker, "t")
    controller = broker.controller
    assert isinstance(controller, LocalController)
    change = PartitionChangeRecord(partition_id=0, topic_id=plan.topic_id, leader=leader)
    assert controller.propose([change]).exception() is None


def move_leader_away(broker: Broker) -> None:
    change_leader(broker, OTHER_NODE)


def produce_to(broker: Broker, version: int) -> ProduceResponse:
    records = encode_batch([Record(offset=0, timestamp=0, key=None, value=b"v")])
    request = ProduceRequest(acks=1, timeout_ms=1000, transactional_id=None, topic_data=[
        TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=records)])])
    response = produce.handle(context(broker, 0, version), request)
    assert isinstance(response, ProduceResponse)
    encode_response_message(1, 1, response, version)  # the version carries what was set
    return response


def fetch_from(broker: Broker, version: int, current_leader_epoch: int = -1) -> FetchResponse:
    topic_id = broker.replica_manager.image.topics_by_name["t"].topic_id
    request = FetchRequest(max_wait_ms=0, min_bytes=1, topics=[FetchTopic(
        topic="t", topic_id=topic_id if version >= 13 else ZERO_UUID, partitions=[FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
            current_leader_epoch=current_leader_epoch)])])
    response = fetch.handle(context(broker, 1, version), request)
    assert isinstance(response, FetchResponse)
    encode_response_message(1, 1, response, version)
    return response


def test_a_produce_to_a_follower_names_the_current_leader(broker: Broker) -> None:
    move_leader_away(broker)
    answer = produce_to(broker, 11).responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (OTHER_NODE, 1)


def test_a_produce_before_v10_gets_no_hint(broker: Broker) -> None:
    move_leader_away(broker)
    answer = produce_to(broker, 9).responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert answer.current_leader.leader_id == -1


def test_a_successful_produce_carries_no_hint(broker: Broker) -> None:
    create_topic(broker, "t")
    response = produce_to(broker, 11)
    assert response.responses[0].partition_responses[0].current_leader.leader_id == -1
    assert response.node_endpoints == []


@pytest.mark.parametrize(("version", "hinted"), [(12, False), (15, False), (16, True), (17, True)])
def test_a_fenced_fetch_from_a_follower_names_the_leader_from_v16(
        broker: Broker, version: int, hinted: bool) -> None:
    """A v11+ consumer may read a follower (KIP-392); with the old epoch it is fenced."""
    move_leader_away(broker)
    data = fetch_from(broker, version, current_leader_epoch=0).responses[0].partitions[0]
    assert data.error_code == ErrorCode.FENCED_LEADER_EPOCH
    expected = (OTHER_NODE, 1) if hinted else (-1, -1)
    assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == expected


def test_a_fenced_fetch_names_the_leader_and_its_new_epoch(broker: Broker) -> None:
    change_leader(broker, broker.node_id)
    response = fetch_from(broker, 17, current_leader_epoch=0)
    data = response.responses[0].partitions[0]
    assert data.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (broker.node_id, 1)
    assert [endpoint.node_id for endpoint in response.node_endpoints] == [broker.node_id]


def test_the_hints_of_an_unknown_partition_are_empty(broker: Broker) -> None:
    hints = LeaderHints(broker, "")
    assert hints.current_leader("missing", 0) == CurrentLeader(-1, -1)
    assert hints.hinted_endpoints() == []
