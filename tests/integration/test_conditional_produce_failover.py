"""Conditional appends through a leader failover, on three real Samsa node processes (RF 3,
min.insync.replicas 2): writers, each a Samsa Producer (acks=all, idempotent) in its own
thread, keep doing read-modify-append (read the high watermark, append expecting it, re-read
and retry on OffsetConflictError) while the partition leader is killed with kill -9 and
restarted. The history read back is gap-free, holds exactly the acknowledged appends, each
once and at its expected offset, and no writer saw any error but conflicts."""

from __future__ import annotations

import threading

import pytest

from samsa.admin import AdminClient as SamsaAdmin
from samsa.errors import KafkaError, OffsetConflictError
from samsa.producer import Producer
from samsa.types import TopicPartition
from tests.integration.cluster_nodes import ClusterNodes, wait_until
from tests.integration.test_cluster import admin_for, formed
from tests.integration.test_replication import create_topic, partition_state
from tests.integration.test_replication_failover import NODES, full_isr, read_all

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOPIC = "ledger"
READ_RETRY_S = 0.1  # a failed read during the failover is retried after this backoff


class Writer:
    """One event-sourcing writer (see the module docstring); ``acked``: (expected, offset,
    value) of each acknowledged append; ``errors``: anything but a conflict."""

    def __init__(self, cluster: ClusterNodes, name: int, stop: threading.Event) -> None:
        self.name = name
        self.bootstrap = cluster.bootstrap
        self.stop = stop
        self.acked: list[tuple[int, int, bytes]] = []
        self.conflicts = 0
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        config = {"bootstrap.servers": self.bootstrap, "acks": "all",
                  "delivery.timeout.ms": 120_000, "request.timeout.ms": 10_000}
        try:
            with Producer(config) as producer, SamsaAdmin(
                    {"bootstrap.servers": self.bootstrap}) as admin:
                while not self.stop.is_set():
                    self._append_one(producer, admin)
        except BaseException as error:  # the test reports it
            self.errors.append(error)

    def _append_one(self, producer: Producer, admin: SamsaAdmin) -> None:
        tp = TopicPartition(TOPIC, 0)
        try:
            expected = admin.list_offsets({tp: "latest"})[tp].offset
        except KafkaError:  # no leader for a moment: read again
            self.stop.wait(READ_RETRY_S)
            return
        value = b"%d:%d" % (self.name, len(self.acked))
        try:
            offset = producer.send(TOPIC, value, partition=0,
                                   expected_offset=expected).result(150).offset
        except OffsetConflictError:
            self.conflicts += 1
            return
        self.acked.append((expected, offset, value))


def test_conditional_appends_through_a_leader_kill_stay_gap_free_and_decided_once(
        cluster_nodes) -> None:  # type: ignore[no-untyped-def]
    cluster = cluster_nodes(3, broker_session_timeout_ms="3000")
    formed(cluster)
    admin = admin_for(cluster, *NODES)
    create_topic(admin, TOPIC, **{"min.insync.replicas": "2"})
    stop = threading.Event()
    writers = [Writer(cluster, name, stop) for name in range(3)]

    def acked() -> int:
        assert not any(w.errors for w in writers), [w.errors for w in writers]
        return sum(len(w.acked) for w in writers)

    def wait_for(count: int) -> None:
        start = acked()
        wait_until(lambda: acked() >= start + count, timeout_s=90,
                   what=f"{count} more acknowledged conditional appends")

    for writer in writers:
        writer.thread.start()
    try:
        wait_for(40)
        leader, _ = partition_state(admin, TOPIC)
        cluster.kill(leader)
        wait_for(40)
        cluster.start(leader)
        full_isr(admin_for(cluster, *NODES), TOPIC)
        wait_for(20)
    finally:
        stop.set()
        for writer in writers:
            writer.thread.join(180)
    assert not any(w.errors for w in writers), [w.errors for w in writers]
    history = read_all(cluster.bootstrap, TOPIC)
    assert [offset for offset, _ in history] == list(range(len(history)))  # gap-free
    values = [value for _, value in history]
    assert len(values) == len(set(values)), "an append was written twice"
    at = {value: offset for offset, value in history}
    everything = [entry for w in writers for entry in w.acked]
    for expected, offset, value in everything:
        assert offset == expected and at.get(value) == offset, (expected, offset, value, at.get(value))
    assert sorted(values) == sorted(value for _, _, value in everything)  # nothing unacknowledged
    assert sum(w.conflicts for w in writers) > 0, "the writers never contended"
