"""Idempotent-producer state of one partition (Kafka's ``ProducerStateManager``) and its snapshots.

Per producer id the manager keeps the epoch and the metadata of the producer's last
``NUM_BATCHES_TO_RETAIN`` (5) batches: last sequence, last offset, offset delta (so first
sequence and first offset follow) and max timestamp, as Kafka's ``ProducerStateEntry``.

Checks of a client's batch (Kafka 4's ``ProducerAppendInfo``, origin CLIENT):

- duplicate: same epoch and the same first *and* last sequence as one of the 5 retained batches
  → the original batch's metadata is returned and nothing is appended (Kafka answers such a
  retry with error NONE and the original offsets);
- epoch older than the producer's → INVALID_PRODUCER_EPOCH;
- a newer epoch must start at sequence 0 → else OUT_OF_ORDER_SEQUENCE_NUMBER, unless the
  producer is unknown here;
- same epoch: the first sequence must follow the last one, wrapping from 2**31-1 to 0 → else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
- unknown producer (never seen, expired, or its state lost with its snapshots): any epoch and
  any sequence is accepted. Since KIP-360 (Kafka 2.5) the broker never answers
  UNKNOWN_PRODUCER_ID for this; the producer's state simply starts again;
- a transactional batch → INVALID_TXN_STATE: there is no transaction coordinator, so no
  transaction can have been verified (what Kafka 4 answers in the same case).

Replicated and replayed batches (origin REPLICATION) are not checked; control batches end a
transaction and may bump the epoch. Only batch headers are read: a control batch's
coordinator epoch (inside its record) is not, so it stays -1 here.

Producers expire ``producer.id.expiration.ms`` (Kafka 4: 86400000) after their last batch's
max timestamp, unless they have a transaction open.

Snapshot file ``<20-digit offset>.snapshot`` (Kafka's ``ProducerSnapshot`` v1, byte for byte):
the state after every offset below ``offset``. Big-endian::

    int16  version = 1
    uint32 crc              CRC-32C of every byte after this field
    int32  entry count
    entry * count, 46 bytes each:
        int64 producer_id, int16 epoch, int32 last_sequence, int64 last_offset,
        int32 offset_delta, int64 timestamp, int32 coordinator_epoch,
        int64 current_txn_first_offset
    (last_sequence -1, last_offset -1, offset_delta 0 for a producer with no batch; Samsa
    writes entries sorted by producer id, Kafka in hash-map order; readers take any order)

Only the last batch of each producer survives a snapshot (as in Kafka), so after a restart
duplicates are detected against that one batch until the producer appends again.

``ProducerStateManager`` does no I/O; the functions at the end read and write snapshot files
(temp + fsync + rename). The state is owned by the ``Log`` holding it (the broker's event loop).
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import crc32c

from protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
)
from protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, BatchHeader
from storage.checkpoint import fsync_directory
from storage.errors import StorageError

logger = logging.getLogger("samsa.storage.producer_state")

NUM_BATCHES_TO_RETAIN = 5
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms, Kafka 4's default
PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000  # producer.id.expiration.check.interval.ms
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NO_COORDINATOR_EPOCH = -1
NO_TXN_OFFSET = -1

_INT32_MAX = 2**31 - 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # the CRC covers everything after version and crc


class CorruptSnapshotError(StorageError):
    """A producer snapshot file fails its version, length or CRC check (Kafka's
    ``CorruptSnapshotException``); the log drops it and falls back to an older one."""


class BatchMetadata(NamedTuple):
    """One retained batch (Kafka's ``BatchMetadata``); a NamedTuple: one is built per append."""

    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_sequence(self) -> int:
        return decrement_sequence(self.last_sequence, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """One producer's epoch, its last batches (oldest first) and transaction state."""

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        *,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = NO_COORDINATOR_EPOCH,
        last_timestamp: int = NO_TIMESTAMP,
        current_txn_first_offset: int = NO_TXN_OFFSET,
        batches: Iterable[BatchMetadata] = (),
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
            f"last_timestamp={self.last_timestamp}, batches={list(self.batches)})"
        )

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def pending_copy(self) -> ProducerStateEntry:
        """What an append starts from (Kafka's ``withProducerIdAndBatchMetadata``): no batches."""
        return ProducerStateEntry(
            self.producer_id,
            producer_epoch=self.producer_epoch,
            coordinator_epoch=self.coordinator_epoch,
            last_timestamp=self.last_timestamp,
            current_txn_first_offset=self.current_txn_first_offset,
        )

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The retained batch with the exact sequence range of ``header`` (same epoch only)."""
        if header.producer_epoch != self.producer_epoch:
            return None
        last_sequence = header.last_sequence
        for batch in self.batches:
            if batch.last_sequence == last_sequence and batch.first_sequence == header.base_sequence:
                return batch
        return None

    def update_epoch(self, producer_epoch: int) -> None:
        """A new epoch forgets the batches of the old one."""
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch

    def add_batch(self, producer_epoch: int, batch: BatchMetadata) -> None:
        self.update_epoch(producer_epoch)
        self.batches.append(batch)  # the deque drops the oldest beyond 5
        self.last_timestamp = batch.timestamp

    def update(self, pending: ProducerStateEntry) -> None:
        """Take over what one append produced (Kafka's ``ProducerStateEntry.update``)."""
        self.update_epoch(pending.producer_epoch)
        self.batches.extend(pending.batches)
        self.coordinator_epoch = pending.coordinator_epoch
        self.current_txn_first_offset = pending.current_txn_first_offset
        self.last_timestamp = pending.last_timestamp


class ProducerAppend(NamedTuple):
    """The outcome of checking one append: a duplicate, or the entries to apply after writing."""

    entries: dict[int, ProducerStateEntry]
    duplicate: BatchMetadata | None = None


class ProducerStateManager:
    """Producer id → ``ProducerStateEntry`` for one partition; sans-IO, time passed in."""

    def __init__(self, *, producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def clear(self) -> None:
        self.producers.clear()

    # -- appends ------------------------------------------------------------------------------

    def check_client_append(
        self, headers: Sequence[BatchHeader], first_offset: int, *, log_append_time: int = -1
    ) -> ProducerAppend:
        """Check a client's batches, which will get offsets from ``first_offset`` on.

        Returns the first duplicate batch found (then nothing may be appended), or the updated
        entries for ``apply``. Raises the Kafka error of the first batch that fails.
        """
        pending: dict[int, ProducerStateEntry] = {}
        base_offset = first_offset
        for header in headers:
            if header.producer_id >= 0:
                current = self.producers.get(header.producer_id)
                duplicate = None if current is None else current.find_duplicate(header)
                if duplicate is not None:
                    return ProducerAppend({}, duplicate)
                if header.is_transactional:
                    raise InvalidTxnStateError(
                        f"transactional batch from producer {header.producer_id}: transactions "
                        "are not supported, so no transaction is ongoing"
                    )
                updated = _pending_entry(pending, current, header.producer_id)
                _check_epoch(updated, header, base_offset)
                _check_sequence(current, updated, header, base_offset)
                _add_data_batch(updated, header, base_offset, log_append_time)
            base_offset += header.last_offset_delta + 1
        return ProducerAppend(pending)

    def prepare_replica_append(self, headers: Iterable[BatchHeader]) -> ProducerAppend:
        """Batches that already carry offsets (replication, log replay): nothing is checked."""
        pending: dict[int, ProducerStateEntry] = {}
        for header in headers:
            if header.producer_id >= 0:
                current = self.producers.get(header.producer_id)
                updated = _pending_entry(pending, current, header.producer_id)
                if header.is_control:
                    _add_control_batch(updated, header)
                else:
                    _add_data_batch(updated, header, header.base_offset, -1)
        return ProducerAppend(pending)

    def apply(self, append: ProducerAppend) -> None:
        for producer_id, pending in append.entries.items():
            current = self.producers.get(producer_id)
            if current is None:
                self.producers[producer_id] = pending
            else:
                current.update(pending)

    def replay(self, header: BatchHeader) -> None:
        """Rebuild: apply one batch read back from the log."""
        if header.producer_id >= 0:
            self.apply(self.prepare_replica_append((header,)))

    # -- expiry and snapshots -----------------------------------------------------------------

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset == NO_TXN_OFFSET
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many went."""
        expired = [pid for pid, entry in self.producers.items() if self.is_expired(entry, now_ms)]
        for producer_id in expired:
            del self.producers[producer_id]
        return len(expired)

    def load(self, entries: Iterable[ProducerStateEntry], now_ms: int) -> None:
        """Replace the state with a snapshot's entries, dropping those already expired."""
        self.producers = {
            entry.producer_id: entry for entry in entries if not self.is_expired(entry, now_ms)
        }

    def snapshot_bytes(self) -> bytes:
        return encode_snapshot(self.producers.values())


def _pending_entry(
    pending: dict[int, ProducerStateEntry], current: ProducerStateEntry | None, producer_id: int
) -> ProducerStateEntry:
    updated = pending.get(producer_id)
    if updated is None:
        base = current if current is not None else ProducerStateEntry(producer_id)
        updated = pending[producer_id] = base.pending_copy()
    return updated


def _check_epoch(updated: ProducerStateEntry, header: BatchHeader, offset: int) -> None:
    if header.producer_epoch < updated.producer_epoch:
        raise InvalidProducerEpochError(
            f"epoch {header.producer_epoch} of producer {header.producer_id} at offset {offset} "
            f"is smaller than the last seen epoch {updated.producer_epoch}"
        )


def _check_sequence(
    current: ProducerStateEntry | None, updated: ProducerStateEntry, header: BatchHeader, offset: int
) -> None:
    """Kafka's ``ProducerAppendInfo.checkSequence``; ``updated`` holds this append's batches."""
    first_sequence = header.base_sequence
    if header.producer_epoch != updated.producer_epoch:
        if first_sequence != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceNumberError(
                f"producer {header.producer_id} at offset {offset}: new epoch "
                f"{header.producer_epoch} starts at sequence {first_sequence}, not 0 "
                f"(current epoch {updated.producer_epoch})"
            )
        return
    if updated.batches:
        last_sequence = updated.last_sequence
    elif current is not None and header.producer_epoch == current.producer_epoch:
        last_sequence = current.last_sequence
    else:
        last_sequence = NO_SEQUENCE
    # A producer whose state is gone (no epoch known) may continue at any sequence.
    current_epoch = NO_PRODUCER_EPOCH if current is None else current.producer_epoch
    if current_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_sequence, first_sequence):
        raise OutOfOrderSequenceNumberError(
            f"producer {header.producer_id} at offset {offset}: sequence {first_sequence} does "
            f"not follow {last_sequence}"
        )


def _add_data_batch(
    updated: ProducerStateEntry, header: BatchHeader, base_offset: int, log_append_time: int
) -> None:
    delta = header.last_offset_delta
    timestamp = log_append_time if log_append_time >= 0 else header.max_timestamp
    metadata = BatchMetadata(header.last_sequence, base_offset + delta, delta, timestamp)
    updated.add_batch(header.producer_epoch, metadata)
    if header.is_transactional and updated.current_txn_first_offset == NO_TXN_OFFSET:
        updated.current_txn_first_offset = base_offset


def _add_control_batch(updated: ProducerStateEntry, header: BatchHeader) -> None:
    """An end-transaction marker (Kafka's ``appendEndTxnMarker``); an emptied one is ignored."""
    if header.records_count == 0:
        return
    updated.update_epoch(header.producer_epoch)
    updated.current_txn_first_offset = NO_TXN_OFFSET
    updated.last_timestamp = header.max_timestamp


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == _INT32_MAX)


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement``, wrapping below 0 to 2**31-1 (Kafka's ``decrementSequence``)."""
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


# -- the snapshot format ----------------------------------------------------------------------


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Kafka's ``ProducerSnapshot`` v1 bytes (see the module docstring), sorted by producer id."""
    ordered = sorted(entries, key=lambda entry: entry.producer_id)
    buffer = bytearray(_SNAPSHOT_HEADER.size + _SNAPSHOT_ENTRY.size * len(ordered))
    position = _SNAPSHOT_HEADER.size
    for entry in ordered:
        _SNAPSHOT_ENTRY.pack_into(
            buffer, position, entry.producer_id, entry.producer_epoch, entry.last_sequence,
            entry.last_offset, entry.last_offset_delta, entry.last_timestamp,
            entry.coordinator_epoch, entry.current_txn_first_offset,
        )
        position += _SNAPSHOT_ENTRY.size
    _SNAPSHOT_HEADER.pack_into(buffer, 0, SNAPSHOT_VERSION, 0, len(ordered))
    crc = crc32c.crc32c(memoryview(buffer)[_CRC_START:])
    struct.pack_into(">I", buffer, 2, crc)
    return bytes(buffer)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Entries of a snapshot; CorruptSnapshotError for a bad version, length or CRC.

    As Kafka's reader, bytes after the last entry are allowed (the CRC covers them too).
    """
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"{len(data)} bytes are too few for a snapshot header")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if count < 0 or _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size > len(data):
        raise CorruptSnapshotError(f"{count} entries do not fit in {len(data)} bytes")
    computed = crc32c.crc32c(data[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(f"stored CRC {crc} does not match computed CRC {computed}")
    return [
        _entry_from_fields(*fields)
        for fields in _SNAPSHOT_ENTRY.iter_unpack(
            data[_SNAPSHOT_HEADER.size : _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size]
        )
    ]


def _entry_from_fields(
    producer_id: int, epoch: int, last_sequence: int, last_offset: int, offset_delta: int,
    timestamp: int, coordinator_epoch: int, current_txn_first_offset: int,
) -> ProducerStateEntry:
    batches = []
    if last_offset >= 0:
        batches.append(BatchMetadata(last_sequence, last_offset, offset_delta, timestamp))
    return ProducerStateEntry(
        producer_id,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        last_timestamp=timestamp,
        current_txn_first_offset=max(current_txn_first_offset, NO_TXN_OFFSET),
        batches=batches,
    )


# -- snapshot files ---------------------------------------------------------------------------


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / snapshot_file_name(offset)


def list_snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the ``<offset>.snapshot`` files in ``directory``, ascending."""
    offsets = []
    for name in os.listdir(directory):
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit() and len(stem) == 20:
            offsets.append(int(stem))
    return sorted(offsets)


def write_snapshot_file(directory: Path, offset: int, data: bytes) -> Path:
    """Replace ``<offset>.snapshot`` with ``data``: temp file, fsync, rename, directory fsync."""
    path = snapshot_path(directory, offset)
    temp = path.with_name(path.name + ".tmp")
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    fsync_directory(directory)
    return path


def read_snapshot_file(path: Path) -> list[ProducerStateEntry]:
    return decode_snapshot(path.read_bytes())


def delete_snapshot_file(directory: Path, offset: int) -> None:
    snapshot_path(directory, offset).unlink(missing_ok=True)


def remove_stray_snapshots(directory: Path, segment_base_offsets: Sequence[int]) -> None:
    """Kafka's ``removeStraySnapshots``: delete snapshots that match no segment's base offset,
    except the newest one if it lies at or after the last segment's base (a clean close wrote it).
    """
    bases = set(segment_base_offsets)
    strays = [offset for offset in list_snapshot_offsets(directory) if offset not in bases]
    keep = None
    if strays and (not bases or strays[-1] >= max(bases)):
        keep = strays[-1]
    for offset in strays:
        if offset != keep:
            logger.info("deleting stray producer snapshot %s", snapshot_path(directory, offset))
            delete_snapshot_file(directory, offset)
