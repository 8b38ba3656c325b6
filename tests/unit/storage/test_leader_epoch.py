"""The leader epoch cache against a brute-force model, its checkpoint file under damage, and the
``Log`` keeping it (append, truncation, log start, crash, a lost or corrupt file)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from protocol.records import Record, encode_batch
from storage.checkpoint import LEADER_EPOCH_CHECKPOINT
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.errors import CorruptCheckpointError
from storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)
from storage.log import Log
from tests.unit.storage.helpers import crash, release_opened_logs

release_logs = pytest.fixture(autouse=True)(release_opened_logs)

# -- the brute-force model: a plain list of (epoch, start), each rule a linear scan ----------------

Model = list[tuple[int, int]]


def model_assign(model: Model, epoch: int, start: int) -> Model:
    if model and model[-1][0] == epoch and model[-1][1] <= start:
        return model
    return [(e, s) for e, s in model if e < epoch and s < start] + [(epoch, start)]


def model_truncate_from_end(model: Model, end: int) -> Model:
    return [(e, s) for e, s in model if s < end]


def model_truncate_from_start(model: Model, start: int) -> Model:
    below = [(e, s) for e, s in model if s <= start]
    if not below:
        return model
    return [(below[-1][0], start)] + [(e, s) for e, s in model if s > start]


def model_end_offset_for(model: Model, epoch: int, log_end_offset: int) -> tuple[int, int]:
    if epoch == UNDEFINED_EPOCH:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    if model and model[-1][0] == epoch:
        return epoch, log_end_offset
    higher = [(e, s) for e, s in model if e > epoch]
    if not higher:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    floor = [(e, s) for e, s in model if e <= epoch]
    return (floor[-1][0] if floor else epoch), higher[0][1]


def model_epoch_for_offset(model: Model, offset: int) -> int | None:
    found = None
    for epoch, start in model:
        if start > offset:
            break
        found = epoch
    return found


epochs = st.integers(0, 12)
offsets = st.integers(0, 60)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), epochs, offsets),
        st.tuples(st.just("end"), st.integers(-1, 60), st.just(0)),
        st.tuples(st.just("start"), offsets, st.just(0)),
        st.tuples(st.just("clear"), st.just(0), st.just(0)),
    ),
    max_size=30,
)


def entries(cache: LeaderEpochFileCache) -> Model:
    return [(entry.epoch, entry.start_offset) for entry in cache.entries]


@settings(max_examples=150, deadline=None)
@given(operations)
def test_cache_matches_the_model_and_reads_back_from_its_file(ops: list[tuple[str, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / LEADER_EPOCH_CHECKPOINT
        cache = LeaderEpochFileCache.read(path)
        model: Model = []
        for name, first, _second in ops:
            if name == "assign":
                cache.assign(first, _second)
                model = model_assign(model, first, _second)
            elif name == "end":
                cache.truncate_from_end(first)
                model = model_truncate_from_end(model, first) if first >= 0 else model
            elif name == "start":
                cache.truncate_from_start(first)
                model = model_truncate_from_start(model, first)
            else:
                cache.clear()
                model = []
            assert entries(cache) == model
            assert [e for e, _ in model] == sorted({e for e, _ in model})
            assert [s for _, s in model] == sorted({s for _, s in model})
        if path.exists():  # written on every change: the file holds what memory holds
            assert entries(LeaderEpochFileCache.read(path)) == model
        log_end_offset = 61
        for epoch in range(-2, 14):
            assert cache.end_offset_for(epoch, log_end_offset) == model_end_offset_for(
                model, epoch, log_end_offset)
        for offset in range(0, 62):
            assert cache.epoch_for_offset(offset) == model_epoch_for_offset(model, offset)
        assert cache.latest_epoch == (model[-1][0] if model else None)


def test_kafka_examples() -> None:
    cache = LeaderEpochFileCache()
    for epoch, start in [(0, 0), (0, 5), (2, 10), (4, 20)]:
        cache.assign(epoch, start)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(4, 20))
    assert cache.end_offset_for(4, 33) == (4, 33)  # the latest epoch ends at the LEO
    assert cache.end_offset_for(1, 33) == (0, 10)  # unknown epoch: the one below, next start
    assert cache.end_offset_for(2, 33) == (2, 20)
    assert cache.end_offset_for(5, 33) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(-1, 33) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    cache.truncate_from_start(12)
    assert cache.entries == (EpochEntry(2, 12), EpochEntry(4, 20))
    assert cache.end_offset_for(1, 33) == (1, 12)  # below every known epoch: the log start
    cache.assign(3, 15)  # an older epoch at a lower offset than the latest: the latest goes
    assert cache.entries == (EpochEntry(2, 12), EpochEntry(3, 15))
    with pytest.raises(ValueError):
        cache.assign(-1, 3)


# -- the checkpoint file under damage ----------------------------------------------------------------

WRITTEN = [(0, 0), (3, 1500), (4, 1700), (12, 123456)]


def written_file(directory: Path) -> Path:
    cache = LeaderEpochFileCache.read(directory / LEADER_EPOCH_CHECKPOINT)
    cache.assign_all(WRITTEN)
    return directory / LEADER_EPOCH_CHECKPOINT


def test_a_cut_file_is_a_clear_error_or_empty(tmp_path: Path) -> None:
    path = written_file(tmp_path)
    data = path.read_bytes()
    for length in range(len(data)):
        path.write_bytes(data[:length])
        if length == 0:  # an empty file reads as no entries (Kafka creates it empty)
            assert LeaderEpochFileCache.read(path).entries == ()
            continue
        with pytest.raises(CorruptCheckpointError, match=rf"{path}, line \d+: "):
            LeaderEpochFileCache.read(path)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_damaged_byte_is_a_clear_error_or_a_well_formed_cache(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = written_file(Path(directory))
        content = bytearray(path.read_bytes())
        position = data.draw(st.integers(0, len(content) - 1))
        byte = st.one_of(st.sampled_from(b"0123456789 \n"), st.integers(0, 255))
        content[position] = data.draw(byte.filter(lambda b: b != content[position]))
        path.write_bytes(bytes(content))
        try:
            cache = LeaderEpochFileCache.read(path)
        except CorruptCheckpointError as error:
            assert str(path) in str(error) and 1 <= error.line_number <= content.count(b"\n") + 1
            event("a clear error")
            return
        event("read back")
        model: Model = []
        for entry in cache.entries:  # whatever it says, the invariants hold
            model = model_assign(model, entry.epoch, entry.start_offset)
        assert entries(cache) == model


# -- the Log keeps it ------------------------------------------------------------------------------

CONFIG = LogConfig(segment_bytes=600, flush_messages=10**9)
NOW = 1_700_000_000_000


def batch(count: int = 2, *, leader_epoch: int | None = None, base_offset: int = 0) -> bytes:
    records = [Record(offset=base_offset + i, timestamp=NOW, key=None, value=b"v" * 40)
               for i in range(count)]
    if leader_epoch is None:
        return encode_batch(records, base_offset=base_offset)
    return encode_batch(records, base_offset=base_offset, partition_leader_epoch=leader_epoch)


def open_log(directory: Path, clock: ManualClock, *, clean: bool = True) -> Log:
    return Log.open(directory, CONFIG, clock=clock, had_clean_shutdown=clean)


def log_with_epochs(directory: Path, clock: ManualClock) -> Log:
    """Epoch 0 at 0, 2 at 6, 5 at 12 (three batches each), over several segments."""
    log = open_log(directory, clock)
    for epoch in (0, 2, 5):
        for _ in range(3):
            log.append_as_leader(batch(), leader_epoch=epoch)
    return log


EXPECTED = (EpochEntry(0, 0), EpochEntry(2, 6), EpochEntry(5, 12))


def test_leader_appends_assign_and_reopen_reads_the_file(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = log_with_epochs(tmp_path / "t-0", clock)
    assert len(log.segments) > 1
    assert log.leader_epoch_cache.entries == EXPECTED
    log.close()
    text = (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).read_text()
    assert text == "0\n3\n0 0\n2 6\n5 12\n"
    assert open_log(tmp_path / "t-0", clock).leader_epoch_cache.entries == EXPECTED


def test_follower_appends_keep_the_batch_epochs_and_skip_none(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", ManualClock(NOW))
    log.append_as_follower(batch(leader_epoch=None, base_offset=0))
    assert log.leader_epoch_cache.entries == ()
    log.append_as_follower(batch(leader_epoch=3, base_offset=2) + batch(leader_epoch=7, base_offset=4))
    assert log.leader_epoch_cache.entries == (EpochEntry(3, 2), EpochEntry(7, 4))


@pytest.mark.parametrize("damage", ["missing", "empty", "garbage", "cut"])
def test_a_lost_or_corrupt_file_is_rebuilt_from_the_log(tmp_path: Path, damage: str) -> None:
    clock = ManualClock(NOW)
    log = log_with_epochs(tmp_path / "t-0", clock)
    log.close()
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    data = path.read_bytes()
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes({"empty": b"", "garbage": b"0\n3\nx y\n", "cut": data[:-3]}[damage])
    reopened = open_log(tmp_path / "t-0", clock)
    assert reopened.leader_epoch_cache.entries == EXPECTED
    assert path.read_bytes() == data


def test_truncation_and_log_start_update_the_cache_and_the_file(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = log_with_epochs(tmp_path / "t-0", clock)
    log.truncate_to(10)
    assert log.leader_epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(2, 6))
    log.increment_log_start_offset(7)
    assert log.leader_epoch_cache.entries == (EpochEntry(2, 7),)
    assert log.delete_old_segments() > 0  # retention: the log start moves to a segment base
    assert log.leader_epoch_cache.entries == (EpochEntry(2, log.log_start_offset),)
    log.truncate_fully_and_start_at(40)
    assert log.leader_epoch_cache.entries == ()
    log.append_as_leader(batch(), leader_epoch=9)
    log.close()
    assert open_log(tmp_path / "t-0", clock).leader_epoch_cache.entries == (EpochEntry(9, 40),)


def test_a_crash_that_loses_unflushed_epochs_trims_the_file(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path / "t-0", clock)
    log.append_as_leader(batch(), leader_epoch=1)
    log.flush()
    flushed = log.log_end_offset
    for epoch in (2, 3):
        log.append_as_leader(batch(), leader_epoch=epoch)
    segment_path = log.active_segment.log_path
    full = segment_path.read_bytes()
    crash(log)
    for length in range(len(full) // 2, len(full) + 1, 5):
        segment_path.write_bytes(full[:length])
        (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).write_text("0\n3\n1 0\n2 2\n3 4\n")
        reopened = open_log(tmp_path / "t-0", clock, clean=False)
        end = reopened.log_end_offset
        assert end >= flushed
        expected = [EpochEntry(1, 0), EpochEntry(2, 2), EpochEntry(3, 4)]
        assert reopened.leader_epoch_cache.entries == tuple(e for e in expected if e.start_offset < end)
        crash(reopened)
