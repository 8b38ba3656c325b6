"""Leader: this voter leads ``epoch``; Kafka's ``LeaderState``.

State (owned by the node's task):
- ``replicas``: per voter and per observer that fetched, its log end offset (None until it
  fetches in this epoch; for the leader itself, its flushed end offset), last fetch time and
  last caught-up time (the last time it had everything the leader had at its previous fetch).
- ``high_watermark``: None until the offset a majority of voters hold exceeds
  ``epoch_start_offset`` (the LeaderChangeMessage batch that opened the epoch): a leader never
  commits an older epoch's entries by counting replicas. Then it only grows.
- check quorum: ``check_quorum_deadline_ms`` moves forward whenever a majority (the leader
  included) has fetched since the last move; past it the leader resigns.
- ``unacknowledged``: voters that have neither fetched nor answered BeginQuorumEpoch.
- ``held_fetches``: Fetches with nothing to return, answered on new data, a new high
  watermark, an epoch change, or at their deadline (Kafka's fetch purgatory).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replication.raft.config import RaftConfig


@dataclass(slots=True)
class ReplicaState:
    replica_id: int
    end_offset: int | None = None
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_end: int = 0  # the leader's end offset at that replica's last fetch
    high_watermark_sent: int = -1


@dataclass(slots=True)
class HeldFetch:
    request: object  # the RaftRequest, answered later
    deadline_ms: int


@dataclass(slots=True)
class LeaderState:
    epoch: int
    node_id: int
    voter_ids: frozenset[int]
    epoch_start_offset: int
    granting_voters: frozenset[int]
    check_quorum_deadline_ms: int
    replicas: dict[int, ReplicaState] = field(default_factory=dict)
    high_watermark: int | None = None
    fetched_since_check: set[int] = field(default_factory=set)
    unacknowledged: set[int] = field(default_factory=set)
    in_flight: dict[int, int] = field(default_factory=dict)  # voter -> BeginQuorumEpoch id
    retry_at_ms: dict[int, int] = field(default_factory=dict)
    held_fetches: dict[int, HeldFetch] = field(default_factory=dict)  # replica -> fetch
    name: str = "leader"

    def __post_init__(self) -> None:
        for voter in self.voter_ids:
            self.replicas[voter] = ReplicaState(voter)
        self.unacknowledged = set(self.voter_ids) - {self.node_id}

    @property
    def leader_id(self) -> int:
        return self.node_id

    @property
    def voted_id(self) -> int | None:
        return None

    @property
    def majority(self) -> int:
        return len(self.voter_ids) // 2 + 1

    def update_local(self, flushed_end_offset: int, now_ms: int) -> bool:
        """The leader's own durable end offset moved; True if the high watermark grew."""
        local = self.replicas[self.node_id]
        local.end_offset = flushed_end_offset
        local.last_fetch_ms = local.last_caught_up_ms = now_ms
        return self._advance_high_watermark()

    def update_replica(
        self, replica_id: int, fetch_offset: int, leader_end_offset: int, now_ms: int
    ) -> bool:
        """A valid Fetch from ``replica_id`` at ``fetch_offset``; True if the HW grew."""
        replica = self.replicas.get(replica_id)
        if replica is None:
            replica = self.replicas[replica_id] = ReplicaState(replica_id)
        if fetch_offset >= leader_end_offset:
            replica.last_caught_up_ms = now_ms
        elif fetch_offset >= replica.last_fetch_leader_end and replica.last_fetch_ms >= 0:
            replica.last_caught_up_ms = replica.last_fetch_ms
        replica.end_offset = fetch_offset
        replica.last_fetch_ms = now_ms
        replica.last_fetch_leader_end = leader_end_offset
        if replica_id not in self.voter_ids:
            return False
        self.unacknowledged.discard(replica_id)
        return self._advance_high_watermark()

    def _advance_high_watermark(self) -> bool:
        offsets = sorted(
            (self.replicas[v].end_offset or 0 for v in self.voter_ids), reverse=True
        )  # fmt: skip
        candidate = offsets[self.majority - 1]
        if candidate <= self.epoch_start_offset:
            return False
        if self.high_watermark is not None and candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        return True

    def record_voter_contact(self, voter_id: int, now_ms: int, config: RaftConfig) -> None:
        """Check quorum: a voter fetched; a majority since the last reset moves the deadline."""
        if voter_id not in self.voter_ids or voter_id == self.node_id:
            return
        self.fetched_since_check.add(voter_id)
        if len(self.fetched_since_check) + 1 >= self.majority:
            self.fetched_since_check.clear()
            self.check_quorum_deadline_ms = now_ms + config.check_quorum_timeout_ms

    def successors_by_progress(self) -> list[int]:
        """Other voters, most caught up first (EndQuorumEpoch's preferred successors)."""
        others = [self.replicas[v] for v in self.voter_ids if v != self.node_id]
        others.sort(key=lambda r: (-(r.end_offset if r.end_offset is not None else -1),
                                   r.replica_id))  # fmt: skip
        return [r.replica_id for r in others]
