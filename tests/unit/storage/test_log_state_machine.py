"""Log against a plain in-memory model: append, roll, read anywhere, truncate, retention,
offset-for-timestamp, clean and unclean reopen, driven by hypothesis."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.errors import CorruptMessageError
from protocol.records import LOG_OVERHEAD, Record, encode_batch, iter_batches, read_batch_header
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.segment import TimestampAndOffset
from tests.unit.storage.helpers import crash

CONFIG = LogConfig(
    segment_bytes=2048,
    index_interval_bytes=128,
    segment_index_bytes=64 * 8,
    retention_ms=-1,
    message_timestamp_after_max_ms=2**62,
    file_delete_delay_ms=0,
)


@dataclass(frozen=True)
class ModelRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def batch_bytes(values: list[bytes], timestamps: list[int]) -> bytes:
    records = [
        Record(offset=i, timestamp=t, key=b"k%d" % i, value=v)
        for i, (v, t) in enumerate(zip(values, timestamps, strict=True))
    ]
    return encode_batch(records, base_offset=0)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="samsa-log-sm-"))
        self.clock = ManualClock()
        self.log = Log.open(self.root / "topic-0", CONFIG, clock=self.clock)
        self.records: list[ModelRecord] = []
        self.batch_bounds: list[int] = [0]  # offsets at which batches start, plus the LEO
        self.log_start = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def leo(self) -> int:
        return self.batch_bounds[-1]

    @rule(
        values=st.lists(st.binary(max_size=200), min_size=1, max_size=8),
        skew=st.lists(st.integers(-5_000, 5_000), min_size=8, max_size=8),
    )
    def append(self, values: list[bytes], skew: list[int]) -> None:
        self.clock.advance(10)
        timestamps = [self.clock.now_ms + skew[i] for i in range(len(values))]
        result = self.log.append_as_leader(batch_bytes(values, timestamps), leader_epoch=3)
        assert result.first_offset == self.leo
        for i, (value, timestamp) in enumerate(zip(values, timestamps, strict=True)):
            self.records.append(ModelRecord(self.leo + i, timestamp, b"k%d" % i, value))
        self.batch_bounds.append(self.leo + len(values))

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(data=st.data())
    def read_anywhere(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.leo))
        max_bytes = data.draw(st.sampled_from([1, 100, 1000, 100_000]))
        piece = self.log.read(offset, max_bytes)
        if offset == self.leo:
            assert piece is None
            return
        assert piece is not None
        batches = list(_whole_batches(piece.read()))
        assert batches, "min_one_message must return at least one whole batch"
        assert batches[0].header.base_offset <= offset <= batches[0].header.last_offset
        for batch in batches:
            assert batch.header.partition_leader_epoch == 3
            for record in batch.records:
                expected = self.records[record.offset - self.records[0].offset]
                assert (record.offset, record.timestamp, record.value) == (
                    expected.offset, expected.timestamp, expected.value)

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        candidates = [b for b in self.batch_bounds if b >= self.log_start]
        target = data.draw(st.sampled_from(candidates))
        self.log.truncate_to(target)
        self.records = [r for r in self.records if r.offset < target]
        self.batch_bounds = [b for b in self.batch_bounds if b <= target]

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data())
    def delete_records_and_retention(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log_start, self.leo))
        self.log.increment_log_start_offset(target)
        self.log_start = max(self.log_start, target)
        self.log.delete_old_segments()
        self.log.purge_deleted_segments()
        assert self.log.log_start_offset == self.log_start
        assert self.log.segments[0].base_offset <= self.log_start

    @rule(data=st.data())
    def offset_for_timestamp(self, data: st.DataObject) -> None:
        if data.draw(st.booleans()) and self.records:  # a record's timestamp, or just above it
            target = data.draw(st.sampled_from(self.records)).timestamp + data.draw(st.sampled_from([0, 1]))
        else:
            target = self.clock.now_ms + data.draw(st.integers(-10_000, 10_000))
        expected = first_offset_for_timestamp(self.records, self.log_start, target)
        found = self.log.offset_for_timestamp(target)
        assert found == (None if expected is None else TimestampAndOffset(expected.timestamp, expected.offset))

    @rule()
    def reopen_clean(self) -> None:
        self.log.close()
        self.log = Log.open(self.root / "topic-0", CONFIG, clock=self.clock,
                            log_start_offset=self.log_start, had_clean_shutdown=True)

    @rule()
    def reopen_after_crash(self) -> None:
        crash(self.log)
        self.log = Log.open(self.root / "topic-0", CONFIG, clock=self.clock,
                            log_start_offset=self.log_start, had_clean_shutdown=False)

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.log_start


def first_offset_for_timestamp(records: list[ModelRecord], log_start: int, target: int) -> ModelRecord | None:
    """ListOffsets by timestamp: the first record, by offset, at or above the log start offset
    whose timestamp is >= ``target`` (not the one with the smallest such timestamp: timestamps
    need not grow with offsets). Kafka finds it through the time index and answers the first
    matching record of the first batch whose max timestamp reaches ``target``, which is the same
    record: no earlier batch holds one. Kafka gives up, though, when the first segment whose
    largest timestamp reaches ``target`` has matches only below the log start offset (until
    retention deletes that segment); Samsa goes on to the next segment, as Kafka's contract
    ("the earliest offset whose timestamp is >= the given one") says (see the test below)."""
    return next((r for r in records if r.offset >= log_start and r.timestamp >= target), None)


def test_a_match_below_the_log_start_does_not_hide_one_in_a_later_segment(tmp_path: Path) -> None:
    """Found by the state machine: offset 0 (timestamp 10) is below the log start in segment 0,
    offset 1 (timestamp 20) is in segment 1. Kafka would answer nothing for 10 until retention
    deletes segment 0; Samsa answers offset 1."""
    log = Log.open(tmp_path / "topic-0", CONFIG, clock=ManualClock())
    try:
        log.append_as_leader(batch_bytes([b"below"], [10]), leader_epoch=0)
        log.increment_log_start_offset(1)
        log.roll()
        log.append_as_leader(batch_bytes([b"kept"], [20]), leader_epoch=0)
        assert [segment.base_offset for segment in log.segments] == [0, 1]
        assert log.offset_for_timestamp(10) == TimestampAndOffset(20, 1)
        assert log.offset_for_timestamp(21) is None
    finally:
        log.close()


def _whole_batches(data: bytes):  # type: ignore[no-untyped-def]
    """Batches of a fetch slice, dropping a partial trailing batch as clients do."""
    position = 0
    while position + LOG_OVERHEAD < len(data):
        try:
            header = read_batch_header(data, position)
        except CorruptMessageError:
            return
        if position + header.size_in_bytes > len(data):
            return
        yield from iter_batches(data[position : position + header.size_in_bytes])
        position += header.size_in_bytes


LogMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogStateMachine = LogMachine.TestCase
