"""The ``RaftLog`` protocol: what the quorum core needs of ``__cluster_metadata-0``.

Two implementations: ``MemoryRaftLog`` (unit tests, the simulator) and ``FileRaftLog``
(the daemon, over ``storage.Log``). One contract test suite runs against both.

Invariants every implementation keeps:
- offsets are dense from ``start_offset`` to ``end_offset``; batches are RecordBatch v2 bytes
  whose ``partition_leader_epoch`` is the epoch they were appended in, non-decreasing;
- ``start_offset <= high_watermark <= end_offset`` and ``flushed_end_offset <= end_offset``;
  nothing below the high watermark is ever truncated;
- a log that starts above 0 has a snapshot ending at its start offset
  (``earliest_snapshot_id().end_offset == start_offset``);
- ``end_offset_for_epoch(e)`` is Kafka's ``KafkaMetadataLog.endOffsetForEpoch``: the largest
  epoch <= e the log knows (its batches' epochs, and the snapshot's epoch at the log start)
  and the offset where it ends (the start of the next epoch, or ``end_offset``).
  ``e`` at or above the last epoch gives ``(end_offset, last_fetched_epoch)``; ``e`` below
  every epoch gives ``(start_offset, snapshot epoch or e)``.
- ``read_snapshot`` raises ``protocol.errors.SnapshotNotFoundError`` for an unknown id and
  ``ValueError`` for a position past the end.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from replication.metadata.snapshot import SnapshotId

__all__ = ["OffsetAndEpoch", "OffsetRange", "RaftLog", "SnapshotId"]


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    """Kafka's ``OffsetAndEpoch``: an (exclusive) end offset and the epoch it belongs to."""

    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """The offsets one append assigned: ``base_offset`` to ``last_offset`` inclusive."""

    base_offset: int
    last_offset: int


class RaftLog(Protocol):
    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def last_fetched_epoch(self) -> int: ...

    @property
    def flushed_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    def update_high_watermark(self, offset: int) -> None: ...

    def append_as_leader(
        self, records: Sequence[bytes], epoch: int, timestamp_ms: int
    ) -> OffsetRange: ...

    def append_control_as_leader(
        self, record_type: int, value: bytes, epoch: int, timestamp_ms: int
    ) -> OffsetRange: ...

    def append_as_follower(self, batches: bytes, epoch: int) -> OffsetRange | None: ...

    def read(self, start_offset: int, max_bytes: int) -> bytes: ...

    def truncate_to(self, offset: int) -> None: ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...

    def flush(self) -> None: ...

    def batches_from(self, offset: int) -> Iterator[tuple[int, int, list[bytes | None], bool]]: ...

    def latest_snapshot_id(self) -> SnapshotId | None: ...

    def earliest_snapshot_id(self) -> SnapshotId | None: ...

    def create_snapshot(self, snapshot_id: SnapshotId, payload: bytes) -> None: ...

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int]: ...

    def install_snapshot(self, snapshot_id: SnapshotId, payload: bytes) -> None: ...

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> None: ...
