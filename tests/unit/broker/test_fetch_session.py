"""Fetch sessions (KIP-227) as a table of request (session id, epoch) -> outcome."""

from __future__ import annotations

import random
import uuid

from broker.fetch_session import FetchSessionCache, RequestedPartition
from protocol.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from storage.clock import ManualClock

ZERO = uuid.UUID(int=0)


def wanted(*indexes: int, offset: int = 0) -> list[RequestedPartition]:
    return [RequestedPartition((ZERO, "t", i), offset, 1000) for i in indexes]


def cache(**kwargs) -> FetchSessionCache:  # type: ignore[no-untyped-def]
    return FetchSessionCache(clock=ManualClock(), rng=random.Random(1), **kwargs)


def test_sessionless_full_fetch() -> None:
    context = cache().new_context(session_id=0, session_epoch=-1, partitions=wanted(0), forgotten=[])
    assert (context.session_id, context.incremental, context.error) == (0, False, None)


def test_new_session_then_incremental_fetches() -> None:
    sessions = cache()
    full = sessions.new_context(session_id=0, session_epoch=0, partitions=wanted(0, 1), forgotten=[])
    assert full.session_id != 0 and not full.incremental
    assert full.include((ZERO, "t", 0), has_records=False, error_code=0, high_watermark=5,
                        last_stable_offset=5, log_start_offset=0)
    incremental = sessions.new_context(session_id=full.session_id, session_epoch=1,
                                       partitions=wanted(1, offset=7), forgotten=[(ZERO, "t", 0)])
    assert incremental.incremental
    assert [(p.key[2], p.fetch_offset) for p in incremental.partitions] == [(1, 7)]
    # unchanged since last sent: left out of an incremental response
    assert incremental.include((ZERO, "t", 1), has_records=False, error_code=0, high_watermark=-1,
                               last_stable_offset=-1, log_start_offset=-1) is False
    assert incremental.include((ZERO, "t", 1), has_records=True, error_code=0, high_watermark=-1,
                               last_stable_offset=-1, log_start_offset=-1) is True


def test_unknown_session_and_wrong_epoch() -> None:
    sessions = cache()
    missing = sessions.new_context(session_id=12345, session_epoch=1, partitions=[], forgotten=[])
    assert isinstance(missing.error, FetchSessionIdNotFoundError)
    opened = sessions.new_context(session_id=0, session_epoch=0, partitions=wanted(0), forgotten=[])
    wrong = sessions.new_context(session_id=opened.session_id, session_epoch=5, partitions=[],
                                 forgotten=[])
    assert isinstance(wrong.error, InvalidFetchSessionEpochError)


def test_closing_a_session() -> None:
    sessions = cache()
    opened = sessions.new_context(session_id=0, session_epoch=0, partitions=wanted(0), forgotten=[])
    closed = sessions.new_context(session_id=opened.session_id, session_epoch=-1,
                                  partitions=wanted(0), forgotten=[])
    assert closed.session_id == 0 and len(sessions) == 0


def test_a_full_cache_evicts_only_idle_sessions() -> None:
    clock = ManualClock()
    sessions = FetchSessionCache(clock=clock, max_sessions=1, eviction_ms=1000)
    first = sessions.new_context(session_id=0, session_epoch=0, partitions=wanted(0), forgotten=[])
    refused = sessions.new_context(session_id=0, session_epoch=0, partitions=wanted(0), forgotten=[])
    assert first.session_id != 0 and refused.session_id == 0
    clock.advance(1000)
    later = sessions.new_context(session_id=0, session_epoch=0, partitions=wanted(0), forgotten=[])
    assert later.session_id not in (0, first.session_id)


def test_a_followers_epochs_and_log_start_are_carried_incrementally() -> None:
    """KIP-320 fields of a follower's fetch: kept in the session, updated when a request names
    the partition again, and served unchanged to a request that leaves it out."""
    sessions = cache()
    key = (ZERO, "t", 0)
    first = RequestedPartition(key, 5, 1000, current_leader_epoch=3, last_fetched_epoch=2,
                               log_start_offset=1)
    full = sessions.new_context(session_id=0, session_epoch=0, partitions=[first], forgotten=[])
    same = sessions.new_context(session_id=full.session_id, session_epoch=1, partitions=[],
                                forgotten=[])
    assert same.partitions == [first]
    moved = RequestedPartition(key, 9, 1000, current_leader_epoch=4, last_fetched_epoch=4,
                               log_start_offset=7)
    updated = sessions.new_context(session_id=full.session_id, session_epoch=2,
                                   partitions=[moved], forgotten=[])
    assert updated.partitions == [moved]
    later = sessions.new_context(session_id=full.session_id, session_epoch=3, partitions=[],
                                 forgotten=[])
    assert later.partitions == [moved]
