"""Three real RaftNodes driven by hand: elect, replicate, commit, truncate a diverged
follower, catch a lagging follower up from a snapshot, observers, listeners."""

from __future__ import annotations

import pytest

from protocol.messages.fetch_request import FetchRequest
from protocol.messages.leader_change_message import LeaderChangeMessage
from replication.raft.config import RaftConfig
from replication.raft.errors import NotLeaderError
from replication.raft.log import SnapshotId
from replication.raft.quorum_state import ElectionState
from tests.unit.replication.raft.cluster import Cluster


def committed_values(cluster: Cluster, node_id: int) -> list[bytes | None]:
    log = cluster.logs[node_id]
    values: list[bytes | None] = []
    for base, _epoch, batch_values, is_control in log.batches_from(log.start_offset):
        if base >= log.high_watermark:
            break
        if not is_control:
            values.extend(batch_values)
    return values


def test_first_election_writes_leader_change_and_commits_it() -> None:
    cluster = Cluster()
    leader = cluster.elect()
    cluster.settle()
    assert leader.epoch == 1
    assert {n.role for n in cluster.nodes.values()} == {"leader", "follower"}
    (base, epoch, values, is_control), *_ = leader.log.batches_from(0)
    assert (base, epoch, is_control) == (0, 1, True)
    change = LeaderChangeMessage.decode(values[0] or b"", 0)
    assert change.leader_id == leader.node_id
    assert [v.voter_id for v in change.voters] == [1, 2, 3]
    cluster.advance(1)
    cluster.settle()
    for node_id, node in cluster.nodes.items():
        assert node.high_watermark == 1, node_id
        assert cluster.stores[node_id].read() is not None
        assert cluster.stores[node_id].read().epoch == 1  # type: ignore[union-attr]


def test_proposals_commit_on_every_node_and_listeners_hear_of_it() -> None:
    cluster = Cluster()
    leader = cluster.elect()
    heard: list[tuple[str, object]] = []

    class Listener:
        def on_leader_change(self, epoch: int, leader_id: int | None) -> None:
            heard.append(("leader", (epoch, leader_id)))

        def on_high_watermark(self, high_watermark: int) -> None:
            heard.append(("hw", high_watermark))

        def on_snapshot_installed(self, snapshot_id: SnapshotId) -> None:
            heard.append(("snapshot", snapshot_id))

    follower = cluster.nodes[next(i for i in cluster.nodes if i != leader.node_id)]
    follower.listeners.append(Listener())
    last = leader.propose(cluster.now_ms, [b"a", b"b"])
    last = leader.propose(cluster.now_ms, [b"c"])
    assert last == 3
    cluster.run_until(lambda: all(n.high_watermark == 4 for n in cluster.nodes.values()))
    for node_id in cluster.nodes:
        assert committed_values(cluster, node_id) == [b"a", b"b", b"c"]
    assert ("leader", (1, leader.node_id)) in heard
    assert heard[-1] == ("hw", 4)
    with pytest.raises(NotLeaderError):
        follower.propose(cluster.now_ms, [b"x"])


def test_diverged_follower_truncates_to_the_new_leader() -> None:
    cluster = Cluster(seed=3)
    old = cluster.elect()
    cluster.run_until(lambda: all(n.high_watermark == 1 for n in cluster.nodes.values()))
    cluster.isolated.add(old.node_id)
    old.propose(cluster.now_ms, [b"lost-1"])
    old.propose(cluster.now_ms, [b"lost-2"])
    cluster.advance(1)  # flushed on the old leader, reaches no one
    assert old.log.end_offset == 3
    cluster.run_until(lambda: (cluster.leader() or old) is not old and cluster.leader() is not None)
    new = cluster.leader()
    assert new is not None and new.epoch > old.epoch
    new.propose(cluster.now_ms, [b"kept"])
    cluster.isolated.clear()
    cluster.run_until(
        lambda: all(n.high_watermark == new.log.end_offset for n in cluster.nodes.values())
    )
    assert old.role in ("follower", "unattached", "voted") or old.leader_id == new.node_id
    for node_id in cluster.nodes:
        assert committed_values(cluster, node_id) == [b"kept"]
        assert cluster.logs[node_id].read(0, 1 << 20) == new.log.read(0, 1 << 20)


def test_lagging_follower_catches_up_from_a_snapshot_in_chunks() -> None:
    cluster = Cluster(config=RaftConfig(fetch_max_bytes=256), seed=1)
    leader = cluster.elect()
    lagging = next(i for i in cluster.nodes if i != leader.node_id)
    cluster.crash(lagging)
    for i in range(20):
        leader.propose(cluster.now_ms, [b"v%02d" % i])
        cluster.deliver()
        cluster.advance(1)
    cluster.run_until(lambda: leader.high_watermark == leader.log.end_offset)
    snapshot_id = SnapshotId(leader.log.high_watermark, leader.epoch)
    payload = bytes(range(256)) * 4  # 1 KiB: four chunks of fetch_max_bytes
    leader.log.create_snapshot(snapshot_id, payload)
    leader.log.delete_before_snapshot(snapshot_id)
    assert leader.log.start_offset == snapshot_id.end_offset
    installed: list[SnapshotId] = []

    class Listener:
        def on_leader_change(self, epoch: int, leader_id: int | None) -> None: ...

        def on_high_watermark(self, high_watermark: int) -> None: ...

        def on_snapshot_installed(self, snapshot_id: SnapshotId) -> None:
            installed.append(snapshot_id)

    restarted = cluster.start(lagging)
    restarted.listeners.append(Listener())
    leader.propose(cluster.now_ms, [b"after"])
    cluster.run_until(lambda: restarted.high_watermark == leader.log.end_offset)
    assert installed == [snapshot_id]
    log = cluster.logs[lagging]
    assert log.latest_snapshot_id() == snapshot_id
    assert log.read_snapshot(snapshot_id, 0, 1 << 20) == (payload, len(payload))
    assert log.start_offset == snapshot_id.end_offset
    assert committed_values(cluster, lagging) == [b"after"]


def test_observer_finds_the_leader_and_replicates_without_counting() -> None:
    cluster = Cluster(observer_ids=(9,))
    leader = cluster.elect()
    observer = cluster.nodes[9]
    assert observer.role == "follower" and not observer.is_voter
    leader.propose(cluster.now_ms, [b"x"])
    cluster.run_until(lambda: observer.high_watermark == 2)
    description = leader.describe_quorum(cluster.now_ms)
    assert [r.replica_id for r in description.observers] == [9]
    assert [r.replica_id for r in description.voters] == [1, 2, 3]
    assert description.high_watermark == 2


def test_observer_does_not_make_a_majority() -> None:
    cluster = Cluster(observer_ids=(9,))
    leader = cluster.elect()
    cluster.run_until(lambda: leader.high_watermark == 1)
    others = [i for i in cluster.voter_ids if i != leader.node_id]
    cluster.isolated.update(others)
    leader.propose(cluster.now_ms, [b"x"])
    for _ in range(200):
        cluster.deliver()
        cluster.advance(1)
    assert cluster.nodes[9].log.end_offset == 2  # the observer has it ...
    assert leader.high_watermark == 1  # ... but only voters commit


def test_leader_without_a_majority_resigns_after_check_quorum_timeout() -> None:
    config = RaftConfig()
    cluster = Cluster(config=config)
    leader = cluster.elect()
    cluster.isolated.update(i for i in cluster.voter_ids if i != leader.node_id)
    start = cluster.now_ms
    cluster.run_until(lambda: leader.role != "leader", limit_ms=10_000)
    assert leader.role == "resigned"
    elapsed = cluster.now_ms - start
    # the deadline runs from the last time a majority fetched, just before the cut
    timeout = config.check_quorum_timeout_ms
    assert timeout - config.fetch_max_wait_ms <= elapsed <= timeout


def test_graceful_resign_hands_over_quickly() -> None:
    cluster = Cluster(seed=5)
    leader = cluster.elect()
    cluster.run_until(lambda: all(n.high_watermark == 1 for n in cluster.nodes.values()))
    start, epoch = cluster.now_ms, leader.epoch
    leader.shutdown(cluster.now_ms)
    assert leader.role == "resigned"
    cluster.run_until(lambda: cluster.leader() is not None and cluster.leader() is not leader)
    assert cluster.now_ms - start < cluster.config.election_timeout_ms
    assert cluster.leader().epoch == epoch + 1  # type: ignore[union-attr]


def test_restarted_leader_resigns_and_does_not_vote_again_in_its_epoch() -> None:
    cluster = Cluster()
    leader = cluster.elect()
    cluster.settle()
    node_id = leader.node_id
    cluster.crash(node_id)
    restarted = cluster.start(node_id)
    assert restarted.role == "resigned" and restarted.epoch == 1
    assert cluster.stores[node_id].read() == ElectionState(1, node_id, None)


def test_single_voter_elects_itself_and_commits_on_flush() -> None:
    cluster = Cluster(voter_ids=(1,))
    node = cluster.nodes[1]
    assert node.role == "leader" and node.epoch == 1
    node.propose(cluster.now_ms, [b"solo"])
    assert node.next_wakeup_ms(cluster.now_ms) == cluster.now_ms  # a flush is due
    cluster.advance(0)
    assert node.high_watermark == 2 and node.log.flushed_end_offset == 2


def test_fetches_with_nothing_new_are_held_until_data_arrives() -> None:
    cluster = Cluster()
    leader = cluster.elect()
    cluster.run_until(lambda: all(n.high_watermark == 1 for n in cluster.nodes.values()))
    cluster.settle()
    cluster.collect()
    assert not cluster.in_flight  # both followers' fetches are held by the leader
    assert len(leader.state.held_fetches) == 2  # type: ignore[union-attr]
    leader.propose(cluster.now_ms, [b"x"])
    cluster.collect()
    answered = [s for _, s in cluster.in_flight if s.is_response]
    assert len(answered) == 2
    cluster.in_flight.clear()


def test_held_fetch_expires_at_max_wait() -> None:
    cluster = Cluster()
    leader = cluster.elect()
    cluster.run_until(lambda: all(n.high_watermark == 1 for n in cluster.nodes.values()))
    cluster.settle()
    cluster.collect()
    assert not cluster.in_flight
    cluster.advance(cluster.config.fetch_max_wait_ms - 1)
    cluster.collect()
    assert not cluster.in_flight
    cluster.advance(1)
    cluster.collect()
    assert sum(1 for _, s in cluster.in_flight if s.is_response) == 2
    assert leader.role == "leader"


def test_fetch_from_a_stale_epoch_is_fenced_and_names_the_leader() -> None:
    cluster = Cluster()
    leader = cluster.elect()
    cluster.settle()
    request = FetchRequest()
    from replication.raft import messages
    from replication.raft.node import RaftRequest

    request = messages.fetch_request(
        None, replica_id=9, epoch=0, fetch_offset=0, last_fetched_epoch=0,
        max_wait_ms=0, max_bytes=1024,
    )  # fmt: skip
    leader.handle_request(cluster.now_ms, RaftRequest(9, 77, request))
    (send,) = [s for s in leader.take_sends() if s.request_id == 77]
    partition = messages.only_partition(send.message)
    assert partition.error_code == 74  # FENCED_LEADER_EPOCH
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (
        leader.node_id,
        leader.epoch,
    )
