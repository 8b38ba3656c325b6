"""Voted: this voter granted its vote in ``epoch`` to ``voted_id`` and waits for a leader.

It grants the same candidate again (a retried Vote) and nobody else in this epoch; when the
election timer fires without a leader it stands for election in the next epoch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class VotedState:
    epoch: int
    voted_id: int
    election_deadline_ms: int
    name: str = "voted"

    @property
    def leader_id(self) -> int | None:
        return None
