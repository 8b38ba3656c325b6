"""ElectLeaders, auto leader rebalance and unclean elections of leaderless partitions."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode, InvalidRequestError
from protocol.messages.metadata.config_record import ConfigRecord
from replication.controller.elections import (
    ElectionType,
    imbalanced_partitions,
    plan_balance_partition_leaders,
    plan_elect_leaders,
    plan_elect_unclean_leaders,
)
from replication.metadata.image import RECOVERING, TOPIC_RESOURCE_TYPE
from tests.unit.replication.controller.cluster import Cluster


@pytest.fixture
def cluster() -> Cluster:
    """t-0 [1,2,3] led by 2 (1 came back); t-1 [2,3] led by 2; u-0 [3,1] leaderless (ISR [3],
    3 fenced); v-0 [1,2] with 1 out of the ISR."""
    cluster = Cluster()
    cluster.start_brokers([1, 2, 3])
    cluster.add_topic("t", [[1, 2, 3], [2, 3]], isrs=[[2, 3, 1], [2, 3]])
    cluster.add_topic("u", [[3, 1]], isrs=[[3]])
    cluster.add_topic("v", [[1, 2]], isrs=[[2]])
    cluster.heartbeat(3, want_fence=True)
    return cluster


def codes(results) -> dict[tuple[str, int], int]:  # type: ignore[no-untyped-def]
    return {(r.topic, r.partition_id): r.error_code for r in results}


def test_preferred_elections(cluster: Cluster) -> None:
    results, records = plan_elect_leaders(
        cluster.image, ElectionType.PREFERRED, [("t", [0, 1, 7]), ("u", [0]), ("v", [0]), ("w", [0])])
    assert codes(results) == {
        ("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
        ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("u", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ("v", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ("w", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    cluster.apply(records)
    assert cluster.partition("t").leader == 1


def test_unclean_elections(cluster: Cluster) -> None:
    results, records = plan_elect_leaders(cluster.image, ElectionType.UNCLEAN, [("u", [0]), ("t", [0])])
    assert codes(results) == {("u", 0): ErrorCode.NONE, ("t", 0): ErrorCode.ELECTION_NOT_NEEDED}
    cluster.apply(records)
    after = cluster.partition("u")
    assert (after.leader, after.isr, after.leader_recovery_state) == (1, (1,), RECOVERING)


def test_unclean_election_without_a_live_replica(cluster: Cluster) -> None:
    cluster.heartbeat(1, want_fence=True)
    results, _ = plan_elect_leaders(cluster.image, ElectionType.UNCLEAN, [("u", [0])])
    assert codes(results) == {("u", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}


def test_all_partitions_leave_out_the_ones_not_needing_an_election(cluster: Cluster) -> None:
    results, _ = plan_elect_leaders(cluster.image, ElectionType.PREFERRED, None)
    assert codes(results) == {("t", 0): ErrorCode.NONE,
                              ("u", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                              ("v", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}


def test_unknown_election_type(cluster: Cluster) -> None:
    with pytest.raises(InvalidRequestError):
        plan_elect_leaders(cluster.image, 7, None)


def test_rebalance_selects_brokers_above_the_imbalance_percentage() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2])
    # broker 1 is preferred for 10 partitions and leads 9 of them: 10% is not above 10%
    layout = [[1, 2]] * 10 + [[2, 1]] * 2
    isrs = [[1, 2]] * 9 + [[2, 1]] + [[1, 2], [2, 1]]
    cluster.add_topic("t", layout, isrs=isrs)
    assert [(t.name, p.partition_id) for t, p in imbalanced_partitions(cluster.image)] == [("t", 10)]
    assert len(imbalanced_partitions(cluster.image, 0)) == 2  # KRaft: every one
    records, more = plan_balance_partition_leaders(cluster.image)
    assert not more
    cluster.apply(records)
    assert cluster.partition("t", 10).leader == 2
    records, more = plan_balance_partition_leaders(cluster.image, imbalance_percentage=0,
                                                   max_elections=1)
    assert more and len(records) == 1


def test_rebalance_skips_inactive_preferred_leaders_and_reassignments() -> None:
    cluster = Cluster()
    cluster.start_brokers([1, 2])
    cluster.add_topic("t", [[1, 2]], isrs=[[2, 1]])
    cluster.heartbeat(1, want_fence=True)
    assert imbalanced_partitions(cluster.image) == []


def test_unclean_elections_of_leaderless_partitions_follow_the_topic_config(cluster: Cluster) -> None:
    assert plan_elect_unclean_leaders(cluster.image) == ([], False)
    cluster.apply([ConfigRecord(resource_type=TOPIC_RESOURCE_TYPE, resource_name="u",
                                name="unclean.leader.election.enable", value="true")])
    records, more = plan_elect_unclean_leaders(cluster.image)
    assert len(records) == 1 and not more
    cluster.apply(records)
    assert cluster.partition("u").leader == 1
