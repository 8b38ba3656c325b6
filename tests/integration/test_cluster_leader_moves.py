"""Leader moves on three real Samsa node processes (KIP-951 and Samsa's own clients):

- a Produce v11 sent to a follower is answered NOT_LEADER_OR_FOLLOWER naming the real leader,
  its leader epoch and its endpoint (``node_endpoints``);
- Samsa's Producer (idempotent, acks=all) keeps writing while the partition's leader is killed
  (kill -9) and another elected; Samsa's Consumer, reading from before the kill, sees every
  acknowledged record exactly once at its acknowledged offset; Samsa's AdminClient lists the
  offsets at the new leader.

Every wait polls the cluster with a deadline.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import Future

import pytest

from broker.node_client import NodeClient
from protocol.errors import ErrorCode
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.produce_response import ProduceResponse
from protocol.records import Record, encode_batch
from samsa.admin import AdminClient as SamsaAdmin
from samsa.consumer import Consumer as SamsaConsumer
from samsa.producer import Producer as SamsaProducer
from samsa.types import RecordMetadata, TopicPartition
from tests.integration.cluster_nodes import ClusterNodes, wait_until
from tests.integration.test_cluster import admin_for, formed
from tests.integration.test_replication import create_topic, partition_state

pytestmark = pytest.mark.cluster

NODES = (1, 2, 3)


def produce_v11(port: int, topic: str) -> ProduceResponse:
    async def ask() -> ProduceResponse:
        client = NodeClient("127.0.0.1", port, client_id="test", request_timeout_ms=10000)
        try:
            batch = encode_batch([Record(offset=0, timestamp=0, key=None, value=b"x")])
            request = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])])
            response = await client.send(request, version=11)
            assert isinstance(response, ProduceResponse)
            return response
        finally:
            await client.close()

    return asyncio.run(ask())


def answered(cluster: ClusterNodes, node_id: int, topic: str, code: int) -> ProduceResponse:
    """The first Produce v11 response of ``node_id`` whose partition error is ``code``."""
    def attempt() -> ProduceResponse | None:
        response = produce_v11(cluster.client_ports[node_id], topic)
        return response if response.responses[0].partition_responses[0].error_code == code else None

    found = wait_until(attempt, timeout_s=15, what=f"node {node_id} answering error {code}")
    assert found is not None
    return found


def test_a_produce_to_a_follower_names_the_leader_and_its_endpoint(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3)
    formed(cluster)
    admin = admin_for(cluster, *NODES)
    create_topic(admin, "hinted")
    leader, _ = partition_state(admin, "hinted")
    # Right after creation the leader may not have taken its role, nor the follower's image
    # the topic: wait for each to answer as it will.
    ok = answered(cluster, leader, "hinted", ErrorCode.NONE)
    assert ok.node_endpoints == []
    assert ok.responses[0].partition_responses[0].current_leader.leader_id == -1
    follower = next(node_id for node_id in NODES if node_id != leader)
    response = answered(cluster, follower, "hinted", ErrorCode.NOT_LEADER_OR_FOLLOWER)
    answer = response.responses[0].partition_responses[0]
    assert answer.current_leader.leader_id == leader
    assert answer.current_leader.leader_epoch >= 0
    assert [(node.node_id, node.host, node.port, node.rack) for node in response.node_endpoints] == [
        (leader, "127.0.0.1", cluster.client_ports[leader], f"rack-{leader}")]


class SamsaWriter:
    """Samsa's idempotent acks=all Producer writing ``p-<n>`` to ``topic``-0 from a thread
    until stopped: what was acknowledged (value -> offset) and every delivery error."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = SamsaProducer(bootstrap_servers=bootstrap, acks="all",
                                      enable_idempotence=True, linger_ms=2,
                                      delivery_timeout_ms=60000)
        self.acked: dict[bytes, int] = {}
        self.errors: list[BaseException] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, value: bytes, future: Future[RecordMetadata]) -> None:
        error = future.exception()
        if error is not None:
            self.errors.append(error)
        else:
            self.acked[value] = future.result().offset

    def _run(self) -> None:
        while not self._stop.is_set():
            value = f"p-{self.sent}".encode()
            future = self.producer.send(self.topic, value, partition=0)
            future.add_done_callback(functools.partial(self._delivered, value))
            self.sent += 1
            if self.sent % 50 == 0:
                self._stop.wait(0.005)  # a steady stream, not a flood of the buffer

    def __enter__(self) -> SamsaWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.producer.flush(60)
        self.producer.close(10)

    def wait_for(self, count: int) -> None:
        start = len(self.acked)
        wait_until(lambda: len(self.acked) >= start + count, timeout_s=30,
                   what=f"{count} more acknowledged writes")


def read_until(consumer: SamsaConsumer, seen: list[tuple[int, bytes]], end: int) -> bool:
    for record in consumer.poll(timeout=0.5):
        seen.append((record.offset, record.value))
    return bool(seen) and seen[-1][0] >= end - 1


def test_samsa_clients_follow_a_killed_leader(cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster: ClusterNodes = cluster_nodes(3, broker_session_timeout_ms="3000")
    formed(cluster)
    admin = admin_for(cluster, *NODES)
    create_topic(admin, "moves", **{"min.insync.replicas": "2"})  # type: ignore[arg-type]
    tp = TopicPartition("moves", 0)
    consumer = SamsaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    samsa_admin = SamsaAdmin(bootstrap_servers=cluster.bootstrap)
    seen: list[tuple[int, bytes]] = []
    try:
        consumer.assign([tp])
        with SamsaWriter(cluster.bootstrap, "moves") as writer:
            writer.wait_for(300)
            wait_until(lambda: read_until(consumer, seen, 100), timeout_s=20,
                       what="the consumer reading from the first leader")
            leader, _ = partition_state(admin, "moves")
            assert samsa_admin.list_offsets({tp: "latest"})[tp].offset > 0  # asks the leader
            cluster.kill(leader)
            survivors = admin_for(cluster, *(n for n in NODES if n != leader))
            wait_until(lambda: partition_state(survivors, "moves")[0] not in (-1, leader),
                       timeout_s=20, what="a new leader elected")
            writer.wait_for(300)
        assert not writer.errors, writer.errors[:3]
        end = max(writer.acked.values()) + 1
        wait_until(lambda: read_until(consumer, seen, end), timeout_s=30,
                   what=f"the consumer reading to offset {end} from the new leader")
        assert samsa_admin.list_offsets({tp: "latest"})[tp].offset >= end  # the new leader
    finally:
        consumer.close()
        samsa_admin.close()
    values = [value for _, value in seen]
    assert len(values) == len(set(values)), "a record was read twice"
    at = {value: offset for offset, value in seen}
    assert all(at.get(value) == offset for value, offset in writer.acked.items()), \
        "an acknowledged record is missing or at another offset"
