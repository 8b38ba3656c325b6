"""Elections for ``RaftNode``: Vote, BeginQuorumEpoch and EndQuorumEpoch, both directions.

Vote (Kafka's ``handleVoteRequest``): a candidate of an older epoch is fenced; a newer epoch
first moves this node to Unattached of that epoch (persisted); then only Unattached grants
(becoming Voted, persisted before the answer is queued), Voted grants its own candidate
again, every other role refuses. A vote needs the candidate's (last epoch, end offset) to be
at least this log's. A shutting-down node grants nothing.

BeginQuorumEpoch makes this node a follower of the new leader; EndQuorumEpoch from its leader
shortens its fetch timer by its place among the preferred successors (the first stands at
once). Responses teach the sender's epoch and leader (``RaftNode.handle_leader_view``); a
candidate becomes leader on a majority of grants; Begin/EndQuorumEpoch are retried after
retry_backoff_ms until each voter answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.codec import Message
from protocol.errors import ErrorCode
from protocol.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from replication.raft import messages
from replication.raft.candidate import CandidateState
from replication.raft.follower import FollowerState
from replication.raft.leader import LeaderState
from replication.raft.resigned import ResignedState
from replication.raft.unattached import UnattachedState
from replication.raft.voted import VotedState

if TYPE_CHECKING:
    from replication.raft.node import Pending, RaftNode, RaftRequest

_NONE = int(ErrorCode.NONE)


def on_vote_response(
    node: RaftNode, now_ms: int, pending: Pending, message: Message | None
) -> None:
    state, voter = node.state, pending.destination
    ours = isinstance(state, CandidateState) and state.epoch == pending.epoch
    if ours:
        assert isinstance(state, CandidateState)
        state.in_flight.pop(voter, None)
    partition = messages.response_partition(message)
    if partition is None:
        if ours:
            assert isinstance(state, CandidateState)
            state.retry_at_ms[voter] = now_ms + node.config.retry_backoff_ms
        return
    if node.handle_leader_view(now_ms, messages.leader_view(partition)) or not ours:
        return
    assert isinstance(state, CandidateState)
    granted = partition.error_code == _NONE and bool(partition.vote_granted)
    state.record_vote(voter, granted)
    if state.is_won:
        node.become_leader(now_ms, state)


def on_epoch_response(
    node: RaftNode, now_ms: int, pending: Pending, message: Message | None
) -> None:
    """BeginQuorumEpoch (leader) and EndQuorumEpoch (resigned): retry until answered."""
    state, voter = node.state, pending.destination
    expected = LeaderState if pending.kind is BeginQuorumEpochRequest else ResignedState
    ours = isinstance(state, expected) and state.epoch == pending.epoch
    if ours:
        assert isinstance(state, (LeaderState, ResignedState))
        state.in_flight.pop(voter, None)
    partition = messages.response_partition(message)
    if partition is not None and node.handle_leader_view(now_ms, messages.leader_view(partition)):
        return
    if not ours:
        return
    assert isinstance(state, (LeaderState, ResignedState))
    if partition is not None and partition.error_code == _NONE:
        state.unacknowledged.discard(voter)
    else:
        state.retry_at_ms[voter] = now_ms + node.config.retry_backoff_ms


def handle_vote(node: RaftNode, now_ms: int, request: RaftRequest) -> None:
    partition = messages.only_partition(request.message)
    candidate, epoch = partition.candidate_id, partition.candidate_epoch
    if candidate not in node.voter_ids or not node.is_voter:
        _answer_vote(node, request, int(ErrorCode.INCONSISTENT_VOTER_SET), False)
        return
    if epoch < node.epoch:
        _answer_vote(node, request, int(ErrorCode.FENCED_LEADER_EPOCH), False)
        return
    if epoch > node.epoch:
        node.become_unattached(now_ms, epoch)
    granted = _can_grant(node, candidate, partition)
    if granted and isinstance(node.state, UnattachedState):
        deadline = now_ms + node.random_election_timeout_ms()
        node.transition(VotedState(epoch, candidate, deadline))
    _answer_vote(node, request, _NONE, granted)


def _can_grant(node: RaftNode, candidate: int, partition: Any) -> bool:
    if node.shutting_down:
        return False
    state = node.state
    if isinstance(state, VotedState):
        return state.voted_id == candidate
    if not isinstance(state, UnattachedState):
        return False
    theirs = (partition.last_offset_epoch, partition.last_offset)
    return theirs >= (node.log.last_fetched_epoch, node.log.end_offset)


def _answer_vote(node: RaftNode, request: RaftRequest, error: int, granted: bool) -> None:
    response = messages.vote_response(
        error, leader_id=node.leader_id, epoch=node.epoch, granted=granted
    )
    node.respond(request, response)


def handle_begin_quorum_epoch(node: RaftNode, now_ms: int, request: RaftRequest) -> None:
    partition = messages.only_partition(request.message)
    epoch, leader = partition.leader_epoch, partition.leader_id
    error = _NONE
    if epoch < node.epoch:
        error = int(ErrorCode.FENCED_LEADER_EPOCH)
    elif leader not in node.voter_ids or leader == node.node_id:
        error = int(ErrorCode.INCONSISTENT_VOTER_SET)
    elif epoch == node.epoch and isinstance(node.state, (LeaderState, ResignedState)):
        error = int(ErrorCode.INVALID_REQUEST)  # two leaders in one epoch cannot happen
    elif not (isinstance(node.state, FollowerState) and node.state.epoch == epoch):
        node.become_follower(now_ms, epoch, leader)
    response = messages.begin_quorum_epoch_response(
        error, leader_id=node.leader_id, epoch=node.epoch
    )
    node.respond(request, response)


def handle_end_quorum_epoch(node: RaftNode, now_ms: int, request: RaftRequest) -> None:
    partition = messages.only_partition(request.message)
    epoch, leader = partition.leader_epoch, partition.leader_id
    error = _NONE
    if epoch < node.epoch:
        error = int(ErrorCode.FENCED_LEADER_EPOCH)
    else:
        if epoch > node.epoch:
            if leader != node.node_id and leader in node.voter_ids:
                node.become_follower(now_ms, epoch, leader)
            else:
                node.become_unattached(now_ms, epoch)
        state = node.state
        if isinstance(state, FollowerState) and state.leader_id == leader and node.is_voter:
            successors = messages.preferred_successors(partition)
            backoff = _end_epoch_backoff_ms(node, successors)
            state.fetch_deadline_ms = min(state.fetch_deadline_ms, now_ms + backoff)
    response = messages.end_quorum_epoch_response(error, leader_id=node.leader_id, epoch=node.epoch)
    node.respond(request, response)


def _end_epoch_backoff_ms(node: RaftNode, successors: list[int]) -> int:
    """Kafka's strict exponential backoff by position among the preferred successors:
    the first stands at once, later ones wait longer, unlisted voters the longest."""
    position = successors.index(node.node_id) if node.node_id in successors else len(successors)
    if position == 0:
        return 0
    if position >= len(successors):
        return node.config.election_backoff_max_ms
    return min(node.config.election_backoff_max_ms, node.config.retry_backoff_ms << (position - 1))
