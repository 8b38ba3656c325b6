"""One share partition (KIP-932; Kafka's ``SharePartition``): the delivery state of the records
of one topic partition for one share group, stepped by calls that take the current time.

The in-flight records are those between the share-partition start offset (SPSO,
``start_offset``) and the share-partition end offset (SPEO, ``end_offset``, exclusive). Each
has a state and a delivery count:

    AVAILABLE       may be acquired by a share fetch          count < delivery_count_limit
    ACQUIRED        locked for one member until a deadline    count >= 1
    ACKNOWLEDGED    accepted by the member that held it
    ARCHIVED        rejected, out of deliveries, expired, or not a record (a gap)
    DEAD_LETTERING  (Samsa) archived for delivery — never acquired again — but waiting for the
                    caller to append it to the dead-letter topic (``take_dead_letters``,
                    then ``dead_lettered``); it holds SPSO back, so the move survives a crash

Transitions: ``acquire`` AVAILABLE → ACQUIRED (count + 1, lock until now +
``record_lock_duration_ms``); ``acknowledge`` by the lock's holder: Accept → ACKNOWLEDGED,
Release → AVAILABLE, Reject → ARCHIVED (or DEAD_LETTERING), Gap → ARCHIVED; a lock that
expires or whose member leaves ends like a Release. A record whose delivery count has reached
``delivery_count_limit`` when its delivery ends is archived (or dead-lettered) instead of made
AVAILABLE. With ``record_expiry_ms``, an AVAILABLE record older than that is archived (or
dead-lettered) as expired.

Invariants, after every public call:
- ``start_offset <= end_offset <= start_offset + partition_max_record_locks``, unless a
  restored snapshot was already wider (then the window only shrinks until it fits);
- the in-flight batches cover ``[start_offset, end_offset)`` exactly, in order, with no two
  neighbours alike (they are merged), and the first is neither ACKNOWLEDGED nor ARCHIVED
  (SPSO advances past those; records below SPSO are forgotten);
- an AVAILABLE record's count is below the limit; an ACQUIRED one has one member and a
  deadline; delivery counts never decrease;
- every record that becomes DEAD_LETTERING is reported once by ``take_dead_letters`` (again
  after a ``restore``, until confirmed), and never after it was confirmed or forgotten.

Time is only ever the ``now_ms`` passed in: every call that takes it first applies the lock
and expiry deadlines up to it (and, after its own changes, expires what it made AVAILABLE if
that is already too old), so the result does not depend on when a timer fired.
``next_deadline_ms`` tells the shell when to call ``expire``.

Owned by the share-partition leader's event-loop task; no I/O, no asyncio.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from broker.share.values import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    DeadLetter,
    DeadLetterReason,
    FetchedBatch,
    InFlightBatch,
    RecordState,
    SharePartitionConfig,
    SharePartitionDescription,
    ShareSnapshot,
    StateBatch,
)
from protocol.errors import InvalidRecordStateError, InvalidRequestError

__all__ = ["SharePartition"]

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(slots=True, eq=False)
class _Batch:
    """A contiguous range of in-flight records alike in everything the machine tracks
    (compared by identity: ``list.index`` finds this very batch)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int | None = None
    timestamp_ms: int | None = None  # the log batch's max timestamp, when a fetch told us
    reason: DeadLetterReason | None = None

    @property
    def record_count(self) -> int:
        return self.last_offset - self.first_offset + 1

    def alike(self, other: _Batch) -> bool:
        return (self.state, self.delivery_count, self.member_id, self.lock_deadline_ms,
                self.timestamp_ms, self.reason) == (other.state, other.delivery_count,
                other.member_id, other.lock_deadline_ms, other.timestamp_ms, other.reason)

    def unlock(self, state: RecordState) -> None:
        self.state, self.member_id, self.lock_deadline_ms = state, None, None


class SharePartition:
    def __init__(
        self, config: SharePartitionConfig, *, start_offset: int, state_epoch: int = 0, leader_epoch: int = 0
    ) -> None:
        """An uninitialized share partition starting at ``start_offset`` (see
        ``initial_start_offset`` for ``share.auto.offset.reset``)."""
        self.config = config
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        self._batches: list[_Batch] = []
        self._dead_letters: list[DeadLetter] = []
        self.archived_record_count = 0
        self.dead_lettered_record_count = 0
        self.expired_record_count = 0

    # ---- persistence ----------------------------------------------------------------------

    @classmethod
    def restore(
        cls, snapshot: ShareSnapshot, config: SharePartitionConfig, *, now_ms: int, leader_epoch: int | None = None
    ) -> SharePartition:
        """Rebuild from a snapshot: as the original would be once every lock had expired.
        Offsets in no state batch are AVAILABLE, never delivered; records DEAD_LETTERING are
        reported again by ``take_dead_letters``."""
        partition = cls(config, start_offset=snapshot.start_offset, state_epoch=snapshot.state_epoch,
                        leader_epoch=snapshot.leader_epoch if leader_epoch is None else leader_epoch)
        for state_batch in sorted(snapshot.state_batches, key=lambda each: each.first_offset):
            partition._restore_batch(state_batch, now_ms)
        partition._advance_start_offset()
        partition._coalesce()
        return partition

    def _restore_batch(self, state_batch: StateBatch, now_ms: int) -> None:
        first = max(state_batch.first_offset, self.end_offset)
        if first > state_batch.last_offset:
            return
        if first > self.end_offset:
            self._batches.append(_Batch(self.end_offset, first - 1, RecordState.AVAILABLE, 0))
        batch = _Batch(first, state_batch.last_offset, RecordState.AVAILABLE, state_batch.delivery_count)
        self._batches.append(batch)
        self.end_offset = state_batch.last_offset + 1
        code = state_batch.delivery_state
        if code in (RecordState.AVAILABLE, RecordState.ACQUIRED):
            if batch.delivery_count >= self.config.delivery_count_limit:
                self._archive(batch, DeadLetterReason.DELIVERY_LIMIT, now_ms)
        elif code in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
            batch.state = RecordState(code)
        elif code - RecordState.DEAD_LETTERING in range(len(DeadLetterReason)):
            self._archive(batch, DeadLetterReason.from_delivery_state(code), now_ms, count=False)
        else:
            raise ValueError(f"unknown delivery state {code} in a share snapshot")

    def snapshot(self) -> ShareSnapshot:
        """What ``__share_group_state`` keeps: an ACQUIRED record as AVAILABLE with its count
        (a lock does not survive a restart), DEAD_LETTERING with its reason's code."""
        state_batches: list[StateBatch] = []
        for batch in self._batches:
            code = self._persisted_code(batch)
            previous = state_batches[-1] if state_batches else None
            if previous is not None and (previous.delivery_state, previous.delivery_count) == (code, batch.delivery_count):
                state_batches[-1] = replace(previous, last_offset=batch.last_offset)
            else:
                state_batches.append(StateBatch(batch.first_offset, batch.last_offset, code, batch.delivery_count))
        return ShareSnapshot(self.state_epoch, self.leader_epoch, self.start_offset, tuple(state_batches))

    @staticmethod
    def _persisted_code(batch: _Batch) -> int:
        if batch.state is RecordState.ACQUIRED:
            return int(RecordState.AVAILABLE)
        if batch.state is RecordState.DEAD_LETTERING:
            assert batch.reason is not None
            return batch.reason.delivery_state
        return int(batch.state)

    # ---- acquisition ----------------------------------------------------------------------

    def acquire(
        self, member_id: str, fetched: Sequence[FetchedBatch], *, now_ms: int, max_records: int
    ) -> tuple[AcquiredRecords, ...]:
        """Acquire for ``member_id`` up to ``max_records`` AVAILABLE records among those the
        fetch read (``fetched``: the log batches one read returned, in offset order). Records
        past SPEO join the in-flight window, up to SPSO + ``partition_max_record_locks``;
        offsets the log skipped between SPEO and a fetched batch (compaction) are gaps,
        archived. ``max_records`` is a hard limit: a batch is split to respect it."""
        if max_records <= 0:
            raise InvalidRequestError(f"max_records must be positive, not {max_records}")
        ordered = sorted(fetched, key=lambda each: each.first_offset)
        self._apply_deadlines(now_ms)
        for fetched_batch in ordered:
            self._ingest(fetched_batch)
        self._expire_records(now_ms)
        acquired: list[_Batch] = []
        budget = max_records
        for fetched_batch in ordered:
            if budget == 0:
                break
            for batch in self._isolate(fetched_batch.first_offset, fetched_batch.last_offset):
                if budget == 0:
                    break
                if batch.state is not RecordState.AVAILABLE:
                    continue
                if batch.record_count > budget:
                    self._split(batch, batch.first_offset + budget)
                self._lock(batch, member_id, now_ms)
                budget -= batch.record_count
                acquired.append(batch)
        result = _merged_acquired(acquired)
        self._advance_start_offset()
        self._coalesce()
        return result

    def _lock(self, batch: _Batch, member_id: str, now_ms: int) -> None:
        batch.state = RecordState.ACQUIRED
        batch.member_id = member_id
        batch.lock_deadline_ms = now_ms + self.config.record_lock_duration_ms
        batch.delivery_count += 1

    def _ingest(self, fetched: FetchedBatch) -> None:
        if fetched.max_timestamp_ms is not None:
            for batch in self._isolate(fetched.first_offset, fetched.last_offset):
                if batch.timestamp_ms is None:
                    batch.timestamp_ms = fetched.max_timestamp_ms
        window_end = self.start_offset + self.config.partition_max_record_locks
        first = max(fetched.first_offset, self.end_offset)
        last = min(fetched.last_offset, window_end - 1)
        if first > last:
            return
        if first > self.end_offset:
            self._batches.append(_Batch(self.end_offset, first - 1, RecordState.ARCHIVED, 0))
        self._batches.append(_Batch(first, last, RecordState.AVAILABLE, 0, timestamp_ms=fetched.max_timestamp_ms))
        self.end_offset = last + 1
        self._advance_start_offset()

    # ---- acknowledgement ------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], *, now_ms: int) -> None:
        """Apply ``member_id``'s acknowledgements, all or none: every offset must be ACQUIRED
        by this member (else InvalidRecordStateError), the batches in order without overlap
        and each with one type or one per offset (else InvalidRequestError). All or none
        because ShareAcknowledge answers one error code per partition, as Kafka rolls back."""
        self._apply_deadlines(now_ms)
        previous_last = -1
        for acknowledgement in batches:
            _check_shape(acknowledgement, previous_last)
            previous_last = acknowledgement.last_offset
            self._check_held(member_id, acknowledgement)
        for acknowledgement in batches:
            for first, last, acknowledge_type in _runs(acknowledgement):
                for batch in self._isolate(first, last):
                    self._apply_acknowledge(batch, acknowledge_type, now_ms)
        self._expire_records(now_ms)  # a released record may already be too old
        self._advance_start_offset()
        self._coalesce()

    def _check_held(self, member_id: str, acknowledgement: AcknowledgementBatch) -> None:
        first, last = acknowledgement.first_offset, acknowledgement.last_offset
        if first < self.start_offset or last >= self.end_offset:
            raise InvalidRecordStateError(f"offsets {first}-{last} are not all in flight "
                                          f"({self.start_offset}-{self.end_offset - 1})")
        for batch in self._overlapping(first, last):
            if not self._may_acknowledge(batch, member_id):
                raise InvalidRecordStateError(
                    f"offsets {batch.first_offset}-{batch.last_offset} are {batch.state.name}"
                    f"{f' by {batch.member_id}' if batch.member_id else ''}, not acquired by {member_id}")

    def _may_acknowledge(self, batch: _Batch, member_id: str) -> bool:
        return batch.state is RecordState.ACQUIRED and batch.member_id == member_id

    def _apply_acknowledge(self, batch: _Batch, acknowledge_type: AcknowledgeType, now_ms: int) -> None:
        if acknowledge_type is AcknowledgeType.ACCEPT:
            batch.unlock(RecordState.ACKNOWLEDGED)
        elif acknowledge_type is AcknowledgeType.RELEASE:
            self._end_delivery(batch, now_ms)
        elif acknowledge_type is AcknowledgeType.REJECT:
            self._archive(batch, DeadLetterReason.REJECTED, now_ms)
        else:  # a gap: the offset holds no record, there is nothing to dead-letter or count
            batch.unlock(RecordState.ARCHIVED)

    # ---- time, members, the log -----------------------------------------------------------

    def expire(self, now_ms: int) -> None:
        """Apply the lock and record-expiry deadlines up to ``now_ms``."""
        self._apply_deadlines(now_ms)
        self._advance_start_offset()
        self._coalesce()

    def next_deadline_ms(self) -> int | None:
        """The earliest time at which ``expire`` would change something, if any."""
        deadlines = [batch.lock_deadline_ms for batch in self._batches if batch.lock_deadline_ms is not None]
        expiry_ms = self.config.record_expiry_ms
        if expiry_ms is not None:
            deadlines += [batch.timestamp_ms + expiry_ms for batch in self._batches
                          if batch.state is RecordState.AVAILABLE and batch.timestamp_ms is not None]
        return min(deadlines, default=None)

    def release_member(self, member_id: str, *, now_ms: int) -> None:
        """A member left: its acquired records are released (and archived at the limit)."""
        self._apply_deadlines(now_ms)
        for batch in list(self._batches):
            if batch.state is RecordState.ACQUIRED and batch.member_id == member_id:
                self._end_delivery(batch, now_ms)
        self._expire_records(now_ms)
        self._advance_start_offset()
        self._coalesce()

    def advance_log_start_offset(self, log_start_offset: int) -> None:
        """The log start offset moved (retention, DeleteRecords): records below it are gone,
        whatever their state; SPSO moves up to it. Pending dead letters for them are dropped."""
        if log_start_offset <= self.start_offset:
            return
        if log_start_offset < self.end_offset:
            index = self._split_at(log_start_offset)
            del self._batches[:index]
        else:
            self._batches.clear()
            self.end_offset = log_start_offset
        self.start_offset = log_start_offset
        self._advance_start_offset()

    # ---- dead letters ---------------------------------------------------------------------

    def take_dead_letters(self) -> tuple[DeadLetter, ...]:
        """The dead letters decided since the last call (after a restore: all pending ones),
        restricted to records still DEAD_LETTERING."""
        pending, self._dead_letters = self._dead_letters, []
        taken: list[DeadLetter] = []
        for dead_letter in pending:
            for batch in self._overlapping(dead_letter.first_offset, dead_letter.last_offset):
                if batch.state is RecordState.DEAD_LETTERING:
                    taken.append(replace(dead_letter, first_offset=max(batch.first_offset, dead_letter.first_offset),
                                         last_offset=min(batch.last_offset, dead_letter.last_offset)))
        return tuple(taken)

    def dead_lettered(self, first_offset: int, last_offset: int) -> None:
        """The caller appended these records to the dead-letter topic: DEAD_LETTERING → ARCHIVED.
        Idempotent: offsets in any other state (already confirmed, forgotten) are left alone."""
        for batch in self._isolate(first_offset, last_offset):
            if batch.state is RecordState.DEAD_LETTERING:
                batch.state, batch.reason = RecordState.ARCHIVED, None
                self.dead_lettered_record_count += batch.record_count
        self._advance_start_offset()
        self._coalesce()

    # ---- observability --------------------------------------------------------------------

    def first_available_offset(self, now_ms: int) -> int | None:
        """The first AVAILABLE in-flight record with the deadlines due at ``now_ms`` applied
        (None: none), changing nothing. The window is copied only when a deadline falls due at
        or before the first AVAILABLE batch (a lock ran out, or that batch expired), not on
        every fetch."""
        for batch in self._batches:
            if self._lock_due(batch, now_ms) or self._expiry_due(batch, now_ms):
                break
            if batch.state is RecordState.AVAILABLE:
                return batch.first_offset
        else:
            return None
        view = self._copy_at(now_ms)
        return next((batch.first_offset for batch in view._batches
                     if batch.state is RecordState.AVAILABLE), None)

    def describe(self, now_ms: int) -> SharePartitionDescription:
        """The state as the group description shows it, with deadlines due at ``now_ms`` applied
        to the view only (describing changes nothing)."""
        view = self._copy_at(now_ms)
        batches = tuple(InFlightBatch(batch.first_offset, batch.last_offset, batch.state, batch.delivery_count,
                                      batch.member_id, batch.lock_deadline_ms, batch.reason)
                        for batch in view._batches)
        return SharePartitionDescription(
            start_offset=view.start_offset,
            end_offset=view.end_offset,
            in_flight_record_count=view.end_offset - view.start_offset,
            acquired_record_count=_count(view._batches, RecordState.ACQUIRED),
            dead_lettering_record_count=_count(view._batches, RecordState.DEAD_LETTERING),
            batches=batches,
            archived_record_count=view.archived_record_count,
            dead_lettered_record_count=view.dead_lettered_record_count,
            expired_record_count=view.expired_record_count,
        )

    def _copy_at(self, now_ms: int) -> SharePartition:
        """A copy with the deadlines up to ``now_ms`` applied (its dead letters are dropped)."""
        copy = SharePartition(self.config, start_offset=self.start_offset,
                              state_epoch=self.state_epoch, leader_epoch=self.leader_epoch)
        copy.end_offset = self.end_offset
        copy._batches = [replace(batch) for batch in self._batches]
        copy.archived_record_count = self.archived_record_count
        copy.dead_lettered_record_count = self.dead_lettered_record_count
        copy.expired_record_count = self.expired_record_count
        copy.expire(now_ms)
        return copy

    # ---- transitions shared by the calls above --------------------------------------------

    @staticmethod
    def _lock_due(batch: _Batch, now_ms: int) -> bool:
        return batch.state is RecordState.ACQUIRED and batch.lock_deadline_ms is not None \
            and now_ms >= batch.lock_deadline_ms

    def _expiry_due(self, batch: _Batch, now_ms: int) -> bool:
        expiry_ms = self.config.record_expiry_ms
        return expiry_ms is not None and batch.state is RecordState.AVAILABLE \
            and batch.timestamp_ms is not None and now_ms >= batch.timestamp_ms + expiry_ms

    def _apply_deadlines(self, now_ms: int) -> None:
        for batch in list(self._batches):
            if self._lock_due(batch, now_ms):
                self._end_delivery(batch, now_ms)
        self._expire_records(now_ms)
        self._advance_start_offset()

    def _expire_records(self, now_ms: int) -> None:
        if self.config.record_expiry_ms is None:
            return
        for batch in list(self._batches):
            if self._expiry_due(batch, now_ms):
                self._archive(batch, DeadLetterReason.EXPIRED, now_ms)

    def _end_delivery(self, batch: _Batch, now_ms: int) -> None:
        """A delivery ended without an outcome (release, lock expiry, member gone)."""
        if batch.delivery_count >= self.config.delivery_count_limit:
            self._archive(batch, DeadLetterReason.DELIVERY_LIMIT, now_ms)
        else:
            batch.unlock(RecordState.AVAILABLE)

    def _archive(self, batch: _Batch, reason: DeadLetterReason, now_ms: int, *, count: bool = True) -> None:
        if count and reason is DeadLetterReason.EXPIRED:
            self.expired_record_count += batch.record_count
        if self.config.dead_letter_topic is None:
            batch.unlock(RecordState.ARCHIVED)
            if count:
                self.archived_record_count += batch.record_count
            return
        batch.unlock(RecordState.DEAD_LETTERING)
        batch.reason = reason
        self._dead_letters.append(DeadLetter(batch.first_offset, batch.last_offset, reason,
                                             batch.delivery_count, now_ms))

    # ---- the sorted batches ---------------------------------------------------------------

    def _split_at(self, offset: int) -> int:
        """Make ``offset`` (inside the window, or at its end) start a batch; return its index."""
        index = bisect.bisect_right(self._batches, offset, key=lambda batch: batch.first_offset) - 1
        if index < 0:
            return 0
        batch = self._batches[index]
        if batch.first_offset == offset:
            return index
        if offset > batch.last_offset:
            return index + 1
        self._split(batch, offset, index=index)
        return index + 1

    def _split(self, batch: _Batch, offset: int, *, index: int | None = None) -> None:
        if index is None:
            index = self._batches.index(batch)
        tail = replace(batch, first_offset=offset)
        batch.last_offset = offset - 1
        self._batches.insert(index + 1, tail)

    def _isolate(self, first_offset: int, last_offset: int) -> list[_Batch]:
        """The batches covering ``[first_offset, last_offset]`` ∩ the window, split so none
        reaches outside it."""
        first, last = max(first_offset, self.start_offset), min(last_offset, self.end_offset - 1)
        if first > last:
            return []
        start = self._split_at(first)
        stop = self._split_at(last + 1)
        return self._batches[start:stop]

    def _overlapping(self, first_offset: int, last_offset: int) -> Iterator[_Batch]:
        start = max(0, bisect.bisect_right(self._batches, first_offset, key=lambda batch: batch.first_offset) - 1)
        for batch in self._batches[start:]:
            if batch.first_offset > last_offset:
                return
            if batch.last_offset >= first_offset:
                yield batch

    def _advance_start_offset(self) -> None:
        done = 0
        while done < len(self._batches) and self._batches[done].state in _DONE:
            done += 1
        if done:
            del self._batches[:done]
            self.start_offset = self._batches[0].first_offset if self._batches else self.end_offset

    def _coalesce(self) -> None:
        merged: list[_Batch] = []
        for batch in self._batches:
            if merged and merged[-1].alike(batch):
                merged[-1].last_offset = batch.last_offset
            else:
                merged.append(batch)
        self._batches = merged


def _check_shape(acknowledgement: AcknowledgementBatch, previous_last: int) -> None:
    first, last, types = acknowledgement.first_offset, acknowledgement.last_offset, acknowledgement.acknowledge_types
    if first > last or first <= previous_last:
        raise InvalidRequestError(f"acknowledgement batch {first}-{last} is empty, out of order or overlapping")
    if len(types) not in (1, last - first + 1):
        raise InvalidRequestError(f"acknowledgement batch {first}-{last} has {len(types)} acknowledge types")
    if any(each not in AcknowledgeType._value2member_map_ for each in types):
        raise InvalidRequestError(f"acknowledgement batch {first}-{last} has an unknown acknowledge type")


def _runs(acknowledgement: AcknowledgementBatch) -> Iterator[tuple[int, int, AcknowledgeType]]:
    """The batch as ranges of one acknowledge type each."""
    types = acknowledgement.acknowledge_types
    if len(types) == 1:
        yield acknowledgement.first_offset, acknowledgement.last_offset, AcknowledgeType(types[0])
        return
    run_first = acknowledgement.first_offset
    for position, acknowledge_type in enumerate(types):
        offset = acknowledgement.first_offset + position
        if offset == acknowledgement.last_offset or types[position + 1] != acknowledge_type:
            yield run_first, offset, AcknowledgeType(acknowledge_type)
            run_first = offset + 1


def _merged_acquired(batches: Iterable[_Batch]) -> tuple[AcquiredRecords, ...]:
    merged: list[AcquiredRecords] = []
    for batch in batches:
        previous = merged[-1] if merged else None
        if previous is not None and previous.last_offset + 1 == batch.first_offset \
                and previous.delivery_count == batch.delivery_count:
            merged[-1] = replace(previous, last_offset=batch.last_offset)
        else:
            merged.append(AcquiredRecords(batch.first_offset, batch.last_offset, batch.delivery_count))
    return tuple(merged)


def _count(batches: Iterable[_Batch], state: RecordState) -> int:
    return sum(batch.record_count for batch in batches if batch.state is state)
