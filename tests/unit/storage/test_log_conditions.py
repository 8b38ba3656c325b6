"""Conditional appends at the log (``AppendCondition``, SamsaConditionalProduce): the end offset
and key conditions, nothing written on a conflict, ``last_offset_of_key`` against a dict model,
and concurrent read-modify-append writers interleaved by hypothesis."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.compression import CompressionType
from protocol.errors import OffsetConflictError
from protocol.records import Record, decode_batch, encode_batch
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import AppendCondition, Log
from storage.producer_state import EndMarker
from tests.unit.storage.helpers import crash

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=400, retention_ms=-1, file_delete_delay_ms=0)


def batch(*keys: bytes | None, value: bytes = b"v", compression: CompressionType = CompressionType.NONE,
          producer_id: int = -1, sequence: int = -1, transactional: bool = False) -> bytes:
    records = [Record(i, NOW, key, value) for i, key in enumerate(keys)]
    return encode_batch(records, base_offset=0, compression=compression, producer_id=producer_id,
                        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence,
                        is_transactional=transactional)


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    opened = Log.open(tmp_path / "events-0", CONFIG, clock=ManualClock(NOW))
    yield opened
    crash(opened)


def stored_values(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for segment, position, header in log.batches()
            for r in decode_batch(segment.read_batch_bytes(position, header)).records]


def test_the_expected_end_offset_appends_and_a_stale_one_conflicts(log: Log) -> None:
    assert log.append_as_leader(batch(b"a"), condition=AppendCondition(0)).first_offset == 0
    assert log.append_as_leader(batch(b"a", b"b"), condition=AppendCondition(1)).first_offset == 1
    before = log.active_segment.size
    with pytest.raises(OffsetConflictError, match="expected end offset 1, the log end offset is 3") as raised:
        log.append_as_leader(batch(b"c", value=b"lost"), condition=AppendCondition(1))
    assert raised.value.current_offset == 3
    assert (log.log_end_offset, log.active_segment.size) == (3, before)  # nothing written
    assert b"lost" not in [value for _, _, value in stored_values(log)]


def test_no_end_offset_condition_is_minus_one(log: Log) -> None:
    log.append_as_leader(batch(b"a"))
    assert log.append_as_leader(batch(b"a"), condition=AppendCondition(-1)).first_offset == 1


def test_the_key_condition_names_the_last_record_with_the_key(log: Log) -> None:
    first = AppendCondition(key=b"order-1", expected_key_offset=-1)
    assert log.append_as_leader(batch(b"order-1"), condition=first).first_offset == 0
    log.append_as_leader(batch(b"order-2", b"order-2"))
    with pytest.raises(OffsetConflictError,
                       match="expected no record with the key, the last one is at offset 2") as raised:
        log.append_as_leader(batch(b"order-2"), condition=AppendCondition(key=b"order-2"))
    assert raised.value.current_offset == 2
    with pytest.raises(OffsetConflictError, match="no record has it"):
        log.append_as_leader(batch(b"x"), condition=AppendCondition(key=b"x", expected_key_offset=1))
    with pytest.raises(OffsetConflictError) as raised:
        log.append_as_leader(batch(b"order-1"), condition=AppendCondition(key=b"order-1"))
    assert raised.value.current_offset == 0
    again = AppendCondition(key=b"order-1", expected_key_offset=0)
    assert log.append_as_leader(batch(b"order-1"), condition=again).first_offset == 3
    assert log.log_end_offset == 4


def test_both_conditions_the_end_offset_first(log: Log) -> None:
    log.append_as_leader(batch(b"k"))
    with pytest.raises(OffsetConflictError) as raised:
        log.append_as_leader(batch(b"k"), condition=AppendCondition(5, b"k", 7))
    assert raised.value.current_offset == 1  # the end offset's conflict
    with pytest.raises(OffsetConflictError) as raised:
        log.append_as_leader(batch(b"k"), condition=AppendCondition(1, b"k", 7))
    assert raised.value.current_offset == 0  # then the key's
    assert log.append_as_leader(batch(b"k"), condition=AppendCondition(1, b"k", 0)).first_offset == 1


def test_a_retried_idempotent_batch_gets_its_offsets_not_a_conflict(log: Log) -> None:
    data = batch(b"k", producer_id=7, sequence=0)
    assert log.append_as_leader(data, condition=AppendCondition(0)).first_offset == 0
    retried = log.append_as_leader(data, condition=AppendCondition(0))
    assert (retried.first_offset, retried.duplicate, log.log_end_offset) == (0, True, 1)


def test_a_conflict_leaves_the_producer_state_untouched(log: Log) -> None:
    log.append_as_leader(batch(b"k"))
    with pytest.raises(OffsetConflictError):
        log.append_as_leader(batch(b"k", producer_id=7, sequence=0), condition=AppendCondition(0))
    # Sequence 0 was not taken: the producer may send it again (after re-reading).
    assert log.append_as_leader(batch(b"k", producer_id=7, sequence=0),
                                condition=AppendCondition(1)).first_offset == 1


def test_last_offset_of_key_skips_aborted_transactions_and_markers(log: Log) -> None:
    log.append_as_leader(batch(b"a", b"b"))
    log.append_as_leader(batch(b"a", producer_id=9, sequence=0, transactional=True),
                         transaction_verified=True)
    assert log.last_offset_of_key(b"a") == 2  # an open transaction's record is in the log
    log.append_end_marker(9, 0, EndMarker(is_abort=True, coordinator_epoch=0))
    assert log.last_offset_of_key(b"a") == 0
    log.append_as_leader(batch(b"a", producer_id=9, sequence=1, transactional=True),
                         transaction_verified=True)
    log.append_end_marker(9, 0, EndMarker(is_abort=False, coordinator_epoch=0))
    assert log.last_offset_of_key(b"a") == 4
    assert log.last_offset_of_key(b"b") == 1
    assert log.last_offset_of_key(b"nobody") == -1


def test_last_offset_of_key_below_the_log_start_offset_is_gone(log: Log) -> None:
    log.append_as_leader(batch(b"a", b"b", b"c"))
    log.increment_log_start_offset(2)
    assert (log.last_offset_of_key(b"a"), log.last_offset_of_key(b"c")) == (-1, 2)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", None]), st.integers(1, 3),
                          st.sampled_from([CompressionType.NONE, CompressionType.GZIP])),
                max_size=30),
       st.sampled_from([b"a", b"b", b"c", b"d"]))
def test_last_offset_of_key_matches_a_dict_model(
    tmp_path_factory: pytest.TempPathFactory,
    appends: list[tuple[bytes | None, int, CompressionType]], probe: bytes,
) -> None:
    log = Log.open(tmp_path_factory.mktemp("log") / "events-0", CONFIG, clock=ManualClock(NOW))
    model: dict[bytes | None, int] = {}
    try:
        for key, count, compression in appends:  # segments of 400 bytes: many rolls
            result = log.append_as_leader(batch(*[key] * count, compression=compression))
            model[key] = result.last_offset
        assert log.last_offset_of_key(probe) == model.get(probe, -1)
    finally:
        crash(log)


# -- N writers doing read-modify-append with retries, interleaved by hypothesis -------------

STREAM = b"stream"


@dataclass
class Writer:
    """An event-sourcing writer: reads the stream's version (the partition's end offset, or
    the offset of the stream key's last record), prepares the next event, appends it with that
    version expected; on a conflict reads again and retries."""

    name: int
    events: int  # how many it wants to append
    by_key: bool  # the key condition, else the end offset condition
    appended: list[tuple[int, int]] = field(default_factory=list)  # (expected, offset) acked
    expected: int | None = None  # read, not yet appended

    @property
    def done(self) -> bool:
        return len(self.appended) == self.events

    def step(self, log: Log) -> None:
        if self.expected is None:  # read: another writer may append before we do
            self.expected = log.last_offset_of_key(STREAM) if self.by_key else log.log_end_offset
            return
        condition = (AppendCondition(key=STREAM, expected_key_offset=self.expected) if self.by_key
                     else AppendCondition(self.expected))
        value = b"%d:%d" % (self.name, len(self.appended))
        try:
            result = log.append_as_leader(batch(STREAM, value=value), condition=condition)
        except OffsetConflictError as conflict:
            actual = log.last_offset_of_key(STREAM) if self.by_key else log.log_end_offset
            assert conflict.current_offset == actual != self.expected
        else:
            assert self.by_key or result.first_offset == self.expected
            self.appended.append((self.expected, result.first_offset))
        self.expected = None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=5), st.booleans(),
       st.lists(st.integers(0, 40), max_size=6), st.randoms(use_true_random=False))
def test_concurrent_writers_make_a_gap_free_history_each_append_decided_once(
    tmp_path_factory: pytest.TempPathFactory, wanted: list[int], by_key: bool,
    other_keys_at: list[int], schedule: random.Random,
) -> None:
    """With the key condition, records of other keys are appended in between (at the step
    numbers drawn): the stream's history is then the chain of its key's records."""
    log = Log.open(tmp_path_factory.mktemp("log") / "events-0", CONFIG, clock=ManualClock(NOW))
    writers = [Writer(name, events, by_key) for name, events in enumerate(wanted)]
    steps = 0
    try:
        while not all(writer.done for writer in writers):
            if by_key and steps in other_keys_at:
                log.append_as_leader(batch(b"other"))
            schedule.choice([w for w in writers if not w.done]).step(log)
            steps += 1
        history = [(offset, value) for offset, key, value in stored_values(log) if key == STREAM]
        offsets = [offset for offset, _ in history]
        if not by_key:
            assert offsets == list(range(sum(wanted)))  # no gap, nothing else
        # Every success's expected version is the end offset it was appended at, or (key) the
        # stream's previous record: a chain, no fork.
        previous = dict(zip(offsets, [-1, *offsets[:-1]], strict=True))
        values = dict(history)
        for writer in writers:
            assert all((previous[offset] if by_key else offset) == expected
                       for expected, offset in writer.appended)
            # Each acknowledged append is in the log exactly once, in the writer's order.
            assert [values[offset] for _, offset in writer.appended] == [
                b"%d:%d" % (writer.name, i) for i in range(writer.events)]
        assert sorted(offset for w in writers for _, offset in w.appended) == offsets
    finally:
        crash(log)
