"""Combining persisted state batches: the rule the share coordinator uses to lay new state
batches over a share partition's current ones, on a write and when replaying an update.

The semantics are those of Kafka's ``PersisterStateBatchCombiner`` (which works pairwise over
a sorted set); this is Samsa's own sweep computing the same result:

- batches ending below the start offset are dropped and one straddling it is cut to start
  there (no cut when the start offset is -1, "unchanged");
- every offset covered by several batches takes the one of highest *priority*: the higher
  delivery count, then the later delivery state. A record's (count, state) only grows over
  its life — AVAILABLE → ACQUIRED → AVAILABLE with count + 1, or on to a terminal state — so
  the highest is the newest, whatever order the batches arrive in;
- the result is sorted, non-overlapping, and neighbours with the same state and count that
  touch are one batch.

So combining is a join: associative, commutative and idempotent over the per-offset states
(with the start offsets' maximum). ``broker.share.state_store`` relies on that.

Samsa's DEAD_LETTERING codes (100–102) rank as Kafka's unused ARCHIVING (3) would: after
AVAILABLE and ACKNOWLEDGED, before ARCHIVED, which a dead-lettered record becomes. Ranked by
their raw codes, as Kafka's byte comparison would, a DEAD_LETTERING record would never become
ARCHIVED on disk and would be dead-lettered again after every restart.

Pure functions; no state.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import pairwise

from broker.share.values import DEAD_LETTERING_BASE_CODE, StateBatch

__all__ = ["combine_state_batches", "priority"]

_ARCHIVING_RANK = 3  # Kafka's ARCHIVING, named in KIP-932 and never used


def priority(batch: StateBatch) -> tuple[int, int, int]:
    """Which of two batches covering one offset wins: the higher delivery count, then the
    later state (ties between Samsa's DEAD_LETTERING reasons broken by code)."""
    state = batch.delivery_state
    rank = _ARCHIVING_RANK if state >= DEAD_LETTERING_BASE_CODE else state
    return batch.delivery_count, rank, state


def combine_state_batches(
    current: Iterable[StateBatch], new: Iterable[StateBatch], *, start_offset: int
) -> tuple[StateBatch, ...]:
    """``current`` and ``new`` laid over each other, cut at ``start_offset`` (-1: no cut)."""
    batches = sorted(
        (_cut(batch, start_offset) for batch in (*current, *new)
         if start_offset == -1 or batch.last_offset >= start_offset),
        key=lambda batch: batch.first_offset,
    )
    return tuple(_coalesce(_sweep(batches)))


def _cut(batch: StateBatch, start_offset: int) -> StateBatch:
    if start_offset == -1 or batch.first_offset >= start_offset:
        return batch
    return StateBatch(start_offset, batch.last_offset, batch.delivery_state, batch.delivery_count)


def _sweep(batches: list[StateBatch]) -> Iterable[StateBatch]:
    """The winning batch of each stretch between two boundaries, left to right.

    ``active`` is a max-heap (by priority) of the batches that have started; one that has
    ended is dropped when it reaches the top."""
    boundaries = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    active: list[tuple[tuple[int, int, int], int, StateBatch]] = []
    index = 0
    for first, next_first in pairwise(boundaries):
        while index < len(batches) and batches[index].first_offset == first:
            batch = batches[index]
            heapq.heappush(active, (_negated(priority(batch)), index, batch))
            index += 1
        while active and active[0][2].last_offset < first:
            heapq.heappop(active)
        if active:
            winner = active[0][2]
            yield StateBatch(first, next_first - 1, winner.delivery_state, winner.delivery_count)


def _negated(key: tuple[int, int, int]) -> tuple[int, int, int]:
    return -key[0], -key[1], -key[2]


def _coalesce(pieces: Iterable[StateBatch]) -> Iterable[StateBatch]:
    previous: StateBatch | None = None
    for piece in pieces:
        if previous is not None and previous.last_offset + 1 == piece.first_offset \
                and (previous.delivery_state, previous.delivery_count) == (piece.delivery_state, piece.delivery_count):
            previous = StateBatch(previous.first_offset, piece.last_offset, piece.delivery_state, piece.delivery_count)
            continue
        if previous is not None:
            yield previous
        previous = piece
    if previous is not None:
        yield previous

