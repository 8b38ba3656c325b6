"""Bounded descriptors and maps: the LRU, lazily mapped indexes checked against a sorted-list
oracle while the LRU unmaps and remaps them, segment files closed and reopened under reads, fetch
slices that keep their file open, and process limits that fail a call, not the directory."""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import tempfile
from bisect import bisect_right
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from protocol.errors import KafkaStorageError
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.index import OffsetIndex, OffsetPosition
from storage.log import Log
from storage.log_manager import LogManager
from storage.open_files import LeastRecentlyUsed, SegmentFile
from tests.unit.storage.helpers import client_batch, crash, release_opened_logs

release_logs = pytest.fixture(autouse=True)(release_opened_logs)

NOW = 1_700_000_000_000
SMALL_SEGMENTS = LogConfig(
    segment_bytes=400, index_interval_bytes=1, message_timestamp_after_max_ms=2**62,
    retention_ms=-1,
)


def descriptors_to(directory: Path) -> int:
    """How many of this process's descriptors point into ``directory``."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        count += target.startswith(str(directory))
    return count


def maps_of(directory: Path) -> int:
    with open("/proc/self/maps") as maps:
        return sum(str(directory) in line for line in maps)


class Member:
    def __init__(self, name: str) -> None:
        self.name = name
        self.evicted = 0

    def evict(self) -> None:
        self.evicted += 1


# -- the LRU ---------------------------------------------------------------------------------------


def test_lru_evicts_the_least_recently_used_and_returns_it() -> None:
    lru = LeastRecentlyUsed(2)
    a, b, c = Member("a"), Member("b"), Member("c")
    assert lru.touch(a) == [] and lru.touch(b) == []
    assert lru.touch(a) == []  # a is now the most recent
    assert lru.touch(c) == [b]
    assert b not in lru and a in lru and c in lru
    assert b.evicted == 0  # the caller evicts, outside the LRU's lock
    lru.discard(a)
    assert len(lru) == 1 and lru.shrink(5) == [c] and len(lru) == 0
    assert lru.evictions == 2


@given(st.integers(0, 4), st.lists(st.integers(0, 7), max_size=40))
@settings(max_examples=80, deadline=None)
def test_lru_matches_a_list_model(capacity: int, uses: list[int]) -> None:
    lru = LeastRecentlyUsed(capacity)
    members = [Member(str(n)) for n in range(8)]
    model: list[int] = []
    for n in uses:
        evicted = lru.touch(members[n])
        if n in model:
            model.remove(n)
        model.append(n)
        expected: list[int] = []
        while capacity and len(model) > capacity:
            expected.append(model.pop(0))
        assert evicted == [members[i] for i in expected]
        assert len(lru) == len(model)


# -- indexes mapped lazily, unmapped by the LRU, against an oracle ---------------------------------


class LazyIndexMachine(RuleBasedStateMachine):
    """Three offset indexes share an LRU of two maps: every lookup must match the oracle however
    often they are unmapped, remapped, trimmed, closed and reopened lazily."""

    BASES = (0, 1000, 5000)

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="lazy-index-"))
        self.maps = LeastRecentlyUsed(2)
        self.indexes = [self._open(base, lazy=False) for base in self.BASES]
        self.model: list[list[tuple[int, int]]] = [[] for _ in self.BASES]

    def _open(self, base: int, *, lazy: bool) -> OffsetIndex:
        return OffsetIndex(
            self.directory / f"{base:020d}.index", base, max_index_size=8 * 64, lazy=lazy,
            maps=self.maps,
        )

    @rule(which=st.integers(0, 2), gap=st.integers(1, 50), size=st.integers(0, 300))
    def append(self, which: int, gap: int, size: int) -> None:
        index, entries = self.indexes[which], self.model[which]
        if index.is_full():
            return
        last_offset, last_position = entries[-1] if entries else (self.BASES[which] - 1, 0)
        entry = (last_offset + gap, last_position + size)
        index.append(*entry)
        entries.append(entry)

    @rule(which=st.integers(0, 2), offset=st.integers(-10, 7000))
    def lookup(self, which: int, offset: int) -> None:
        entries, base = self.model[which], self.BASES[which]
        slot = bisect_right([entry[0] for entry in entries], offset) - 1
        expected = OffsetPosition(*entries[slot]) if slot >= 0 else OffsetPosition(base, 0)
        assert self.indexes[which].lookup(offset) == expected

    @rule(which=st.integers(0, 2), offset=st.integers(0, 7000))
    def truncate_to(self, which: int, offset: int) -> None:
        self.indexes[which].truncate_to(offset)
        self.model[which] = [entry for entry in self.model[which] if entry[0] < offset]

    @rule(which=st.integers(0, 2))
    def close_and_reopen_lazily(self, which: int) -> None:
        """A clean close trims the file; the reopened index reads nothing until it is used."""
        self.indexes[which].close()
        reopened = self._open(self.BASES[which], lazy=True)
        assert not reopened.loaded and not reopened.mapped
        reopened.resize(8 * 64)  # as the log re-grows an index it appends to
        self.indexes[which] = reopened

    @precondition(lambda self: len(self.maps) > 0)
    @rule()
    def evict_everything(self) -> None:
        for member in self.maps.shrink(len(self.maps)):
            member.evict()

    @invariant()
    def at_most_two_mapped(self) -> None:
        assert sum(index.mapped for index in self.indexes) <= 2
        assert maps_of(self.directory) <= 2

    @invariant()
    def no_descriptor_held(self) -> None:
        assert descriptors_to(self.directory) == 0

    def teardown(self) -> None:
        for index in self.indexes:
            index.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def test_lazy_indexes_match_the_oracle_under_eviction() -> None:
    run_state_machine_as_test(
        LazyIndexMachine, settings=settings(max_examples=40, stateful_step_count=40, deadline=None)
    )


# -- segment files closed and reopened ------------------------------------------------------------


def test_segment_files_reopen_and_slices_keep_theirs(tmp_path: Path) -> None:
    files = LeastRecentlyUsed(2)
    paths = [tmp_path / f"{n}.log" for n in range(5)]
    segment_files = [SegmentFile(path, files, writable=True) for path in paths]
    for n, segment_file in enumerate(segment_files):
        handle = segment_file.acquire()
        os.pwrite(handle.fd, b"file-%d" % n, 0)
        del handle
        assert descriptors_to(tmp_path) <= 2
    held = segment_files[0].acquire()  # a slice in flight on file 0
    for segment_file in segment_files[1:]:
        segment_file.acquire()
    assert not segment_files[0].is_open  # evicted from the LRU ...
    assert os.pread(held.fd, 6, 0) == b"file-0"  # ... but the held descriptor still reads
    assert descriptors_to(tmp_path) == 3
    del held
    assert descriptors_to(tmp_path) == 2  # closed with its last holder
    segment_files[0].rename(tmp_path / "renamed.log")  # while closed
    assert os.pread(segment_files[0].acquire().fd, 6, 0) == b"file-0"
    for segment_file in segment_files:
        segment_file.release()
    assert descriptors_to(tmp_path) == 0


def _log(directory: Path, files: LeastRecentlyUsed, maps: LeastRecentlyUsed) -> Log:
    return Log.open(directory, SMALL_SEGMENTS, clock=ManualClock(NOW), open_files=files,
                    index_maps=maps, had_clean_shutdown=True)


def test_a_log_reads_every_offset_with_two_open_files_and_two_maps(tmp_path: Path) -> None:
    files, maps = LeastRecentlyUsed(2), LeastRecentlyUsed(2)
    log = _log(tmp_path / "t-0", files, maps)
    for n in range(40):
        log.append_as_leader(client_batch([b"value-%03d" % n], timestamp=NOW + n))
    assert len(log.segments) > 5
    early = log.read(0, 10_000)
    assert early is not None
    for offset in (39, 0, 17, 3, 30, 8):  # jump between segments: files and maps churn
        piece = log.read(offset, 10_000)
        assert piece is not None and piece.first_offset == offset
    assert len(files) <= 2 and len(maps) <= 2
    assert descriptors_to(log.directory) <= 3  # two in the LRU, one held by ``early``
    assert early.read()[:8] == (0).to_bytes(8, "big")  # its file was closed by the LRU: still read
    assert log.offset_for_timestamp(NOW + 21) is not None


def test_old_segments_indexes_are_read_at_first_use_and_rebuilt_then(tmp_path: Path) -> None:
    files, maps = LeastRecentlyUsed(4), LeastRecentlyUsed(4)
    log = _log(tmp_path / "t-0", files, maps)
    for n in range(40):
        log.append_as_leader(client_batch([b"value-%03d" % n], timestamp=NOW + n))
    expected = {offset: log.read(offset, 10_000).read() for offset in range(40)}  # type: ignore[union-attr]
    old = log.segments[1]
    log.close()
    old.offset_index.path.write_bytes(b"\x00" * 16)  # corrupt: offsets do not increase
    (old.directory / f"{log.segments[2].base_offset:020d}.timeindex").unlink()  # missing
    reopened = _log(tmp_path / "t-0", files, maps)
    assert [s.indexes_checked for s in reopened.segments] == [False] * (
        len(reopened.segments) - 1) + [True]
    assert maps_of(reopened.directory) <= 2  # only the active segment's indexes
    for offset in range(40):
        piece = reopened.read(offset, 10_000)
        assert piece is not None and piece.read() == expected[offset]
    assert reopened.segments[1].offset_index.entries > 0  # rebuilt at first use


def test_a_process_limit_fails_the_call_not_the_directory(tmp_path: Path) -> None:
    files, maps = LeastRecentlyUsed(1), LeastRecentlyUsed(1)
    log = _log(tmp_path / "t-0", files, maps)
    for n in range(20):
        log.append_as_leader(client_batch([b"value-%03d" % n], timestamp=NOW + n))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 4, hard))
    fillers: list[int] = []
    try:
        with contextlib.suppress(OSError):
            while True:  # take every descriptor left under the lowered limit
                fillers.append(os.open(os.devnull, os.O_RDONLY))
        with pytest.raises(KafkaStorageError, match="RLIMIT_NOFILE"):
            log.read(0, 10_000)  # the first segment must be reopened: EMFILE
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert log.health.offline_reason is None
    assert log.read(0, 10_000) is not None  # served again once a descriptor is free


def test_a_log_that_cannot_load_is_offline_and_the_rest_served(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    manager = LogManager([tmp_path], default_config=SMALL_SEGMENTS, clock=clock,
                         segment_open_files_max=8)
    manager.startup()
    for partition in range(3):
        log = manager.get_or_create_log("t", partition)
        log.append_as_leader(client_batch([b"v"], timestamp=NOW))
        log.flush()
    manager.checkpoint()
    for log in manager.logs.values():
        crash(log)
    broken = tmp_path / "t-1" / f"{0:020d}.log"
    broken.unlink()
    broken.mkdir()  # opening it for writing fails (EISDIR): a log that cannot load
    restarted = LogManager([tmp_path], default_config=SMALL_SEGMENTS, clock=clock)
    restarted.startup()
    assert set(restarted.logs) == {("t", 0), ("t", 1), ("t", 2)}
    offline = restarted.logs[("t", 1)]
    assert offline.health.offline_reason is not None and "IsADirectoryError" in (
        offline.health.offline_reason)
    with pytest.raises(KafkaStorageError):
        offline.read(0, 100)
    assert offline.recovery_point == 1  # from the checkpoint: the next checkpoint keeps it
    assert restarted.logs[("t", 0)].read(0, 100) is not None
    assert restarted.open_files.capacity > 8  # unset: half of RLIMIT_NOFILE
