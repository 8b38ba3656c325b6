"""Errors the Raft core raises to its callers (the state machine side and the shells).

Protocol-level failures never raise: they become error codes in responses. These are for
calls the caller should not have made (``propose`` on a non-leader) and for damaged state.
"""

from __future__ import annotations

from protocol.errors import NotLeaderOrFollowerError

__all__ = ["NotLeaderError", "QuorumStateError", "RaftLogError"]


class NotLeaderError(NotLeaderOrFollowerError):
    """``propose`` on a node that is not the leader; names the leader it knows, if any."""

    def __init__(self, epoch: int, leader_id: int | None) -> None:
        self.epoch = epoch
        self.leader_id = leader_id
        super().__init__(f"not the leader in epoch {epoch} (leader: {leader_id})")


class QuorumStateError(Exception):
    """The ``quorum-state`` file is unreadable or inconsistent; names the file and why."""


class RaftLogError(ValueError):
    """A ``RaftLog`` call its caller should not have made (the rules are in
    ``replication.raft.log``): e.g. truncating below the high watermark, a follower append
    that does not start at the log end offset. Bad bytes from the wire raise
    ``protocol.errors.CorruptMessageError`` / ``InvalidRecordError`` instead."""
