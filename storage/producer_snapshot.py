"""Producer-state snapshot files, ``<offset>.snapshot`` (Kafka's ``ProducerSnapshot`` v1).

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

Files are written to a temp file, fsynced and renamed (then the directory is fsynced). The
functions are called by the partition's ``Log`` (``storage.log_producers``), on its owner.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

import crc32c

from storage.errors import StorageError
from storage.fsync import fsync, fsync_directory
from storage.producer_state import NO_TXN_OFFSET, BatchMetadata, ProducerStateEntry

logger = logging.getLogger("samsa.storage.producer_state")

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # the CRC covers everything after version and crc


class CorruptSnapshotError(StorageError):
    """A producer snapshot file fails its version, length or CRC check (Kafka's
    ``CorruptSnapshotException``); the log drops it and falls back to an older one."""


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
    return snapshot_offsets_in(os.listdir(directory))


def snapshot_offsets_in(names: Iterable[str]) -> list[int]:
    """Offsets of the ``<offset>.snapshot`` files among a directory's file ``names``, ascending."""
    offsets = []
    for name in names:
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
        fsync(handle.fileno(), temp)
    os.replace(temp, path)
    fsync_directory(directory)
    return path


def read_snapshot_file(path: Path) -> list[ProducerStateEntry]:
    return decode_snapshot(path.read_bytes())


def delete_snapshot_file(directory: Path, offset: int) -> None:
    snapshot_path(directory, offset).unlink(missing_ok=True)


def remove_stray_snapshots(directory: Path, segment_base_offsets: Sequence[int],
                           offsets: list[int] | None = None) -> list[int]:
    """Kafka's ``removeStraySnapshots``: delete snapshots that match no segment's base offset,
    except the newest one if it lies at or after the last segment's base (a clean close wrote it).
    ``offsets``: the snapshots there are, if the caller listed them; returns those left.
    """
    bases = set(segment_base_offsets)
    offsets = list_snapshot_offsets(directory) if offsets is None else offsets
    strays = [offset for offset in offsets if offset not in bases]
    keep = None
    if strays and (not bases or strays[-1] >= max(bases)):
        keep = strays[-1]
    deleted = set()
    for offset in strays:
        if offset != keep:
            logger.info("deleting stray producer snapshot %s", snapshot_path(directory, offset))
            delete_snapshot_file(directory, offset)
            deleted.add(offset)
    return [offset for offset in offsets if offset not in deleted]
