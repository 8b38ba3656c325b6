"""The pure parts of the admin client's cluster calls: a DescribeQuorum response (through the wire
at each version) as a ``QuorumInfo``, its errors as Kafka's classes, and the partition summary
checked against its definition on generated metadata."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import (
    ClusterAuthorizationFailedError,
    NotLeaderOrFollowerError,
    UnknownServerError,
)
from protocol.messages.describe_quorum_response import (
    DescribeQuorumResponse,
    Listener,
    Node,
    PartitionData,
    ReplicaState,
    TopicData,
)
from samsa._admin_cluster import quorum_info, summarize_partitions
from samsa.admin import QuorumNode, RaftVoterEndpoint
from samsa.types import BrokerInfo, PartitionInfo, TopicInfo

DIRECTORY = UUID("5d6e2e8a-8c6a-4b5e-9d0f-0a1b2c3d4e5f")


def response(*, leader_id: int = 2, version: int = 2, error_code: int = 0,
             partition_error: int = 0, topic: str = "__cluster_metadata"
             ) -> DescribeQuorumResponse:
    directory = DIRECTORY if version >= 2 else UUID(int=0)
    voters = [ReplicaState(replica_id=1, log_end_offset=90, last_fetch_timestamp=500,
                           last_caught_up_timestamp=400),
              ReplicaState(replica_id=2, replica_directory_id=directory, log_end_offset=100,
                           last_fetch_timestamp=-1, last_caught_up_timestamp=600)]
    message = DescribeQuorumResponse(error_code=error_code, topics=[TopicData(
        topic_name=topic, partitions=[PartitionData(
            partition_index=0, error_code=partition_error, leader_id=leader_id, leader_epoch=5,
            high_watermark=95, current_voters=voters,
            observers=[ReplicaState(replica_id=7, log_end_offset=80)])])])
    if version >= 2:
        message.nodes = [Node(node_id=n, listeners=[Listener("CONTROLLER", f"h{n}", 9000 + n)])
                         for n in (1, 2)]
    return DescribeQuorumResponse.decode(message.encode(version), version)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_quorum_at_every_version(version: int) -> None:
    quorum = quorum_info(response(version=version))
    assert (quorum.leader_id, quorum.leader_epoch, quorum.high_watermark) == (2, 5, 95)
    assert [(v.replica_id, v.log_end_offset, v.lag) for v in quorum.voters] == [
        (1, 90, 10), (2, 100, 0)]  # lag: the leader's log end offset minus the replica's
    assert [(o.replica_id, o.lag) for o in quorum.observers] == [(7, 20)]
    assert quorum.leader == quorum.voters[1]
    if version == 0:  # no timestamps before v1: unknown
        assert quorum.voters[0].last_fetch_timestamp is None
    else:
        assert (quorum.voters[0].last_fetch_timestamp,
                quorum.voters[0].last_caught_up_timestamp) == (500, 400)
        assert quorum.voters[1].last_fetch_timestamp is None  # -1 on the wire
        assert quorum.observers[0].last_caught_up_timestamp is None  # the default, -1
    if version == 2:
        assert quorum.voters[1].replica_directory_id == str(DIRECTORY)
        assert quorum.nodes[1] == QuorumNode(1, (RaftVoterEndpoint("CONTROLLER", "h1", 9001),))
    else:
        assert quorum.nodes == {}
    assert quorum.voters[0].replica_directory_id is None


def test_without_the_leader_among_the_voters_lag_is_to_the_high_watermark() -> None:
    quorum = quorum_info(response(leader_id=9))
    assert quorum.leader is None
    assert [v.lag for v in quorum.voters] == [5, -5]


def test_errors_are_raised_as_their_kafka_class() -> None:
    with pytest.raises(ClusterAuthorizationFailedError):
        quorum_info(response(error_code=ClusterAuthorizationFailedError.code))
    with pytest.raises(NotLeaderOrFollowerError) as raised:
        quorum_info(response(partition_error=NotLeaderOrFollowerError.code))
    assert raised.value.retriable  # retried by the admin client
    with pytest.raises(UnknownServerError, match="__cluster_metadata-0"):
        quorum_info(response(topic="orders"))


# --- the partition summary ---------------------------------------------------------------------

LIVE = {n: BrokerInfo(n, "h", 9092) for n in (1, 2, 3)}


def test_under_replicated_and_offline_partitions() -> None:
    healthy = PartitionInfo("a", 0, 1, replicas=(1, 2), isr=(2, 1))
    under = PartitionInfo("a", 1, 2, replicas=(1, 2, 3), isr=(2,))
    leaderless = PartitionInfo("b", 0, -1, replicas=(4,), isr=(4,))
    gone = PartitionInfo("b", 1, 4, replicas=(4, 1), isr=(4,))  # leader 4 is not live
    topics = [TopicInfo("b", {1: gone, 0: leaderless}), TopicInfo("a", {1: under, 0: healthy})]
    summary = summarize_partitions(topics, LIVE)
    assert (summary.topic_count, summary.partition_count) == (2, 4)
    assert summary.under_replicated == (under, gone)
    assert summary.offline == (leaderless, gone)


partition_shapes = st.tuples(
    st.integers(-1, 4),                                       # leader (4: not live)
    st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True),  # replicas
    st.integers(0, 3),                                        # how many of them are in sync
)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.sampled_from("abcd"), st.lists(partition_shapes, max_size=4),
                       max_size=4))
def test_summary_matches_its_definition(shapes: dict[str, list[tuple[int, list[int], int]]]) -> None:
    topics = [TopicInfo(name, {i: PartitionInfo(name, i, leader, replicas=tuple(replicas),
                                                isr=tuple(replicas[:in_sync]))
                               for i, (leader, replicas, in_sync) in enumerate(listed)})
              for name, listed in shapes.items()]
    every = sorted((p for t in topics for p in t.partitions.values()),
                   key=lambda p: (p.topic, p.partition))
    summary = summarize_partitions(reversed(topics), LIVE)
    assert summary.partition_count == len(every)
    assert list(summary.under_replicated) == [p for p in every if len(p.isr) < len(p.replicas)]
    assert list(summary.offline) == [p for p in every if p.leader not in LIVE]
