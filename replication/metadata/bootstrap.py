"""The bootstrap metadata of a new cluster: Kafka's ``bootstrap.checkpoint`` (``BootstrapDirectory``,
``BootstrapMetadata``).

``kafka-storage format`` (and ``samsa storage format``) writes ``bootstrap.checkpoint`` into the
metadata log directory (``metadata.log.dir``, by default the first of ``log.dirs``): the
records a new cluster's metadata log must open with — a FeatureLevelRecord per finalized
feature, ``metadata.version`` first, and the ``--add-scram`` users as UserScramCredentialRecords.

File layout: exactly a KRaft snapshot (``replication.metadata.snapshot``) with epoch 0 — a control
batch with the SnapshotHeaderRecord, data batches of framed metadata records, a control batch
with the SnapshotFooterRecord. Kafka's reader keeps every record of the data batches and skips
the control batches; so does this one (KRaftVersion / Voters control records included).

Invariants: a ``BootstrapMetadata`` always holds a FeatureLevelRecord for ``metadata.version``
(Kafka refuses a file without one: ``BootstrapMetadata.fromRecords``); a file that cannot be read
whole raises ``BootstrapError`` naming the file and the reason; no file is ``None`` (the caller
keeps its own defaults, as Kafka falls back to the configured or latest ``metadata.version``).

Who uses it: the first leader of an empty metadata log writes ``records`` in its first batch (the
single node's ``LocalController`` at start-up, the ``QuorumController`` when it first becomes
active), as Kafka's ``QuorumController`` writes the bootstrap records when its log is empty.
Functions and values only; nothing here owns state.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from protocol.codec import Message
from protocol.messages.metadata.feature_level_record import FeatureLevelRecord
from replication.metadata.image import METADATA_VERSION
from replication.metadata.records import encode_metadata_record
from replication.metadata.snapshot import (
    SnapshotError,
    SnapshotId,
    encode_snapshot,
    read_snapshot,
)
from storage.fsync import fsync, fsync_directory

__all__ = [
    "BOOTSTRAP_FILE",
    "BootstrapError",
    "BootstrapMetadata",
    "read_bootstrap",
    "write_bootstrap",
]

BOOTSTRAP_FILE = "bootstrap.checkpoint"  # Kafka's BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME
_BOOTSTRAP_ID = SnapshotId(end_offset=0, epoch=0)


class BootstrapError(Exception):
    """A ``bootstrap.checkpoint`` that cannot be used; the message names the file."""


@dataclass(frozen=True, slots=True)
class BootstrapMetadata:
    records: tuple[Message, ...]
    source: str  # where they came from, for log lines

    def __post_init__(self) -> None:
        if self.metadata_version is None:
            raise BootstrapError(f"No FeatureLevelRecord for {METADATA_VERSION} was found in the "
                                 f"bootstrap metadata from {self.source}")

    @property
    def metadata_version(self) -> int | None:
        """The last ``metadata.version`` level the records finalize (Kafka takes the last)."""
        levels = [record.feature_level for record in self.records
                  if isinstance(record, FeatureLevelRecord) and record.name == METADATA_VERSION]
        return levels[-1] if levels else None


def read_bootstrap(directory: Path) -> BootstrapMetadata | None:
    """``directory/bootstrap.checkpoint`` read whole, or None when there is no such file."""
    path = directory / BOOTSTRAP_FILE
    if not path.exists():
        return None
    try:
        snapshot = read_snapshot(path, snapshot_id=_BOOTSTRAP_ID)
    except SnapshotError as error:
        raise BootstrapError(f"the bootstrap metadata file {path} is damaged: {error.reason}") from None
    return BootstrapMetadata(snapshot.records, f"the binary bootstrap metadata file: {path}")


def write_bootstrap(directory: Path, records: Sequence[Message], *, now_ms: int) -> Path:
    """Write ``records`` as ``directory/bootstrap.checkpoint`` (temp file, fsync, rename, as
    Kafka's ``writeBinaryFile``); BootstrapError if they finalize no ``metadata.version``."""
    BootstrapMetadata(tuple(records), "the format command")  # checks metadata.version
    path = directory / BOOTSTRAP_FILE
    temporary = directory / f"{BOOTSTRAP_FILE}.tmp"
    batches = encode_snapshot([encode_metadata_record(record) for record in records], _BOOTSTRAP_ID,
                              timestamp_ms=now_ms, last_contained_log_timestamp=now_ms)
    try:
        with open(temporary, "wb") as file:
            for batch in batches:
                file.write(batch)
            file.flush()
            fsync(file.fileno(), temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    fsync_directory(directory)
    return path
