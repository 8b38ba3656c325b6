"""``samsa cluster info`` / ``samsa cluster quorum``'s documents and text, from hand-built admin
values (no broker, no socket): Kafka's ``kafka-metadata-quorum describe`` rules for the replica
order, lag, unknown timestamps and the max follower lag; the sections of ``cluster info``."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from samsa.admin import (
    ClusterDescription,
    PartitionSummary,
    QuorumInfo,
    QuorumNode,
    RaftVoterEndpoint,
    ReplicaState,
)
from samsa.types import BrokerInfo, PartitionInfo
from tools.cli import main
from tools.cluster_report import (
    REPLICATION_HEADINGS,
    info_document,
    quorum_document,
    render_info,
    render_replication,
    render_status,
    replication_cells,
)

CLUSTER = ClusterDescription("abc", 2, (
    BrokerInfo(1, "h1", 9092, "rack-a"),
    BrokerInfo(2, "h2", 9093, None),
    BrokerInfo(3, "h3", 9094, "rack-c", fenced=True),
))


def replica(node_id: int, end: int, lag: int, fetch: int | None = 1000,
            caught_up: int | None = 1000) -> ReplicaState:
    return ReplicaState(node_id, end, lag, fetch, caught_up)


QUORUM = QuorumInfo(
    leader_id=2, leader_epoch=7, high_watermark=40,
    voters=(replica(1, 38, 4, 900, 800), replica(2, 42, 0, 1000, 1000), replica(3, 42, 0, None, None)),
    observers=(replica(4, 30, 12, 950, 700),),
    nodes={n: QuorumNode(n, (RaftVoterEndpoint("CONTROLLER", f"h{n}", 9100 + n),)) for n in (1, 2, 3)},
)
UNDER = PartitionInfo("orders", 1, 1, replicas=(1, 2, 3), isr=(1, 2))
OFFLINE = PartitionInfo("orders", 2, -1, replicas=(3,), isr=())
SUMMARY = PartitionSummary(topic_count=2, partition_count=5, under_replicated=(UNDER,),
                           offline=(OFFLINE,))


def text(render: Any, *args: Any, **kwargs: Any) -> str:
    out = io.StringIO()
    render(*args, out, **kwargs)
    return out.getvalue()


# --- the quorum ----------------------------------------------------------------------------------

def test_replicas_are_leader_then_followers_then_observers() -> None:
    replicas = quorum_document(QUORUM)["replicas"]
    assert [(r["node_id"], r["status"]) for r in replicas] == [
        (2, "Leader"), (1, "Follower"), (3, "Follower"), (4, "Observer")]


def test_unknown_timestamps_are_null_in_json_and_minus_one_in_text() -> None:
    follower = quorum_document(QUORUM)["replicas"][2]
    assert (follower["last_fetch_timestamp"], follower["last_caught_up_timestamp"]) == (None, None)
    assert replication_cells(follower) == ["3", "-", "42", "0", "-1", "-1", "Follower"]


def test_replication_table_has_kafkas_headings_and_one_row_per_replica() -> None:
    lines = text(render_replication, quorum_document(QUORUM)).splitlines()
    assert lines[0].split() == list(REPLICATION_HEADINGS)
    assert [line.split() for line in lines[1:]] == [
        ["2", "-", "42", "0", "1000", "1000", "Leader"],
        ["1", "-", "38", "4", "900", "800", "Follower"],
        ["3", "-", "42", "0", "-1", "-1", "Follower"],
        ["4", "-", "30", "12", "950", "700", "Observer"]]


def test_human_readable_times_are_relative_to_now() -> None:
    cells = replication_cells(quorum_document(QUORUM)["replicas"][1], now_ms=1500)
    assert cells[4:6] == ["600 ms ago", "700 ms ago"]


def test_max_follower_lag_is_measured_to_the_furthest_voter() -> None:
    document = quorum_document(QUORUM)
    # voter 1 is 4 behind the leader; caught up 1000 - 800 ms before the leader's last append
    assert (document["max_follower_lag"], document["max_follower_lag_time_ms"]) == (4, 200)


@pytest.mark.parametrize(("voters", "expected"), [
    ((replica(2, 42, 0),), (0, 0)),                                  # the leader alone
    ((replica(1, 40, 2, None, None), replica(2, 42, 0)), (2, -1)),  # time unknown
])
def test_max_follower_lag_edge_cases(voters: tuple[ReplicaState, ...],
                                     expected: tuple[int, int]) -> None:
    quorum = QuorumInfo(leader_id=2, leader_epoch=1, high_watermark=42, voters=voters)
    document = quorum_document(quorum)
    assert (document["max_follower_lag"], document["max_follower_lag_time_ms"]) == expected


def test_status_lists_voters_with_their_endpoints_like_kafka() -> None:
    lines = dict(line.split(":", 1) for line in
                 text(render_status, "abc", quorum_document(QUORUM)).splitlines())
    assert lines["ClusterId"].strip() == "abc"
    assert lines["LeaderId"].strip() == "2"
    assert lines["MaxFollowerLag"].strip() == "4"
    assert json.loads(lines["CurrentVoters"]) == [
        {"id": n, "directoryId": None, "endpoints": [f"CONTROLLER://h{n}:{9100 + n}"]}
        for n in (1, 2, 3)]
    assert json.loads(lines["CurrentObservers"]) == [{"id": 4, "directoryId": None}]
    assert text(render_status, "abc", quorum_document(QUORUM)).startswith(
        "ClusterId:              abc\nLeaderId:               2\n")


def test_an_ipv6_endpoint_is_bracketed() -> None:
    quorum = QuorumInfo(leader_id=1, leader_epoch=1, high_watermark=0, voters=(replica(1, 0, 0),),
                        nodes={1: QuorumNode(1, (RaftVoterEndpoint("CONTROLLER", "::1", 9093),))})
    assert quorum_document(quorum)["replicas"][0]["endpoints"] == ["CONTROLLER://[::1]:9093"]


# --- cluster info --------------------------------------------------------------------------------

def test_info_document_has_every_section() -> None:
    document = info_document(CLUSTER, QUORUM, SUMMARY)
    assert (document["cluster_id"], document["controller_id"]) == ("abc", 2)
    assert document["brokers"][2] == {"node_id": 3, "host": "h3", "port": 9094, "rack": "rack-c",
                                      "fenced": True}
    assert document["quorum"] == quorum_document(QUORUM)
    assert document["partitions"] == {
        "topics": 2, "partitions": 5, "under_replicated_count": 1, "offline_count": 1,
        "under_replicated": [{"topic": "orders", "partition": 1, "leader": 1,
                              "replicas": [1, 2, 3], "isr": [1, 2]}],
        "offline": [{"topic": "orders", "partition": 2, "leader": -1, "replicas": [3],
                     "isr": []}]}
    json.dumps(document)  # JSON-ready as it is


def test_info_text_sections() -> None:
    lines = text(render_info, info_document(CLUSTER, QUORUM, SUMMARY)).splitlines()
    assert lines[:3] == ["Cluster", "  Cluster ID: abc", "  Controller: 2"]
    brokers = lines.index("Brokers")
    assert [line.split() for line in lines[brokers + 1:brokers + 5]] == [
        ["ID", "HOST:PORT", "RACK", "FENCED"], ["1", "h1:9092", "rack-a", "no"],
        ["2", "h2:9093", "-", "no"], ["3", "h3:9094", "rack-c", "yes"]]
    quorum = lines.index("Quorum")
    assert lines[quorum + 1] == "  Leader: 2  Epoch: 7  HighWatermark: 40"
    assert lines[quorum + 2].split() == list(REPLICATION_HEADINGS)
    partitions = lines.index("Partitions")
    assert lines[partitions + 1] == "  Topics: 2  Partitions: 5  Under-replicated: 1  Offline: 1"
    assert lines[partitions + 2:] == [
        "  Under-replicated:",
        "    TOPIC   PARTITION  LEADER  REPLICAS  ISR",
        "    orders  1          1       1,2,3     1,2",
        "  Offline:",
        "    TOPIC   PARTITION  LEADER  REPLICAS  ISR",
        "    orders  2          -1      3         -"]


def test_healthy_partitions_print_only_the_counts() -> None:
    lines = text(render_info, info_document(CLUSTER, QUORUM, PartitionSummary(1, 3))).splitlines()
    assert lines[-2:] == ["Partitions", "  Topics: 1  Partitions: 3  Under-replicated: 0  Offline: 0"]


def test_a_quorum_that_could_not_be_read_is_reported_in_its_section() -> None:
    no_controller = ClusterDescription("abc", -1, CLUSTER.brokers)
    document = info_document(no_controller, "KafkaTimeoutError: no leader", SUMMARY)
    assert document["quorum"] == {"error": "KafkaTimeoutError: no leader"}
    lines = text(render_info, document).splitlines()
    assert "  Controller: none" in lines
    assert lines[lines.index("Quorum") + 1] == "  unavailable: KafkaTimeoutError: no leader"


def test_human_readable_without_replication_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cluster", "quorum", "--human-readable", "--bootstrap-server", "unused:1"])
    assert code == 2
    assert "--human-readable is only supported along with --replication" in capsys.readouterr().err


def test_status_and_replication_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["cluster", "quorum", "--status", "--replication"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
