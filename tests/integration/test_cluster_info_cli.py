"""``samsa cluster info`` and ``samsa cluster quorum`` (run as ``python -m tools.cli``) against
real brokers: a 3-node KRaft cluster, healthy and then with a killed node (fenced, lagging in the
quorum, its partitions under-replicated), and a single node (its own quorum of one voter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from samsa.admin import AdminClient, NewTopic
from tests.integration.cluster_nodes import cluster_nodes, wait_until  # noqa: F401
from tests.integration.conftest import ROOT

pytestmark = pytest.mark.integration

FAST_FENCING = {"broker_heartbeat_interval_ms": "500", "broker_session_timeout_ms": "3000"}


def cli(bootstrap: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", *args, "--bootstrap-server", bootstrap],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def info(bootstrap: str) -> Any:
    return json.loads(cli(bootstrap, "cluster", "info", "--json"))


def by_status(quorum: Any) -> dict[str, list[int]]:
    statuses: dict[str, list[int]] = {}
    for replica in quorum["replicas"]:
        statuses.setdefault(replica["status"], []).append(replica["node_id"])
    return statuses


def test_a_three_node_cluster_healthy_then_with_a_node_down(  # type: ignore[no-untyped-def]
        cluster_nodes, tmp_path: Path) -> None:  # noqa: F811
    # The harness puts each node's log file in tmp_path/cluster-<n> without creating it.
    (tmp_path / "cluster-0").mkdir(exist_ok=True)
    cluster = cluster_nodes(3, **FAST_FENCING)
    with AdminClient({"bootstrap.servers": cluster.bootstrap,
                      "default.api.timeout.ms": 20_000}) as admin:
        wait_until(lambda: len(admin.describe_cluster().brokers) == 3, what="3 unfenced brokers")
        admin.create_topics([NewTopic("orders", 3, 3)])
        wait_until(lambda: (s := admin.summarize_partitions()).partition_count >= 3
                   and not s.under_replicated and not s.offline, what="every ISR full")

    healthy = info(cluster.bootstrap)
    assert healthy["cluster_id"]
    assert [(b["node_id"], b["port"], b["rack"], b["fenced"]) for b in healthy["brokers"]] == [
        (n, cluster.client_ports[n], f"rack-{n}", False) for n in (1, 2, 3)]
    quorum = healthy["quorum"]
    leader = quorum["leader_id"]
    assert healthy["controller_id"] == leader
    assert quorum["leader_epoch"] >= 1 and quorum["high_watermark"] > 0
    statuses = by_status(quorum)
    assert statuses["Leader"] == [leader]
    assert sorted(statuses["Follower"]) == sorted({1, 2, 3} - {leader})
    assert "Observer" not in statuses
    replicas = {r["node_id"]: r for r in quorum["replicas"]}
    assert replicas[leader]["lag"] == 0
    assert all(r["lag"] >= 0 and r["last_caught_up_timestamp"] for r in replicas.values())
    assert {n: r["endpoints"] for n, r in replicas.items()} == {
        n: [f"CONTROLLER://127.0.0.1:{port}"] for n, port in cluster.controller_ports.items()}
    partitions = healthy["partitions"]
    assert partitions["partitions"] >= 3
    assert (partitions["under_replicated_count"], partitions["offline_count"]) == (0, 0)

    text = cli(cluster.bootstrap, "cluster", "info")
    for section in ("Cluster", "Brokers", "Quorum", "Partitions"):
        assert section in text.splitlines()
    assert f"  Controller: {leader}" in text
    status = cli(cluster.bootstrap, "cluster", "quorum", "--status")
    assert f"ClusterId:              {healthy['cluster_id']}" in status
    assert f"LeaderId:               {leader}" in status

    victim = min({1, 2, 3} - {leader})
    cluster.kill(victim)
    survivors = ",".join(f"127.0.0.1:{cluster.client_ports[n]}" for n in (1, 2, 3) if n != victim)

    def degraded() -> Any:
        document = info(survivors)
        fenced = [b["node_id"] for b in document["brokers"] if b["fenced"]]
        return document if fenced == [victim] and document["partitions"][
            "under_replicated_count"] >= 3 else None

    down = wait_until(degraded, timeout_s=40, what=f"node {victim} fenced")
    assert [b["node_id"] for b in down["brokers"]] == [1, 2, 3]  # fenced ones are listed too
    under = [(p["topic"], p["partition"]) for p in down["partitions"]["under_replicated"]]
    assert {("orders", 0), ("orders", 1), ("orders", 2)} <= set(under)
    assert all(victim not in p["isr"] for p in down["partitions"]["under_replicated"])
    assert down["partitions"]["offline_count"] == 0
    lagging = {r["node_id"]: r for r in down["quorum"]["replicas"]}[victim]
    assert lagging["status"] == "Follower" and lagging["lag"] > 0  # the fencing came after it

    table = cli(survivors, "cluster", "quorum", "--replication").splitlines()
    assert table[0].split() == ["NodeId", "DirectoryId", "LogEndOffset", "Lag",
                                "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    rows = {int(line.split()[0]): line.split() for line in table[1:]}
    assert rows[down["quorum"]["leader_id"]][-1] == "Leader"
    assert int(rows[victim][3]) > 0


def test_a_single_node_is_its_own_quorum(broker) -> None:  # type: ignore[no-untyped-def]
    cli(broker.bootstrap, "topics", "create", "orders", "--partitions", "2")
    document = info(broker.bootstrap)
    assert document["controller_id"] == 1
    assert document["brokers"] == [{"node_id": 1, "host": broker.host, "port": broker.port,
                                    "rack": None, "fenced": False}]
    quorum = document["quorum"]
    assert quorum["leader_id"] == 1 and quorum["high_watermark"] > 0
    [voter] = quorum["replicas"]
    assert (voter["node_id"], voter["status"], voter["lag"]) == (1, "Leader", 0)
    assert voter["log_end_offset"] == quorum["high_watermark"]
    assert voter["endpoints"] == [f"PLAINTEXT://{broker.host}:{broker.port}"]
    assert (document["partitions"]["partitions"], document["partitions"]["offline_count"],
            document["partitions"]["under_replicated_count"]) == (2, 0, 0)

    lines = cli(broker.bootstrap, "cluster", "info").splitlines()
    assert lines[lines.index("Brokers") + 2].split() == [
        "1", f"{broker.host}:{broker.port}", "-", "no"]
    assert lines[lines.index("Partitions") + 1] == (
        "  Topics: 1  Partitions: 2  Under-replicated: 0  Offline: 0")
    replication = cli(broker.bootstrap, "cluster", "quorum", "--replication").splitlines()
    assert replication[1].split()[-1] == "Leader" and len(replication) == 2
