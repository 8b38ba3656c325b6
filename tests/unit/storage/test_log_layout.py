"""``Log.describe_segments`` against a model of the batches appended, driven by hypothesis:
after any run of appends, rolls, truncations, DeleteRecords + retention and reopens, the layout
is contiguous from the segment holding the log start offset to the log end offset, its sizes are
the segment files', and its timestamps are the batches'."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.records import Record, encode_batch
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.segment import SegmentDescription
from tests.unit.storage.helpers import crash

CONFIG = LogConfig(
    segment_bytes=1024,
    index_interval_bytes=128,
    segment_index_bytes=64 * 8,
    retention_ms=-1,
    message_timestamp_after_max_ms=2**62,
    file_delete_delay_ms=0,
)


@dataclass(frozen=True)
class ModelBatch:
    base_offset: int
    timestamps: tuple[int, ...]

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.timestamps)


class LayoutMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="samsa-layout-"))
        self.clock = ManualClock()
        self.log = Log.open(self.root / "topic-0", CONFIG, clock=self.clock)
        self.batches: list[ModelBatch] = []
        self.log_start = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def leo(self) -> int:
        return self.batches[-1].next_offset if self.batches else 0

    @rule(
        sizes=st.lists(st.integers(0, 150), min_size=1, max_size=6),
        skew=st.lists(st.integers(-5_000, 5_000), min_size=6, max_size=6),
    )
    def append(self, sizes: list[int], skew: list[int]) -> None:
        self.clock.advance(10)
        timestamps = tuple(self.clock.now_ms + skew[i] for i in range(len(sizes)))
        records = [
            Record(offset=i, timestamp=t, key=b"k", value=b"v" * size)
            for i, (size, t) in enumerate(zip(sizes, timestamps, strict=True))
        ]
        result = self.log.append_as_leader(encode_batch(records), leader_epoch=0)
        assert result.first_offset == self.leo
        self.batches.append(ModelBatch(result.first_offset, timestamps))

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        bounds = [b.base_offset for b in self.batches if b.base_offset >= self.log_start]
        target = data.draw(st.sampled_from([*bounds, self.leo]))
        self.log.truncate_to(target)
        self.batches = [b for b in self.batches if b.base_offset < target]

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data(), retention=st.booleans())
    def delete_records(self, data: st.DataObject, retention: bool) -> None:
        target = data.draw(st.integers(self.log_start, self.leo))
        self.log.increment_log_start_offset(target)
        self.log_start = max(self.log_start, target)
        if retention:  # else the segments below the log start offset stay until the next run
            self.log.delete_old_segments()
            self.log.purge_deleted_segments()

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
        else:
            crash(self.log)
        self.log = Log.open(self.root / "topic-0", CONFIG, clock=self.clock,
                            log_start_offset=self.log_start, had_clean_shutdown=clean)

    @invariant()
    def segments_are_contiguous_from_the_log_start_to_the_log_end(self) -> None:
        layout = self.log.describe_segments()
        segments = layout.segments
        assert (layout.log_start_offset, layout.log_end_offset) == (self.log_start, self.leo)
        assert segments, "the active segment is always described"
        for before, after in itertools.pairwise(segments):
            assert before.end_offset == after.base_offset
        assert segments[-1].end_offset == self.leo
        assert segments[-1].base_offset == self.log.active_segment.base_offset
        first = segments[0]
        assert first.base_offset <= self.log_start
        assert self.log_start < first.end_offset or len(segments) == 1
        below = [s for s in self.log.segments if s.base_offset < first.base_offset]
        assert sum(s.size_in_bytes for s in segments) + sum(s.size for s in below) == (
            self.log.size_in_bytes
        )
        if not below:
            assert first.base_offset == self.log.segments[0].base_offset

    @invariant()
    def timestamps_are_those_of_the_batches_in_each_segment(self) -> None:
        for segment in self.log.describe_segments().segments:
            held = [b for b in self.batches
                    if segment.base_offset <= b.base_offset < segment.end_offset]
            assert (segment.size_in_bytes == 0) == (not held)
            assert segment.first_timestamp == expected_first_timestamp(held)
            assert segment.max_timestamp == max((max(b.timestamps) for b in held), default=-1)


def expected_first_timestamp(held: list[ModelBatch]) -> int:
    return max(held[0].timestamps) if held else -1


def test_an_empty_log_is_one_empty_active_segment(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG, clock=ManualClock())
    layout = log.describe_segments()
    assert layout.segments == (SegmentDescription(0, 0, 0, -1, -1),)
    log.close()


def test_segments_below_the_log_start_offset_are_left_out(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", CONFIG, clock=clock)
    for value in (b"a", b"b", b"c"):
        log.append_as_leader(encode_batch([Record(0, clock.now_ms, None, value)]))
        log.roll()
    log.increment_log_start_offset(2)
    layout = log.describe_segments()
    assert [(s.base_offset, s.end_offset) for s in layout.segments] == [(2, 3), (3, 3)]
    assert layout.log_start_offset == 2 and layout.segments[0].first_timestamp == clock.now_ms
    log.close()


LayoutMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLayoutMachine = LayoutMachine.TestCase
