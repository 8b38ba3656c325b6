"""Share sessions (KIP-932; Kafka's ``ShareSessionCache``): which topic partitions a share
consumer fetches from this broker, keyed by (group id, member id), so that a ShareFetch after
the first names only what changed.

ShareSessionEpoch of a ShareFetch:

     0   open a session (replacing the member's previous one, whose acquired records the
         caller releases): its partitions are the request's Topics. Piggybacked
         acknowledgements are refused (INVALID_REQUEST: nothing can be acquired yet in a new
         session). At ``group.share.max.share.sessions`` (2000) sessions: SHARE_SESSION_LIMIT_REACHED.
    -1   close the session after this request (SHARE_SESSION_NOT_FOUND without one); the
         caller answers the request then releases the member's acquired records.
     n   the session's next epoch (else INVALID_SHARE_SESSION_EPOCH; SHARE_SESSION_NOT_FOUND
         without a session): Topics are added, ForgottenTopicsData removed, and the fetch
         covers every partition of the session. The epoch then moves on (after 2^31-1: 1).

ShareAcknowledge checks the same epoch rule (0 is INVALID_SHARE_SESSION_EPOCH, -1 closes)
without changing the partitions. A connection that closes removes the sessions it opened
(Kafka does: the member's acquired records are released then); a session opened again on
another connection is no longer the old connection's to close.

Sans-IO, owned by the event loop (``broker.share.partition_manager`` holds the cache).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from protocol.errors import (
    InvalidRequestError,
    InvalidShareSessionEpochError,
    ShareSessionLimitReachedError,
    ShareSessionNotFoundError,
)

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "SessionPartition",
    "SessionUpdate",
    "ShareSession",
    "ShareSessionCache",
]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_INT32_MAX = 2**31 - 1

SessionPartition = tuple[UUID, int]
"""A partition of a session: (topic id, partition index)."""


def next_epoch(epoch: int) -> int:
    """Kafka's ``ShareRequestMetadata.nextEpoch``."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    connection_id: str
    epoch: int  # the epoch the next request must carry
    partitions: dict[SessionPartition, None] = field(default_factory=dict)  # ordered set


@dataclass(frozen=True, slots=True)
class SessionUpdate:
    """What a request did to the session cache: the partitions to fetch (all the session's),
    whether the session closes with this request, and the session it replaced (its member's
    acquired records are the caller's to release)."""

    partitions: tuple[SessionPartition, ...]
    closing: bool = False
    replaced: ShareSession | None = None


class ShareSessionCache:
    def __init__(self, *, max_sessions: int = 2000) -> None:
        if max_sessions < 1:
            raise ValueError(f"group.share.max.share.sessions must be at least 1, not {max_sessions}")
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        self._by_connection: dict[str, set[tuple[str, str]]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def fetch(
        self, group_id: str, member_id: str, epoch: int, *, added: Iterable[SessionPartition],
        forgotten: Iterable[SessionPartition], acknowledging: bool, connection_id: str,
    ) -> SessionUpdate:
        """A ShareFetch's session step (see the module docstring); raises the request's error."""
        key = (group_id, member_id)
        session = self._sessions.get(key)
        if epoch == FINAL_EPOCH:
            if session is None:
                raise ShareSessionNotFoundError(f"no share session for {group_id}/{member_id}")
            return SessionUpdate(tuple(session.partitions), closing=True)
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                raise InvalidRequestError("acknowledgements in a ShareFetch that opens a share session")
            replaced = self._remove(key) if session is not None else None
            if len(self._sessions) >= self.max_sessions:
                raise ShareSessionLimitReachedError(
                    f"{len(self._sessions)} share sessions (group.share.max.share.sessions)")
            session = ShareSession(group_id, member_id, connection_id, next_epoch(INITIAL_EPOCH),
                                   dict.fromkeys(added))
            self._sessions[key] = session
            self._by_connection.setdefault(connection_id, set()).add(key)
            return SessionUpdate(tuple(session.partitions), replaced=replaced)
        session = self._check(key, epoch)
        for partition in added:
            session.partitions[partition] = None
        for partition in forgotten:
            session.partitions.pop(partition, None)
        session.epoch = next_epoch(session.epoch)
        return SessionUpdate(tuple(session.partitions))

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> bool:
        """A ShareAcknowledge's session step: True when it closes the session (epoch -1)."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            raise InvalidShareSessionEpochError("a ShareAcknowledge cannot open a share session")
        if epoch == FINAL_EPOCH:
            if key not in self._sessions:
                raise ShareSessionNotFoundError(f"no share session for {group_id}/{member_id}")
            return True
        session = self._check(key, epoch)
        session.epoch = next_epoch(session.epoch)
        return False

    def _check(self, key: tuple[str, str], epoch: int) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionNotFoundError(f"no share session for {key[0]}/{key[1]}")
        if session.epoch != epoch:
            raise InvalidShareSessionEpochError(f"expected share session epoch {session.epoch}, not {epoch}")
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        """Remove the session (after a request with epoch -1 was answered)."""
        return self._remove((group_id, member_id))

    def connection_closed(self, connection_id: str) -> list[ShareSession]:
        """The sessions opened on that connection and still its own, removed."""
        removed = []
        for key in self._by_connection.pop(connection_id, set()):
            session = self._sessions.get(key)
            if session is not None and session.connection_id == connection_id:
                removed.append(self._remove(key))
        return [session for session in removed if session is not None]

    def _remove(self, key: tuple[str, str]) -> ShareSession | None:
        session = self._sessions.pop(key, None)
        if session is not None:
            keys = self._by_connection.get(session.connection_id)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_connection[session.connection_id]
        return session
