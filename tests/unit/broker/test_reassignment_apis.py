"""AlterPartitionReassignments, ListPartitionReassignments, AlterPartition and ElectLeaders on
Samsa's single node, in-process: the only valid target is this node, nothing is ever being
reassigned, and AlterPartition belongs to a KRaft controller."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import (
    RequestContext,
    alter_partition,
    alter_partition_reassignments,
    elect_leaders,
    list_partition_reassignments,
)
from broker.broker import Broker
from broker.config import BrokerConfig
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from protocol.messages.alter_partition_request import AlterPartitionRequest
from protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    started = Broker.create(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}),
                            clock=ManualClock(1000))
    started.startup()
    create_topic(started, "t", num_partitions=2)
    yield started
    started.shutdown()


def context(broker: Broker, api_key: int, version: int = 0) -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, client_id="c")
    return RequestContext(header=header, api_version=version, broker=broker, connection_id="c")


def reassign(broker: Broker, *topics: tuple[str, list[tuple[int, list[int] | None]]]
             ) -> AlterPartitionReassignmentsResponse:
    request = AlterPartitionReassignmentsRequest(topics=[
        ReassignableTopic(name=name, partitions=[
            ReassignablePartition(partition_index=index, replicas=replicas)
            for index, replicas in partitions])
        for name, partitions in topics])
    response = alter_partition_reassignments.handle(context(broker, 45), request)
    assert isinstance(response, AlterPartitionReassignmentsResponse)  # committed at once
    return response


def test_a_reassignment_to_this_node_is_a_no_op_and_any_other_broker_is_invalid(broker: Broker) -> None:
    response = reassign(broker, ("t", [(0, [1]), (1, [2]), (5, [1])]), ("nope", [(0, [1])]),
                        ("t", [(0, [1, 1]), (1, None)]))
    assert response.error_code == ErrorCode.NONE
    codes = [(topic.name, [(p.partition_index, p.error_code) for p in topic.partitions])
             for topic in response.responses]
    assert codes == [
        ("t", [(0, ErrorCode.NONE), (1, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
               (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]),
        ("nope", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]),
        ("t", [(0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
               (1, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)]),
    ]
    assert "no such broker is registered" in (response.responses[0].partitions[1].error_message or "")
    assert broker.replica_manager.image.topics_by_name["t"].partitions[0].replicas == (1,)


def test_an_empty_reassignment_request_is_answered_with_nothing(broker: Broker) -> None:
    assert reassign(broker).responses == []


def test_nothing_is_ever_being_reassigned_on_one_node(broker: Broker) -> None:
    for topics in (None, [ListPartitionReassignmentsTopics(name="t", partition_indexes=[0, 1]),
                          ListPartitionReassignmentsTopics(name="nope", partition_indexes=[0])]):
        response = list_partition_reassignments.handle(
            context(broker, 46), ListPartitionReassignmentsRequest(topics=topics))
        assert response.error_code == ErrorCode.NONE and response.topics == []


def test_alter_partition_is_for_a_kraft_controller(broker: Broker) -> None:
    response = alter_partition.handle(context(broker, 56, 3), AlterPartitionRequest(broker_id=1))
    assert response.error_code == ErrorCode.NOT_CONTROLLER  # type: ignore[union-attr]
    assert response.topics == []  # type: ignore[union-attr]


def test_elect_leaders_on_one_node_is_never_needed(broker: Broker) -> None:
    request = ElectLeadersRequest(election_type=0, topic_partitions=[
        TopicPartitions(topic="t", partitions=[0, 1, 9])])
    response = elect_leaders.handle(context(broker, 43, 2), request)
    [result] = response.replica_election_results  # type: ignore[union-attr]
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [
        (0, ErrorCode.ELECTION_NOT_NEEDED), (1, ErrorCode.ELECTION_NOT_NEEDED),
        (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
