"""One contract suite for every ``RaftLog`` (NATS-style): each test runs against every factory in
``FACTORIES``: ``FileRaftLog`` and ``MemoryRaftLog``, each with create, reopen (what survives a
clean stop) and crash (what survives a crash: the file log cut at a byte past what was flushed,
the memory log at its flushed end). The rules are those of ``replication.raft.log``.

Covered: offsets and epochs of leader, control and follower appends; the error type of each
misuse and of each kind of bad follower bytes; reads of whole batches and their range; the
high watermark bounds and committed reads; truncation (never below the high watermark);
``end_offset_for_epoch`` against a brute-force model of random appends and truncations;
snapshots (create and its refusals, chunked read, install, delete before); reopen; crashes at
any cut point, including one that empties a rolled segment.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import (
    CorruptMessageError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    SnapshotNotFoundError,
)
from protocol.records import (
    ControlRecordType,
    Record,
    decode_batch,
    encode_batch,
    read_batch_header,
)
from replication.metadata.snapshot import SnapshotId, encode_snapshot
from replication.raft.errors import RaftLogError
from replication.raft.file_log import FileRaftLog
from replication.raft.log import OffsetAndEpoch, OffsetRange, RaftLog
from replication.raft.memory_log import MemoryRaftLog
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import crash as abandon_log

NOW = 1_700_000_000_000


@dataclass(frozen=True)
class RaftLogFactory:
    name: str
    create: Callable[[Path], RaftLog]
    reopen: Callable[[RaftLog], RaftLog]
    crash: Callable[[RaftLog, float], RaftLog]  # fraction of the unflushed bytes that survive


# -- FileRaftLog ---------------------------------------------------------------------------------

FILE_CONFIG = LogConfig(segment_bytes=700, flush_messages=10**9)


def _file_create(directory: Path) -> RaftLog:
    return FileRaftLog.open(directory / "__cluster_metadata-0", FILE_CONFIG, clock=ManualClock(NOW))


def _file_reopen(raft_log: RaftLog) -> RaftLog:
    assert isinstance(raft_log, FileRaftLog)
    raft_log.close()
    return FileRaftLog.open(raft_log.directory, FILE_CONFIG, clock=ManualClock(NOW))


def _file_crash(raft_log: RaftLog, surviving: float) -> RaftLog:
    """Kill the process: then cut the segment files at one byte between the flushed length and
    their end (later segment files lose everything), and open with recovery."""
    assert isinstance(raft_log, FileRaftLog)
    log = raft_log.log
    segments = list(log.segments)
    flushed_bytes = sum(header.size_in_bytes for _, _, header in log.batches(0)
                        if header.last_offset < log.recovery_point)
    total = sum(segment.size for segment in segments)
    cut = flushed_bytes + int((total - flushed_bytes) * surviving)
    abandon_log(log)
    for segment in segments:
        data = segment.log_path.read_bytes()
        segment.log_path.write_bytes(data[: max(0, cut)])
        cut -= len(data)
    reopened = Log.open(raft_log.directory, FILE_CONFIG, clock=ManualClock(NOW), had_clean_shutdown=False)
    file_log = FileRaftLog(reopened)
    file_log.load_snapshots()
    return file_log


# -- MemoryRaftLog (the simulator's) ---------------------------------------------------------------


def _memory_reopen(raft_log: RaftLog) -> RaftLog:
    """A clean stop flushed everything; what a restart reads is what was flushed."""
    assert isinstance(raft_log, MemoryRaftLog)
    raft_log.flush()
    raft_log.crash()
    return raft_log


def _memory_crash(raft_log: RaftLog, surviving: float) -> RaftLog:
    """The memory log's crash keeps the flushed prefix (its cut is at whole batches)."""
    assert isinstance(raft_log, MemoryRaftLog)
    raft_log.crash()
    return raft_log


FACTORIES = [
    RaftLogFactory("file", _file_create, _file_reopen, _file_crash),
    RaftLogFactory("memory", lambda _: MemoryRaftLog(), _memory_reopen, _memory_crash),
]


@pytest.fixture(params=FACTORIES, ids=lambda factory: factory.name)
def factory(request: pytest.FixtureRequest) -> RaftLogFactory:
    factory: RaftLogFactory = request.param
    return factory


@pytest.fixture
def raft_log(factory: RaftLogFactory, tmp_path: Path) -> RaftLog:
    return factory.create(tmp_path / "a")


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{index}".encode() for index in range(count)]


def batches(data: bytes) -> list[tuple[int, int, int, bool]]:
    """(base offset, last offset, epoch, is control) of each batch in ``data``."""
    found, position = [], 0
    while position < len(data):
        header = read_batch_header(data, position)
        found.append((header.base_offset, header.last_offset, header.partition_leader_epoch,
                      header.is_control))
        position += header.size_in_bytes
    return found


def read_all(raft_log: RaftLog) -> bytes:
    """Every batch, reading on until the end (a read may stop at a segment's end)."""
    data, offset = b"", raft_log.start_offset
    while offset < raft_log.end_offset:
        chunk = raft_log.read(offset, 1 << 30)
        data += chunk
        offset = batches(chunk)[-1][1] + 1
    return data


# -- appends and reads ---------------------------------------------------------------------------


def test_an_empty_log(raft_log: RaftLog) -> None:
    assert (raft_log.start_offset, raft_log.end_offset, raft_log.high_watermark) == (0, 0, 0)
    assert (raft_log.flushed_end_offset, raft_log.last_fetched_epoch) == (0, 0)
    assert raft_log.end_offset_for_epoch(3) == OffsetAndEpoch(0, 0)
    assert raft_log.latest_snapshot_id() is None and raft_log.earliest_snapshot_id() is None
    assert list(raft_log.batches_from(0)) == []


def test_leader_appends_get_offsets_and_carry_their_epoch(raft_log: RaftLog) -> None:
    assert raft_log.append_as_leader(values("a", 3), 1, NOW) == OffsetRange(0, 2)
    leader_change = b"\x00\x00"
    assert raft_log.append_control_as_leader(ControlRecordType.LEADER_CHANGE, leader_change, 2,
                                             NOW) == OffsetRange(3, 3)
    assert raft_log.append_as_leader(values("b", 2), 2, NOW) == OffsetRange(4, 5)
    assert raft_log.end_offset == 6 and raft_log.last_fetched_epoch == 2
    assert batches(read_all(raft_log)) == [(0, 2, 1, False), (3, 3, 2, True), (4, 5, 2, False)]
    control = decode_batch(raft_log.read(3, 1 << 20))
    assert control.is_control and control.records[0].value == leader_change
    assert control.records[0].key == b"\x00\x00\x00\x02"
    record = decode_batch(raft_log.read(0, 1 << 20)).records[1]
    assert (record.key, record.value, record.timestamp) == (None, b"a-1", NOW)


def test_read_returns_whole_batches_from_the_one_holding_the_offset(raft_log: RaftLog) -> None:
    raft_log.append_as_leader(values("a", 3), 1, NOW)
    raft_log.append_as_leader(values("b", 3), 1, NOW)
    assert batches(raft_log.read(1, 1 << 20))[0][:2] == (0, 2)
    assert batches(raft_log.read(1, 1)) == [(0, 2, 1, False)]  # at least one batch
    assert raft_log.read(6, 1 << 20) == b""


def test_follower_appends_keep_the_leaders_offsets_and_epochs(factory: RaftLogFactory,
                                                             tmp_path: Path) -> None:
    leader = factory.create(tmp_path / "leader")
    leader.append_as_leader(values("a", 2), 3, NOW)
    leader.append_control_as_leader(ControlRecordType.LEADER_CHANGE, b"x", 4, NOW)
    leader.append_as_leader(values("b", 4), 4, NOW)
    data = read_all(leader)
    follower = factory.create(tmp_path / "follower")
    assert follower.append_as_follower(b"", 4) is None
    assert follower.append_as_follower(data[:20], 4) is None  # no whole batch yet
    first = batches(data)[0]
    assert follower.append_as_follower(data + data[:30], 4) == OffsetRange(first[0], 6)
    assert read_all(follower) == data
    assert follower.last_fetched_epoch == 4
    assert follower.end_offset_for_epoch(3) == OffsetAndEpoch(2, 3)


def test_follower_appends_refuse_corrupt_batches_and_epochs_above_the_leaders(
    factory: RaftLogFactory, tmp_path: Path
) -> None:
    leader = factory.create(tmp_path / "leader")
    leader.append_as_leader(values("a", 2), 5, NOW)
    data = bytearray(read_all(leader))
    follower = factory.create(tmp_path / "follower")
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(bytes(data), 4)
    data[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError):
        follower.append_as_follower(bytes(data), 5)
    assert follower.end_offset == 0


def _batch(base_offset: int, epoch: int, count: int = 1) -> bytes:
    return encode_batch([Record(base_offset + index, NOW, None, b"v") for index in range(count)],
                        partition_leader_epoch=epoch)


def test_follower_appends_are_all_or_nothing_and_contiguous_from_the_end(raft_log: RaftLog) -> None:
    with pytest.raises(RaftLogError):  # the caller fetched from its end offset: a bug
        raft_log.append_as_follower(_batch(5, 1), 1)
    with pytest.raises(InvalidRecordError):  # a hole between the leader's batches
        raft_log.append_as_follower(_batch(0, 1, 2) + _batch(3, 1), 1)
    with pytest.raises(InvalidRecordError):  # epochs go backwards
        raft_log.append_as_follower(_batch(0, 2) + _batch(1, 1), 2)
    short = bytearray(_batch(0, 1))
    short[8:12] = (20).to_bytes(4, "big")  # a batch length below the v2 header
    with pytest.raises(CorruptMessageError):
        raft_log.append_as_follower(bytes(short), 1)
    assert raft_log.end_offset == 0
    assert raft_log.append_as_follower(_batch(0, 2), 2) == OffsetRange(0, 0)
    with pytest.raises(InvalidRecordError):  # below the log's last epoch
        raft_log.append_as_follower(_batch(1, 1), 3)


def test_leader_appends_refuse_no_records_and_an_older_epoch(raft_log: RaftLog) -> None:
    raft_log.append_as_leader(values("a", 1), 3, NOW)
    with pytest.raises(RaftLogError):
        raft_log.append_as_leader([], 3, NOW)
    with pytest.raises(RaftLogError):
        raft_log.append_as_leader(values("b", 1), 2, NOW)
    with pytest.raises(RaftLogError):
        raft_log.append_control_as_leader(ControlRecordType.LEADER_CHANGE, b"x", 2, NOW)
    assert raft_log.end_offset == 1 and raft_log.last_fetched_epoch == 3


def test_reads_outside_the_log_are_out_of_range(raft_log: RaftLog) -> None:
    raft_log.append_as_leader(values("a", 2), 1, NOW)
    for offset in (-1, 3):
        with pytest.raises(OffsetOutOfRangeError):
            raft_log.read(offset, 1 << 20)
        with pytest.raises(OffsetOutOfRangeError):
            list(raft_log.batches_from(offset))
    assert raft_log.read(2, 1 << 20) == b"" and list(raft_log.batches_from(2)) == []


# -- high watermark, committed reads, truncation -------------------------------------------------


def test_the_high_watermark_stays_within_the_log_and_bounds_committed_reads(raft_log: RaftLog) -> None:
    raft_log.append_as_leader(values("a", 2), 1, NOW)
    raft_log.append_as_leader(values("b", 2), 1, NOW)
    with pytest.raises(RaftLogError):
        raft_log.update_high_watermark(5)  # past the end offset
    assert list(raft_log.batches_from(0)) == []  # nothing committed yet
    raft_log.update_high_watermark(3)  # inside the second batch: only the first is committed
    assert [(base, epoch, vals, control) for base, epoch, vals, control in raft_log.batches_from(0)] == [
        (0, 1, [b"a-0", b"a-1"], False)]
    with pytest.raises(RaftLogError):
        raft_log.update_high_watermark(2)  # backwards
    assert raft_log.high_watermark == 3
    raft_log.update_high_watermark(4)
    assert [base for base, *_ in raft_log.batches_from(1)] == [0, 2]
    assert len(raft_log.read(0, 1 << 20)) > 0  # read is the uncommitted view


def test_truncation_drops_the_tail_and_its_epochs_never_below_the_high_watermark(raft_log: RaftLog) -> None:
    raft_log.append_as_leader(values("a", 2), 1, NOW)
    raft_log.append_as_leader(values("b", 2), 2, NOW)
    raft_log.append_as_leader(values("c", 2), 3, NOW)
    raft_log.update_high_watermark(2)
    raft_log.truncate_to(4)
    assert raft_log.end_offset == 4 and raft_log.last_fetched_epoch == 2
    assert raft_log.end_offset_for_epoch(3) == OffsetAndEpoch(4, 2)
    with pytest.raises(RaftLogError):
        raft_log.truncate_to(1)
    raft_log.truncate_to(9)  # at or past the end: nothing to do
    assert raft_log.end_offset == 4
    raft_log.append_as_leader(values("d", 1), 4, NOW)
    assert batches(read_all(raft_log))[-1] == (4, 4, 4, False)


def test_flush_makes_the_end_durable(raft_log: RaftLog) -> None:
    raft_log.append_as_leader(values("a", 2), 1, NOW)
    assert raft_log.flushed_end_offset <= raft_log.end_offset
    raft_log.flush()
    assert raft_log.flushed_end_offset == raft_log.end_offset == 2


# -- end_offset_for_epoch against a brute-force model -----------------------------------------------


def model_end_offset_for_epoch(
    model: list[tuple[int, int, int]], end: int, epoch: int
) -> OffsetAndEpoch:
    """Kafka's rule from the batches themselves: (base, count, epoch) per batch."""
    starts: list[tuple[int, int]] = []  # (epoch, first offset)
    for base, _count, batch_epoch in model:
        if not starts or starts[-1][0] != batch_epoch:
            starts.append((batch_epoch, base))
    last_epoch = starts[-1][0] if starts else 0
    if starts and starts[-1][0] == epoch:
        return OffsetAndEpoch(end, epoch)
    higher = [start for known, start in starts if known > epoch]
    if not higher or epoch == -1:
        return OffsetAndEpoch(end, last_epoch)
    lower = [known for known, _ in starts if known <= epoch]
    return OffsetAndEpoch(higher[0], lower[-1] if lower else epoch)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("append"), st.integers(1, 3), st.integers(0, 2)),
                          st.tuples(st.just("truncate"), st.integers(0, 30), st.just(0))),
                max_size=14),
       st.sampled_from(FACTORIES))
def test_end_offset_for_epoch_matches_the_model(ops: list[tuple[str, int, int]],
                                                factory: RaftLogFactory) -> None:
    with tempfile.TemporaryDirectory() as directory:
        raft_log = factory.create(Path(directory))
        model: list[tuple[int, int, int]] = []
        epoch = 0
        for name, first, second in ops:
            if name == "append":
                epoch += second
                raft_log.append_as_leader(values("v", first), epoch, NOW)
                model.append((raft_log.end_offset - first, first, epoch))
            else:
                boundaries = [base for base, _, _ in model if base >= first]
                if boundaries:
                    raft_log.truncate_to(boundaries[0])
                    model = [batch for batch in model if batch[0] < boundaries[0]]
                    epoch = model[-1][2] if model else epoch
        end = raft_log.end_offset
        assert end == sum(count for _, count, _ in model)
        assert raft_log.last_fetched_epoch == (model[-1][2] if model else 0)
        for asked in range(-1, epoch + 3):
            assert raft_log.end_offset_for_epoch(asked) == model_end_offset_for_epoch(model, end, asked)


# -- snapshots -------------------------------------------------------------------------------------


def snapshot_payload(snapshot_id: SnapshotId) -> bytes:
    return b"".join(encode_snapshot([b"\x01\x02"], snapshot_id, timestamp_ms=NOW,
                                    last_contained_log_timestamp=NOW))


def test_snapshots_are_created_at_committed_offsets_and_read_in_chunks(raft_log: RaftLog) -> None:
    raft_log.append_as_leader(values("a", 3), 1, NOW)
    raft_log.append_as_leader(values("b", 3), 2, NOW)
    with pytest.raises(RaftLogError):  # not committed yet
        raft_log.create_snapshot(SnapshotId(3, 1), snapshot_payload(SnapshotId(3, 1)))
    raft_log.update_high_watermark(6)
    first, second = SnapshotId(3, 1), SnapshotId(6, 2)
    assert raft_log.create_snapshot(first, snapshot_payload(first))
    assert raft_log.create_snapshot(second, snapshot_payload(second))
    assert not raft_log.create_snapshot(second, b"other")  # already there: kept as it was
    assert (raft_log.earliest_snapshot_id(), raft_log.latest_snapshot_id()) == (first, second)
    payload = snapshot_payload(second)
    chunk, size = raft_log.read_snapshot(second, 0, 10)
    rest, _ = raft_log.read_snapshot(second, 10, 1 << 20)
    assert (chunk + rest, size) == (payload, len(payload))
    assert len(chunk) == 10
    assert raft_log.read_snapshot(second, size, 10) == (b"", size)
    for position in (-1, size + 1):
        with pytest.raises(RaftLogError):
            raft_log.read_snapshot(second, position, 10)
    with pytest.raises(SnapshotNotFoundError):
        raft_log.read_snapshot(SnapshotId(6, 1), 0, 10)


@pytest.mark.parametrize("snapshot_id", [SnapshotId(6, 1),  # epoch 1 ends at 3
                                         SnapshotId(6, 3),  # no epoch 3 in the log
                                         SnapshotId(2, 1)])  # inside the first batch
def test_snapshots_must_match_the_logs_epochs_and_batches(raft_log: RaftLog,
                                                          snapshot_id: SnapshotId) -> None:
    raft_log.append_as_leader(values("a", 3), 1, NOW)
    raft_log.append_as_leader(values("b", 3), 2, NOW)
    raft_log.update_high_watermark(6)
    with pytest.raises(RaftLogError):
        raft_log.create_snapshot(snapshot_id, snapshot_payload(snapshot_id))
    assert raft_log.latest_snapshot_id() is None


def test_delete_before_snapshot_moves_the_log_start(raft_log: RaftLog) -> None:
    for prefix, epoch in (("a", 1), ("b", 1), ("c", 2)):
        raft_log.append_as_leader(values(prefix, 3), epoch, NOW)
    raft_log.update_high_watermark(9)
    first, second = SnapshotId(3, 1), SnapshotId(6, 1)
    raft_log.create_snapshot(first, snapshot_payload(first))
    raft_log.create_snapshot(second, snapshot_payload(second))
    assert not raft_log.delete_before_snapshot(SnapshotId(9, 2))  # unknown
    assert raft_log.delete_before_snapshot(second)
    assert not raft_log.delete_before_snapshot(second)  # not above the log start any more
    assert raft_log.start_offset == 6 and raft_log.earliest_snapshot_id() == second
    assert [base for base, *_ in raft_log.batches_from(6)] == [6]
    with pytest.raises(OffsetOutOfRangeError):
        raft_log.read(5, 1 << 20)
    assert raft_log.end_offset_for_epoch(0) == OffsetAndEpoch(6, 1)  # below the log: the snapshot
    assert raft_log.end_offset_for_epoch(1) == OffsetAndEpoch(6, 1)
    assert raft_log.end_offset_for_epoch(2) == OffsetAndEpoch(9, 2)
    assert not raft_log.create_snapshot(first, b"late")  # below the log start: ignored


def test_delete_before_snapshot_keeps_the_epoch_in_force_at_the_new_start(raft_log: RaftLog) -> None:
    raft_log.append_as_leader(values("a", 3), 1, NOW)
    raft_log.append_as_leader(values("b", 3), 2, NOW)
    raft_log.update_high_watermark(6)
    snapshot_id = SnapshotId(6, 2)
    raft_log.create_snapshot(snapshot_id, snapshot_payload(snapshot_id))
    assert raft_log.delete_before_snapshot(snapshot_id)
    assert (raft_log.start_offset, raft_log.end_offset, raft_log.last_fetched_epoch) == (6, 6, 2)
    assert raft_log.end_offset_for_epoch(1) == OffsetAndEpoch(6, 2)
    assert raft_log.end_offset_for_epoch(2) == OffsetAndEpoch(6, 2)
    raft_log.append_as_leader(values("c", 1), 4, NOW)
    assert raft_log.end_offset_for_epoch(3) == OffsetAndEpoch(6, 2)
    assert raft_log.end_offset_for_epoch(4) == OffsetAndEpoch(7, 4)


def test_delete_before_snapshot_never_passes_the_high_watermark(factory: RaftLogFactory,
                                                                raft_log: RaftLog) -> None:
    raft_log.append_as_leader(values("a", 3), 1, NOW)
    raft_log.append_as_leader(values("b", 3), 1, NOW)
    raft_log.update_high_watermark(6)
    snapshot_id = SnapshotId(3, 1)
    raft_log.create_snapshot(snapshot_id, snapshot_payload(snapshot_id))
    reopened = factory.reopen(raft_log)  # the high watermark restarts at the log start
    assert reopened.high_watermark == 0
    with pytest.raises(RaftLogError):
        reopened.delete_before_snapshot(snapshot_id)
    reopened.update_high_watermark(3)
    assert reopened.delete_before_snapshot(snapshot_id) and reopened.start_offset == 3


def test_install_snapshot_restarts_the_log_at_its_end(raft_log: RaftLog) -> None:
    raft_log.append_as_leader(values("a", 3), 1, NOW)
    snapshot_id = SnapshotId(40, 7)
    raft_log.install_snapshot(snapshot_id, snapshot_payload(snapshot_id))
    assert (raft_log.start_offset, raft_log.end_offset) == (40, 40)
    assert raft_log.high_watermark == 40 and raft_log.last_fetched_epoch == 7
    assert raft_log.latest_snapshot_id() == snapshot_id
    assert raft_log.end_offset_for_epoch(7) == OffsetAndEpoch(40, 7)
    assert raft_log.read_snapshot(snapshot_id, 0, 1 << 20)[0] == snapshot_payload(snapshot_id)
    raft_log.append_as_leader(values("b", 2), 8, NOW)
    assert batches(read_all(raft_log)) == [(40, 41, 8, False)]


# -- surviving a stop and a crash ------------------------------------------------------------------


def test_reopen_keeps_the_log_the_epochs_and_the_snapshots(factory: RaftLogFactory, raft_log: RaftLog) -> None:
    for prefix, epoch in (("a", 1), ("b", 2), ("c", 2), ("d", 5)):
        raft_log.append_as_leader(values(prefix, 4), epoch, NOW)
    raft_log.update_high_watermark(8)
    raft_log.create_snapshot(SnapshotId(8, 2), snapshot_payload(SnapshotId(8, 2)))
    data = read_all(raft_log)
    reopened = factory.reopen(raft_log)
    assert read_all(reopened) == data and reopened.end_offset == 16
    assert reopened.flushed_end_offset == 16
    assert reopened.latest_snapshot_id() == SnapshotId(8, 2)
    assert reopened.end_offset_for_epoch(3) == OffsetAndEpoch(12, 2)


def _appended(raft_log: RaftLog, plan: list[tuple[int, bool]]) -> list[int]:
    """Append one batch per (size, flush after?); the flushed end after each step."""
    flushed = []
    for index, (size, flush) in enumerate(plan):
        raft_log.append_as_leader(values(f"b{index}", size), 1 + index // 3, NOW)
        if flush:
            raft_log.flush()
        flushed.append(raft_log.flushed_end_offset)
    return flushed


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.booleans()), min_size=1, max_size=12),
       st.floats(0, 1), st.sampled_from(FACTORIES))
def test_a_crash_keeps_a_prefix_and_everything_flushed(plan: list[tuple[int, bool]], surviving: float,
                                                       factory: RaftLogFactory) -> None:
    with tempfile.TemporaryDirectory() as directory:
        raft_log = factory.create(Path(directory))
        _appended(raft_log, plan)
        flushed, before = raft_log.flushed_end_offset, read_all(raft_log)
        recovered = factory.crash(raft_log, surviving)
        assert flushed <= recovered.end_offset <= len(before) and recovered.flushed_end_offset >= flushed
        after = read_all(recovered)
        assert before.startswith(after)
        kept = batches(after)
        assert recovered.end_offset == (kept[-1][1] + 1 if kept else 0)
        assert recovered.last_fetched_epoch == (kept[-1][2] if kept else 0)
        recovered.append_as_leader([b"after"], 9, NOW)  # and it goes on from there
        assert recovered.end_offset_for_epoch(8).offset == recovered.end_offset - 1


def test_every_cut_point_of_one_unflushed_batch(factory: RaftLogFactory, tmp_path: Path) -> None:
    outcomes = set()
    steps = 30
    for step in range(steps + 1):
        raft_log = factory.create(tmp_path / str(step))
        raft_log.append_as_leader(values("a", 2), 1, NOW)
        raft_log.flush()
        raft_log.append_as_leader(values("b", 3), 2, NOW)
        data = read_all(raft_log)
        crashed = factory.crash(raft_log, step / steps)
        outcomes.add(crashed.end_offset)
        assert data.startswith(read_all(crashed))
        assert crashed.last_fetched_epoch == (2 if crashed.end_offset == 5 else 1)
    assert 2 in outcomes and outcomes <= {2, 5}


def test_a_crash_that_empties_a_rolled_segment_leaves_no_gap(factory: RaftLogFactory,
                                                             raft_log: RaftLog) -> None:
    """Nothing flushed and the segments rolled: the crash empties the first segment file while
    the next one (named by its base offset) survives. The log must not claim those offsets."""
    _appended(raft_log, [(1, False)] * 3 + [(4, False)] + [(6, False)] * 3)
    if isinstance(raft_log, FileRaftLog):
        assert len(raft_log.log.segments) > 1
    recovered = factory.crash(raft_log, 0.0)
    assert (recovered.start_offset, recovered.end_offset, recovered.last_fetched_epoch) == (0, 0, 0)
    assert recovered.append_as_leader([b"after"], 3, NOW) == OffsetRange(0, 0)
