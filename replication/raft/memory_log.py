"""``MemoryRaftLog``: the ``RaftLog`` in memory, for unit tests and the simulator.

It keeps every rule of the contract in ``replication.raft.log`` (the contract suite runs it
beside ``FileRaftLog``); the shapes of Kafka's ``MockLog`` where they help.

Batches are real RecordBatch v2 bytes (``protocol.records.encode_batch``, uncompressed), so
the bytes a follower appends are the bytes the leader wrote, exactly as in the daemon.

State, owned by the one ``RaftNode`` (and its state machine) that steps it:
- ``_batches``: the log from ``start_offset``, in offset order, each with its epoch (the
  batch's partition leader epoch) and its bytes; record values are decoded lazily.
- ``_epochs``: Kafka's leader epoch cache, ``(epoch, start_offset)`` per epoch present in
  ``_batches``, epochs and start offsets strictly increasing; after ``delete_before_snapshot``
  the first entry starts at ``start_offset`` (Kafka's ``truncateFromStart``) and it stays even
  when no batch is left.
- ``_snapshots``: finished snapshots by id; durable from the moment they are created.
- ``flushed_end_offset``: everything below it survives ``crash()``; always a batch boundary.

``crash()`` models a process crash and restart: the unflushed tail is lost and the high
watermark, which Kafka keeps only in memory for the metadata log, goes back to the log start.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from protocol.errors import OffsetOutOfRangeError, SnapshotNotFoundError
from protocol.records import Record, decode_batch, encode_batch
from replication.raft.errors import RaftLogError
from replication.raft.log import (
    OffsetAndEpoch,
    OffsetRange,
    SnapshotId,
    follower_batches,
    validate_offset_and_epoch,
)

__all__ = ["MemoryRaftLog"]

_CONTROL_KEY = struct.Struct(">hh")  # control record key: version 0, type


@dataclass(slots=True)
class _Batch:
    base_offset: int
    last_offset: int
    epoch: int
    is_control: bool
    data: bytes
    values: list[bytes | None] | None = field(default=None)


class MemoryRaftLog:
    def __init__(self) -> None:
        self._batches: list[_Batch] = []
        self._base_offsets: list[int] = []  # parallel to _batches, for bisect
        self._epochs: list[tuple[int, int]] = []
        self._snapshots: dict[SnapshotId, bytes] = {}
        self._start_offset = 0
        self._end_offset = 0
        self._flushed_end_offset = 0
        self._high_watermark = 0

    # --- positions ----------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start_offset

    @property
    def end_offset(self) -> int:
        return self._end_offset

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_fetched_epoch(self) -> int:
        if self._epochs:
            return self._epochs[-1][0]
        snapshot = self.latest_snapshot_id()
        return snapshot.epoch if snapshot is not None else 0

    def update_high_watermark(self, offset: int) -> None:
        if not self._high_watermark <= offset <= self._end_offset:
            raise RaftLogError(
                f"high watermark {offset} outside [high watermark {self._high_watermark}, "
                f"end offset {self._end_offset}]"
            )
        self._high_watermark = offset

    def flush(self) -> None:
        self._flushed_end_offset = self._end_offset

    def crash(self) -> None:
        """A crash and restart: drop the unflushed tail; the high watermark is forgotten."""
        self._truncate(self._flushed_end_offset)
        self._high_watermark = self._start_offset

    # --- appends --------------------------------------------------------------------

    def append_as_leader(
        self, records: Sequence[bytes], epoch: int, timestamp_ms: int
    ) -> OffsetRange:
        if not records:
            raise RaftLogError("an append needs at least one record")
        self._check_leader_epoch(epoch)
        base = self._end_offset
        batch = encode_batch(
            [Record(base + i, timestamp_ms, None, value) for i, value in enumerate(records)],
            partition_leader_epoch=epoch,
        )
        self._add(_Batch(base, base + len(records) - 1, epoch, False, batch, list(records)))
        return OffsetRange(base, base + len(records) - 1)

    def append_control_as_leader(
        self, record_type: int, value: bytes, epoch: int, timestamp_ms: int
    ) -> OffsetRange:
        self._check_leader_epoch(epoch)
        base = self._end_offset
        key = _CONTROL_KEY.pack(0, record_type)
        batch = encode_batch(
            [Record(base, timestamp_ms, key, value)],
            partition_leader_epoch=epoch,
            is_control=True,
        )
        self._add(_Batch(base, base, epoch, True, batch, [value]))
        return OffsetRange(base, base)

    def _check_leader_epoch(self, epoch: int) -> None:
        if epoch < self.last_fetched_epoch:
            raise RaftLogError(
                f"leader append in epoch {epoch}, below the log's epoch {self.last_fetched_epoch}"
            )

    def append_as_follower(self, batches: bytes, epoch: int) -> OffsetRange | None:
        """The leader's batches verbatim (checks: ``follower_batches``)."""
        data, headers = follower_batches(
            batches, epoch, self._end_offset, self.last_fetched_epoch
        )
        if not headers:
            return None
        position = 0
        for header in headers:
            end = position + header.size_in_bytes
            self._add(
                _Batch(
                    header.base_offset,
                    header.last_offset,
                    header.partition_leader_epoch,
                    header.is_control,
                    bytes(data[position:end]),
                )
            )
            position = end
        return OffsetRange(headers[0].base_offset, headers[-1].last_offset)

    def _add(self, batch: _Batch) -> None:
        if not self._epochs or batch.epoch > self._epochs[-1][0]:
            self._epochs.append((batch.epoch, batch.base_offset))
        self._batches.append(batch)
        self._base_offsets.append(batch.base_offset)
        self._end_offset = batch.last_offset + 1

    # --- reads ----------------------------------------------------------------------

    def _index_of(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= offset."""
        index = bisect.bisect_right(self._base_offsets, offset) - 1
        if index < 0:
            return 0
        if self._batches[index].last_offset < offset:
            return index + 1
        return index

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``start_offset``; at least one if any."""
        self._check_in_range(start_offset)
        chunks: list[bytes] = []
        size = 0
        for batch in self._batches[self._index_of(start_offset) :]:
            if chunks and size + len(batch.data) > max_bytes:
                break
            chunks.append(batch.data)
            size += len(batch.data)
        return b"".join(chunks)

    def _check_in_range(self, offset: int) -> None:
        if not self._start_offset <= offset <= self._end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self._start_offset}, {self._end_offset}]"
            )

    def batches_from(self, offset: int) -> Iterator[tuple[int, int, list[bytes | None], bool]]:
        """Committed batches (below the high watermark) from the one holding ``offset``."""
        self._check_in_range(offset)
        for batch in self._batches[self._index_of(offset) :]:
            if batch.last_offset >= self._high_watermark:
                return
            if batch.values is None:
                batch.values = [r.value for r in decode_batch(batch.data).records]
            yield batch.base_offset, batch.epoch, batch.values, batch.is_control

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The contract's rule: Kafka's epoch cache lookup, then the snapshot override."""
        epochs = [known for known, _ in self._epochs]
        if epoch == -1 or not epochs or epoch > epochs[-1]:
            return OffsetAndEpoch(self._end_offset, self.last_fetched_epoch)
        if epoch == epochs[-1]:
            return OffsetAndEpoch(self._end_offset, epoch)
        higher = bisect.bisect_right(epochs, epoch)
        found = epochs[higher - 1] if higher > 0 else epoch
        answer = OffsetAndEpoch(self._epochs[higher][1], found)
        earliest = self.earliest_snapshot_id()
        if earliest is not None and answer == OffsetAndEpoch(earliest.end_offset, epoch):
            return OffsetAndEpoch(earliest.end_offset, earliest.epoch)
        return answer

    # --- truncation -----------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop offsets >= ``offset`` (the whole batch holding it); never below the HW."""
        if offset >= self._end_offset:
            return
        if offset < self._high_watermark:
            raise RaftLogError(
                f"truncation to {offset} below the high watermark {self._high_watermark}"
            )
        self._truncate(offset)

    def _truncate(self, offset: int) -> None:
        if offset >= self._end_offset:
            return
        index = self._index_of(offset)
        del self._batches[index:]
        del self._base_offsets[index:]
        self._end_offset = (
            self._batches[-1].last_offset + 1 if self._batches else self._start_offset
        )
        while self._epochs and self._epochs[-1][1] >= self._end_offset:
            self._epochs.pop()
        self._flushed_end_offset = min(self._flushed_end_offset, self._end_offset)
        self._high_watermark = min(self._high_watermark, self._end_offset)

    # --- snapshots ------------------------------------------------------------------

    def latest_snapshot_id(self) -> SnapshotId | None:
        return max(self._snapshots, key=_snapshot_order, default=None)

    def earliest_snapshot_id(self) -> SnapshotId | None:
        return min(self._snapshots, key=_snapshot_order, default=None)

    def create_snapshot(self, snapshot_id: SnapshotId, payload: bytes) -> bool:
        """Keep a snapshot of the committed prefix below ``snapshot_id.end_offset``."""
        end = snapshot_id.end_offset
        if end < self._start_offset or snapshot_id in self._snapshots:
            return False
        if end > self._high_watermark:
            raise RaftLogError(
                f"snapshot {snapshot_id} beyond the high watermark {self._high_watermark}"
            )
        kind, _ = validate_offset_and_epoch(self, end, snapshot_id.epoch)
        if kind != "valid":
            raise RaftLogError(f"snapshot {snapshot_id} is not valid for the log ({kind})")
        if not self._is_batch_boundary(end):
            raise RaftLogError(f"snapshot {snapshot_id} ends inside a batch")
        self._snapshots[snapshot_id] = bytes(payload)
        return True

    def _is_batch_boundary(self, offset: int) -> bool:
        index = self._index_of(offset)
        return index == len(self._batches) or self._batches[index].base_offset == offset

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int]:
        payload = self._snapshots.get(snapshot_id)
        if payload is None:
            raise SnapshotNotFoundError(f"no snapshot {snapshot_id}")
        if not 0 <= position <= len(payload):
            raise RaftLogError(f"position {position} outside snapshot of {len(payload)} bytes")
        return payload[position : position + max(max_bytes, 0)], len(payload)

    def install_snapshot(self, snapshot_id: SnapshotId, payload: bytes) -> None:
        """Keep the snapshot, then drop the whole log and start it at the snapshot's end."""
        self._snapshots[snapshot_id] = bytes(payload)
        self._batches.clear()
        self._base_offsets.clear()
        self._epochs.clear()
        self._start_offset = self._end_offset = snapshot_id.end_offset
        self._flushed_end_offset = snapshot_id.end_offset
        self._high_watermark = snapshot_id.end_offset
        for older in [
            s for s in self._snapshots if _snapshot_order(s) < _snapshot_order(snapshot_id)
        ]:
            del self._snapshots[older]

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        """Move the log start to the snapshot's end; older snapshots go too."""
        end = snapshot_id.end_offset
        if snapshot_id not in self._snapshots or end <= self._start_offset:
            return False
        if end > self._high_watermark:
            raise RaftLogError(
                f"log start {end} would pass the high watermark {self._high_watermark}"
            )
        index = self._index_of(end)  # a batch boundary: create_snapshot checked it
        del self._batches[:index]
        del self._base_offsets[:index]
        self._start_offset = end
        self._epochs = _epochs_from(self._epochs, end)
        for older in [
            s for s in self._snapshots if _snapshot_order(s) < _snapshot_order(snapshot_id)
        ]:
            del self._snapshots[older]
        return True


def _epochs_from(epochs: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    """Kafka's ``truncateFromStart``: the entries from ``start``; the one in force there is
    kept, moved to ``start``."""
    kept = [(epoch, offset) for epoch, offset in epochs if offset > start]
    before = [epoch for epoch, offset in epochs if offset <= start]
    return ([(before[-1], start)] if before else []) + kept


def _snapshot_order(snapshot_id: SnapshotId) -> tuple[int, int]:
    return snapshot_id.end_offset, snapshot_id.epoch
