"""Resigned: this node led ``epoch`` and stepped down (``resign``, shutdown, lost quorum, or
a restart that found it was the leader).

It tells the other voters with EndQuorumEpoch (``preferred_successors`` first, most caught up
first) until each answers, answers Fetch with NOT_LEADER_OR_FOLLOWER, grants no vote in this
epoch, and stands for election in the next one when its election timer fires.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ResignedState:
    epoch: int
    node_id: int
    election_deadline_ms: int
    preferred_successors: list[int]
    unacknowledged: set[int]
    in_flight: dict[int, int] = field(default_factory=dict)  # voter -> request id
    retry_at_ms: dict[int, int] = field(default_factory=dict)
    name: str = "resigned"

    @property
    def leader_id(self) -> int | None:
        return self.node_id

    @property
    def voted_id(self) -> int | None:
        return None
