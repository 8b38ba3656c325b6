"""KRaft snapshots of the metadata image: Kafka's ``Snapshots``, ``FileRawSnapshotWriter``,
``RecordsSnapshotWriter`` and ``RecordsSnapshotReader``, for ``__cluster_metadata-0``.

File names (Kafka's ``Snapshots``), in the partition directory next to the segments::

    <end offset, 20 digits>-<epoch, 10 digits>.checkpoint          a finished snapshot
    <end offset>-<epoch>-<random>.checkpoint.part                   being written (a leftover
                                                                    after a crash: deleted at start)
    <end offset>-<epoch>.checkpoint.deleted                         being removed

The end offset is one past the last log offset the snapshot contains (last applied offset + 1)
and the epoch is the leader epoch of that last contained batch.

Content: RecordBatch v2 batches, uncompressed, each with the snapshot's epoch as partition leader
epoch, offsets counting from 0 as Kafka's snapshot writer (its ``BatchAccumulator`` starts at 0):

    offset 0        control batch: one SnapshotHeaderRecord (control type 3, record version 0:
                    version 0, last_contained_log_timestamp)
    offsets 1..n    data batches: the image's records, framed exactly as log records
                    (``replication.metadata.records``), null keys, at most 8 MiB a batch
                    (Kafka's ``KafkaRaftClient.MAX_BATCH_SIZE_BYTES``)
    offset n+1      control batch: one SnapshotFooterRecord (control type 4, version 0)

Writing goes to a ``.checkpoint.part`` file that is fsynced, renamed to its final name, and the
directory fsynced, so a ``.checkpoint`` file is always whole. Reading checks every batch (CRC,
contiguous offsets from 0, the epoch of the file name, header first, footer last and nothing
after it) and raises ``SnapshotError`` naming the path and the reason: a damaged snapshot is
never half applied. Functions only; ``replication.raft.file_log.FileRaftLog`` owns the files.
"""

from __future__ import annotations

import os
import re
import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from protocol.codec import Message
from protocol.errors import KafkaError
from protocol.messages.snapshot_footer_record import SnapshotFooterRecord
from protocol.messages.snapshot_header_record import SnapshotHeaderRecord
from protocol.records import (
    LOG_OVERHEAD,
    ControlRecordType,
    Record,
    RecordBatch,
    control_record_type,
    decode_batch,
    encode_batch,
)
from replication.metadata.records import MetadataRecordError, decode_metadata_record
from storage.fsync import fsync, fsync_directory

__all__ = [
    "DELETED_SUFFIX",
    "MAX_BATCH_SIZE_BYTES",
    "PARTIAL_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "Snapshot",
    "SnapshotError",
    "SnapshotId",
    "SnapshotPath",
    "encode_snapshot",
    "parse_snapshot_path",
    "read_snapshot",
    "read_snapshot_timestamp",
    "snapshot_file_name",
    "write_snapshot",
]

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
DELETED_SUFFIX = ".checkpoint.deleted"
MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024  # Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES
OFFSET_WIDTH = 20
EPOCH_WIDTH = 10
_NAME = re.compile(rf"^(\d{{{OFFSET_WIDTH}}})-(\d{{{EPOCH_WIDTH}}})")
_CONTROL_KEY = struct.Struct(">hh")  # Kafka's ControlRecordType key: version 0, type
_HEADER_VERSION = 0  # ControlRecordUtils.SNAPSHOT_HEADER_CURRENT_VERSION
_FOOTER_VERSION = 0  # ControlRecordUtils.SNAPSHOT_FOOTER_CURRENT_VERSION
_RECORD_OVERHEAD = 16  # a bound on a record's varints around its value


class SnapshotError(Exception):
    """A snapshot file that cannot be used: partial, corrupt, or not Kafka's layout."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """Kafka's ``OffsetAndEpoch`` of a snapshot: its end offset (exclusive) and epoch."""

    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class SnapshotPath:
    path: Path
    snapshot_id: SnapshotId
    partial: bool
    deleted: bool


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot read back whole: its records in order and what its header says."""

    snapshot_id: SnapshotId
    records: tuple[Message, ...]
    last_contained_log_timestamp: int
    size_in_bytes: int


def snapshot_file_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:0{OFFSET_WIDTH}d}-{snapshot_id.epoch:0{EPOCH_WIDTH}d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_path(path: Path) -> SnapshotPath | None:
    """Kafka's ``Snapshots.parse``: None for a file that is not a snapshot of any kind."""
    name = path.name
    partial = name.endswith(PARTIAL_SUFFIX)
    deleted = name.endswith(DELETED_SUFFIX)
    if not (partial or deleted or name.endswith(SNAPSHOT_SUFFIX)):
        return None
    match = _NAME.match(name)
    if match is None:
        return None
    if not (partial or deleted) and len(name) != OFFSET_WIDTH + 1 + EPOCH_WIDTH + len(SNAPSHOT_SUFFIX):
        return None
    snapshot_id = SnapshotId(int(match.group(1)), int(match.group(2)))
    return SnapshotPath(path, snapshot_id, partial, deleted)


# -- writing ----------------------------------------------------------------------------------


def encode_snapshot(
    values: Iterable[bytes],
    snapshot_id: SnapshotId,
    *,
    timestamp_ms: int,
    last_contained_log_timestamp: int,
    max_batch_size_bytes: int = MAX_BATCH_SIZE_BYTES,
) -> Iterable[bytes]:
    """The batches of a snapshot holding ``values`` (framed metadata records), in file order."""
    epoch = snapshot_id.epoch
    header = SnapshotHeaderRecord(version=_HEADER_VERSION,
                                  last_contained_log_timestamp=last_contained_log_timestamp)
    yield _control_batch(ControlRecordType.SNAPSHOT_HEADER, header, 0, epoch, timestamp_ms)
    offset = 1
    pending: list[Record] = []
    pending_bytes = 0
    for value in values:
        size = len(value) + _RECORD_OVERHEAD
        if pending and pending_bytes + size > max_batch_size_bytes:
            yield encode_batch(pending, partition_leader_epoch=epoch)
            pending, pending_bytes = [], 0
        pending.append(Record(offset=offset, timestamp=timestamp_ms, key=None, value=value))
        pending_bytes += size
        offset += 1
    if pending:
        yield encode_batch(pending, partition_leader_epoch=epoch)
    footer = SnapshotFooterRecord(version=_FOOTER_VERSION)
    yield _control_batch(ControlRecordType.SNAPSHOT_FOOTER, footer, offset, epoch, timestamp_ms)


def _control_batch(
    record_type: ControlRecordType, message: Message, offset: int, epoch: int, timestamp_ms: int
) -> bytes:
    record = Record(offset=offset, timestamp=timestamp_ms,
                    key=_CONTROL_KEY.pack(0, record_type), value=message.encode(0))
    return encode_batch([record], partition_leader_epoch=epoch, is_control=True)


def write_snapshot(directory: Path, snapshot_id: SnapshotId, batches: Iterable[bytes]) -> Path:
    """Write ``batches`` as the snapshot ``snapshot_id`` in ``directory``: a ``.part`` file,
    fsynced, renamed to its final name (replacing one of the same id), directory fsynced."""
    final = directory / snapshot_file_name(snapshot_id)
    stem = final.name[: -len(SNAPSHOT_SUFFIX)]
    partial = directory / f"{stem}-{uuid.uuid4().hex}{PARTIAL_SUFFIX}"
    try:
        with open(partial, "wb") as file:
            for batch in batches:
                file.write(batch)
            file.flush()
            fsync(file.fileno(), partial)
        os.replace(partial, final)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    fsync_directory(directory)
    return final


# -- reading ----------------------------------------------------------------------------------


def read_snapshot(path: Path, *, snapshot_id: SnapshotId | None = None) -> Snapshot:
    """Read and check a whole snapshot file; SnapshotError with the reason if it is unusable.
    ``snapshot_id``: a file in the snapshot layout whose name is not a snapshot's (Kafka's
    ``bootstrap.checkpoint``: epoch 0), taken as that id."""
    if snapshot_id is None:
        parsed = parse_snapshot_path(path)
        if parsed is None or parsed.partial or parsed.deleted:
            raise SnapshotError(path, "not a snapshot file name (<20 digits>-<10 digits>.checkpoint)")
        snapshot_id = parsed.snapshot_id
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SnapshotError(path, f"cannot read: {error}") from None
    batches = _read_batches(path, data, snapshot_id.epoch)
    return _snapshot_of(path, snapshot_id, batches, len(data))


def read_snapshot_timestamp(path: Path) -> int:
    """The header's last contained log timestamp, reading only the first batch (Kafka's
    ``Snapshots.lastContainedLogTimestamp``); SnapshotError if the header is unreadable."""
    try:
        with open(path, "rb") as file:
            prefix = file.read(LOG_OVERHEAD)
            if len(prefix) < LOG_OVERHEAD:
                raise SnapshotError(path, "shorter than a batch header")
            (length,) = struct.unpack_from(">i", prefix, 8)
            data = prefix + file.read(max(length, 0))
    except OSError as error:
        raise SnapshotError(path, f"cannot read: {error}") from None
    try:
        batch = decode_batch(memoryview(data), 0, verify_crc=True)
    except (KafkaError, ValueError, IndexError, struct.error) as error:
        raise SnapshotError(path, f"bad header batch: {error}") from None
    header = _control_message(path, batch, ControlRecordType.SNAPSHOT_HEADER)
    assert isinstance(header, SnapshotHeaderRecord)
    return header.last_contained_log_timestamp


def _read_batches(path: Path, data: bytes, epoch: int) -> list[RecordBatch]:
    view = memoryview(data)
    batches: list[RecordBatch] = []
    position, next_offset = 0, 0
    while position < len(data):
        if len(data) - position < LOG_OVERHEAD:
            raise SnapshotError(path, f"{len(data) - position} stray bytes at position {position}")
        try:
            batch = decode_batch(view, position, verify_crc=True)
        except (KafkaError, ValueError, IndexError, struct.error) as error:
            raise SnapshotError(path, f"bad batch at position {position}: {error}") from None
        if batch.base_offset != next_offset:
            raise SnapshotError(path, f"batch at position {position} has base offset "
                                      f"{batch.base_offset}, expected {next_offset}")
        if batch.header.partition_leader_epoch != epoch:
            raise SnapshotError(path, f"batch at offset {batch.base_offset} has epoch "
                                      f"{batch.header.partition_leader_epoch}, expected {epoch}")
        batches.append(batch)
        next_offset = batch.next_offset
        position += batch.size_in_bytes
    return batches


def _snapshot_of(
    path: Path, snapshot_id: SnapshotId, batches: Sequence[RecordBatch], size: int
) -> Snapshot:
    if not batches:
        raise SnapshotError(path, "empty file")
    header = _control_message(path, batches[0], ControlRecordType.SNAPSHOT_HEADER)
    assert isinstance(header, SnapshotHeaderRecord)
    _control_message(path, batches[-1], ControlRecordType.SNAPSHOT_FOOTER)
    records: list[Message] = []
    for batch in batches[1:-1]:
        if batch.is_control:
            _check_ignorable_control(path, batch)
            continue
        for record in batch.records:
            if record.value is None:
                raise SnapshotError(path, f"record at offset {record.offset} has no value")
            try:
                message, _ = decode_metadata_record(record.value)
            except MetadataRecordError as error:
                raise SnapshotError(path, f"record at offset {record.offset}: {error}") from None
            records.append(message)
    return Snapshot(snapshot_id, tuple(records), header.last_contained_log_timestamp, size)


def _control_message(path: Path, batch: RecordBatch, expected: ControlRecordType) -> Message:
    """The header (first batch) or footer (last batch) record, checked."""
    what = "header" if expected is ControlRecordType.SNAPSHOT_HEADER else "footer (partial snapshot?)"
    if not batch.is_control or not batch.records:
        raise SnapshotError(path, f"no snapshot {what} at offset {batch.base_offset}")
    record = batch.records[0]
    try:
        record_type = control_record_type(record)
    except KafkaError as error:
        raise SnapshotError(path, f"bad control record at offset {record.offset}: {error}") from None
    if record_type is not expected or record.value is None:
        raise SnapshotError(path, f"no snapshot {what} at offset {batch.base_offset}")
    cls = SnapshotHeaderRecord if expected is ControlRecordType.SNAPSHOT_HEADER else SnapshotFooterRecord
    try:
        message, _ = cls.decode_from(memoryview(record.value), 0, 0)
    except Exception as error:  # any decoding failure is a corrupt file
        raise SnapshotError(path, f"bad {cls.__name__} at offset {record.offset}: {error}") from None
    return message


def _check_ignorable_control(path: Path, batch: RecordBatch) -> None:
    """KRaftVersionRecord / VotersRecord may follow the header (Kafka, kraft.version 1)."""
    for record in batch.records:
        try:
            record_type = control_record_type(record)
        except KafkaError as error:
            raise SnapshotError(path, f"bad control record at offset {record.offset}: {error}") from None
        if record_type not in (ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS):
            raise SnapshotError(path, f"unexpected {record_type.name} control record at offset "
                                      f"{record.offset}")
