"""The ``RaftLog`` protocol: what the quorum core needs of ``__cluster_metadata-0``.

Two implementations: ``MemoryRaftLog`` (unit tests, the simulator) and ``FileRaftLog``
(the daemon, over ``storage.Log``). One contract test suite
(``tests/unit/replication/raft/test_raft_log_contract.py``) runs against both; this module is
the contract's single source: every rule below and in the method docstrings is tested there.
The semantics are Kafka's ``ReplicatedLog`` as its ``KafkaMetadataLog`` and its own memory log
(``MockLog``) implement it; where those two differ, the choice is named.

Invariants every implementation keeps:
- offsets are dense from ``start_offset`` to ``end_offset`` (a Raft log is never compacted);
  batches are RecordBatch v2 bytes whose ``partition_leader_epoch`` is the epoch they were
  appended in, non-decreasing along the log;
- ``start_offset <= high_watermark <= end_offset`` and ``flushed_end_offset <= end_offset``;
  nothing below the high watermark is ever truncated;
- a log that starts above 0 has a snapshot ending at its start offset
  (``earliest_snapshot_id().end_offset == start_offset``);
- a restart (or a crash) keeps at least everything below ``flushed_end_offset`` and every
  snapshot; the high watermark, which Kafka keeps only in memory for this log, restarts at
  ``start_offset``.

Errors, one type per kind of fault:
- ``RaftLogError`` (a ``ValueError``): a call the caller should not have made;
- ``protocol.errors.CorruptMessageError``: follower bytes that fail their CRC or whose batch
  length is impossible; ``protocol.errors.InvalidRecordError``: follower bytes that parse but
  cannot belong here (magic, epochs, offsets not contiguous);
- ``protocol.errors.OffsetOutOfRangeError``: a read outside ``[start_offset, end_offset]``
  (Kafka's ``OffsetOutOfRangeException``);
- ``protocol.errors.SnapshotNotFoundError``: an unknown snapshot id.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from protocol.errors import CorruptMessageError, InvalidRecordError
from protocol.records import (
    LOG_OVERHEAD,
    BatchHeader,
    batch_crc_is_valid,
    read_batch_header,
)
from replication.metadata.snapshot import SnapshotId
from replication.raft.errors import RaftLogError

__all__ = [
    "OffsetAndEpoch",
    "OffsetRange",
    "RaftLog",
    "SnapshotId",
    "follower_batches",
    "validate_offset_and_epoch",
]

_BATCH_LENGTH = struct.Struct(">i")  # after the int64 base offset
_MIN_BATCH_LENGTH = 49  # the v2 header after the length field (61 - LOG_OVERHEAD)


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
    def start_offset(self) -> int:
        """The first offset in the log; a snapshot ends here when it is above 0."""
        ...

    @property
    def end_offset(self) -> int:
        """One past the last offset (``start_offset`` when the log is empty)."""
        ...

    @property
    def last_fetched_epoch(self) -> int:
        """Kafka's ``lastFetchedEpoch``: the epoch of the last batch; with no batch, the latest
        snapshot's epoch; with neither, 0 (the primordial epoch, which has no records)."""
        ...

    @property
    def flushed_end_offset(self) -> int:
        """Everything below it survives a crash; ``<= end_offset``."""
        ...

    @property
    def high_watermark(self) -> int:
        """The committed end; ``start_offset`` after a restart until the core raises it."""
        ...

    def update_high_watermark(self, offset: int) -> None:
        """Raise the high watermark to ``offset``.

        ``RaftLogError`` unless ``high_watermark <= offset <= end_offset`` (MockLog's rule:
        never backwards, never past the log end; ``KafkaMetadataLog`` clamps instead, which
        would hide a core that lets a follower's high watermark run past its log; the core
        clamps a leader's high watermark to its own end first, as ``KafkaRaftClient`` does).
        """
        ...

    def append_as_leader(
        self, records: Sequence[bytes], epoch: int, timestamp_ms: int
    ) -> OffsetRange:
        """One batch of ``records`` (values, null keys, ``timestamp_ms``) at ``end_offset``,
        stamped ``epoch``. ``RaftLogError`` for no records or an epoch below
        ``last_fetched_epoch`` (a leader's epoch is never older than its log)."""
        ...

    def append_control_as_leader(
        self, record_type: int, value: bytes, epoch: int, timestamp_ms: int
    ) -> OffsetRange:
        """One control batch holding one record of ``record_type`` (key: version 0, type);
        the epoch rule of ``append_as_leader``."""
        ...

    def append_as_follower(self, batches: bytes, epoch: int) -> OffsetRange | None:
        """The leader's batches, byte for byte (offsets and epochs kept), from a Fetch answered
        in leader epoch ``epoch``. All or nothing: every check (``follower_batches``) passes
        before a byte is appended. A partial batch at the end (a Fetch cut by its byte limit)
        is left out; None when there is no whole batch. ``RaftLogError`` if the first batch
        does not start at ``end_offset``; ``CorruptMessageError`` / ``InvalidRecordError``
        for bad bytes (a bad CRC, an epoch above ``epoch`` or below the log's last, ...)."""
        ...

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``start_offset``: at least one when
        ``start_offset < end_offset``, then more while they fit ``max_bytes`` (an
        implementation may stop early, e.g. at a segment end); ``b""`` at ``end_offset``.
        Uncommitted batches included. ``OffsetOutOfRangeError`` outside
        ``[start_offset, end_offset]``."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every batch that holds an offset ``>= offset`` (so a batch holding ``offset``
        goes whole: ``end_offset`` becomes its base offset), the epochs that began there and
        the unflushed mark above it. No-op at or past ``end_offset``. ``RaftLogError`` below
        the high watermark (committed data never goes)."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's ``KafkaMetadataLog.endOffsetForEpoch`` over the leader epoch cache (one
        ``(epoch, start offset)`` entry per epoch in the log; after ``delete_before_snapshot``
        the first entry starts at the new ``start_offset``):

        - ``epoch`` is the last epoch in the log -> ``(end_offset, epoch)``;
        - ``epoch`` is above every epoch in the log, or is -1, or the log has no entry ->
          ``(end_offset, last_fetched_epoch)``;
        - else the largest known epoch ``<= epoch`` and where the next epoch starts; when none
          is ``<= epoch``: ``(first entry's start, epoch)``, except that an answer equal to
          ``(earliest snapshot's end offset, epoch)`` becomes the earliest snapshot's id
          (the epoch is older than the log: the snapshot at the log start answers).
        """
        ...

    def flush(self) -> None:
        """Make everything appended durable: ``flushed_end_offset == end_offset``."""
        ...

    def batches_from(self, offset: int) -> Iterator[tuple[int, int, list[bytes | None], bool]]:
        """The committed batches (last offset below the high watermark) from the one holding
        ``offset``, decoded: ``(base offset, epoch, record values, is control)``. What a state
        machine applies (Kafka's COMMITTED isolation); ``read`` is the uncommitted view.
        ``OffsetOutOfRangeError`` outside ``[start_offset, end_offset]``."""
        ...

    def latest_snapshot_id(self) -> SnapshotId | None:
        """The greatest snapshot id, ordered by (end offset, epoch)."""
        ...

    def earliest_snapshot_id(self) -> SnapshotId | None:
        """The least snapshot id; it ends at ``start_offset`` when that is above 0."""
        ...

    def create_snapshot(self, snapshot_id: SnapshotId, payload: bytes) -> bool:
        """Keep ``payload`` as snapshot ``snapshot_id``, durable on return; True if written.

        Kafka's ``createNewSnapshot``: False (nothing written) when the id ends below
        ``start_offset`` (a newer snapshot was installed meanwhile) or already exists.
        ``RaftLogError`` when it ends above the high watermark, is not valid for the log
        (``validate_offset_and_epoch`` is not "valid": the epoch does not reach that offset)
        or ends inside a batch (a state machine snapshots whole batches).
        """
        ...

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int]:
        """``(up to max_bytes of the snapshot from position, the snapshot's size)``; ``b""``
        at ``position == size``. ``SnapshotNotFoundError`` for an unknown id, ``RaftLogError``
        for a position outside ``[0, size]`` (FetchSnapshot answers POSITION_OUT_OF_RANGE)."""
        ...

    def install_snapshot(self, snapshot_id: SnapshotId, payload: bytes) -> None:
        """A follower's snapshot fetched from the leader: kept (durable), then the log restarts
        empty at its end offset (start, end, flushed end and high watermark all there, so
        ``last_fetched_epoch`` is the snapshot's epoch) and older snapshots go."""
        ...

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        """Kafka's ``deleteBeforeSnapshot``: the log start moves to the snapshot's end offset,
        the batches below it and the older snapshots go; True if the start moved. False (no
        change) for an unknown snapshot or one not above ``start_offset``. ``RaftLogError``
        when it ends above the high watermark (the log start never passes the committed end)."""
        ...


def validate_offset_and_epoch(
    log: RaftLog, offset: int, epoch: int
) -> tuple[Literal["valid", "snapshot", "diverging"], OffsetAndEpoch | None]:
    """Kafka's ``ReplicatedLog.validateOffsetAndEpoch`` (``epoch``: that of offset - 1):
    ("valid", None), ("snapshot", latest snapshot id) or ("diverging", our end for the epoch)."""
    if log.start_offset == 0 and offset == 0:
        return "valid", None
    earliest = log.earliest_snapshot_id()
    if earliest is not None and (
        offset < log.start_offset
        or (offset == log.start_offset and epoch != earliest.epoch)
        or epoch < earliest.epoch
    ):
        latest = log.latest_snapshot_id()
        assert latest is not None
        return "snapshot", OffsetAndEpoch(latest.end_offset, latest.epoch)
    end = log.end_offset_for_epoch(epoch)
    if end.epoch != epoch or end.offset < offset:
        return "diverging", end
    return "valid", None


def follower_batches(
    data: bytes, leader_epoch: int, end_offset: int, last_epoch: int
) -> tuple[bytes, list[BatchHeader]]:
    """The whole batches at the front of ``data`` (a partial one at the end is left out, as
    Kafka's batch iterator does) and their headers, after every ``append_as_follower`` check:

    - ``RaftLogError``: the first batch does not start at ``end_offset``;
    - ``CorruptMessageError``: a batch length below the v2 header, a truncated header, a bad CRC;
    - ``InvalidRecordError``: magic other than 2, a batch not starting where the previous one
      ended, an epoch above ``leader_epoch`` (the leader never holds those) or below the one
      before it (``last_epoch`` for the first).
    """
    headers = _whole_batch_headers(data)
    if not headers:
        return b"", []
    if headers[0].base_offset != end_offset:
        raise RaftLogError(
            f"follower append at offset {headers[0].base_offset}, the log end offset is {end_offset}"
        )
    expected_offset, previous_epoch = end_offset, last_epoch
    for header in headers:
        if header.base_offset != expected_offset:
            raise InvalidRecordError(
                f"batch at offset {header.base_offset} does not follow offset {expected_offset - 1}"
            )
        epoch = header.partition_leader_epoch
        if not previous_epoch <= epoch <= leader_epoch:
            raise InvalidRecordError(
                f"batch at offset {header.base_offset} has leader epoch {epoch}, outside "
                f"[{previous_epoch}, {leader_epoch}] (the log's last epoch, the leader's epoch)"
            )
        expected_offset, previous_epoch = header.next_offset, epoch
    size = sum(header.size_in_bytes for header in headers)
    return (data if size == len(data) else bytes(data[:size])), headers


def _whole_batch_headers(data: bytes) -> list[BatchHeader]:
    headers: list[BatchHeader] = []
    position = 0
    while len(data) - position >= LOG_OVERHEAD:
        (length,) = _BATCH_LENGTH.unpack_from(data, position + 8)
        if length < _MIN_BATCH_LENGTH:
            raise CorruptMessageError(
                f"record batch at position {position} has batch_length {length}"
            )
        if position + LOG_OVERHEAD + length > len(data):
            break  # a partial batch: the Fetch was cut by its byte limit
        header = read_batch_header(data, position)
        if not batch_crc_is_valid(data, position, header):
            raise CorruptMessageError(f"record batch at offset {header.base_offset}: bad CRC")
        headers.append(header)
        position += header.size_in_bytes
    return headers
