"""Fetch sessions (KIP-227): the broker remembers what a consumer fetches, so that incremental
fetch requests carry only what changed and responses only the partitions that changed.

Request (session_id, session_epoch) and what it means, as Kafka's ``FetchManager`` reads it:

    (0, -1)  sessionless full fetch                          response session_id 0
    (0,  0)  full fetch opening a new session                response session_id = new id
    (X, -1)  close session X, then sessionless full fetch
    (X,  0)  close session X and open a new one (full fetch)
    (X,  n)  incremental fetch in session X; n must be the epoch the session expects, else
             INVALID_FETCH_SESSION_EPOCH; an unknown X gives FETCH_SESSION_ID_NOT_FOUND

An incremental request adds or updates the partitions it names and drops its forgotten topics;
the partitions fetched are all those of the session, in session order. An incremental response
holds a partition only if it has records, an error, or a new high watermark, last stable
offset or log start offset since it was last sent. Sessions are keyed by (topic id, topic name,
partition): v13+ requests name topics by id, older ones by name.

Capacity is Kafka's ``max.incremental.fetch.session.cache.slots`` (1000, counted in sessions
here); when full, a session idle longer than ``min.incremental.fetch.session.eviction.ms``
(120 s) is evicted, else no session is opened (the fetch is served sessionless).

Sans-IO; the clock is injected; owned by the broker's event loop.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from dataclasses import dataclass, field
from uuid import UUID

from protocol.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError, KafkaError
from storage.clock import Clock

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "CachedPartition",
    "FetchContext",
    "FetchSessionCache",
    "PartitionKey",
    "RequestedPartition",
]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0

PartitionKey = tuple[UUID, str, int]  # (topic id or zero, topic name or "", partition)


@dataclass(frozen=True, slots=True)
class RequestedPartition:
    key: PartitionKey
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1  # the epoch the fetcher believes current (KIP-320), -1: none
    last_fetched_epoch: int = -1  # the epoch of the fetcher's last batch (diverging-epoch check)
    log_start_offset: int = -1  # a follower's own log start offset


@dataclass(slots=True)
class CachedPartition:
    """A session partition: what to fetch next and what was last sent about it."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    sent_high_watermark: int = -1
    sent_last_stable_offset: int = -1
    sent_log_start_offset: int = -1

    def must_respond(
        self, *, has_records: bool, error_code: int, high_watermark: int,
        last_stable_offset: int, log_start_offset: int, has_preferred_read_replica: bool = False,
    ) -> bool:
        """True if the partition belongs in the response (a preferred read replica always
        does, as Kafka's ``maybeUpdateResponseData``); records what is being sent."""
        changed = (
            has_records
            or has_preferred_read_replica
            or error_code != 0
            or high_watermark != self.sent_high_watermark
            or last_stable_offset != self.sent_last_stable_offset
            or log_start_offset != self.sent_log_start_offset
        )
        if changed:
            self.sent_high_watermark = high_watermark
            self.sent_last_stable_offset = last_stable_offset
            self.sent_log_start_offset = log_start_offset
        return changed


@dataclass(slots=True)
class FetchSession:
    session_id: int
    next_epoch: int
    last_used_ms: int
    partitions: OrderedDict[PartitionKey, CachedPartition] = field(default_factory=OrderedDict)


@dataclass(slots=True)
class FetchContext:
    """How one fetch request is served: which partitions, and how its response is filtered."""

    partitions: list[RequestedPartition]
    session_id: int = INVALID_SESSION_ID
    incremental: bool = False
    session: FetchSession | None = None
    error: KafkaError | None = None

    def include(
        self, key: PartitionKey, *, has_records: bool, error_code: int, high_watermark: int,
        last_stable_offset: int, log_start_offset: int, has_preferred_read_replica: bool = False,
    ) -> bool:
        """Whether a partition's data goes into the response (always, unless incremental)."""
        cached = self.session.partitions.get(key) if self.session is not None else None
        if cached is None:
            return not self.incremental
        changed = cached.must_respond(
            has_records=has_records, error_code=error_code, high_watermark=high_watermark,
            last_stable_offset=last_stable_offset, log_start_offset=log_start_offset,
            has_preferred_read_replica=has_preferred_read_replica,
        )
        return changed or not self.incremental


class FetchSessionCache:
    def __init__(
        self, *, clock: Clock, max_sessions: int = 1000, eviction_ms: int = 120_000,
        rng: random.Random | None = None,
    ) -> None:
        self.clock = clock
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def new_context(
        self,
        *,
        session_id: int,
        session_epoch: int,
        partitions: list[RequestedPartition],
        forgotten: list[PartitionKey],
    ) -> FetchContext:
        """Interpret a request's session fields (see the module docstring)."""
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)
            if session_epoch == FINAL_EPOCH:
                return FetchContext(partitions)
            session = self._open(partitions)
            return FetchContext(
                partitions, session_id=session.session_id if session else 0, session=session
            )
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext([], error=FetchSessionIdNotFoundError(
                f"fetch session {session_id} was not found"))
        if session_epoch != session.next_epoch:
            return FetchContext([], error=InvalidFetchSessionEpochError(
                f"fetch session {session_id} expected epoch {session.next_epoch}, "
                f"got {session_epoch}"))
        return self._incremental(session, partitions, forgotten)

    def _open(self, partitions: list[RequestedPartition]) -> FetchSession | None:
        now = self.clock.monotonic_ms()
        if len(self._sessions) >= self.max_sessions and not self._evict_one(now):
            return None
        session_id = self._new_session_id()
        session = FetchSession(session_id, next_epoch=1, last_used_ms=now)
        for requested in partitions:
            session.partitions[requested.key] = _cached(requested)
        self._sessions[session_id] = session
        return session

    def _incremental(
        self, session: FetchSession, partitions: list[RequestedPartition], forgotten: list[PartitionKey]
    ) -> FetchContext:
        for key in forgotten:
            session.partitions.pop(key, None)
        for requested in partitions:
            cached = session.partitions.get(requested.key)
            if cached is None:
                session.partitions[requested.key] = _cached(requested)
            else:
                cached.fetch_offset = requested.fetch_offset
                cached.max_bytes = requested.max_bytes
                cached.current_leader_epoch = requested.current_leader_epoch
                cached.last_fetched_epoch = requested.last_fetched_epoch
                cached.log_start_offset = requested.log_start_offset
        session.next_epoch = _next_epoch(session.next_epoch)
        session.last_used_ms = self.clock.monotonic_ms()
        self._sessions.move_to_end(session.session_id)
        wanted = [
            RequestedPartition(key, cached.fetch_offset, cached.max_bytes,
                               cached.current_leader_epoch, cached.last_fetched_epoch,
                               cached.log_start_offset)
            for key, cached in session.partitions.items()
        ]
        return FetchContext(wanted, session_id=session.session_id, incremental=True, session=session)

    def _evict_one(self, now: int) -> bool:
        for session_id, session in self._sessions.items():
            if now - session.last_used_ms >= self.eviction_ms:
                del self._sessions[session_id]
                return True
            break  # ordered by last use: if the oldest is fresh, all are
        return False

    def _new_session_id(self) -> int:
        for _ in itertools.count():
            candidate = self._rng.randint(1, 2**31 - 1)
            if candidate not in self._sessions:
                return candidate
        raise AssertionError("unreachable")

    def remove_topics(self, topic_ids: set[UUID], names: set[str]) -> None:
        """Forget deleted topics in every session."""
        for session in self._sessions.values():
            for key in [k for k in session.partitions if k[0] in topic_ids or k[1] in names]:
                del session.partitions[key]


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


def _cached(requested: RequestedPartition) -> CachedPartition:
    return CachedPartition(requested.fetch_offset, requested.max_bytes,
                           requested.current_leader_epoch, requested.last_fetched_epoch,
                           requested.log_start_offset)
