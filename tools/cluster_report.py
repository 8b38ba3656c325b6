"""What ``samsa cluster info`` and ``samsa cluster quorum`` print, as pure functions of the admin
client's values (no I/O but the ``file`` they write to): one JSON-ready document, and the text
rendered from that same document, so ``--json`` and the text always carry the same content.

Document (``info_document``)::

    {"cluster_id", "controller_id",
     "brokers": [{"node_id", "host", "port", "rack", "fenced"}],            # by node id
     "quorum": {"leader_id", "leader_epoch", "high_watermark",
                "max_follower_lag", "max_follower_lag_time_ms",
                "replicas": [{"node_id", "directory_id", "log_end_offset", "lag",
                              "last_fetch_timestamp", "last_caught_up_timestamp",
                              "status", "endpoints"}]}                     # or {"error": text}
     "partitions": {"topics", "partitions", "under_replicated_count", "offline_count",
                    "under_replicated": [{"topic", "partition", "leader", "replicas", "isr"}],
                    "offline": [...]}}

The quorum follows ``kafka-metadata-quorum describe``: replicas in the order leader, the other
voters, observers (Status Leader / Follower / Observer); ``lag`` is the leader's log end offset
minus the replica's; unknown timestamps are null in JSON and -1 in text, as Kafka prints them;
``max_follower_lag`` is the leader's log end offset minus the smallest voter's, and
``max_follower_lag_time_ms`` the leader's last caught-up time minus that voter's (0 when it is
the leader, -1 when a time is unknown).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from samsa.admin import ClusterDescription, PartitionSummary, QuorumInfo, ReplicaState
    from samsa.types import PartitionInfo

__all__ = ["REPLICATION_HEADINGS", "info_document", "partitions_document", "quorum_document",
           "render_info", "render_replication", "render_status", "replication_cells"]

REPLICATION_HEADINGS = ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                        "LastCaughtUpTimestamp", "Status")
_REPLICATION_KEYS = ("node_id", "directory_id", "log_end_offset", "lag", "last_fetch_timestamp",
                     "last_caught_up_timestamp", "status")


# --- documents ---------------------------------------------------------------------------------

def info_document(cluster: ClusterDescription, quorum: QuorumInfo | str,
                  partitions: PartitionSummary) -> dict[str, Any]:
    """``cluster info``'s document; ``quorum`` is the error text when it could not be read."""
    return {
        "cluster_id": cluster.cluster_id,
        "controller_id": cluster.controller_id,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                     "fenced": b.fenced} for b in cluster.brokers],
        "quorum": {"error": quorum} if isinstance(quorum, str) else quorum_document(quorum),
        "partitions": partitions_document(partitions),
    }


def quorum_document(quorum: QuorumInfo) -> dict[str, Any]:
    lag, lag_time_ms = _max_follower_lag(quorum)
    return {
        "leader_id": quorum.leader_id,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "max_follower_lag": lag,
        "max_follower_lag_time_ms": lag_time_ms,
        "replicas": [_replica_document(quorum, replica, status)
                     for replica, status in _replicas_in_order(quorum)],
    }


def _replicas_in_order(quorum: QuorumInfo) -> list[tuple[ReplicaState, str]]:
    leader = [(v, "Leader") for v in quorum.voters if v.replica_id == quorum.leader_id]
    followers = [(v, "Follower") for v in quorum.voters if v.replica_id != quorum.leader_id]
    return leader + followers + [(o, "Observer") for o in quorum.observers]


def _replica_document(quorum: QuorumInfo, replica: ReplicaState, status: str) -> dict[str, Any]:
    node = quorum.nodes.get(replica.replica_id)
    endpoints = [] if node is None else [_endpoint_text(e.name, e.host, e.port)
                                         for e in node.endpoints]
    return {
        "node_id": replica.replica_id,
        "directory_id": replica.replica_directory_id,
        "log_end_offset": replica.log_end_offset,
        "lag": replica.lag,
        "last_fetch_timestamp": replica.last_fetch_timestamp,
        "last_caught_up_timestamp": replica.last_caught_up_timestamp,
        "status": status,
        "endpoints": endpoints,
    }


def _endpoint_text(name: str, host: str, port: int) -> str:
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def _max_follower_lag(quorum: QuorumInfo) -> tuple[int, int]:
    """(entries, ms) the furthest voter is behind the leader, as ``describe --status``."""
    leader = quorum.leader
    if leader is None or not quorum.voters:
        return -1, -1
    furthest = min(quorum.voters, key=lambda voter: voter.log_end_offset)
    lag = leader.log_end_offset - furthest.log_end_offset
    if furthest is leader:
        return lag, 0
    if leader.last_caught_up_timestamp is None or furthest.last_caught_up_timestamp is None:
        return lag, -1
    return lag, leader.last_caught_up_timestamp - furthest.last_caught_up_timestamp


def partitions_document(summary: PartitionSummary) -> dict[str, Any]:
    return {
        "topics": summary.topic_count,
        "partitions": summary.partition_count,
        "under_replicated_count": len(summary.under_replicated),
        "offline_count": len(summary.offline),
        "under_replicated": [_partition_document(p) for p in summary.under_replicated],
        "offline": [_partition_document(p) for p in summary.offline],
    }


def _partition_document(partition: PartitionInfo) -> dict[str, Any]:
    return {"topic": partition.topic, "partition": partition.partition,
            "leader": partition.leader, "replicas": list(partition.replicas),
            "isr": list(partition.isr)}


# --- text --------------------------------------------------------------------------------------

def render_info(document: Mapping[str, Any], out: TextIO) -> None:
    """``cluster info``'s text: the sections Cluster, Brokers, Quorum, Partitions."""
    controller = document["controller_id"]
    print("Cluster", file=out)
    print(f"  Cluster ID: {document['cluster_id']}", file=out)
    print(f"  Controller: {controller if controller >= 0 else 'none'}", file=out)
    print(file=out)
    print("Brokers", file=out)
    _table(["ID", "HOST:PORT", "RACK", "FENCED"], [
        [b["node_id"], f"{b['host']}:{b['port']}", b["rack"] or "-",
         "yes" if b["fenced"] else "no"] for b in document["brokers"]], out, indent="  ")
    print(file=out)
    print("Quorum", file=out)
    _render_quorum_section(document["quorum"], out)
    print(file=out)
    print("Partitions", file=out)
    _render_partitions_section(document["partitions"], out)


def _render_quorum_section(quorum: Mapping[str, Any], out: TextIO) -> None:
    if "error" in quorum:
        print(f"  unavailable: {quorum['error']}", file=out)
        return
    print(f"  Leader: {quorum['leader_id']}  Epoch: {quorum['leader_epoch']}  "
          f"HighWatermark: {quorum['high_watermark']}", file=out)
    render_replication(quorum, out, indent="  ")


def _render_partitions_section(partitions: Mapping[str, Any], out: TextIO) -> None:
    print(f"  Topics: {partitions['topics']}  Partitions: {partitions['partitions']}  "
          f"Under-replicated: {partitions['under_replicated_count']}  "
          f"Offline: {partitions['offline_count']}", file=out)
    for key, title in (("under_replicated", "Under-replicated"), ("offline", "Offline")):
        if partitions[key]:
            print(f"  {title}:", file=out)
            _table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"], [
                [p["topic"], p["partition"], p["leader"], _ids(p["replicas"]), _ids(p["isr"])]
                for p in partitions[key]], out, indent="    ")


def render_replication(quorum: Mapping[str, Any], out: TextIO, *, indent: str = "",
                       now_ms: int | None = None) -> None:
    """The ``describe --replication`` table; with ``now_ms``, times as "N ms ago"."""
    _table(list(REPLICATION_HEADINGS),
           [replication_cells(replica, now_ms) for replica in quorum["replicas"]], out,
           indent=indent)


def replication_cells(replica: Mapping[str, Any], now_ms: int | None = None) -> list[str]:
    cells = []
    for key in _REPLICATION_KEYS:
        value = replica[key]
        if key.endswith("_timestamp"):
            value = _timestamp_text(value, now_ms)
        elif key == "directory_id" and value is None:
            value = "-"
        cells.append(str(value))
    return cells


def _timestamp_text(timestamp_ms: int | None, now_ms: int | None) -> str:
    if timestamp_ms is None:
        return "-1"
    if now_ms is None:
        return str(timestamp_ms)
    return f"{max(now_ms - timestamp_ms, 0)} ms ago"


def render_status(cluster_id: str | None, quorum: Mapping[str, Any], out: TextIO) -> None:
    """The ``describe --status`` summary."""
    replicas = quorum["replicas"]
    voters = [r for r in replicas if r["status"] != "Observer"]
    observers = [r for r in replicas if r["status"] == "Observer"]
    lines = [("ClusterId", cluster_id), ("LeaderId", quorum["leader_id"]),
             ("LeaderEpoch", quorum["leader_epoch"]), ("HighWatermark", quorum["high_watermark"]),
             ("MaxFollowerLag", quorum["max_follower_lag"]),
             ("MaxFollowerLagTimeMs", quorum["max_follower_lag_time_ms"]),
             ("CurrentVoters", _node_list(voters)), ("CurrentObservers", _node_list(observers))]
    for name, value in lines:
        print(f"{name + ':':<24}{value}", file=out)


def _node_list(replicas: Iterable[Mapping[str, Any]]) -> str:
    """Kafka's node list: ``[{"id": 1, "directoryId": null, "endpoints": [...]}, ...]``."""
    nodes = []
    for replica in sorted(replicas, key=lambda r: r["node_id"]):
        node: dict[str, Any] = {"id": replica["node_id"], "directoryId": replica["directory_id"]}
        if replica["endpoints"]:
            node["endpoints"] = replica["endpoints"]
        nodes.append(json.dumps(node))
    return "[" + ", ".join(nodes) + "]"


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids) or "-"


def _table(headings: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO, *,
           indent: str = "") -> None:
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headings)]
    for line in [list(headings), *cells]:
        text = "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip()
        print(indent + text, file=out)
