"""KIP-951 in the client: ``Cluster.update_leader`` takes a leader named by a broker only when
its epoch is newer than the known one and its endpoint is known; a hinted batch retries at once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from samsa._accumulator import ProducerBatch, RecordAccumulator
from samsa._cluster import Cluster
from samsa._encoding import BatchBuilder
from samsa.config import parse_config
from samsa.types import BrokerInfo, PartitionInfo, TopicInfo, TopicPartition

TP = TopicPartition("t", 0)
KNOWN = BrokerInfo(1, "127.0.0.1", 9001)
NEW = BrokerInfo(2, "127.0.0.1", 9002)


def cluster_with(leader: int, leader_epoch: int) -> Cluster:
    cluster = Cluster(parse_config("producer", None, {"bootstrap.servers": "127.0.0.1:9001"}))
    cluster.brokers = {KNOWN.node_id: KNOWN}
    cluster.topics = {"t": TopicInfo("t", {0: PartitionInfo("t", 0, leader, leader_epoch)})}
    return cluster


@given(known_epoch=st.integers(-1, 5), hinted_epoch=st.integers(-1, 6),
       hinted_leader=st.sampled_from([-1, 1, 2, 3]), with_endpoint=st.booleans())
def test_a_hint_is_taken_only_when_newer_and_reachable(
        known_epoch: int, hinted_epoch: int, hinted_leader: int, with_endpoint: bool) -> None:
    cluster = cluster_with(1, known_epoch)
    endpoints = {NEW.node_id: NEW} if with_endpoint else {}
    taken = cluster.update_leader(TP, hinted_leader, hinted_epoch, endpoints)
    reachable = hinted_leader == KNOWN.node_id or (hinted_leader == NEW.node_id and with_endpoint)
    assert taken == (hinted_epoch > known_epoch and reachable)
    partition = cluster.topics["t"].partitions[0]
    expected = (hinted_leader, hinted_epoch) if taken else (1, known_epoch)
    assert (partition.leader, partition.leader_epoch) == expected
    if taken:
        assert hinted_leader in cluster.brokers


def test_an_unknown_partition_takes_no_hint() -> None:
    cluster = cluster_with(1, 0)
    assert not cluster.update_leader(TopicPartition("t", 7), 2, 5, {NEW.node_id: NEW})
    assert not cluster.update_leader(TopicPartition("other", 0), 2, 5, {NEW.node_id: NEW})


def test_a_batch_whose_leader_moved_is_retried_without_backoff() -> None:
    accumulator = RecordAccumulator(batch_size=1024, linger_ms=0, buffer_memory=1 << 20,
                                    retry_backoff_ms=100, retry_backoff_max_ms=1000,
                                    delivery_timeout_ms=120_000)
    batch = ProducerBatch(TP, BatchBuilder(1024), 0.0, 0)
    accumulator.reenqueue(batch, 50.0, leader_moved=True)
    assert batch.retry_after_ms == 50.0
    accumulator.reenqueue(batch, 60.0)
    assert batch.retry_after_ms == 60.0 + 200
