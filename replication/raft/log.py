"""The log the Raft core replicates (Kafka's ``ReplicatedLog``): the ``RaftLog`` protocol and its
value types. Text of the lead's contract (``raft_api.md``); implementations: ``MemoryRaftLog``
(``replication.raft.memory_log``) and ``FileRaftLog`` (``replication.raft.file_log``), both run
through one contract suite (tests/unit/replication/raft/test_raft_log_contract.py).

Invariants every implementation keeps:
- ``start_offset <= high_watermark <= end_offset`` and ``flushed_end_offset <= end_offset``;
  everything below ``flushed_end_offset`` survives a crash, the rest may be cut to a prefix;
- batches are RecordBatch v2 bytes, each stamped with the leader epoch that wrote it; a
  follower keeps the leader's offsets and epochs byte for byte;
- the epoch of every offset is known from the first offset each epoch wrote (the leader epoch
  cache), which answers ``end_offset_for_epoch`` as Kafka's ``LeaderEpochFileCache.endOffsetFor``;
- snapshots are named by ``SnapshotId(end_offset, epoch)``: the offsets below ``end_offset``
  are in the snapshot, ``epoch`` is the epoch of the last of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

from replication.metadata.snapshot import SnapshotId

__all__ = ["OffsetAndEpoch", "OffsetRange", "RaftLog", "SnapshotId"]


class OffsetAndEpoch(NamedTuple):
    """Kafka's ``OffsetAndEpoch``: an offset and the epoch of the batch before it."""

    offset: int
    epoch: int


class OffsetRange(NamedTuple):
    """The offsets an append was given: ``base_offset`` to ``last_offset``, both included."""

    base_offset: int
    last_offset: int


class RaftLog(Protocol):
    @property
    def start_offset(self) -> int: ...  # log start (after a snapshot: its end offset)

    @property
    def end_offset(self) -> int: ...  # LEO

    @property
    def last_fetched_epoch(self) -> int: ...  # epoch of the last batch (or latest snapshot's), 0 if empty

    @property
    def flushed_end_offset(self) -> int: ...  # everything below is durable

    @property
    def high_watermark(self) -> int: ...

    def update_high_watermark(self, offset: int) -> None: ...

    def append_as_leader(
        self, records: Sequence[bytes], epoch: int, timestamp_ms: int
    ) -> OffsetRange: ...  # one batch of records (values; keys null), offsets assigned

    def append_control_as_leader(
        self, record_type: int, value: bytes, epoch: int, timestamp_ms: int
    ) -> OffsetRange: ...  # a control batch (LeaderChangeMessage: control type 2)

    def append_as_follower(self, batches: bytes, epoch: int) -> OffsetRange | None: ...
    # raw RecordBatch bytes from a Fetch response, offsets and epochs kept; None if empty

    def read(self, start_offset: int, max_bytes: int) -> bytes: ...  # whole batches from start_offset

    def truncate_to(self, offset: int) -> None: ...  # drop offsets >= offset (never below HW)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...
    # Kafka's LeaderEpochFileCache.endOffsetFor: largest epoch <= epoch and its end offset

    def flush(self) -> None: ...

    def batches_from(self, offset: int) -> Iterator[tuple[int, int, list[bytes | None], bool]]: ...
    # committed-data reading for the state machine: (base_offset, epoch, record values, is_control)

    # snapshots (KIP-630)
    def latest_snapshot_id(self) -> SnapshotId | None: ...

    def earliest_snapshot_id(self) -> SnapshotId | None: ...

    def create_snapshot(self, snapshot_id: SnapshotId, payload: bytes) -> None: ...

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int]: ...  # chunk, total size

    def install_snapshot(self, snapshot_id: SnapshotId, payload: bytes) -> None: ...
    # follower: store snapshot, then truncate fully and start the log at its end offset

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> None: ...  # log start -> snapshot end
