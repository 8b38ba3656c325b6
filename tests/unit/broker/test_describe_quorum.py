"""DescribeQuorum on a real in-process ``Broker`` (temp log dir, no sockets): this node is the
leader and only voter of ``__cluster_metadata``, at the metadata log's end offset, for every
version; a request for anything else gets Kafka's UNKNOWN_TOPIC_OR_PARTITION per partition."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import RequestContext, describe_quorum
from broker.broker import Broker
from broker.config import BrokerConfig
from protocol.codec import ZERO_UUID
from protocol.errors import ErrorCode
from protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from protocol.messages.describe_quorum_response import DescribeQuorumResponse
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic

NOW = 5000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    properties = {"log.dirs": str(tmp_path), "node.id": "3", "offsets.topic.num.partitions": "1",
                  "listeners": "PLAINTEXT://127.0.0.1:9092"}
    started = Broker.create(BrokerConfig.from_properties(properties), clock=ManualClock(NOW))
    started.startup()
    yield started
    started.shutdown()


def _ask(broker: Broker, topics: list[TopicData], version: int = 2) -> DescribeQuorumResponse:
    header = RequestHeader(request_api_key=55, request_api_version=version, client_id="c")
    context = RequestContext(header=header, api_version=version, broker=broker, connection_id="c")
    response = describe_quorum.handle(context, DescribeQuorumRequest(topics=topics))
    # Every field set must survive the wire at this version.
    return DescribeQuorumResponse.decode(response.encode(version), version)


def _metadata(partition: int = 0, topic: str = "__cluster_metadata") -> list[TopicData]:
    return [TopicData(topic_name=topic, partitions=[PartitionData(partition_index=partition)])]


def test_this_node_leads_and_is_the_only_voter(broker: Broker) -> None:
    create_topic(broker, "t", num_partitions=2)
    end_offset = broker.replica_manager.metadata_log.log.log_end_offset  # type: ignore[union-attr]
    assert end_offset > 0
    response = _ask(broker, _metadata())
    assert response.error_code == ErrorCode.NONE
    [topic] = response.topics
    [partition] = topic.partitions
    assert (topic.topic_name, partition.partition_index, partition.error_code) == (
        "__cluster_metadata", 0, 0)
    assert (partition.leader_id, partition.leader_epoch) == (3, 0)
    assert partition.high_watermark == end_offset
    [voter] = partition.current_voters
    assert (voter.replica_id, voter.log_end_offset) == (3, end_offset)
    assert (voter.last_fetch_timestamp, voter.last_caught_up_timestamp) == (NOW, NOW)
    assert voter.replica_directory_id == ZERO_UUID
    assert partition.observers == []
    [node] = response.nodes
    assert node.node_id == 3
    assert [(listener.name, listener.port) for listener in node.listeners] == [("PLAINTEXT", 9092)]


def test_the_high_watermark_follows_metadata_appends(broker: Broker) -> None:
    before = _ask(broker, _metadata()).topics[0].partitions[0].high_watermark
    create_topic(broker, "t", num_partitions=1)
    after = _ask(broker, _metadata()).topics[0].partitions[0].high_watermark
    assert after > before


@pytest.mark.parametrize("version", [0, 1])
def test_older_versions_leave_out_the_v2_fields(broker: Broker, version: int) -> None:
    response = _ask(broker, _metadata(), version)
    partition = response.topics[0].partitions[0]
    assert partition.leader_id == 3
    assert response.nodes == []  # v2+
    if version == 1:
        assert partition.current_voters[0].last_fetch_timestamp == NOW


@pytest.mark.parametrize(
    "topics",
    [
        _metadata(partition=1),
        _metadata(topic="t"),
        [],
        _metadata() + _metadata(),
    ],
)
def test_anything_but_the_metadata_partition_is_unknown(
    broker: Broker, topics: list[TopicData]
) -> None:
    response = _ask(broker, topics)
    assert response.error_code == ErrorCode.NONE
    assert [p.error_code for t in response.topics for p in t.partitions] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    ] * sum(len(t.partitions) for t in topics)
    assert response.nodes == []


def test_without_describe_on_the_cluster_it_is_refused(tmp_path: Path) -> None:
    properties = {"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "1",
                  "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                  "allow.everyone.if.no.acl.found": "false"}
    secured = Broker.create(BrokerConfig.from_properties(properties), clock=ManualClock(NOW))
    secured.startup()
    try:
        header = RequestHeader(request_api_key=55, request_api_version=2, client_id="c")
        context = RequestContext(header=header, api_version=2, broker=secured, connection_id="c",
                                 principal="User:bob")
        response = describe_quorum.handle(context, DescribeQuorumRequest(topics=_metadata()))
        assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert response.topics == []
    finally:
        secured.shutdown()
