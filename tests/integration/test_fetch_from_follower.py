"""Fetch from the closest replica (KIP-392) and replica-aware admin answers, on three real
nodes (``broker.rack=rack-<id>``, ``replica.selector.class`` = Kafka's rack-aware selector):
the leader names the follower in a consumer's rack as ``preferred_read_replica``; a follower
serves v11+ consumers up to its high watermark; librdkafka with ``client.rack`` reads its
records from that follower; DescribeLogDirs and SamsaDescribeLogSegments answer on followers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.node_client import NodeClient
from protocol.errors import ErrorCode
from protocol.messages.describe_log_dirs_request import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
)
from protocol.messages.describe_log_dirs_response import DescribeLogDirsResponse
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.fetch_response import FetchResponse, PartitionData
from protocol.messages.samsa_describe_log_segments_request import (
    DescribeLogSegmentsTopic,
    SamsaDescribeLogSegmentsRequest,
)
from protocol.messages.samsa_describe_log_segments_response import (
    DescribeLogSegmentsPartitionResult,
    SamsaDescribeLogSegmentsResponse,
)
from protocol.records import iter_batches
from tests.integration.cluster_nodes import ClusterNodes, wait_until
from tests.integration.test_cluster import admin_for, formed
from tests.integration.test_replication import create_topic, partition_state, produce_all

pytestmark = pytest.mark.cluster

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
RECORDS = 300
VALUE = b"v" * 1000


def _ask(cluster: ClusterNodes, node_id: int, request: Any, version: int) -> Any:
    async def ask() -> Any:
        client = NodeClient("127.0.0.1", cluster.client_ports[node_id], client_id="test",
                            request_timeout_ms=10000)
        try:
            return await client.send(request, version=version)
        finally:
            await client.close()

    return asyncio.run(ask())


def _fetch(cluster: ClusterNodes, node_id: int, topic: str, *, version: int = 11,
           rack: str = "", offset: int = 0) -> PartitionData:
    request = FetchRequest(max_wait_ms=0, min_bytes=1, rack_id=rack, topics=[FetchTopic(
        topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=offset,
                                                partition_max_bytes=1 << 20)])])
    response = _ask(cluster, node_id, request, version)
    assert isinstance(response, FetchResponse)
    return response.responses[0].partitions[0]


def _record_count(data: PartitionData) -> int:
    records = data.records or b""
    return sum(batch.last_offset - batch.base_offset + 1 for batch in iter_batches(bytes(records)))


@pytest.fixture
def replicated(cluster_nodes) -> tuple[ClusterNodes, int, list[int]]:  # type: ignore[no-untyped-def]
    """The cluster, the leader of ``near``-0 and its followers, with every replica in sync and
    holding all ``RECORDS`` below its high watermark."""
    cluster = cluster_nodes(3, replica_selector_class=SELECTOR)
    formed(cluster)
    admin = admin_for(cluster, 1, 2, 3)
    create_topic(admin, "near")
    produce_all(cluster.bootstrap, "near", [VALUE] * RECORDS)
    wait_until(lambda: partition_state(admin, "near")[1] == [1, 2, 3], timeout_s=20,
               what="every replica in the ISR")
    leader, _ = partition_state(admin, "near")
    followers = [node for node in (1, 2, 3) if node != leader]
    for follower in followers:
        def caught_up(node: int = follower) -> bool:
            return _fetch(cluster, node, "near").high_watermark == RECORDS
        wait_until(caught_up, timeout_s=20, what=f"node {follower}'s high watermark at {RECORDS}")
    return cluster, leader, followers


def test_the_leader_names_the_follower_in_the_consumers_rack(replicated) -> None:  # type: ignore[no-untyped-def]
    cluster, leader, (follower, _) = replicated
    sent_away = _fetch(cluster, leader, "near", rack=f"rack-{follower}")
    assert (sent_away.error_code, sent_away.preferred_read_replica) == (ErrorCode.NONE, follower)
    assert (_record_count(sent_away), sent_away.high_watermark) == (0, RECORDS)
    for rack in (f"rack-{leader}", "rack-elsewhere", ""):  # the leader's rack, none, no rack
        served = _fetch(cluster, leader, "near", rack=rack)
        assert served.preferred_read_replica == -1 and _record_count(served) > 0
    old = _fetch(cluster, leader, "near", version=10, rack=f"rack-{follower}")  # no rack_id yet
    assert old.preferred_read_replica == -1 and _record_count(old) > 0
    on_follower = _fetch(cluster, follower, "near", rack=f"rack-{leader}")  # followers never do
    assert on_follower.preferred_read_replica == -1 and _record_count(on_follower) > 0


def test_a_follower_serves_consumers_as_kafka_does(replicated) -> None:  # type: ignore[no-untyped-def]
    cluster, _, (follower, _) = replicated
    served = _fetch(cluster, follower, "near")
    assert served.error_code == ErrorCode.NONE and _record_count(served) > 0
    at_end = _fetch(cluster, follower, "near", offset=RECORDS)
    assert (at_end.error_code, _record_count(at_end)) == (ErrorCode.NONE, 0)
    beyond = _fetch(cluster, follower, "near", offset=RECORDS + 5)
    assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    before_v11 = _fetch(cluster, follower, "near", version=10)
    assert before_v11.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_librdkafka_with_client_rack_reads_the_follower(replicated) -> None:  # type: ignore[no-untyped-def]
    cluster, leader, (follower, _) = replicated
    received: dict[int, int] = {}

    def statistics(raw: str) -> None:
        for broker in json.loads(raw)["brokers"].values():
            if broker.get("nodeid", -1) >= 0:
                received[broker["nodeid"]] = broker["rxbytes"]

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "near-readers",
                         "client.rack": f"rack-{follower}", "enable.auto.commit": False,
                         "statistics.interval.ms": 200, "stats_cb": statistics})
    consumer.assign([TopicPartition("near", 0, 0)])
    seen: list[int] = []
    try:
        def all_read() -> bool:
            for message in consumer.consume(num_messages=500, timeout=0.5):
                offset = message.offset()
                if message.error() is None and offset is not None:
                    seen.append(offset)
            return len(seen) >= RECORDS and follower in received
        wait_until(all_read, timeout_s=25, what="every record through the follower")
    finally:
        consumer.close()
    assert sorted(seen) == list(range(RECORDS))
    assert received[follower] > RECORDS * len(VALUE) > received.get(leader, 0), received


def test_followers_answer_describe_log_dirs_and_segments(replicated) -> None:  # type: ignore[no-untyped-def]
    cluster, leader, followers = replicated
    for node in (leader, *followers):
        dirs = _ask(cluster, node, DescribeLogDirsRequest(
            topics=[DescribableLogDirTopic("near", [0])]), 1)
        assert isinstance(dirs, DescribeLogDirsResponse)
        [entry] = [p for result in dirs.results for t in result.topics if t.name == "near"
                   for p in t.partitions]
        assert entry.partition_size > RECORDS * len(VALUE) and entry.offset_lag == 0
        segments = _ask(cluster, node, SamsaDescribeLogSegmentsRequest(
            topics=[DescribeLogSegmentsTopic("near", [0])]), 0)
        assert isinstance(segments, SamsaDescribeLogSegmentsResponse)
        layout: DescribeLogSegmentsPartitionResult = segments.topics[0].partitions[0]
        assert (layout.error_code, layout.high_watermark) == (ErrorCode.NONE, RECORDS)
        assert layout.segments[-1].end_offset == RECORDS
