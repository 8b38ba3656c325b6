"""``RaftNode``: the sans-IO KRaft client (Kafka's ``KafkaRaftClient`` + ``QuorumState``).

Driving: the shell (the daemon's asyncio task, or the simulator) calls ``handle_request``,
``handle_response`` and ``poll`` with the current time, then sends what ``take_sends``
returns; it calls ``poll`` again at ``next_wakeup_ms``. Requests this node sends carry ids
it assigns; every request gets exactly one ``RaftResponse`` back from the shell (``message``
None on a timeout or disconnect); an answer to an id the node no longer waits for (late,
duplicated, or already timed out at request_timeout_ms by the node itself) is ignored.

Invariants:
- the election state (epoch, leader, vote) is written to the ``QuorumStateStore`` before the
  node acts on it: before a vote is granted, before a response of the new epoch is queued,
  before an election starts; the epoch never decreases, across restarts too;
- one vote per epoch: only Unattached grants (becoming Voted); Voted grants only its candidate
  again; a vote needs the candidate's (last epoch, end offset) >= this log's;
- the leader's high watermark is the largest offset a majority of voters hold (the leader
  counts its flushed end offset), and exists only once it is above the epoch's start offset;
  a follower's is min(the leader's, its own log end); both only grow, and the log's high
  watermark follows them;
- a follower appends only the leader's batches at its own log end, after truncating what the
  leader says diverges (never below the high watermark), and flushes before fetching further.

State: owned by the one task that drives the node; listeners run synchronously inside calls.
Role transitions live here; each role's data and bookkeeping live in its own module; serving
and handling Fetch/FetchSnapshot live in ``fetching``.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from protocol.codec import Message
from protocol.errors import ErrorCode
from protocol.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from protocol.messages.end_quorum_epoch_request import EndQuorumEpochRequest
from protocol.messages.fetch_request import FetchRequest
from protocol.messages.fetch_snapshot_request import FetchSnapshotRequest
from protocol.messages.leader_change_message import LeaderChangeMessage, Voter
from protocol.messages.vote_request import VoteRequest
from protocol.records import ControlRecordType
from replication.raft import elections, fetching, messages
from replication.raft.candidate import CandidateState
from replication.raft.config import RaftConfig
from replication.raft.errors import NotLeaderError
from replication.raft.follower import FollowerState
from replication.raft.leader import LeaderState
from replication.raft.log import RaftLog, SnapshotId
from replication.raft.quorum_state import ElectionState, QuorumStateStore
from replication.raft.resigned import ResignedState
from replication.raft.unattached import UnattachedState
from replication.raft.voted import VotedState

__all__ = [
    "QuorumDescription",
    "RaftListener",
    "RaftNode",
    "RaftRequest",
    "RaftResponse",
    "ReplicaDescription",
    "Send",
]

EpochState = (
    UnattachedState | VotedState | CandidateState | LeaderState | FollowerState | ResignedState
)
_NONE = int(ErrorCode.NONE)


@dataclass(frozen=True, slots=True)
class RaftRequest:
    source: int
    request_id: int
    message: Message


@dataclass(frozen=True, slots=True)
class RaftResponse:
    source: int
    request_id: int
    message: Message | None  # None: timed out or disconnected


@dataclass(frozen=True, slots=True)
class Send:
    destination: int
    request_id: int
    message: Message
    is_response: bool


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]


class RaftListener(Protocol):
    def on_leader_change(self, epoch: int, leader_id: int | None) -> None: ...

    def on_high_watermark(self, high_watermark: int) -> None: ...

    def on_snapshot_installed(self, snapshot_id: SnapshotId) -> None: ...


@dataclass(frozen=True, slots=True)
class Pending:
    kind: type
    destination: int
    epoch: int
    deadline_ms: int


class RaftNode:
    def __init__(
        self, *, node_id: int, voter_ids: Collection[int], log: RaftLog,
        store: QuorumStateStore, config: RaftConfig, rng: random.Random, now_ms: int,
        cluster_id: str | None = None, bootstrap_voter_ids: Sequence[int] | None = None,
    ) -> None:  # fmt: skip
        if not voter_ids:
            raise ValueError("a quorum needs at least one voter")
        self.node_id = node_id
        self.voter_ids = frozenset(voter_ids)
        self.log = log
        self.config = config
        self.cluster_id = cluster_id
        self.listeners: list[RaftListener] = []
        self._store = store
        self._rng = rng
        self._bootstrap = sorted(bootstrap_voter_ids or self.voter_ids)
        self._sends: list[Send] = []
        self._pending: dict[int, Pending] = {}
        self._next_request_id = 0
        self._shutting_down = False
        self._stored = store.read()
        self._told: dict[int, tuple[tuple[int, int | None] | None, int]] = {}
        self._state: EpochState = UnattachedState(0, None)
        self._initialize(now_ms)

    # --- observation -----------------------------------------------------------------

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voter_ids

    @property
    def state(self) -> EpochState:
        return self._state

    @property
    def role(self) -> str:
        return self._state.name

    @property
    def epoch(self) -> int:
        return self._state.epoch

    @property
    def leader_id(self) -> int | None:
        return self._state.leader_id

    @property
    def voted_id(self) -> int | None:
        return self._state.voted_id

    @property
    def high_watermark(self) -> int | None:
        state = self._state
        if isinstance(state, (LeaderState, FollowerState)):
            return state.high_watermark
        return None

    def describe_quorum(self, now_ms: int) -> QuorumDescription:
        state = self._state
        if not isinstance(state, LeaderState):
            raise NotLeaderError(self.epoch, self.leader_id)

        def describe(replica_id: int) -> ReplicaDescription:
            replica = state.replicas[replica_id]
            end = replica.end_offset if replica.end_offset is not None else -1
            return ReplicaDescription(
                replica_id, end, replica.last_fetch_ms, replica.last_caught_up_ms
            )

        observers = sorted(set(state.replicas) - self.voter_ids)
        return QuorumDescription(
            leader_id=self.node_id, leader_epoch=state.epoch,
            high_watermark=-1 if state.high_watermark is None else state.high_watermark,
            voters=tuple(describe(v) for v in sorted(self.voter_ids)),
            observers=tuple(describe(o) for o in observers),
        )  # fmt: skip

    # --- driving ---------------------------------------------------------------------

    def handle_request(self, now_ms: int, request: RaftRequest) -> None:
        message = request.message
        request_cluster = getattr(message, "cluster_id", None)
        if (
            request_cluster is not None
            and self.cluster_id is not None
            and (request_cluster != self.cluster_id)
        ):
            self.respond(request, messages.top_level_error_response(
                message, int(ErrorCode.INCONSISTENT_CLUSTER_ID)))  # fmt: skip
        elif messages.only_partition(message) is None:
            self.respond(request, messages.top_level_error_response(
                message, int(ErrorCode.INVALID_REQUEST)))  # fmt: skip
        elif isinstance(message, VoteRequest):
            elections.handle_vote(self, now_ms, request)
        elif isinstance(message, BeginQuorumEpochRequest):
            elections.handle_begin_quorum_epoch(self, now_ms, request)
        elif isinstance(message, EndQuorumEpochRequest):
            elections.handle_end_quorum_epoch(self, now_ms, request)
        elif isinstance(message, FetchRequest):
            fetching.handle_fetch(self, now_ms, request)
        elif isinstance(message, FetchSnapshotRequest):
            fetching.handle_fetch_snapshot(self, now_ms, request)
        else:
            raise TypeError(f"not a KRaft request: {type(message).__name__}")
        self._step(now_ms, flush=False)

    def handle_response(self, now_ms: int, response: RaftResponse) -> None:
        pending = self._pending.pop(response.request_id, None)
        if pending is not None and pending.destination == response.source:
            self._dispatch_response(now_ms, response.request_id, pending, response.message)
        self._step(now_ms, flush=False)

    def poll(self, now_ms: int) -> None:
        """Fire due timers, flush the leader's log, expire this node's timed-out requests."""
        expired = [i for i, p in self._pending.items() if p.deadline_ms <= now_ms]
        for request_id in expired:
            pending = self._pending.pop(request_id)
            self._dispatch_response(now_ms, request_id, pending, None)
        self._step(now_ms, flush=True)

    def next_wakeup_ms(self, now_ms: int) -> int:
        times = [p.deadline_ms for p in self._pending.values()]
        times.extend(self._state_timers(now_ms))
        return max(now_ms, min(times, default=now_ms + self.config.election_timeout_ms))

    def take_sends(self) -> list[Send]:
        sends, self._sends = self._sends, []
        return sends

    # --- the state machine side ------------------------------------------------------

    def propose(self, now_ms: int, records: Sequence[bytes]) -> int:
        state = self._state
        if not isinstance(state, LeaderState) or self._shutting_down:
            raise NotLeaderError(self.epoch, self.leader_id)
        if not records:
            raise ValueError("a proposal needs at least one record")
        appended = self.log.append_as_leader(records, state.epoch, now_ms)
        fetching.complete_held_fetches(self, now_ms)
        return appended.last_offset

    def resign(self, now_ms: int) -> None:
        if isinstance(self._state, LeaderState):
            self._become_resigned(now_ms)
            self._step(now_ms, flush=False)

    def shutdown(self, now_ms: int) -> None:
        """Resign if leading; from now on never vote and never stand for election."""
        self._shutting_down = True
        self.resign(now_ms)

    # --- plumbing shared with ``fetching`` -------------------------------------------

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def respond(self, request: RaftRequest, message: Message) -> None:
        self._sends.append(Send(request.source, request.request_id, message, True))

    def send_request(self, now_ms: int, destination: int, message: Message) -> int:
        request_id = self._next_request_id
        self._next_request_id += 1
        deadline = now_ms + self.config.request_timeout_ms
        self._pending[request_id] = Pending(type(message), destination, self.epoch, deadline)
        self._sends.append(Send(destination, request_id, message, False))
        return request_id

    def leader_only_error(self, request_epoch: int) -> int:
        """Kafka's validateLeaderOnlyRequest: epoch checked before the role."""
        if request_epoch < self.epoch:
            return int(ErrorCode.FENCED_LEADER_EPOCH)
        if request_epoch > self.epoch:
            return int(ErrorCode.UNKNOWN_LEADER_EPOCH)
        if not isinstance(self._state, LeaderState):
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return _NONE

    def handle_leader_view(self, now_ms: int, view: messages.LeaderView) -> bool:
        """Kafka's maybeHandleCommonResponse: learn a newer epoch or this epoch's leader from
        any response. True when the response is stale or moved this node to another state."""
        if view.epoch < self.epoch:
            return True
        leader = view.leader_id if view.leader_id != self.node_id else None
        if view.epoch > self.epoch:
            if leader is not None:
                self.become_follower(now_ms, view.epoch, leader)
            else:
                self.become_unattached(now_ms, view.epoch)
            return True
        if leader is not None and isinstance(
            self._state, (UnattachedState, VotedState, CandidateState)
        ):
            self.become_follower(now_ms, view.epoch, leader)
            return True
        return False

    def notify_snapshot_installed(self, snapshot_id: SnapshotId) -> None:
        for listener in list(self.listeners):
            listener.on_snapshot_installed(snapshot_id)

    def random_election_timeout_ms(self) -> int:
        timeout = self.config.election_timeout_ms
        return timeout + self._rng.randrange(timeout)

    def pick_bootstrap_voter(self) -> int:
        return self._rng.choice(self._bootstrap)

    # --- transitions -----------------------------------------------------------------

    def _initialize(self, now_ms: int) -> None:
        stored, log_epoch = self._stored, self.log.last_fetched_epoch
        if stored is None or stored.epoch < log_epoch:
            self.become_unattached(now_ms, log_epoch)
        elif stored.leader_id == self.node_id and self.is_voter:
            self.transition(self._resigned_state(now_ms, stored.epoch, []))
        elif stored.leader_id is not None and stored.leader_id != self.node_id:
            self.become_follower(now_ms, stored.epoch, stored.leader_id, stored.voted_id)
        elif stored.voted_id == self.node_id and self.is_voter:
            self._start_candidacy(now_ms, stored.epoch, retries=1)
        elif stored.voted_id is not None and self.is_voter:
            self.transition(
                VotedState(
                    stored.epoch, stored.voted_id, now_ms + self.random_election_timeout_ms()
                )
            )
        else:
            self.become_unattached(now_ms, stored.epoch)
        if self.voter_ids == {self.node_id} and not isinstance(self._state, LeaderState):
            self._start_candidacy(now_ms, self.epoch + 1, retries=1)

    def transition(self, new: EpochState) -> None:
        """Persist the new election state, then switch; a leader's held Fetches are answered
        from the new state (with an error)."""
        old = self._state
        if new.epoch < old.epoch:
            raise AssertionError(f"epoch going back from {old.epoch} to {new.epoch}")
        election = ElectionState(new.epoch, new.leader_id, new.voted_id)
        if election != self._stored:
            self._store.write(election)
            self._stored = election
        self._state = new
        if isinstance(old, LeaderState) and old is not new:
            fetching.answer_held_fetches_after_leadership(self, old)

    def become_unattached(self, now_ms: int, epoch: int) -> None:
        """A new epoch without a known leader. An Unattached or Candidate voter keeps the
        election time it had left (as Kafka's transitionToUnattached): otherwise a candidate
        that cannot win, bumping the epoch again and again, would keep resetting everyone
        else's timer and no one else would ever stand."""
        deadline = self._remaining_election_deadline()
        if deadline is None and self.is_voter:
            deadline = now_ms + self.random_election_timeout_ms()
        self.transition(UnattachedState(epoch, deadline, next_fetch_ms=now_ms))

    def _remaining_election_deadline(self) -> int | None:
        state = self._state
        if isinstance(state, (UnattachedState, CandidateState)) and self.is_voter:
            return state.election_deadline_ms
        return None

    def become_follower(
        self, now_ms: int, epoch: int, leader_id: int, voted_id: int | None = None
    ) -> None:
        if voted_id is None and epoch == self.epoch:
            voted_id = self.voted_id
        stagger = self._rng.randrange(max(1, self.config.election_timeout_ms // 2)) \
            if self.is_voter else 0
        deadline = now_ms + self.config.fetch_timeout_ms + stagger
        self.transition(FollowerState(epoch, leader_id, voted_id, deadline, stagger_ms=stagger,
                                      next_fetch_ms=now_ms))

    def _start_candidacy(self, now_ms: int, epoch: int, retries: int) -> None:
        deadline = now_ms + self.random_election_timeout_ms()
        state = CandidateState(epoch, self.node_id, self.voter_ids, deadline, retries)
        self.transition(state)
        if state.is_won:
            self.become_leader(now_ms, state)
            return
        for voter in state.unanswered():
            self._send_vote(now_ms, state, voter)

    def _send_vote(self, now_ms: int, state: CandidateState, voter: int) -> None:
        request = messages.vote_request(
            self.cluster_id, epoch=state.epoch, candidate_id=self.node_id, voter_id=voter,
            last_epoch=self.log.last_fetched_epoch, last_offset=self.log.end_offset,
        )  # fmt: skip
        state.in_flight[voter] = self.send_request(now_ms, voter, request)
        state.retry_at_ms.pop(voter, None)

    def become_leader(self, now_ms: int, candidate: CandidateState) -> None:
        state = LeaderState(
            epoch=candidate.epoch, node_id=self.node_id, voter_ids=self.voter_ids,
            epoch_start_offset=self.log.end_offset, granting_voters=frozenset(candidate.granted),
            check_quorum_deadline_ms=now_ms + self.config.check_quorum_timeout_ms,
        )  # fmt: skip
        self.transition(state)
        change = LeaderChangeMessage(
            version=0, leader_id=self.node_id,
            voters=[Voter(voter_id=v) for v in sorted(self.voter_ids)],
            granting_voters=[Voter(voter_id=v) for v in sorted(candidate.granted)],
        )  # fmt: skip
        self.log.append_control_as_leader(
            int(ControlRecordType.LEADER_CHANGE), change.encode(0), state.epoch, now_ms
        )
        state.update_local(self.log.flushed_end_offset, now_ms)
        for voter in sorted(state.unacknowledged):
            self._send_begin_quorum_epoch(now_ms, state, voter)

    def _send_begin_quorum_epoch(self, now_ms: int, state: LeaderState, voter: int) -> None:
        request = messages.begin_quorum_epoch_request(
            self.cluster_id, epoch=state.epoch, leader_id=self.node_id, voter_id=voter
        )
        state.in_flight[voter] = self.send_request(now_ms, voter, request)
        state.retry_at_ms.pop(voter, None)

    def _resigned_state(self, now_ms: int, epoch: int, successors: list[int]) -> ResignedState:
        others = set(self.voter_ids) - {self.node_id}
        deadline = now_ms + self.random_election_timeout_ms()
        return ResignedState(epoch, self.node_id, deadline, successors, others)

    def _become_resigned(self, now_ms: int) -> None:
        state = self._state
        assert isinstance(state, LeaderState)
        resigned = self._resigned_state(now_ms, state.epoch, state.successors_by_progress())
        self.transition(resigned)
        for voter in sorted(resigned.unacknowledged):
            self._send_end_quorum_epoch(now_ms, resigned, voter)

    def _send_end_quorum_epoch(self, now_ms: int, state: ResignedState, voter: int) -> None:
        request = messages.end_quorum_epoch_request(
            self.cluster_id, epoch=state.epoch, leader_id=self.node_id,
            preferred_successors=state.preferred_successors,
        )  # fmt: skip
        state.in_flight[voter] = self.send_request(now_ms, voter, request)
        state.retry_at_ms.pop(voter, None)

    def _stand_for_election(self, now_ms: int) -> None:
        if self.is_voter and not self._shutting_down:
            self._start_candidacy(now_ms, self.epoch + 1, retries=1)

    # --- timers ----------------------------------------------------------------------

    def _step(self, now_ms: int, *, flush: bool) -> None:
        """Everything due at ``now_ms``, then tell the listeners what changed."""
        state = self._state
        if isinstance(state, LeaderState):
            self._step_leader(now_ms, state, flush)
        elif isinstance(state, CandidateState):
            self._step_candidate(now_ms, state)
        elif isinstance(state, (UnattachedState, VotedState)):
            deadline = state.election_deadline_ms
            if deadline is not None and now_ms >= deadline:
                self._stand_for_election(now_ms)
            elif isinstance(state, UnattachedState) and not self.is_voter:
                fetching.maybe_find_leader(self, now_ms, state)
        elif isinstance(state, FollowerState):
            if now_ms >= state.fetch_deadline_ms:
                self._on_fetch_timeout(now_ms, state)
            else:
                fetching.maybe_send_fetch(self, now_ms, state)
        elif isinstance(state, ResignedState):
            self._step_resigned(now_ms, state)
        if self._state is not state:
            self._step(now_ms, flush=flush)
            return
        self._notify()

    def _on_fetch_timeout(self, now_ms: int, state: FollowerState) -> None:
        if self.is_voter:
            if self._shutting_down:
                return
            self._start_candidacy(now_ms, state.epoch + 1, retries=1)
        else:
            self.become_unattached(now_ms, state.epoch)

    def _step_leader(self, now_ms: int, state: LeaderState, flush: bool) -> None:
        if flush and self.log.flushed_end_offset < self.log.end_offset:
            self.log.flush()
        local = state.replicas[self.node_id].end_offset
        if local != self.log.flushed_end_offset and state.update_local(
            self.log.flushed_end_offset, now_ms
        ):
            fetching.on_leader_high_watermark(self, now_ms, state)
        fetching.expire_held_fetches(self, now_ms, state)
        if len(self.voter_ids) > 1 and now_ms >= state.check_quorum_deadline_ms:
            self._become_resigned(now_ms)
            return
        for voter in sorted(state.unacknowledged):
            if voter not in state.in_flight and now_ms >= state.retry_at_ms.get(voter, 0):
                self._send_begin_quorum_epoch(now_ms, state, voter)

    def _step_candidate(self, now_ms: int, state: CandidateState) -> None:
        if state.backoff_until_ms is not None:
            if now_ms >= state.backoff_until_ms and not self._shutting_down:
                self._start_candidacy(now_ms, state.epoch + 1, state.retries + 1)
            return
        if now_ms >= state.election_deadline_ms or state.is_lost:
            self._start_backoff(now_ms, state)
            return
        for voter in state.unanswered():
            if voter not in state.in_flight and now_ms >= state.retry_at_ms.get(voter, 0):
                self._send_vote(now_ms, state, voter)

    def _start_backoff(self, now_ms: int, state: CandidateState) -> None:
        """Kafka's binary exponential election backoff, capped at election.backoff.max.ms."""
        cap = min(
            self.config.election_backoff_max_ms,
            self.config.retry_backoff_ms * 2 ** min(state.retries - 1, 30),
        )
        state.backoff_until_ms = now_ms + self._rng.randrange(max(1, cap))

    def _step_resigned(self, now_ms: int, state: ResignedState) -> None:
        if now_ms >= state.election_deadline_ms:
            self._stand_for_election(now_ms)
            return
        for voter in sorted(state.unacknowledged):
            if voter not in state.in_flight and now_ms >= state.retry_at_ms.get(voter, 0):
                self._send_end_quorum_epoch(now_ms, state, voter)

    def _state_timers(self, now_ms: int) -> list[int]:
        state = self._state
        standing = self.is_voter and not self._shutting_down
        if isinstance(state, LeaderState):
            times = [h.deadline_ms for h in state.held_fetches.values()]
            if self.log.flushed_end_offset < self.log.end_offset:
                times.append(now_ms)
            if len(self.voter_ids) > 1:
                times.append(state.check_quorum_deadline_ms)
            return times + _retries(state.unacknowledged, state.in_flight, state.retry_at_ms)
        if isinstance(state, CandidateState):
            if state.backoff_until_ms is not None:
                return [state.backoff_until_ms] if not self._shutting_down else []
            retries = _retries(state.unanswered(), state.in_flight, state.retry_at_ms)
            return [state.election_deadline_ms, *retries]
        if isinstance(state, FollowerState):
            times = [state.fetch_deadline_ms] if standing or not self.is_voter else []
            return times + ([state.next_fetch_ms] if state.fetch_in_flight is None else [])
        if isinstance(state, ResignedState):
            times = [state.election_deadline_ms] if standing else []
            return times + _retries(state.unacknowledged, state.in_flight, state.retry_at_ms)
        if isinstance(state, UnattachedState) and not self.is_voter:
            return [state.next_fetch_ms] if state.fetch_in_flight is None else []
        return [state.election_deadline_ms] if standing and state.election_deadline_ms else []

    def _notify(self) -> None:
        """Tell each listener what changed since it was last told; a listener appended to
        ``listeners`` hears the current leader and high watermark at the next call (as
        Kafka's ``register``)."""
        leader = (self.epoch, self.leader_id)
        high_watermark = self.log.high_watermark
        for listener in list(self.listeners):
            told_leader, told_high_watermark = self._told.get(id(listener), (None, -1))
            self._told[id(listener)] = (leader, max(high_watermark, told_high_watermark))
            if leader != told_leader:
                listener.on_leader_change(*leader)
            if high_watermark > told_high_watermark and high_watermark > 0:
                listener.on_high_watermark(high_watermark)

    # --- responses -------------------------------------------------------------------

    def _dispatch_response(
        self, now_ms: int, request_id: int, pending: Pending, message: Message | None
    ) -> None:
        if pending.kind is VoteRequest:
            elections.on_vote_response(self, now_ms, pending, message)
        elif pending.kind in (BeginQuorumEpochRequest, EndQuorumEpochRequest):
            elections.on_epoch_response(self, now_ms, pending, message)
        elif pending.kind is FetchRequest:
            fetching.on_fetch_response(self, now_ms, request_id, pending.destination, message)
        elif pending.kind is FetchSnapshotRequest:
            fetching.on_fetch_snapshot_response(self, now_ms, request_id, message)


def _retries(
    voters: Collection[int], in_flight: dict[int, int], retry_at: dict[int, int]
) -> list[int]:
    return [retry_at.get(v, 0) for v in voters if v not in in_flight]
