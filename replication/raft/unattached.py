"""Unattached: the epoch is known, its leader is not, and this node has not voted in it.

A voter grants its vote to the first candidate of the epoch whose log is at least as up to
date as its own (becoming Voted), and stands for election itself when the election timer
(``election_deadline_ms``, randomized in [T, 2T)) fires. An observer has no election timer:
it fetches from any voter to find the leader (``next_fetch_ms``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class UnattachedState:
    epoch: int
    election_deadline_ms: int | None  # None for an observer
    next_fetch_ms: int = 0  # an observer's next leader-finding Fetch
    fetch_in_flight: int | None = None  # its request id
    name: str = "unattached"

    @property
    def leader_id(self) -> int | None:
        return None

    @property
    def voted_id(self) -> int | None:
        return None
