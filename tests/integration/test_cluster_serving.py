"""A cluster node serves clients only once its metadata caught up (``broker/server.py``), as
Kafka's broker enables request processing only after its initial metadata catch-up: a node
that answered before that described the cluster from a stale or empty image — Metadata with no
brokers, after which librdkafka dropped every broker it knew (issue 13's commit hang)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.integration.cluster_nodes import ClusterNodes, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return True
    except ConnectionRefusedError:
        return False


def brokers_seen_through(port: int) -> set[int]:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    return set(admin.list_topics(timeout=5).brokers)


def test_a_node_serves_clients_only_once_its_metadata_caught_up(tmp_path: Path) -> None:
    cluster = ClusterNodes(tmp_path / "cluster", 3)
    try:
        alone = cluster.start(1)  # one voter of three: no quorum, so it cannot catch up
        assert connects(cluster.controller_ports[1]), "the controller listener serves at once"
        assert not connects(alone.port), "a client was served before the metadata caught up"
        cluster.start(2)
        cluster.start(3)
        wait_until(lambda: brokers_seen_through(alone.port) == {1, 2, 3}, timeout_s=60,
                   what="node 1 serving clients, with every broker in its Metadata")
        assert "caught up with the metadata: serving clients" in alone.log()
    finally:
        codes = cluster.stop_all()
    assert all(code == 0 for code in codes.values()), f"{codes}\n{cluster.logs()}"
