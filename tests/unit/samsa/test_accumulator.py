"""The record accumulator (batching by size and linger, ordering, draining per broker,
retries, expiry, memory) and the idempotent producer's sequence bookkeeping that gates the
drain. Times are passed in: no clock, no socket."""

from __future__ import annotations

import pytest

from protocol.records import decode_batch
from samsa._accumulator import (
    APPENDED,
    BATCH_FULL,
    NEW_BATCH,
    NO_MEMORY,
    Condition,
    ProducerBatch,
    RecordAccumulator,
    now_ms,
)
from samsa._encoding import BatchBuilder
from samsa._idempotence import IdempotenceState
from samsa.types import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
LEADERS = {A0: 1, A1: 2, B0: 1}
VALUE = b"v" * 100
T = 1_700_000_000_000


def accumulator(**overrides: int) -> RecordAccumulator:
    settings = {"batch_size": 1000, "linger_ms": 5, "buffer_memory": 1 << 20,
                "retry_backoff_ms": 100, "retry_backoff_max_ms": 1000,
                "delivery_timeout_ms": 120_000, **overrides}
    return RecordAccumulator(**settings)


def append(acc: RecordAccumulator, tp: TopicPartition, marker: object, **kwargs: object) -> int:
    return acc.append(tp, T, None, VALUE, None, marker, **kwargs)  # type: ignore[arg-type]


def fill(acc: RecordAccumulator, tp: TopicPartition, count: int) -> list[int]:
    return [append(acc, tp, (tp, index)) for index in range(count)]


def drain_all(acc: RecordAccumulator, node: int, now: float) -> list[ProducerBatch]:
    ready, _, _ = acc.ready(LEADERS, now)
    return acc.drain(node, ready.get(node, []), 10**9, now)


# --- batching -----------------------------------------------------------------------------------


def test_records_share_a_batch_until_batch_size() -> None:
    acc = accumulator()
    flags = fill(acc, A0, 20)
    assert flags[0] == APPENDED | NEW_BATCH
    per_batch = flags.index(APPENDED | NEW_BATCH | BATCH_FULL, 1)
    assert 1 < per_batch < 10  # 1000-byte batches of ~110-byte records
    assert all(f == APPENDED for f in flags[1:per_batch])
    batches = drain_all(acc, 1, now_ms())
    assert len(batches) == 1  # one batch per partition per request
    assert batches[0].record_count == per_batch
    assert batches[0].builder.size <= 1000


def test_a_conditional_record_is_a_batch_of_its_own_in_partition_order() -> None:
    acc = accumulator(linger_ms=10_000)
    fill(acc, A0, 2)
    flags = acc.append_conditional(A0, T, b"k", VALUE, None, "cond", Condition(2))
    assert flags == APPENDED | NEW_BATCH | BATCH_FULL
    assert acc.append_conditional(A0, T, b"k", VALUE, None, "cond2", Condition(3, b"k", -1)) \
        == APPENDED | NEW_BATCH | BATCH_FULL
    fill(acc, A0, 2)
    now = now_ms()
    batches = [acc.drain(1, [A0], 10**9, now)[0] for _ in range(4)]
    assert [batch.records for batch in batches] == [
        [(A0, 0), (A0, 1)], ["cond"], ["cond2"], [(A0, 0), (A0, 1)]]
    assert [batch.condition for batch in batches] == [
        None, Condition(2, None, -1), Condition(3, b"k", -1), None]


def test_a_lingering_batch_is_ready_only_after_linger_ms() -> None:
    acc = accumulator(linger_ms=50)
    append(acc, A0, "r")
    created = now_ms()
    ready, delay, unknown = acc.ready(LEADERS, created)
    assert ready == {} and unknown == set()
    assert delay is not None and 0 < delay <= 50
    ready, _, _ = acc.ready(LEADERS, created + 60)
    assert ready == {1: [A0]}


def test_a_full_batch_is_ready_at_once() -> None:
    acc = accumulator(linger_ms=10_000)
    fill(acc, A0, 12)
    ready, _, _ = acc.ready(LEADERS, now_ms())
    assert ready == {1: [A0]}


def test_flush_and_close_hurry_every_batch() -> None:
    acc = accumulator(linger_ms=10_000)
    append(acc, A0, "r")
    acc.flushes_in_progress += 1
    assert acc.ready(LEADERS, now_ms())[0] == {1: [A0]}
    acc.flushes_in_progress -= 1
    assert acc.ready(LEADERS, now_ms())[0] == {}
    acc.begin_close()
    assert acc.ready(LEADERS, now_ms())[0] == {1: [A0]}


def test_unknown_leaders_are_reported_by_topic() -> None:
    acc = accumulator()
    append(acc, TopicPartition("new", 0), "r")
    ready, _, unknown = acc.ready(LEADERS, now_ms() + 100)
    assert ready == {} and unknown == {"new"}


def test_batches_complete_until_a_batch_opens_and_again_once_drained() -> None:
    acc = accumulator()
    assert acc.batches_complete(A0)  # no batch at all
    append(acc, A0, "r")
    assert not acc.batches_complete(A0)
    acc.drain(0, [A0], 1 << 20, now_ms())
    assert acc.batches_complete(A0)


def test_ready_reports_queue_lengths_per_topic() -> None:
    acc = accumulator()
    seen: list[dict[str, dict[int, int]]] = []
    acc.load_listener = seen.append
    append(acc, A0, "r")
    append(acc, TopicPartition("new", 0), "r")
    acc.ready(LEADERS, now_ms())
    assert seen == [{"a": {0: 1}, "new": {0: -1}}]  # -1: no leader


# --- order and draining ------------------------------------------------------------------------


def test_records_and_batches_keep_their_order() -> None:
    acc = accumulator(linger_ms=0)
    fill(acc, A0, 30)
    records = []
    while batches := drain_all(acc, 1, now_ms()):
        for batch in batches:
            records += batch.records
            payload = batch.builder.close()
            assert [r.offset for r in decode_batch(payload).records] == \
                list(range(batch.record_count))
    assert records == [(A0, index) for index in range(30)]


def test_drain_takes_one_batch_of_each_partition_the_node_leads() -> None:
    acc = accumulator(linger_ms=0)
    for tp in (A0, A1, B0):
        fill(acc, tp, 20)
    now = now_ms()
    ready, _, _ = acc.ready(LEADERS, now)
    assert sorted(ready) == [1, 2] and sorted(ready[1]) == [A0, B0]
    node1 = acc.drain(1, ready[1], 10**9, now)
    assert sorted(b.topic_partition for b in node1) == [A0, B0]
    node2 = acc.drain(2, ready[2], 10**9, now)
    assert [b.topic_partition for b in node2] == [A1]


def test_drain_stops_at_max_request_size_but_always_takes_one() -> None:
    acc = accumulator(linger_ms=0)
    fill(acc, A0, 5)
    fill(acc, B0, 5)
    now = now_ms()
    partitions = acc.ready(LEADERS, now)[0][1]
    first = acc.drain(1, partitions, 10, now)
    assert len(first) == 1  # bigger than 10 bytes, but the first always goes
    second = acc.drain(1, partitions, 10, now)
    assert len(second) == 1 and second[0].topic_partition != first[0].topic_partition


def test_drain_rotates_the_partition_it_starts_from() -> None:
    acc = accumulator(linger_ms=0)
    for tp in (A0, B0):
        fill(acc, tp, 40)
    starts = []
    now = now_ms()
    for _ in range(4):
        partitions = acc.ready(LEADERS, now)[0][1]
        starts.append(acc.drain(1, partitions, 1, now)[0].topic_partition)
    assert set(starts) == {A0, B0}


# --- retries, expiry, memory ------------------------------------------------------------------


def test_a_retried_batch_goes_first_after_its_backoff() -> None:
    acc = accumulator(linger_ms=0)
    fill(acc, A0, 20)
    now = now_ms()
    first = drain_all(acc, 1, now)[0]
    acc.reenqueue(first, now)
    assert first.attempts == 1
    assert drain_all(acc, 1, now) == []  # backing off
    ready, delay, _ = acc.ready(LEADERS, now)
    assert ready == {} and delay == pytest.approx(100)
    assert drain_all(acc, 1, now + 101) == [first]
    acc.reenqueue(first, now + 101)
    assert first.retry_after_ms == pytest.approx(now + 101 + 200)  # doubling


def test_retried_batches_line_up_in_sequence_order() -> None:
    acc = accumulator(linger_ms=0)
    fill(acc, A0, 30)
    now = now_ms()
    drained = [drain_all(acc, 1, now)[0] for _ in range(3)]
    for sequence, batch in enumerate(drained):
        batch.base_sequence = sequence * 10
    for batch in (drained[2], drained[0], drained[1]):
        acc.reenqueue(batch, now)
    later = now + 1000
    assert [drain_all(acc, 1, later)[0] for _ in range(3)] == drained


def test_expire_removes_batches_past_the_delivery_timeout() -> None:
    acc = accumulator(delivery_timeout_ms=1000)
    fill(acc, A0, 3)
    created = now_ms()
    assert acc.expire(created + 10) == []
    expired = acc.expire(created + 5000)
    assert [b.record_count for b in expired] == [3]
    assert drain_all(acc, 1, created + 5000) == []


def test_memory_is_reserved_per_batch_and_released_on_completion() -> None:
    acc = accumulator(batch_size=1000, buffer_memory=2500)
    fill(acc, A0, 1)
    fill(acc, B0, 1)
    assert acc.available_memory == 500
    assert append(acc, A1, "r") == NO_MEMORY
    assert append(acc, A0, "r") == APPENDED  # the open batch still takes records
    batch = drain_all(acc, 1, now_ms() + 100)[0]
    acc.deallocate(batch)
    assert acc.available_memory == 1500
    assert append(acc, A1, "r") & APPENDED


def test_waiting_for_memory_hurries_batches_and_times_out() -> None:
    acc = accumulator(batch_size=1000, buffer_memory=1000, linger_ms=10_000)
    fill(acc, A0, 1)
    assert not acc.wait_for_memory(1000, 0.01)
    assert not acc.memory_exhausted  # nobody waits any more


# --- idempotence: sequences gate the drain ---------------------------------------------------


def gated_drain(acc: RecordAccumulator, state: IdempotenceState, now: float
                ) -> list[ProducerBatch]:
    ready, _, _ = acc.ready(LEADERS, now)
    return acc.drain(1, ready.get(1, []), 10**9, now, state.gate)


def test_no_drain_without_a_producer_id_then_sequences_follow_on() -> None:
    acc, state = accumulator(linger_ms=0), IdempotenceState()
    fill(acc, A0, 30)
    assert gated_drain(acc, state, now_ms()) == []
    state.set_producer_id(1000, 0)
    batches = [gated_drain(acc, state, now_ms())[0] for _ in range(3)]
    sequences = [b.base_sequence for b in batches]
    assert sequences[0] == 0
    assert sequences[1] == batches[0].record_count
    assert sequences[2] == sequences[1] + batches[1].record_count
    assert {(b.producer_id, b.producer_epoch) for b in batches} == {(1000, 0)}


def test_a_retry_goes_only_as_the_first_unfinished_batch() -> None:
    acc, state = accumulator(linger_ms=0), IdempotenceState()
    state.set_producer_id(1, 0)
    fill(acc, A0, 30)
    now = now_ms()
    first, second = gated_drain(acc, state, now)[0], gated_drain(acc, state, now)[0]
    acc.reenqueue(second, now)  # the later one failed first
    acc.reenqueue(first, now)
    later = now + 1000
    assert gated_drain(acc, state, later) == [first]
    assert gated_drain(acc, state, later) == []  # second waits for first to finish
    state.on_success(first)
    assert gated_drain(acc, state, later) == [second]


def test_a_failed_batch_bumps_the_epoch_and_rewrites_what_follows() -> None:
    acc, state = accumulator(linger_ms=0), IdempotenceState()
    state.set_producer_id(1, 0)
    fill(acc, A0, 30)
    now = now_ms()
    first, second = gated_drain(acc, state, now)[0], gated_drain(acc, state, now)[0]
    second.payload = second.builder.close(producer_id=1, producer_epoch=0,
                                          base_sequence=second.base_sequence)
    state.on_failure(first)
    assert state.epoch_bump_required
    assert gated_drain(acc, state, now) == []  # nothing new until the bump
    state.bump_epoch()
    assert (state.epoch, second.producer_epoch, second.base_sequence) == (1, 1, 0)
    header = decode_batch(second.payload).header  # rewritten in place, CRC still valid
    assert (header.producer_epoch, header.base_sequence) == (1, 0)
    third = gated_drain(acc, state, now)[0]
    assert (third.producer_epoch, third.base_sequence) == (1, second.record_count)


def test_out_of_order_for_the_next_batch_bumps_otherwise_just_retries() -> None:
    acc, state = accumulator(linger_ms=0), IdempotenceState()
    state.set_producer_id(1, 0)
    fill(acc, A0, 30)
    now = now_ms()
    first, second = gated_drain(acc, state, now)[0], gated_drain(acc, state, now)[0]
    assert state.should_retry_sequence_error(second)
    assert not state.epoch_bump_required  # an earlier batch is still unfinished
    assert state.should_retry_sequence_error(first)
    assert state.epoch_bump_required  # the broker lost track of the very next one


def test_other_partitions_finish_their_old_epoch_first() -> None:
    acc, state = accumulator(linger_ms=0), IdempotenceState()
    state.set_producer_id(1, 0)
    fill(acc, A0, 3)  # one batch
    fill(acc, B0, 30)
    now = now_ms()
    drained = gated_drain(acc, state, now)
    in_flight_b = next(b for b in drained if b.topic_partition == B0)
    failed_a = next(b for b in drained if b.topic_partition == A0)
    state.on_failure(failed_a)
    state.bump_epoch()
    assert [b.topic_partition for b in gated_drain(acc, state, now)] == []  # B0 waits
    state.on_success(in_flight_b)
    next_b = gated_drain(acc, state, now)[0]
    assert (next_b.producer_epoch, next_b.base_sequence) == (1, 0)


def test_split_batches_take_the_sequences_of_the_one_they_replace() -> None:
    acc, state = accumulator(linger_ms=0), IdempotenceState()
    state.set_producer_id(1, 0)
    fill(acc, A0, 30)
    now = now_ms()
    batch = gated_drain(acc, state, now)[0]
    parts = []
    for entries in (batch.records[:2], batch.records[2:]):
        part = ProducerBatch(A0, BatchBuilder(10**6), batch.created_ms, 0)
        for _ in entries:
            part.builder.append(T, None, VALUE, None)
        part.records = list(entries)
        parts.append(part)
    state.split(batch, parts)
    acc.split(batch, parts, now)
    assert [p.base_sequence for p in parts] == [0, 2]
    later = now + 1000
    assert gated_drain(acc, state, later) == [parts[0]]
    state.on_success(parts[0])
    assert gated_drain(acc, state, later) == [parts[1]]
