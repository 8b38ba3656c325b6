"""MemoryRaftLog against a brute-force model: a list of (offset, epoch, value) records.

Rules: leader and follower appends, truncation (never below the HW), HW moves, flush and
crash, snapshots (create + delete before, and install). After every step the log's offsets,
epochs, ``end_offset_for_epoch`` for every epoch, ``read`` (everything) and ``batches_from``
(the committed batches) must match what the model says. The contract itself is tested for
both logs in ``test_raft_log_contract.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.errors import SnapshotNotFoundError
from protocol.records import Record, decode_batch, encode_batch
from replication.raft.errors import RaftLogError
from replication.raft.log import OffsetAndEpoch, SnapshotId
from replication.raft.memory_log import MemoryRaftLog


class Model:
    def __init__(self) -> None:
        self.records: list[tuple[int, int, bytes, int]] = []  # offset, epoch, value, batch base
        self.start = 0
        self.snapshots: dict[SnapshotId, bytes] = {}
        self.high_watermark = 0
        self.flushed = 0
        # The epoch in force at ``start`` after delete_before_snapshot: Kafka's epoch cache
        # keeps that entry, moved to the new log start, until a truncation empties the log.
        self.start_epoch: int | None = None

    @property
    def end(self) -> int:
        return self.records[-1][0] + 1 if self.records else self.start

    @property
    def last_epoch(self) -> int:
        if self.records:
            return self.records[-1][1]
        if self.snapshots:
            return max(self.snapshots, key=lambda s: (s.end_offset, s.epoch)).epoch
        return 0

    def earliest(self) -> SnapshotId | None:
        return min(self.snapshots, key=lambda s: (s.end_offset, s.epoch), default=None)

    def epoch_starts(self) -> list[tuple[int, int]]:
        """(epoch, first offset) per epoch, from the records (and the start entry)."""
        starts = [] if self.start_epoch is None else [(self.start_epoch, self.start)]
        for offset, epoch, _, _ in self.records:
            if not starts or epoch != starts[-1][0]:
                starts.append((epoch, offset))
        return starts

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        starts = self.epoch_starts()
        if starts and starts[-1][0] == epoch:
            return OffsetAndEpoch(self.end, epoch)
        later = [offset for known, offset in starts if known > epoch]
        if not later or epoch == -1:  # the cache knows no answer: the log end
            return OffsetAndEpoch(self.end, self.last_epoch)
        known = [known for known, _ in starts if known <= epoch]
        answer = OffsetAndEpoch(later[0], known[-1] if known else epoch)
        earliest = self.earliest()
        if earliest is not None and answer == OffsetAndEpoch(earliest.end_offset, epoch):
            return OffsetAndEpoch(earliest.end_offset, earliest.epoch)
        return answer

    def committed(self) -> list[tuple[int, int, bytes, int]]:
        """The records of the batches wholly below the high watermark."""
        last = {base: offset for offset, _, _, base in self.records}
        return [r for r in self.records if last[r[3]] < self.high_watermark]

    def batch_bases(self) -> list[int]:
        return sorted({r[3] for r in self.records})

    def truncate(self, offset: int) -> None:
        """Whole batches: the batch holding ``offset`` goes too."""
        cut = next((r[3] for r in self.records if r[0] >= offset), None)
        if cut is not None:
            self.records = [r for r in self.records if r[3] < cut]
            if not self.records:
                self.start_epoch = None
        self.flushed = min(self.flushed, self.end)
        self.high_watermark = min(self.high_watermark, self.end)


values = st.lists(st.binary(max_size=8), min_size=1, max_size=4)


class MemoryRaftLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.log = MemoryRaftLog()
        self.model = Model()
        self.epoch = 1

    @rule(records=values, bump=st.booleans())
    def append_as_leader(self, records: list[bytes], bump: bool) -> None:
        self.epoch = max(self.epoch, self.model.last_epoch) + (1 if bump else 0)
        appended = self.log.append_as_leader(records, self.epoch, 1000)
        base = self.model.end
        assert (appended.base_offset, appended.last_offset) == (base, base + len(records) - 1)
        self.model.records += [(base + i, self.epoch, v, base) for i, v in enumerate(records)]

    @rule(batches=st.lists(values, min_size=1, max_size=3), bump=st.booleans())
    def append_as_follower(self, batches: list[list[bytes]], bump: bool) -> None:
        self.epoch = max(self.epoch, self.model.last_epoch) + (1 if bump else 0)
        data = b""
        base = self.model.end
        added = []
        for batch in batches:
            data += encode_batch(
                [Record(base + i, 5, None, v) for i, v in enumerate(batch)],
                partition_leader_epoch=self.epoch,
            )
            added += [(base + i, self.epoch, v, base) for i, v in enumerate(batch)]
            base += len(batch)
        appended = self.log.append_as_follower(data, self.epoch)
        assert appended is not None and appended.last_offset == base - 1
        self.model.records += added

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.model.start, self.model.end + 2))
        if offset < self.model.high_watermark:
            with pytest.raises(RaftLogError):
                self.log.truncate_to(offset)
            return
        self.log.truncate_to(offset)
        self.model.truncate(offset)

    @rule(data=st.data())
    def update_high_watermark(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.model.high_watermark, self.model.end))
        self.log.update_high_watermark(offset)
        self.model.high_watermark = offset

    @rule()
    def flush(self) -> None:
        self.log.flush()
        self.model.flushed = self.model.end

    @rule()
    def crash(self) -> None:
        self.log.crash()
        self.model.truncate(self.model.flushed)
        self.model.high_watermark = self.model.start

    @precondition(
        lambda self: (
            any(b > self.model.start for b in self.model.batch_bases())
            or (self.model.records and self.model.high_watermark == self.model.end)
        )
    )
    @rule(data=st.data())
    def snapshot_and_delete_before(self, data: st.DataObject) -> None:
        boundaries = [b for b in self.model.batch_bases() if b > self.model.start]
        boundaries.append(self.model.end)
        boundaries = [b for b in boundaries if b <= self.model.high_watermark]
        if not boundaries:
            return
        end = data.draw(st.sampled_from(boundaries))
        epoch = next(r[1] for r in reversed(self.model.records) if r[0] < end)
        snapshot_id = SnapshotId(end, epoch)
        assert self.log.create_snapshot(snapshot_id, b"state@%d" % end)
        assert self.log.delete_before_snapshot(snapshot_id)
        self.model.snapshots = {snapshot_id: b"state@%d" % end}
        in_force = [r[1] for r in self.model.records if r[0] <= end]
        self.model.start_epoch = in_force[-1]
        self.model.records = [r for r in self.model.records if r[0] >= end]
        self.model.start = end

    @rule(gap=st.integers(0, 5), bump=st.integers(0, 2))
    def install_snapshot(self, gap: int, bump: int) -> None:
        end = self.model.end + gap
        epoch = max(self.epoch, self.model.last_epoch) + bump
        self.epoch = epoch
        snapshot_id = SnapshotId(end, epoch)
        self.log.install_snapshot(snapshot_id, b"installed")
        self.model.snapshots = {snapshot_id: b"installed"}
        self.model.records = []
        self.model.start_epoch = None
        self.model.start = self.model.high_watermark = self.model.flushed = end

    @invariant()
    def positions_match(self) -> None:
        log, model = self.log, self.model
        assert (log.start_offset, log.end_offset) == (model.start, model.end)
        assert log.last_fetched_epoch == model.last_epoch
        assert log.high_watermark == model.high_watermark
        assert log.flushed_end_offset == min(model.flushed, model.end)
        assert log.earliest_snapshot_id() == model.earliest()

    @invariant()
    def epochs_match(self) -> None:
        for epoch in range(-1, self.epoch + 2):
            assert self.log.end_offset_for_epoch(epoch) == self.model.end_offset_for_epoch(epoch)

    @invariant()
    def contents_match(self) -> None:
        model = self.model
        read: list[tuple[int, int, bytes | None]] = []
        data = self.log.read(model.start, 1 << 20)
        position = 0
        while position < len(data):
            batch = decode_batch(data, position)
            read += [
                (r.offset, batch.header.partition_leader_epoch, r.value) for r in batch.records
            ]
            position += batch.size_in_bytes
        assert read == [(o, e, v) for o, e, v, _ in model.records]
        flat = [
            (base, epoch, v)
            for base, epoch, batch_values, _ in self.log.batches_from(model.start)
            for v in batch_values
        ]
        assert flat == [(b, e, v) for _, e, v, b in model.committed()]

    @invariant()
    def unknown_snapshot_is_not_found(self) -> None:
        with pytest.raises(SnapshotNotFoundError):
            self.log.read_snapshot(SnapshotId(10**9, 0), 0, 10)


MemoryRaftLogMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None
)
TestMemoryRaftLog = MemoryRaftLogMachine.TestCase


def test_read_returns_at_least_one_whole_batch() -> None:
    log = MemoryRaftLog()
    log.append_as_leader([b"x" * 100], 1, 0)
    log.append_as_leader([b"y"], 1, 0)
    first = log.read(0, 1)
    assert decode_batch(first).records[0].value == b"x" * 100
    assert len(decode_batch(first).records) == 1 and len(first) == decode_batch(first).size_in_bytes


def test_follower_append_must_start_at_the_log_end() -> None:
    log = MemoryRaftLog()
    batch = encode_batch([Record(5, 0, None, b"v")], partition_leader_epoch=1)
    with pytest.raises(RaftLogError):
        log.append_as_follower(batch, 1)


def test_snapshot_beyond_the_high_watermark_is_refused() -> None:
    log = MemoryRaftLog()
    log.append_as_leader([b"a"], 1, 0)
    with pytest.raises(RaftLogError):
        log.create_snapshot(SnapshotId(1, 1), b"s")
