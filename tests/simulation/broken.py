"""Test-only Raft cores with one deliberately broken rule: the simulator must catch each one.

Each variant is the real ``RaftNode`` with one rule broken, through the public API where it can
be (a wrapped store, an edited response) and through the role's state object where it cannot:

- ``double-vote``: grants a vote to any candidate whose log is up to date, even after voting
  for another one in the same epoch -> two leaders in one epoch (SingleLeader).
- ``hw-without-majority``: the leader's high watermark follows its own flushed end offset, as if
  it alone were a majority -> MajorityReachedHighWatermark.
- ``vote-not-persisted``: the quorum-state store never records whom the node voted for, so a
  node that crashes after granting its vote can grant another in the same epoch after the
  restart -> DurableElectionState at once (SingleLeader only when a crash falls between two
  concurrent candidates' requests: rare).
- ``ignore-diverging``: a follower drops the Fetch response's ``diverging_epoch`` instead of
  truncating, and still takes the leader's high watermark -> it commits entries the leader does
  not have (ConsistentCommittedData).

``CATCHES`` names the invariant expected for each variant; the tests run seeds until it fires.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from replication.raft import messages
from replication.raft.leader import LeaderState
from replication.raft.quorum_state import ElectionState
from replication.raft.voted import VotedState
from tests.simulation import core


class DoubleVoteNode(core.RaftNode):
    def handle_request(self, now_ms: int, request: Any) -> None:
        message = request.message
        if type(message).__name__ == "VoteRequest" and self._second_vote(message):
            self.respond(request, messages.vote_response(0, leader_id=self.leader_id,
                                                         epoch=self.epoch, granted=True))
            return
        super().handle_request(now_ms, request)

    def _second_vote(self, message: Any) -> bool:
        """A vote for another candidate of the epoch this node already voted in."""
        partition = message.topics[0].partitions[0]
        state = self.state
        theirs = (partition.last_offset_epoch, partition.last_offset)
        return (isinstance(state, VotedState) and partition.candidate_epoch == state.epoch
                and partition.candidate_id != state.voted_id
                and theirs >= (self.log.last_fetched_epoch, self.log.end_offset))


class SelfMajorityLeaderState(LeaderState):
    """Same layout as LeaderState (no new slots), so a LeaderState can become one."""

    __slots__ = ()

    def _advance_high_watermark(self) -> bool:
        local = self.replicas[self.node_id].end_offset or 0
        if local <= self.epoch_start_offset or (
                self.high_watermark is not None and local <= self.high_watermark):
            return False
        self.high_watermark = local
        return True


class SelfMajorityNode(core.RaftNode):
    def handle_request(self, now_ms: int, request: Any) -> None:
        super().handle_request(now_ms, request)
        self._break_leader()

    def handle_response(self, now_ms: int, response: Any) -> None:
        super().handle_response(now_ms, response)
        self._break_leader()

    def poll(self, now_ms: int) -> None:
        self._break_leader()
        super().poll(now_ms)
        self._break_leader()

    def _break_leader(self) -> None:
        if type(self.state) is LeaderState:
            self.state.__class__ = SelfMajorityLeaderState


class ForgetfulStore:
    """A quorum-state store that loses ``voted_id`` (the vote is never made durable)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def read(self) -> ElectionState | None:
        return self._store.read()  # type: ignore[no-any-return]

    def write(self, state: ElectionState) -> None:
        self._store.write(ElectionState(state.epoch, state.leader_id, None))


class VoteNotPersistedNode(core.RaftNode):
    def __init__(self, *, store: Any, **arguments: Any) -> None:
        super().__init__(store=ForgetfulStore(store), **arguments)


class IgnoreDivergingNode(core.RaftNode):
    def handle_response(self, now_ms: int, response: Any) -> None:
        message = response.message
        if type(message).__name__ == "FetchResponse":
            for topic in message.responses:
                for partition in topic.partitions:
                    if partition.diverging_epoch.epoch >= 0:
                        message = copy.deepcopy(message)
                        _forget_divergence(message)
                        response = core.RaftResponse(response.source, response.request_id, message)
                        break
        super().handle_response(now_ms, response)


def _forget_divergence(message: Any) -> None:
    for topic in message.responses:
        for partition in topic.partitions:
            partition.diverging_epoch.epoch = -1
            partition.diverging_epoch.end_offset = -1


VARIANTS: dict[str, Callable[..., Any]] = {
    "double-vote": DoubleVoteNode,
    "hw-without-majority": SelfMajorityNode,
    "vote-not-persisted": VoteNotPersistedNode,
    "ignore-diverging": IgnoreDivergingNode,
}

CATCHES = {
    "double-vote": "SingleLeader",
    "hw-without-majority": "MajorityReachedHighWatermark",
    "vote-not-persisted": "DurableElectionState",
    "ignore-diverging": "ConsistentCommittedData",
}


def node_class(variant: str) -> Callable[..., Any]:
    return core.RaftNode if variant == "real" else VARIANTS[variant]
