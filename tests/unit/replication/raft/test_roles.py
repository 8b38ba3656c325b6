"""Role transitions of one RaftNode (node 1 of voters 1, 2, 3), table-driven.

Each row: a starting role (built from a stored election state, as after a restart), one
input, and the expected role, epoch, leader, vote, stored state and response.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest

from protocol.errors import ErrorCode
from replication.raft import messages
from replication.raft.config import RaftConfig
from replication.raft.memory_log import MemoryRaftLog
from replication.raft.node import RaftNode, RaftRequest, RaftResponse
from replication.raft.quorum_state import ElectionState, MemoryQuorumStateStore

CONFIG = RaftConfig()
NONE = int(ErrorCode.NONE)
FENCED = int(ErrorCode.FENCED_LEADER_EPOCH)


def make_node(start: str, epoch: int = 5, *, log_epoch: int = 0, log_records: int = 0,
              seed: int = 0) -> tuple[
    RaftNode, MemoryQuorumStateStore
]:  # fmt: skip
    log = MemoryRaftLog()
    for _ in range(log_records):
        log.append_as_leader([b"r"], log_epoch, 0)
    log.flush()
    stored = {
        "unattached": ElectionState(epoch),
        "voted": ElectionState(epoch, None, 2),
        "follower": ElectionState(epoch, 2, None),
        "candidate": ElectionState(epoch, None, 1),
        "resigned": ElectionState(epoch, 1, None),
        "leader": ElectionState(epoch - 1),
    }[start]
    store = MemoryQuorumStateStore(stored)
    node = RaftNode(
        node_id=1, voter_ids=(1, 2, 3), log=log, store=store, config=CONFIG,
        rng=random.Random(seed), now_ms=0,
    )  # fmt: skip
    if start == "leader":
        node.poll(CONFIG.election_timeout_ms * 2)  # stands in epoch `epoch`
        vote = next(s for s in node.take_sends() if s.destination == 2)
        granted = messages.vote_response(NONE, leader_id=None, epoch=epoch, granted=True)
        node.handle_response(
            CONFIG.election_timeout_ms * 2, RaftResponse(2, vote.request_id, granted)
        )
    node.take_sends()
    assert node.role == start and node.epoch == epoch
    return node, store


def vote(candidate: int, epoch: int, last_epoch: int = 0, last_offset: int = 0) -> Any:
    return messages.vote_request(
        None, epoch=epoch, candidate_id=candidate, voter_id=1, last_epoch=last_epoch,
        last_offset=last_offset,
    )  # fmt: skip


def begin(leader: int, epoch: int) -> Any:
    return messages.begin_quorum_epoch_request(None, epoch=epoch, leader_id=leader, voter_id=1)


def end(leader: int, epoch: int, successors: tuple[int, ...] = (3, 1)) -> Any:
    return messages.end_quorum_epoch_request(
        None, epoch=epoch, leader_id=leader, preferred_successors=list(successors)
    )


@dataclass(frozen=True)
class Row:
    start: str
    request: Any
    role: str
    epoch: int
    leader: int | None
    voted: int | None
    error: int = NONE
    granted: bool | None = None
    answered_as: tuple[int, int | None] | None = None  # (epoch, leader) if not the final one


ROWS = [
    # Vote
    Row("unattached", vote(2, 5), "voted", 5, None, 2, granted=True),
    Row("unattached", vote(2, 4), "unattached", 5, None, None, FENCED, False),
    Row("unattached", vote(2, 7), "voted", 7, None, 2, granted=True),
    Row("voted", vote(2, 5), "voted", 5, None, 2, granted=True),  # the same candidate again
    Row("voted", vote(3, 5), "voted", 5, None, 2, granted=False),  # one vote per epoch
    Row("voted", vote(3, 6), "voted", 6, None, 3, granted=True),
    Row("follower", vote(3, 5), "follower", 5, 2, None, granted=False),
    Row("follower", vote(3, 6), "voted", 6, None, 3, granted=True),
    Row("candidate", vote(2, 5), "candidate", 5, None, 1, granted=False),
    Row("candidate", vote(2, 6), "voted", 6, None, 2, granted=True),
    Row("leader", vote(2, 5), "leader", 5, 1, None, granted=False),
    Row("leader", vote(2, 6, 5, 1), "voted", 6, None, 2, granted=True),
    Row("leader", vote(2, 6), "unattached", 6, None, None, granted=False),  # log behind
    Row("resigned", vote(2, 5), "resigned", 5, 1, None, granted=False),
    Row("resigned", vote(2, 6), "voted", 6, None, 2, granted=True),
    # BeginQuorumEpoch
    Row("unattached", begin(2, 5), "follower", 5, 2, None),
    Row("voted", begin(3, 5), "follower", 5, 3, 2),
    Row("candidate", begin(2, 5), "follower", 5, 2, 1),
    Row("candidate", begin(2, 4), "candidate", 5, None, 1, FENCED),
    Row("follower", begin(3, 8), "follower", 8, 3, None),
    Row("leader", begin(2, 6), "follower", 6, 2, None),
    Row("resigned", begin(2, 6), "follower", 6, 2, None),
    # EndQuorumEpoch
    Row("follower", end(2, 5), "follower", 5, 2, None),  # second successor: waits
    Row("follower", end(2, 5, (1, 3)), "candidate", 6, None, 1, answered_as=(5, 2)),  # first
    Row("follower", end(3, 5, (1,)), "follower", 5, 2, None),  # not our leader
    Row("unattached", end(2, 6), "follower", 6, 2, None),
    Row("unattached", end(2, 6, (1, 3)), "candidate", 7, None, 1, answered_as=(6, 2)),
    Row("voted", end(2, 4), "voted", 5, None, 2, FENCED),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.start}-{type(r.request).__name__}")
def test_transition(row: Row) -> None:
    node, store = make_node(row.start)
    now = 2 * CONFIG.election_timeout_ms + 1 if row.start == "leader" else 1
    node.handle_request(now, RaftRequest(2, 42, row.request))
    assert (node.role, node.epoch, node.leader_id, node.voted_id) == (
        row.role, row.epoch, row.leader, row.voted,
    )  # fmt: skip
    # persisted before the response was queued (the store is synchronous)
    assert store.read() == ElectionState(row.epoch, node.leader_id, node.voted_id)
    (response,) = [s for s in node.take_sends() if s.is_response and s.request_id == 42]
    partition = messages.only_partition(response.message)
    assert partition.error_code == row.error
    view = messages.leader_view(partition)
    assert (view.epoch, view.leader_id) == (row.answered_as or (row.epoch, row.leader))
    if row.granted is not None:
        assert partition.vote_granted is row.granted


@pytest.mark.parametrize(
    ("candidate_log", "granted"),
    [((3, 10), True), ((3, 11), True), ((3, 9), False), ((4, 1), True), ((2, 50), False)],
)
def test_vote_needs_a_log_at_least_as_up_to_date(
    candidate_log: tuple[int, int], granted: bool
) -> None:
    node, _ = make_node("unattached", log_epoch=3, log_records=10)
    node.handle_request(0, RaftRequest(2, 1, vote(2, 5, *candidate_log)))
    (response,) = node.take_sends()
    assert messages.only_partition(response.message).vote_granted is granted
    assert node.role == ("voted" if granted else "unattached")


@pytest.mark.parametrize("start", ["unattached", "voted"])
def test_election_timeout_makes_a_candidate_of_the_next_epoch(start: str) -> None:
    node, store = make_node(start)
    wakeup = node.next_wakeup_ms(0)
    assert CONFIG.election_timeout_ms <= wakeup < 2 * CONFIG.election_timeout_ms
    node.poll(wakeup - 1)
    assert node.role == start
    node.poll(wakeup)
    assert (node.role, node.epoch, node.voted_id) == ("candidate", 6, 1)
    assert store.read() == ElectionState(6, None, 1)
    assert sorted(s.destination for s in node.take_sends()) == [2, 3]


def test_follower_fetch_timeout_makes_a_candidate() -> None:
    node, _ = make_node("follower")
    stagger = node.state.stagger_ms  # type: ignore[union-attr]
    assert 0 <= stagger < CONFIG.election_timeout_ms // 2
    node.poll(CONFIG.fetch_timeout_ms + stagger - 1)
    assert node.role == "follower"
    node.poll(CONFIG.fetch_timeout_ms + stagger)
    assert (node.role, node.epoch) == ("candidate", 6)


def test_followers_of_one_epoch_stand_at_different_times() -> None:
    """Two followers that last fetched together must not stand in the same millisecond."""
    staggers = set()
    for seed in range(20):
        node, _ = make_node("follower", seed=seed)
        staggers.add(node.state.stagger_ms)  # type: ignore[union-attr]
    assert len(staggers) > 15


def test_candidate_backs_off_then_stands_again_after_rejections() -> None:
    node, _ = make_node("candidate")
    for voter, request_id in list(node.state.in_flight.items()):  # type: ignore[union-attr]
        rejected = messages.vote_response(NONE, leader_id=None, epoch=5, granted=False)
        node.handle_response(1, RaftResponse(voter, request_id, rejected))
    assert node.role == "candidate" and node.state.backoff_until_ms is not None  # type: ignore[union-attr]
    backoff_end = node.state.backoff_until_ms  # type: ignore[union-attr]
    assert backoff_end <= 1 + CONFIG.retry_backoff_ms
    node.poll(backoff_end)
    assert (node.role, node.epoch) == ("candidate", 6)


def test_candidate_retries_a_vote_that_timed_out() -> None:
    node, _ = make_node("candidate")
    to_two = node.state.in_flight[2]  # type: ignore[union-attr]
    node.handle_response(10, RaftResponse(2, to_two, None))
    node.poll(10 + CONFIG.retry_backoff_ms)
    assert [s.destination for s in node.take_sends()] == [2]


def test_a_response_with_a_newer_epoch_and_leader_makes_a_follower() -> None:
    node, store = make_node("candidate")
    request_id = node.state.in_flight[2]  # type: ignore[union-attr]
    newer = messages.vote_response(FENCED, leader_id=3, epoch=9, granted=False)
    node.handle_response(5, RaftResponse(2, request_id, newer))
    assert (node.role, node.epoch, node.leader_id) == ("follower", 9, 3)
    assert store.read() == ElectionState(9, 3, None)


def test_shutting_down_never_votes_nor_stands() -> None:
    node, _ = make_node("unattached")
    node.shutdown(0)
    node.handle_request(1, RaftRequest(2, 1, vote(2, 5)))
    assert messages.only_partition(node.take_sends()[0].message).vote_granted is False
    node.poll(10 * CONFIG.election_timeout_ms)
    assert node.role == "unattached"


def test_restart_reads_its_role_from_the_store() -> None:
    for start, role in [("voted", "voted"), ("follower", "follower"), ("resigned", "resigned")]:
        node, _ = make_node(start)
        assert node.role == role


def test_log_epoch_above_stored_epoch_wins_at_start() -> None:
    log = MemoryRaftLog()
    log.append_as_leader([b"r"], 7, 0)
    node = RaftNode(
        node_id=1, voter_ids=(1, 2, 3), log=log, store=MemoryQuorumStateStore(ElectionState(5)),
        config=CONFIG, rng=random.Random(0), now_ms=0,
    )  # fmt: skip
    assert (node.role, node.epoch) == ("unattached", 7)


def test_inconsistent_cluster_id_is_a_top_level_error() -> None:
    node = RaftNode(
        node_id=1, voter_ids=(1, 2, 3), log=MemoryRaftLog(), store=MemoryQuorumStateStore(),
        config=CONFIG, rng=random.Random(0), now_ms=0, cluster_id="ours",
    )  # fmt: skip
    request = messages.vote_request(
        "theirs", epoch=1, candidate_id=2, voter_id=1, last_epoch=0, last_offset=0
    )
    node.handle_request(0, RaftRequest(2, 1, request))
    (response,) = node.take_sends()
    assert response.message.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID  # type: ignore[attr-defined]
    assert node.role == "unattached" and node.epoch == 0
