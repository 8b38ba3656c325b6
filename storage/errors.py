"""Errors raised by the storage layer.

Every class here derives from ``StorageError`` so the log manager can tell a storage fault
from a programming error. Errors that map to a Kafka error code live in ``protocol.errors``.
"""

from __future__ import annotations

from pathlib import Path


class StorageError(Exception):
    """Base of every error raised by ``storage``."""


class CorruptIndexError(StorageError):
    """An ``.index`` / ``.timeindex`` file cannot be trusted; the segment rebuilds it from the log.

    The message names the file and what is wrong with it.
    """


class InvalidOffsetError(StorageError):
    """An index entry was appended out of order, or for an offset the index cannot hold."""


class IndexOffsetOverflowError(InvalidOffsetError):
    """``offset - base_offset`` does not fit in the index's int32 relative offset (Kafka's
    ``IndexOffsetOverflowException``): the segment must roll before this offset."""


class IndexFullError(StorageError):
    """An append to an index with no free slot; callers roll the segment first (``is_full()``)."""


class CorruptCheckpointError(StorageError):
    """A checkpoint file is malformed: names the file, the 1-based line number and the reason."""

    def __init__(self, path: Path, line_number: int, reason: str) -> None:
        super().__init__(f"corrupt checkpoint file {path}, line {line_number}: {reason}")
        self.path = path
        self.line_number = line_number
        self.reason = reason

    def __reduce__(self) -> tuple[type[CorruptCheckpointError], tuple[Path, int, str]]:
        return (type(self), (self.path, self.line_number, self.reason))


class ConfigError(StorageError, ValueError):
    """A config value is rejected: names the key, the value and why."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"invalid value {value!r} for configuration {key}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason


class CorruptPartitionMetadataError(StorageError):
    """A ``partition.metadata`` file is malformed: names the file and what is wrong with it."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"corrupt partition metadata file {path}: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple[type[CorruptPartitionMetadataError], tuple[Path, str]]:
        return (type(self), (self.path, self.reason))
