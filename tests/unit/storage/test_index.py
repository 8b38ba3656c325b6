"""OffsetIndex / TimeIndex against a sorted-list + bisect oracle, byte layout, crash shapes."""

from __future__ import annotations

import re
import shutil
import struct
import tempfile
from bisect import bisect_left, bisect_right
from itertools import accumulate
from pathlib import Path
from random import Random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from storage.errors import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    StorageError,
)
from storage.index import (
    INT32_MAX,
    NO_TIMESTAMP,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)

PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

OffsetEntries = list[tuple[int, int]]  # (absolute offset, position)
TimeEntries = list[tuple[int, int]]  # (timestamp, absolute offset)


# -- oracles: what the files and lookups must be, computed independently ----------------------


def offset_index_bytes(base_offset: int, entries: OffsetEntries) -> bytes:
    return b"".join(
        struct.pack(">ii", offset - base_offset, position) for offset, position in entries
    )


def time_index_bytes(base_offset: int, entries: TimeEntries) -> bytes:
    return b"".join(
        struct.pack(">qi", timestamp, offset - base_offset) for timestamp, offset in entries
    )


def oracle_offset_lookup(base_offset: int, entries: OffsetEntries, target: int) -> tuple[int, int]:
    slot = bisect_right([offset for offset, _ in entries], target) - 1
    return entries[slot] if slot >= 0 else (base_offset, 0)


def oracle_time_lookup(base_offset: int, entries: TimeEntries, target: int) -> tuple[int, int]:
    slot = bisect_right([timestamp for timestamp, _ in entries], target) - 1
    return entries[slot] if slot >= 0 else (NO_TIMESTAMP, base_offset)


def oracle_upper_bound(entries: OffsetEntries, position: int) -> tuple[int, int] | None:
    slot = bisect_left([p for _, p in entries], position)
    return entries[slot] if slot < len(entries) else None


def fresh_directory(root: Path) -> Path:
    """One directory per hypothesis example (tmp_path is shared by all examples of a test)."""
    return Path(tempfile.mkdtemp(dir=root))


def index_entries(index: OffsetIndex | TimeIndex) -> list[tuple[int, int]]:
    return [(first, second) for first, second in map(index.entry, range(index.entries))]


def mentions(path: Path) -> str:
    """A ``pytest.raises(match=...)`` pattern for an error message naming ``path``."""
    return re.escape(str(path))


# -- strategies ---------------------------------------------------------------------------------


@st.composite
def offset_index_contents(draw: st.DrawFn, max_size: int = 60) -> tuple[int, OffsetEntries]:
    """A base offset and strictly increasing offsets with non-decreasing positions."""
    base_offset = draw(st.integers(0, 2**40))
    first = draw(st.integers(0, 50))
    offset_steps = draw(st.lists(st.integers(1, 2**20), max_size=max_size))
    relative = list(accumulate([first, *offset_steps]))
    position_steps = draw(
        st.lists(st.integers(0, 10**6), min_size=len(relative), max_size=len(relative))
    )
    positions = list(accumulate(position_steps))
    return base_offset, [(base_offset + r, p) for r, p in zip(relative, positions, strict=True)]


@st.composite
def time_index_appends(draw: st.DrawFn, max_size: int = 60) -> tuple[int, TimeEntries]:
    """A base offset and appends whose timestamps go anywhere and offsets never decrease."""
    base_offset = draw(st.integers(0, 2**40))
    count = draw(st.integers(0, max_size))
    timestamps = draw(st.lists(st.integers(-1, 200), min_size=count, max_size=count))
    offset_steps = draw(st.lists(st.integers(0, 1000), min_size=count, max_size=count))
    offsets = [base_offset + r for r in accumulate(offset_steps)]
    return base_offset, list(zip(timestamps, offsets, strict=True))


def kept_time_entries(appends: TimeEntries) -> TimeEntries:
    """The model of TimeIndex.append: an entry is kept only if its timestamp is a new maximum."""
    kept: TimeEntries = []
    for timestamp, offset in appends:
        if timestamp > (kept[-1][0] if kept else NO_TIMESTAMP):
            kept.append((timestamp, offset))
    return kept


# -- OffsetIndex: properties --------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(contents=offset_index_contents(), data=st.data())
def test_offset_index_lookups_match_oracle(
    tmp_path: Path, contents: tuple[int, OffsetEntries], data: st.DataObject
) -> None:
    base_offset, entries = contents
    path = fresh_directory(tmp_path) / "index"
    index = OffsetIndex(path, base_offset, max_index_size=8 * len(entries) + 8)
    for offset, position in entries:
        index.append(offset, position)
    assert index.entries == len(entries)
    assert index.last_offset == (entries[-1][0] if entries else base_offset)
    assert index_entries(index) == entries
    top = entries[-1][0] + 10 if entries else base_offset + 10
    for target in data.draw(st.lists(st.integers(base_offset - 10, top), max_size=30)):
        assert index.lookup(target) == oracle_offset_lookup(base_offset, entries, target)
    top_position = entries[-1][1] + 10 if entries else 10
    for start in data.draw(st.lists(st.integers(0, top_position), max_size=10)):
        size = data.draw(st.integers(0, 1000))
        assert index.fetch_upper_bound_offset(start, size) == oracle_upper_bound(
            entries, start + size
        )
    index.close()
    assert path.read_bytes() == offset_index_bytes(base_offset, entries)


@PROPERTY_SETTINGS
@given(contents=offset_index_contents(), data=st.data())
def test_offset_index_truncate_to_matches_oracle(
    tmp_path: Path, contents: tuple[int, OffsetEntries], data: st.DataObject
) -> None:
    base_offset, entries = contents
    path = fresh_directory(tmp_path) / "index"
    index = OffsetIndex(path, base_offset, max_index_size=8 * len(entries) + 80)
    for offset, position in entries:
        index.append(offset, position)
    top = entries[-1][0] + 10 if entries else base_offset + 10
    cut = data.draw(st.integers(base_offset - 10, top))
    index.truncate_to(cut)
    kept = [entry for entry in entries if entry[0] < cut]
    assert index_entries(index) == kept
    for target in data.draw(st.lists(st.integers(base_offset - 10, top), max_size=20)):
        assert index.lookup(target) == oracle_offset_lookup(base_offset, kept, target)
    # Appending resumes right after the kept entries.
    next_offset = max(cut, base_offset)
    if index.can_append_offset(next_offset):
        index.append(next_offset, kept[-1][1] if kept else 0)
        kept.append((next_offset, kept[-1][1] if kept else 0))
    index.close()
    assert path.read_bytes() == offset_index_bytes(base_offset, kept)


@PROPERTY_SETTINGS
@given(contents=offset_index_contents())
def test_offset_index_reopen_gives_the_same_entries(
    tmp_path: Path, contents: tuple[int, OffsetEntries]
) -> None:
    base_offset, entries = contents
    path = fresh_directory(tmp_path) / "index"
    index = OffsetIndex(path, base_offset)
    for offset, position in entries:
        index.append(offset, position)
    index.close()
    for writable in (True, False):
        reopened = OffsetIndex(path, base_offset, writable=writable)
        if writable and not entries:
            assert reopened.max_entries == reopened.max_index_size // 8  # empty file: preallocated
        else:
            assert reopened.entries == reopened.max_entries == len(entries)
        assert index_entries(reopened) == entries
        reopened.sanity_check()
        reopened.close()
    assert path.read_bytes() == offset_index_bytes(base_offset, entries)


# -- TimeIndex: properties ----------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(contents=time_index_appends(), data=st.data())
def test_time_index_appends_and_lookups_match_oracle(
    tmp_path: Path, contents: tuple[int, TimeEntries], data: st.DataObject
) -> None:
    base_offset, appends = contents
    path = fresh_directory(tmp_path) / "timeindex"
    index = TimeIndex(path, base_offset, max_index_size=12 * len(appends) + 24)
    kept: TimeEntries = []
    for timestamp, offset in appends:
        written = index.append(timestamp, offset)
        assert written == (timestamp > (kept[-1][0] if kept else NO_TIMESTAMP))
        if written:
            kept.append((timestamp, offset))
    assert kept == kept_time_entries(appends)
    assert index_entries(index) == kept
    assert index.last_entry == (kept[-1] if kept else (NO_TIMESTAMP, base_offset))
    for target in data.draw(st.lists(st.integers(-5, 210), max_size=30)):
        assert index.lookup(target) == oracle_time_lookup(base_offset, kept, target)
    index.close()
    assert path.read_bytes() == time_index_bytes(base_offset, kept)
    reopened = TimeIndex(path, base_offset, writable=False)
    assert index_entries(reopened) == kept
    reopened.sanity_check()
    reopened.close()


@PROPERTY_SETTINGS
@given(contents=time_index_appends(), data=st.data())
def test_time_index_truncate_to_matches_oracle(
    tmp_path: Path, contents: tuple[int, TimeEntries], data: st.DataObject
) -> None:
    base_offset, appends = contents
    path = fresh_directory(tmp_path) / "timeindex"
    index = TimeIndex(path, base_offset, max_index_size=12 * len(appends) + 24)
    for timestamp, offset in appends:
        index.append(timestamp, offset)
    kept = kept_time_entries(appends)
    top = kept[-1][1] + 10 if kept else base_offset + 10
    cut = data.draw(st.integers(base_offset - 10, top))
    index.truncate_to(cut)
    # Offsets may repeat (only timestamps must grow): every entry at or past ``cut`` goes.
    kept = [entry for entry in kept if entry[1] < cut]
    assert index_entries(index) == kept
    assert index.last_entry == (kept[-1] if kept else (NO_TIMESTAMP, base_offset))
    for target in data.draw(st.lists(st.integers(-5, 210), max_size=20)):
        assert index.lookup(target) == oracle_time_lookup(base_offset, kept, target)
    index.close()
    assert path.read_bytes() == time_index_bytes(base_offset, kept)


# -- OffsetIndex: state machine -----------------------------------------------------------------


class OffsetIndexMachine(RuleBasedStateMachine):
    """Appends, truncations, lookups, clean reopens and crashes against a list model."""

    BASE_OFFSET = 100
    MAX_INDEX_SIZE = 8 * 12 + 5  # rounds down to 12 entries

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.directory = fresh_directory(root)
        self.path = self.directory / "00000000000000000100.index"
        self.index = self._open()
        self.model: OffsetEntries = []
        self.crashes = 0

    def _open(self) -> OffsetIndex:
        return OffsetIndex(self.path, self.BASE_OFFSET, max_index_size=self.MAX_INDEX_SIZE)

    @property
    def next_offset(self) -> int:
        return self.model[-1][0] + 1 if self.model else self.BASE_OFFSET

    @property
    def last_position(self) -> int:
        return self.model[-1][1] if self.model else 0

    @rule(gap=st.integers(0, 1000), step=st.integers(0, 5000))
    def append(self, gap: int, step: int) -> None:
        offset, position = self.next_offset + gap, self.last_position + step
        if len(self.model) >= self.MAX_INDEX_SIZE // 8:
            with pytest.raises(IndexFullError, match=mentions(self.path)):
                self.index.append(offset, position)
        else:
            self.index.append(offset, position)
            self.model.append((offset, position))

    @precondition(lambda self: self.model)
    @rule(back=st.integers(0, 200))
    def append_not_increasing(self, back: int) -> None:
        if len(self.model) >= self.MAX_INDEX_SIZE // 8:
            return  # a full index reports IndexFullError first, as in Kafka
        with pytest.raises(InvalidOffsetError, match=mentions(self.path)):
            self.index.append(self.model[-1][0] - back, self.last_position)

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        cut = data.draw(st.integers(self.BASE_OFFSET - 5, self.next_offset + 5))
        self.index.truncate_to(cut)
        self.model = [entry for entry in self.model if entry[0] < cut]

    @rule()
    def truncate(self) -> None:
        self.index.truncate()
        self.model = []

    @rule(data=st.data())
    def lookup(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.BASE_OFFSET - 5, self.next_offset + 5))
        assert self.index.lookup(target) == oracle_offset_lookup(
            self.BASE_OFFSET, self.model, target
        )

    @rule()
    def close_and_reopen(self) -> None:
        self.index.close()
        assert self.path.read_bytes() == offset_index_bytes(self.BASE_OFFSET, self.model)
        self.index = self._open()
        self.index.sanity_check()
        self.index.resize(self.MAX_INDEX_SIZE)  # what the segment does for its active index

    @rule()
    def crash_and_inspect(self) -> None:
        """Open a copy of what is on disk now, as a broker restarting after a crash would."""
        self.index.flush()
        self.crashes += 1
        copy = self.directory / f"crash-{self.crashes}.index"
        shutil.copyfile(self.path, copy)
        crashed = OffsetIndex(copy, self.BASE_OFFSET, writable=False)
        assert crashed.entries == crashed.max_entries == self.MAX_INDEX_SIZE // 8
        if len(self.model) < crashed.max_entries:
            with pytest.raises(CorruptIndexError, match=mentions(copy)):
                crashed.sanity_check()
        else:
            crashed.sanity_check()
            assert index_entries(crashed) == self.model
        crashed.close()

    @invariant()
    def matches_model(self) -> None:
        assert self.index.entries == len(self.model)
        assert self.index.last_offset == (self.model[-1][0] if self.model else self.BASE_OFFSET)
        assert self.index.is_full() == (len(self.model) >= self.MAX_INDEX_SIZE // 8)

    def teardown(self) -> None:
        self.index.close()
        shutil.rmtree(self.directory)


def test_offset_index_state_machine(tmp_path: Path) -> None:
    run_state_machine_as_test(
        lambda: OffsetIndexMachine(tmp_path),
        settings=settings(max_examples=60, stateful_step_count=40, deadline=None),
    )


# -- the warm section (Kafka's cache-friendly search) -------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 1023, 1024, 1025, 1026, 5000])
def test_offset_lookups_across_the_warm_section(tmp_path: Path, count: int) -> None:
    rng = Random(count)
    base_offset = 1_000
    offsets = list(accumulate(rng.randint(1, 5) for _ in range(count)))
    entries = [(base_offset + r, 10 * i) for i, r in enumerate(offsets)]
    index = OffsetIndex(tmp_path / "index", base_offset)
    for offset, position in entries:
        index.append(offset, position)
    targets = {base_offset - 1, base_offset, entries[-1][0] + 1}
    targets |= {offset + delta for offset, _ in entries for delta in (-1, 0, 1)}
    keys = [offset for offset, _ in entries]
    for target in sorted(targets):
        slot = bisect_right(keys, target) - 1
        assert index.lookup(target) == (entries[slot] if slot >= 0 else (base_offset, 0))
    index.close()


@pytest.mark.parametrize("count", [1, 681, 682, 683, 2000])
def test_time_lookups_across_the_warm_section(tmp_path: Path, count: int) -> None:
    rng = Random(count)
    timestamps = list(accumulate(rng.randint(1, 3) for _ in range(count)))
    entries = [(timestamp, 7 + 2 * i) for i, timestamp in enumerate(timestamps)]
    index = TimeIndex(tmp_path / "timeindex", 7)
    for timestamp, offset in entries:
        assert index.append(timestamp, offset)
    for target in range(-1, timestamps[-1] + 2):
        slot = bisect_right(timestamps, target) - 1
        assert index.lookup(target) == (entries[slot] if slot >= 0 else (NO_TIMESTAMP, 7))
    index.close()


# -- files: creation, preallocation, read-only ---------------------------------------------------


def test_new_index_is_preallocated_and_empty(tmp_path: Path) -> None:
    offset_index = OffsetIndex(tmp_path / "a.index", 0)
    time_index = TimeIndex(tmp_path / "a.timeindex", 0)
    assert (tmp_path / "a.index").stat().st_size == 10 * 1024 * 1024
    assert (tmp_path / "a.timeindex").stat().st_size == 10 * 1024 * 1024 // 12 * 12
    assert offset_index.entries == time_index.entries == 0
    assert offset_index.max_entries == 10 * 1024 * 1024 // 8
    assert offset_index.lookup(5) == OffsetPosition(0, 0)
    assert time_index.lookup(5) == TimestampOffset(NO_TIMESTAMP, 0)
    offset_index.close()
    time_index.close()
    assert (tmp_path / "a.index").stat().st_size == 0
    assert (tmp_path / "a.timeindex").stat().st_size == 0


def test_max_index_size_is_rounded_down_to_whole_entries(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "timeindex", 0, max_index_size=12 * 4 + 11)
    assert index.max_entries == 4
    assert index.length == (tmp_path / "timeindex").stat().st_size == 48
    index.close()


def test_max_index_size_below_one_entry_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max index size"):
        OffsetIndex(tmp_path / "index", 0, max_index_size=7)
    assert not (tmp_path / "index").exists()


def test_existing_empty_file_stays_empty_until_resized(tmp_path: Path) -> None:
    """As Kafka: only a newly created index is preallocated; a trimmed empty one (an inactive
    segment without entries) is not grown on every open. The log re-grows the active one."""
    path = tmp_path / "index"
    path.touch()
    index = OffsetIndex(path, 0, max_index_size=80)
    assert (index.entries, index.max_entries, path.stat().st_size) == (0, 0, 0)
    assert index.is_full()
    index.resize(80)
    assert (index.entries, index.max_entries, path.stat().st_size) == (0, 10, 80)
    index.append(3, 4)
    index.close()
    assert path.read_bytes() == struct.pack(">ii", 3, 4)


def test_read_only_empty_file_has_no_map_and_no_entries(tmp_path: Path) -> None:
    path = tmp_path / "timeindex"
    path.touch()
    index = TimeIndex(path, 42, writable=False)
    assert (index.entries, index.max_entries) == (0, 0)
    assert index.lookup(10**12) == (NO_TIMESTAMP, 42)
    assert index.last_entry == (NO_TIMESTAMP, 42)
    index.sanity_check()
    index.flush()
    index.close()
    assert path.stat().st_size == 0


def test_read_only_missing_file_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        OffsetIndex(tmp_path / "index", 0, writable=False)
    assert not (tmp_path / "index").exists()


def test_read_only_index_never_changes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "index"
    writer = OffsetIndex(path, 0, max_index_size=64)
    writer.append(1, 10)
    writer.flush()
    before = path.read_bytes()
    reader = OffsetIndex(path, 0, writable=False)
    assert reader.entries == 8  # untrimmed: the preallocated zeros count as entries
    for mutate in (
        lambda: reader.append(9, 10),
        lambda: reader.truncate_to(0),
        reader.truncate,
        reader.trim_to_valid_size,
        lambda: reader.resize(8),
    ):
        with pytest.raises(ValueError, match="read-only"):
            mutate()
    reader.close()
    assert path.read_bytes() == before
    writer.close()


# -- appends: the contract ---------------------------------------------------------------------


def test_offset_append_rejects_offsets_out_of_range(tmp_path: Path) -> None:
    path = tmp_path / "index"
    index = OffsetIndex(path, 1000, max_index_size=80)
    assert index.can_append_offset(1000) and index.can_append_offset(1000 + INT32_MAX)
    assert not index.can_append_offset(999) and not index.can_append_offset(1001 + INT32_MAX)
    with pytest.raises(IndexOffsetOverflowError, match=mentions(path)):
        index.append(999, 0)
    index.append(1000 + INT32_MAX, 0)
    with pytest.raises(InvalidOffsetError, match=mentions(path)):
        index.append(1000 + INT32_MAX, 1)
    with pytest.raises(IndexOffsetOverflowError):
        index.append(1001 + INT32_MAX, 1)
    assert index.entries == 1
    index.close()
    assert path.read_bytes() == struct.pack(">ii", INT32_MAX, 0)


def test_offset_append_rejects_a_bad_position(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "index", 0, max_index_size=80)
    for position in (-1, INT32_MAX + 1):
        with pytest.raises(ValueError, match="position"):
            index.append(1, position)
    assert index.entries == 0
    index.close()


def test_offset_append_to_full_index_raises(tmp_path: Path) -> None:
    path = tmp_path / "index"
    index = OffsetIndex(path, 0, max_index_size=16)
    index.append(0, 0)
    assert not index.is_full()
    index.append(1, 5)
    assert index.is_full()
    with pytest.raises(IndexFullError, match=mentions(path)):
        index.append(2, 9)
    index.close()


def test_time_index_keeps_the_last_slot_for_the_roll_entry(tmp_path: Path) -> None:
    path = tmp_path / "timeindex"
    index = TimeIndex(path, 0, max_index_size=36)  # 3 slots
    assert index.append(10, 0) and index.append(20, 5)
    assert index.is_full()  # one slot left, reserved
    with pytest.raises(IndexFullError, match=mentions(path)):
        index.append(30, 9)
    assert not index.append(20, 5, skip_full_check=True)  # the same entry again: skipped
    assert index.append(30, 9, skip_full_check=True)
    with pytest.raises(IndexFullError, match=mentions(path)):
        index.append(40, 12, skip_full_check=True)  # no slot at all
    assert not index.append(30, 9, skip_full_check=True)  # nothing to write: no error
    index.close()
    assert path.read_bytes() == time_index_bytes(0, [(10, 0), (20, 5), (30, 9)])


def test_time_append_checks_the_offset_before_skipping(tmp_path: Path) -> None:
    path = tmp_path / "timeindex"
    index = TimeIndex(path, 100, max_index_size=120)
    assert index.append(50, 110)
    assert not index.append(50, 110)  # equal timestamp: skipped
    assert not index.append(40, 120)  # smaller timestamp: skipped
    assert index.append(60, 110)  # the same offset with a greater timestamp is fine
    with pytest.raises(InvalidOffsetError, match=mentions(path)):
        index.append(10, 109)  # a smaller offset is an error even when it would be skipped
    with pytest.raises(IndexOffsetOverflowError, match=mentions(path)):
        index.append(70, 101 + INT32_MAX)
    assert index.entries == 2
    index.close()


def test_time_append_to_empty_index_checks_the_base_offset(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "timeindex", 100, max_index_size=120)
    assert not index.append(NO_TIMESTAMP, 5)  # never written: -1 is "no timestamp"
    with pytest.raises(IndexOffsetOverflowError):
        index.append(0, 99)
    assert index.append(0, 100)
    index.close()


# -- truncation, resize, rename, delete, close ----------------------------------------------------


def test_truncation_zeroes_the_dropped_entries(tmp_path: Path) -> None:
    path = tmp_path / "index"
    index = OffsetIndex(path, 0, max_index_size=80)
    for offset in range(5):
        index.append(offset, offset * 100)
    index.truncate_to(2)
    index.flush()
    assert path.read_bytes() == offset_index_bytes(0, [(0, 0), (1, 100)]) + bytes(64)
    index.truncate()
    assert path.read_bytes() == bytes(80)
    index.close()


def test_resize_grows_and_shrinks(tmp_path: Path) -> None:
    path = tmp_path / "index"
    index = OffsetIndex(path, 0, max_index_size=32)
    for offset in range(4):
        index.append(offset, offset)
    assert index.resize(64 + 7) and index.max_entries == 8 and path.stat().st_size == 64
    assert not index.resize(64)  # already that size
    index.append(4, 4)
    assert index.resize(24)  # below the entries: the last ones are dropped
    assert index_entries(index) == [(0, 0), (1, 1), (2, 2)] and index.is_full()
    assert index.resize(0) and index.entries == 0 and index.lookup(9) == (0, 0)
    assert index.resize(16)
    index.append(7, 7)
    index.close()
    assert path.read_bytes() == struct.pack(">ii", 7, 7)


def test_reset_drops_entries_and_regrows(tmp_path: Path) -> None:
    path = tmp_path / "timeindex"
    index = TimeIndex(path, 0, max_index_size=60)
    index.append(1, 1)
    index.trim_to_valid_size()
    assert index.max_entries == 1
    index.reset()
    assert (index.entries, index.max_entries, path.stat().st_size) == (0, 5, 60)
    index.close()


def test_rename_keeps_the_index_usable(tmp_path: Path) -> None:
    old, new = tmp_path / "0.index", tmp_path / "0.index.deleted"
    index = OffsetIndex(old, 0, max_index_size=80)
    index.append(1, 1)
    index.rename_to(new)
    assert index.path == new and not old.exists()
    index.append(2, 2)
    assert index.lookup(5) == (2, 2)
    index.close()
    assert new.read_bytes() == offset_index_bytes(0, [(1, 1), (2, 2)])


def test_delete_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "index"
    index = OffsetIndex(path, 0)
    assert index.delete() and not path.exists()
    assert not index.delete()


def test_closed_index_refuses_use(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "index", 0, max_index_size=80)
    index.append(0, 0)
    index.close()
    index.close()  # twice is harmless
    for use in (lambda: index.lookup(0), lambda: index.entry(0), lambda: index.append(1, 1)):
        with pytest.raises(ValueError, match="closed"):
            use()


def test_entry_out_of_range(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "timeindex", 0, max_index_size=120)
    index.append(5, 0)
    assert index.entry(0) == TimestampOffset(5, 0)
    for n in (-1, 1):
        with pytest.raises(IndexError, match="timeindex"):
            index.entry(n)
    index.close()


# -- crash shapes: sanity_check ----------------------------------------------------------------


def test_untrimmed_index_after_a_crash_fails_sanity_check(tmp_path: Path) -> None:
    for index_type, name in ((OffsetIndex, "0.index"), (TimeIndex, "0.timeindex")):
        path = tmp_path / name
        writer = index_type(path, 0, max_index_size=120)
        if isinstance(writer, TimeIndex):
            writer.append(1_700_000_000_000, 3)
        else:
            writer.append(3, 0)
        writer.flush()  # the process dies here: no trim
        crashed = index_type(path, 0, writable=False)
        assert crashed.entries == crashed.max_entries
        with pytest.raises(CorruptIndexError, match=mentions(path)) as raised:
            crashed.sanity_check()
        assert "zero-filled tail" in str(raised.value)
        assert isinstance(raised.value, StorageError)
        crashed.close()
        writer.close()


def test_untrimmed_empty_index_after_a_crash_fails_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "index"
    path.write_bytes(bytes(8 * 100))
    index = OffsetIndex(path, 0, writable=False)
    with pytest.raises(CorruptIndexError, match=mentions(path)):
        index.sanity_check()
    index.close()


OFFSET_CORRUPTIONS = {
    "length not a multiple": (offset_index_bytes(10, [(10, 0), (11, 5)]) + b"\0\0\0", "multiple"),
    "offsets decrease": (offset_index_bytes(10, [(10, 0), (15, 5), (13, 9)]), "entry 2"),
    "offsets repeat": (offset_index_bytes(10, [(10, 0), (15, 5), (15, 9)]), "entry 2"),
    "below the base offset": (offset_index_bytes(10, [(9, 0), (11, 5)]), "base offset"),
}


@pytest.mark.parametrize("case", OFFSET_CORRUPTIONS)
def test_corrupt_offset_index_fails_sanity_check(tmp_path: Path, case: str) -> None:
    content, reason = OFFSET_CORRUPTIONS[case]
    path = tmp_path / "00000000000000000010.index"
    path.write_bytes(content)
    for writable in (False, True):
        index = OffsetIndex(path, 10, writable=writable)
        with pytest.raises(CorruptIndexError, match=mentions(path)) as raised:
            index.sanity_check()
        assert reason in str(raised.value)
        index.close()


TIME_CORRUPTIONS = {
    "length not a multiple": (time_index_bytes(10, [(5, 10)]) + b"\0" * 8, "multiple"),
    "timestamps decrease": (time_index_bytes(10, [(5, 10), (4, 11)]), "timestamp"),
    "timestamps repeat": (time_index_bytes(10, [(5, 10), (5, 11)]), "timestamp"),
    "offsets decrease": (time_index_bytes(10, [(5, 12), (6, 11)]), "offset"),
    "below the base offset": (time_index_bytes(10, [(5, 9), (6, 11)]), "base offset"),
    # a flipped top bit: still ordered, and would read as "before every record"
    "a negative timestamp": (time_index_bytes(10, [(5 - 2**63, 10), (6, 11)]), "below zero"),
}


@pytest.mark.parametrize("case", TIME_CORRUPTIONS)
def test_corrupt_time_index_fails_sanity_check(tmp_path: Path, case: str) -> None:
    content, reason = TIME_CORRUPTIONS[case]
    path = tmp_path / "00000000000000000010.timeindex"
    path.write_bytes(content)
    index = TimeIndex(path, 10, writable=False)
    with pytest.raises(CorruptIndexError, match=mentions(path)) as raised:
        index.sanity_check()
    assert reason in str(raised.value)
    index.close()


def test_valid_kafka_shaped_files_pass_sanity_check(tmp_path: Path) -> None:
    (tmp_path / "a.index").write_bytes(offset_index_bytes(50, [(50, 0), (80, 4096)]))
    (tmp_path / "a.timeindex").write_bytes(time_index_bytes(50, [(1, 60), (2, 60), (9, 80)]))
    offset_index = OffsetIndex(tmp_path / "a.index", 50, writable=False)
    time_index = TimeIndex(tmp_path / "a.timeindex", 50, writable=False)
    offset_index.sanity_check()
    time_index.sanity_check()
    assert offset_index.lookup(79) == (50, 0) and time_index.lookup(5) == (2, 60)
    offset_index.close()
    time_index.close()
