"""SharePartition transition by transition, and every error, table-driven (no sockets, no sleeps)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    AutoOffsetReset,
    DeadLetter,
    DeadLetterReason,
    FetchedBatch,
    InFlightBatch,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    ShareSnapshot,
    StateBatch,
    initial_start_offset,
)
from protocol.errors import InvalidRecordStateError, InvalidRequestError, KafkaError

NOW_MS = 1_700_000_000_000
DEAD_LETTERS = SharePartitionConfig(dead_letter_topic="orders.dead-letters")
A, B = "member-a", "member-b"
ACCEPT, RELEASE, REJECT, GAP = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                                AcknowledgeType.GAP)


def partition_with(config: SharePartitionConfig | None = None, **kwargs: Any) -> SharePartition:
    return SharePartition(config or SharePartitionConfig(**kwargs), start_offset=0)


def acquire(partition: SharePartition, member_id: str, first: int, last: int, *, now_ms: int = NOW_MS,
            max_records: int = 500, timestamp_ms: int | None = None) -> tuple[AcquiredRecords, ...]:
    return partition.acquire(member_id, [FetchedBatch(first, last, timestamp_ms)], now_ms=now_ms,
                             max_records=max_records)


def ack(partition: SharePartition, member_id: str, first: int, last: int, *types: int, now_ms: int = NOW_MS) -> None:
    partition.acknowledge(member_id, [AcknowledgementBatch(first, last, types)], now_ms=now_ms)


def states(partition: SharePartition, now_ms: int = NOW_MS) -> list[tuple[int, int, RecordState, int]]:
    return [(each.first_offset, each.last_offset, each.state, each.delivery_count)
            for each in partition.describe(now_ms).batches]


# ---- initialization --------------------------------------------------------------------------


@pytest.mark.parametrize(("reset", "expected"), [(AutoOffsetReset.LATEST, 120), (AutoOffsetReset.EARLIEST, 40)])
def test_share_auto_offset_reset_picks_the_start_offset(reset: AutoOffsetReset, expected: int) -> None:
    assert initial_start_offset(reset, log_start_offset=40, log_end_offset=120) == expected


def test_kafkas_defaults() -> None:
    config = SharePartitionConfig()
    assert (config.record_lock_duration_ms, config.delivery_count_limit, config.partition_max_record_locks) == (
        30_000, 5, 2000)
    assert config.dead_letter_topic is None and config.record_expiry_ms is None


@pytest.mark.parametrize("field", ["record_lock_duration_ms", "delivery_count_limit", "partition_max_record_locks",
                                   "record_expiry_ms"])
def test_a_config_value_must_be_positive(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SharePartitionConfig(**{field: 0})  # type: ignore[arg-type]


# ---- acquisition -----------------------------------------------------------------------------


def test_acquire_locks_new_records_for_the_member() -> None:
    partition = partition_with()
    assert acquire(partition, A, 0, 9) == (AcquiredRecords(0, 9, 1),)
    assert partition.describe(NOW_MS).batches == (
        InFlightBatch(0, 9, RecordState.ACQUIRED, 1, A, NOW_MS + 30_000),)
    assert (partition.start_offset, partition.end_offset) == (0, 10)


def test_acquire_stops_at_max_records_splitting_a_batch() -> None:
    partition = partition_with()
    assert acquire(partition, A, 0, 9, max_records=4) == (AcquiredRecords(0, 3, 1),)
    assert acquire(partition, B, 0, 9, max_records=4) == (AcquiredRecords(4, 7, 1),)
    assert states(partition) == [(0, 3, RecordState.ACQUIRED, 1), (4, 7, RecordState.ACQUIRED, 1),
                                 (8, 9, RecordState.AVAILABLE, 0)]


def test_no_record_past_start_offset_plus_the_record_lock_limit_is_taken_in() -> None:
    partition = partition_with(partition_max_record_locks=5)
    assert acquire(partition, A, 0, 9) == (AcquiredRecords(0, 4, 1),)
    assert partition.end_offset == 5
    assert acquire(partition, B, 0, 9) == ()
    ack(partition, A, 0, 1, ACCEPT)
    assert acquire(partition, B, 0, 9) == (AcquiredRecords(5, 6, 1),)


def test_records_held_by_another_member_are_skipped() -> None:
    partition = partition_with()
    acquire(partition, A, 0, 5)
    partition.acknowledge(A, [AcknowledgementBatch(0, 1, (RELEASE,)), AcknowledgementBatch(4, 5, (RELEASE,))],
                          now_ms=NOW_MS)
    assert acquire(partition, B, 0, 5) == (AcquiredRecords(0, 1, 2), AcquiredRecords(4, 5, 2))


def test_offsets_the_log_skipped_are_archived_gaps() -> None:
    partition = partition_with()
    result = partition.acquire(A, [FetchedBatch(0, 1), FetchedBatch(5, 6)], now_ms=NOW_MS, max_records=10)
    assert result == (AcquiredRecords(0, 1, 1), AcquiredRecords(5, 6, 1))
    assert states(partition)[1] == (2, 4, RecordState.ARCHIVED, 0)
    assert partition.describe(NOW_MS).archived_record_count == 0  # gaps are not records


def test_max_records_must_be_positive() -> None:
    with pytest.raises(InvalidRequestError):
        acquire(partition_with(), A, 0, 9, max_records=0)


# ---- acknowledgement -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "acknowledge_type", "expected_state", "start_offset"),
    [
        (SharePartitionConfig(), ACCEPT, RecordState.ACKNOWLEDGED, 3),
        (SharePartitionConfig(), RELEASE, RecordState.AVAILABLE, 0),
        (SharePartitionConfig(), REJECT, RecordState.ARCHIVED, 3),
        (SharePartitionConfig(), GAP, RecordState.ARCHIVED, 3),
        (DEAD_LETTERS, REJECT, RecordState.DEAD_LETTERING, 0),
        (DEAD_LETTERS, GAP, RecordState.ARCHIVED, 3),
    ],
)
def test_an_acknowledgement_moves_the_records(
    config: SharePartitionConfig, acknowledge_type: int, expected_state: RecordState, start_offset: int
) -> None:
    partition = partition_with(config=config)
    acquire(partition, A, 0, 2)
    ack(partition, A, 0, 2, acknowledge_type)
    assert partition.start_offset == start_offset
    if start_offset == 0:
        assert states(partition) == [(0, 2, expected_state, 1)]


def test_a_released_record_is_delivered_again_with_a_higher_count() -> None:
    partition = partition_with()
    acquire(partition, A, 0, 2)
    ack(partition, A, 1, 1, RELEASE)
    assert acquire(partition, B, 0, 2) == (AcquiredRecords(1, 1, 2),)


def test_one_acknowledge_type_per_offset() -> None:
    partition = partition_with()
    acquire(partition, A, 0, 3)
    ack(partition, A, 0, 3, ACCEPT, RELEASE, RELEASE, REJECT)
    assert states(partition) == [(1, 2, RecordState.AVAILABLE, 1), (3, 3, RecordState.ARCHIVED, 1)]


def test_a_rejection_with_a_dead_letter_topic_waits_for_the_append() -> None:
    partition = partition_with(config=DEAD_LETTERS)
    acquire(partition, A, 0, 4)
    ack(partition, A, 0, 1, REJECT, now_ms=NOW_MS + 5)
    assert partition.take_dead_letters() == (DeadLetter(0, 1, DeadLetterReason.REJECTED, 1, NOW_MS + 5),)
    assert partition.take_dead_letters() == ()
    assert acquire(partition, B, 0, 4) == ()  # 0-1 dead-lettering, 2-4 held by A
    assert partition.start_offset == 0
    partition.dead_lettered(0, 1)
    partition.dead_lettered(0, 1)  # a redo changes nothing
    assert partition.start_offset == 2
    assert partition.describe(NOW_MS).dead_lettered_record_count == 2


@pytest.mark.parametrize(
    ("member_id", "batches", "error"),
    [
        (B, [AcknowledgementBatch(0, 1, (ACCEPT,))], InvalidRecordStateError),  # held by A
        (A, [AcknowledgementBatch(4, 5, (ACCEPT,))], InvalidRecordStateError),  # 5 is not acquired
        (A, [AcknowledgementBatch(3, 12, (ACCEPT,))], InvalidRecordStateError),  # past SPEO
        (A, [AcknowledgementBatch(0, 0, (ACCEPT,)), AcknowledgementBatch(5, 5, (ACCEPT,))], InvalidRecordStateError),
        (A, [AcknowledgementBatch(2, 1, (ACCEPT,))], InvalidRequestError),  # empty
        (A, [AcknowledgementBatch(0, 2, (ACCEPT, ACCEPT))], InvalidRequestError),  # two types, three offsets
        (A, [AcknowledgementBatch(0, 1, (4,))], InvalidRequestError),  # no such type
        (A, [AcknowledgementBatch(0, 1, ())], InvalidRequestError),
        (A, [AcknowledgementBatch(0, 2, (ACCEPT,)), AcknowledgementBatch(2, 3, (ACCEPT,))], InvalidRequestError),
        (A, [AcknowledgementBatch(2, 3, (ACCEPT,)), AcknowledgementBatch(0, 1, (ACCEPT,))], InvalidRequestError),
    ],
)
def test_a_bad_acknowledgement_is_refused_and_changes_nothing(
    member_id: str, batches: list[AcknowledgementBatch], error: type[KafkaError]
) -> None:
    partition = partition_with(config=DEAD_LETTERS)
    acquire(partition, A, 0, 4)
    acquire(partition, B, 5, 7)
    before = partition.describe(NOW_MS)
    with pytest.raises(error):
        partition.acknowledge(member_id, batches, now_ms=NOW_MS)
    assert partition.describe(NOW_MS) == before
    assert partition.take_dead_letters() == ()


def test_records_below_the_start_offset_cannot_be_acknowledged() -> None:
    partition = partition_with()
    acquire(partition, A, 0, 4)
    ack(partition, A, 0, 1, ACCEPT)
    with pytest.raises(InvalidRecordStateError):
        ack(partition, A, 1, 2, ACCEPT)


def test_an_expired_lock_cannot_be_acknowledged() -> None:
    partition = partition_with()
    acquire(partition, A, 0, 1)
    with pytest.raises(InvalidRecordStateError):
        ack(partition, A, 0, 1, ACCEPT, now_ms=NOW_MS + 30_000)


# ---- locks, limits, members ------------------------------------------------------------------


def test_a_lock_expires_at_its_deadline() -> None:
    partition = partition_with()
    acquire(partition, A, 0, 1)
    assert partition.next_deadline_ms() == NOW_MS + 30_000
    partition.expire(NOW_MS + 29_999)
    assert states(partition, NOW_MS + 29_999) == [(0, 1, RecordState.ACQUIRED, 1)]
    partition.expire(NOW_MS + 30_000)
    assert states(partition, NOW_MS + 30_000) == [(0, 1, RecordState.AVAILABLE, 1)]
    assert partition.next_deadline_ms() is None


@pytest.mark.parametrize(
    ("config", "state", "dead_letters"),
    [
        (SharePartitionConfig(delivery_count_limit=2), RecordState.ARCHIVED, 0),
        (SharePartitionConfig(delivery_count_limit=2, dead_letter_topic="dlt"), RecordState.DEAD_LETTERING, 1),
    ],
)
@pytest.mark.parametrize("how", ["lock expires", "release", "member leaves"])
def test_the_last_delivery_ends_in_the_archive(
    config: SharePartitionConfig, state: RecordState, dead_letters: int, how: str
) -> None:
    partition = partition_with(config=config)
    for delivery in (1, 2):
        now_ms = NOW_MS + delivery * 100_000
        assert acquire(partition, A, 0, 0, now_ms=now_ms) == (AcquiredRecords(0, 0, delivery),)
        if how == "lock expires":
            partition.expire(now_ms + 30_000)
        elif how == "release":
            ack(partition, A, 0, 0, RELEASE, now_ms=now_ms)
        else:
            partition.release_member(A, now_ms=now_ms)
    assert acquire(partition, B, 0, 0, now_ms=NOW_MS + 300_000) == ()
    taken = partition.take_dead_letters()
    assert [each.reason for each in taken] == [DeadLetterReason.DELIVERY_LIMIT] * dead_letters
    if state is RecordState.DEAD_LETTERING:
        assert states(partition, NOW_MS + 300_000) == [(0, 0, state, 2)]
    else:
        assert partition.start_offset == 1 and partition.describe(NOW_MS + 300_000).archived_record_count == 1


def test_a_member_leaving_releases_only_its_own_records() -> None:
    partition = partition_with()
    acquire(partition, A, 0, 1)
    acquire(partition, B, 2, 3)
    partition.release_member(A, now_ms=NOW_MS)
    assert states(partition) == [(0, 1, RecordState.AVAILABLE, 1), (2, 3, RecordState.ACQUIRED, 1)]


# ---- record expiry ---------------------------------------------------------------------------


@pytest.mark.parametrize(("dead_letter_topic", "state"), [(None, None), ("dlt", RecordState.DEAD_LETTERING)])
def test_a_record_too_old_is_never_delivered(dead_letter_topic: str | None, state: RecordState | None) -> None:
    config = SharePartitionConfig(record_expiry_ms=60_000, dead_letter_topic=dead_letter_topic)
    partition = partition_with(config=config)
    fetched = [FetchedBatch(0, 1, NOW_MS - 60_000), FetchedBatch(2, 3, NOW_MS - 59_999)]
    assert partition.acquire(A, fetched, now_ms=NOW_MS, max_records=10) == (AcquiredRecords(2, 3, 1),)
    assert partition.describe(NOW_MS).expired_record_count == 2
    if state is None:
        assert partition.start_offset == 2
        assert partition.take_dead_letters() == ()
    else:
        assert states(partition)[0] == (0, 1, state, 0)
        assert partition.take_dead_letters() == (DeadLetter(0, 1, DeadLetterReason.EXPIRED, 0, NOW_MS),)


def test_an_available_record_expires_while_it_waits() -> None:
    partition = partition_with(config=SharePartitionConfig(record_expiry_ms=60_000, dead_letter_topic="dlt"))
    acquire(partition, A, 0, 1, timestamp_ms=NOW_MS)
    ack(partition, A, 0, 1, RELEASE, now_ms=NOW_MS + 10)
    assert partition.next_deadline_ms() == NOW_MS + 60_000
    partition.expire(NOW_MS + 60_000)
    assert partition.take_dead_letters() == (DeadLetter(0, 1, DeadLetterReason.EXPIRED, 1, NOW_MS + 60_000),)


# ---- the log start offset --------------------------------------------------------------------


def test_records_below_a_new_log_start_offset_are_forgotten() -> None:
    partition = partition_with(config=DEAD_LETTERS)
    acquire(partition, A, 0, 5)
    ack(partition, A, 1, 1, REJECT)
    partition.advance_log_start_offset(3)
    assert partition.take_dead_letters() == ()  # record 1 is gone: nothing to dead-letter
    assert (partition.start_offset, states(partition)) == (3, [(3, 5, RecordState.ACQUIRED, 1)])
    partition.advance_log_start_offset(10)
    assert (partition.start_offset, partition.end_offset, states(partition)) == (10, 10, [])
    partition.advance_log_start_offset(4)
    assert partition.start_offset == 10


# ---- persistence -----------------------------------------------------------------------------


def test_the_snapshot_has_kafkas_shape_and_codes() -> None:
    config = SharePartitionConfig(dead_letter_topic="dlt", delivery_count_limit=2)
    partition = SharePartition(config, start_offset=100, state_epoch=3, leader_epoch=7)
    acquire(partition, A, 100, 109)
    ack(partition, A, 100, 105, RELEASE, ACCEPT, ACCEPT, REJECT, RELEASE, ACCEPT)
    assert partition.snapshot() == ShareSnapshot(state_epoch=3, leader_epoch=7, start_offset=100, state_batches=(
        StateBatch(100, 100, 0, 1),
        StateBatch(101, 102, 2, 1),
        StateBatch(103, 103, 100, 1),  # DEAD_LETTERING, rejected: Samsa's code
        StateBatch(104, 104, 0, 1),
        StateBatch(105, 105, 2, 1),
        StateBatch(106, 109, 0, 1),  # acquired: persisted as available, with its count
    ))


def test_a_restore_is_the_original_without_its_locks() -> None:
    config = SharePartitionConfig(dead_letter_topic="dlt", delivery_count_limit=2)
    partition = partition_with(config=config)
    acquire(partition, A, 0, 9)
    ack(partition, A, 0, 2, RELEASE)
    acquire(partition, B, 0, 1)  # 0-1 at their last delivery
    ack(partition, A, 3, 3, REJECT)
    ack(partition, A, 4, 4, ACCEPT)
    partition.take_dead_letters()
    restored = SharePartition.restore(partition.snapshot(), config, now_ms=NOW_MS + 1)
    assert states(restored, NOW_MS + 1) == [
        (0, 1, RecordState.DEAD_LETTERING, 2),  # the lock would have expired at the limit
        (2, 2, RecordState.AVAILABLE, 1),
        (3, 3, RecordState.DEAD_LETTERING, 1),
        (4, 4, RecordState.ACKNOWLEDGED, 1),
        (5, 9, RecordState.AVAILABLE, 1),
    ]
    assert restored.take_dead_letters() == (
        DeadLetter(0, 1, DeadLetterReason.DELIVERY_LIMIT, 2, NOW_MS + 1),
        DeadLetter(3, 3, DeadLetterReason.REJECTED, 1, NOW_MS + 1),
    )
    assert (restored.state_epoch, restored.leader_epoch) == (partition.state_epoch, partition.leader_epoch)


def test_a_restore_fills_offsets_in_no_state_batch_as_never_delivered() -> None:
    snapshot = ShareSnapshot(0, 0, 10, (StateBatch(8, 11, 2, 1), StateBatch(14, 14, 4, 1)))
    restored = SharePartition.restore(snapshot, SharePartitionConfig(), now_ms=NOW_MS)
    assert (restored.start_offset, restored.end_offset) == (12, 15)
    assert states(restored) == [(12, 13, RecordState.AVAILABLE, 0), (14, 14, RecordState.ARCHIVED, 1)]


def test_a_restore_refuses_an_unknown_delivery_state() -> None:
    with pytest.raises(ValueError, match="delivery state 3"):
        SharePartition.restore(ShareSnapshot(0, 0, 0, (StateBatch(0, 0, 3, 1),)), SharePartitionConfig(), now_ms=0)


# ---- observability ---------------------------------------------------------------------------


def test_describe_shows_the_window_locks_and_counts_without_changing_anything() -> None:
    partition = partition_with(config=DEAD_LETTERS)
    acquire(partition, A, 0, 5)
    ack(partition, A, 0, 0, ACCEPT)
    ack(partition, A, 1, 1, REJECT)
    description = partition.describe(NOW_MS)
    assert (description.start_offset, description.end_offset, description.in_flight_record_count) == (1, 6, 5)
    assert (description.acquired_record_count, description.dead_lettering_record_count) == (4, 1)
    assert description.batches[1] == InFlightBatch(2, 5, RecordState.ACQUIRED, 1, A, NOW_MS + 30_000)
    later = partition.describe(NOW_MS + 30_000)  # shows the locks as expired ...
    assert later.acquired_record_count == 0
    assert partition.describe(NOW_MS) == description  # ... without expiring them
