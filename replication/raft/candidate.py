"""Candidate: this voter stands for election in ``epoch`` and has voted for itself.

It asks every other voter for its vote. A majority of grants makes it leader; a majority of
rejections, or the election timer firing, starts a backoff (``backoff_until_ms``: random up to
``min(retry_backoff_ms * 2**(retries-1), election_backoff_max_ms)``, Kafka's binary exponential
election backoff) after which it stands again in the next epoch. A Vote that timed out is sent
again after ``retry_backoff_ms`` (``retry_at_ms``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field


@dataclass(slots=True)
class CandidateState:
    epoch: int
    node_id: int
    voter_ids: frozenset[int]
    election_deadline_ms: int
    retries: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_until_ms: int | None = None
    in_flight: dict[int, int] = field(default_factory=dict)  # voter -> request id
    retry_at_ms: dict[int, int] = field(default_factory=dict)  # voter -> when to ask again
    name: str = "candidate"

    def __post_init__(self) -> None:
        self.granted.add(self.node_id)

    @property
    def leader_id(self) -> int | None:
        return None

    @property
    def voted_id(self) -> int | None:
        return self.node_id

    @property
    def majority(self) -> int:
        return len(self.voter_ids) // 2 + 1

    def record_vote(self, voter_id: int, granted: bool) -> None:
        if voter_id not in self.voter_ids or voter_id == self.node_id:
            return
        if granted:
            self.granted.add(voter_id)
        else:
            self.rejected.add(voter_id)

    @property
    def is_won(self) -> bool:
        return len(self.granted) >= self.majority

    @property
    def is_lost(self) -> bool:
        """So many rejections that a majority can no longer be reached."""
        return len(self.voter_ids) - len(self.rejected) < self.majority

    def unanswered(self) -> Collection[int]:
        return sorted(self.voter_ids - self.granted - self.rejected)
