"""Kafka's checkpoint files, in Kafka's text format (``CheckpointFile``), byte for byte.

Layout: ASCII text, ``\\n`` line ends (the last line too), fields separated by one space::

    0                      <- version (only 0 exists)
    2                      <- entry count
    orders 0 1234          <- one entry per line
    orders 1 987

- Offset checkpoints (``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
  ``log-start-offset-checkpoint``, one per log directory): ``topic partition offset``, written
  sorted by (topic, partition) so the same state always gives the same bytes.
- ``leader-epoch-checkpoint`` (one per partition directory): ``epoch start_offset``, in the
  order given (the leader-epoch cache keeps them ordered by epoch).

Writes replace the file atomically: the text goes to ``<name>.tmp`` in the same directory,
which is flushed and fsynced, renamed over ``<name>``, and the directory is fsynced so the
rename survives a crash. A crash leaves either the old file or the new one, plus perhaps a
stale ``.tmp`` that reads ignore and the next write overwrites. A missing file, or an empty one
(Kafka creates the file empty before its first write), reads as no entries; anything else that
is malformed raises CorruptCheckpointError with the file, the 1-based line and the reason.

Owner: whoever holds the checkpoint object (the log manager, or a partition's leader-epoch
cache) serialises calls; nothing here is thread-safe. OSError from a write is left for the
caller, which takes the log directory offline.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from storage.errors import CorruptCheckpointError
from storage.fsync import fsync, fsync_directory

VERSION = 0
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
TEMP_SUFFIX = ".tmp"

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TOPIC_NAME_LENGTH = 249
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_INTEGER = re.compile(
    r"-?[0-9]+"
)  # ASCII digits only: int() would also take "+1", " 1", "1_0" and non-ASCII digits

T = TypeVar("T")


def _integer(text: str, name: str, low: int, high: int) -> int:
    """Parse a field; ValueError(reason) if it is not a decimal integer within [low, high]."""
    if not _INTEGER.fullmatch(text):
        raise ValueError(f"{name} {text!r} is not an integer")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is out of range [{low}, {high}]")
    return value


def _checked_integer(value: int, name: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is out of range [{low}, {high}]")
    return value


def _checked_topic(topic: str) -> str:
    if not (
        isinstance(topic, str)
        and len(topic) <= MAX_TOPIC_NAME_LENGTH
        and _TOPIC_NAME.fullmatch(topic)
        and topic not in (".", "..")
    ):
        raise ValueError(f"illegal topic name {topic!r}")
    return topic


class CheckpointFile(Generic[T]):
    """One checkpoint file whose entries are ``field_count`` space-separated fields.

    ``format_entry`` turns an entry into its fields (raising ValueError/TypeError for an entry
    that cannot be written); ``parse_entry`` turns fields back into an entry (raising
    ValueError with the reason). ``key``, if given, must be unique across entries.
    """

    def __init__(
        self,
        path: Path,
        *,
        field_count: int,
        format_entry: Callable[[T], Sequence[object]],
        parse_entry: Callable[[list[str]], T],
        key: Callable[[T], Hashable] | None = None,
    ) -> None:
        self.path = Path(path)
        self._field_count = field_count
        self._format_entry = format_entry
        self._parse_entry = parse_entry
        self._key = key

    @property
    def temp_path(self) -> Path:
        return self.path.with_name(self.path.name + TEMP_SUFFIX)

    def encode(self, entries: Sequence[T]) -> bytes:
        """The file's bytes for ``entries``, in the order given."""
        lines = [str(VERSION), str(len(entries))]
        lines.extend(" ".join(map(str, self._format_entry(entry))) for entry in entries)
        return ("\n".join(lines) + "\n").encode("ascii")

    def write(self, entries: Sequence[T]) -> None:
        """Replace the file with ``entries``: temp file, fsync, rename, fsync the directory."""
        data = self.encode(entries)  # validate every entry before touching the disk
        with open(self.temp_path, "wb") as temp:
            temp.write(data)
            temp.flush()
            fsync(temp.fileno(), self.temp_path)
        os.replace(self.temp_path, self.path)
        fsync_directory(self.path.parent)

    def read(self) -> list[T]:
        """The entries in file order; [] if the file is missing or empty."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return self.decode(data)

    def decode(self, data: bytes) -> list[T]:
        if not data:
            return []
        lines = self._lines(data)
        version = self._parse(1, lambda: _integer(lines[0], "version", INT64_MIN, INT64_MAX))
        if version != VERSION:
            raise CorruptCheckpointError(
                self.path, 1, f"unsupported version {version}, expected {VERSION}"
            )
        if len(lines) < 2:
            raise CorruptCheckpointError(self.path, 2, "the entry count is missing")
        count = self._parse(2, lambda: _integer(lines[1], "entry count", 0, INT32_MAX))
        entries = [self._parse_line(number, line) for number, line in enumerate(lines[2:], 3)]
        if len(entries) != count:
            raise CorruptCheckpointError(
                self.path, 2, f"the entry count is {count} but {len(entries)} entries follow"
            )
        self._check_unique(entries)
        return entries

    def _lines(self, data: bytes) -> list[str]:
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError as error:
            line_number = data.count(b"\n", 0, error.start) + 1
            byte = data[error.start]
            raise CorruptCheckpointError(
                self.path, line_number, f"non-ASCII byte 0x{byte:02x}"
            ) from None
        if not text.endswith("\n"):
            raise CorruptCheckpointError(
                self.path, text.count("\n") + 1, "no newline at the end of the file (truncated?)"
            )
        return text[:-1].split("\n")

    def _parse(self, line_number: int, parse: Callable[[], int]) -> int:
        try:
            return parse()
        except ValueError as error:
            raise CorruptCheckpointError(self.path, line_number, str(error)) from None

    def _parse_line(self, line_number: int, line: str) -> T:
        fields = line.split(" ")
        if len(fields) != self._field_count:
            raise CorruptCheckpointError(
                self.path,
                line_number,
                f"expected {self._field_count} space-separated fields, found {len(fields)}: {line!r}",
            )
        try:
            return self._parse_entry(fields)
        except ValueError as error:
            raise CorruptCheckpointError(self.path, line_number, str(error)) from None

    def _check_unique(self, entries: list[T]) -> None:
        if self._key is None:
            return
        seen: set[Hashable] = set()
        for line_number, entry in enumerate(entries, 3):
            key = self._key(entry)
            if key in seen:
                raise CorruptCheckpointError(self.path, line_number, f"duplicate entry for {key}")
            seen.add(key)


# -- offset checkpoints: topic partition offset --------------------------------------------------

_TopicPartitionOffset = tuple[tuple[str, int], int]


def _format_offset(entry: _TopicPartitionOffset) -> tuple[str, int, int]:
    (topic, partition), offset = entry
    return (
        _checked_topic(topic),
        _checked_integer(partition, "partition", 0, INT32_MAX),
        _checked_integer(offset, "offset", INT64_MIN, INT64_MAX),
    )


def _parse_offset(fields: list[str]) -> _TopicPartitionOffset:
    topic, partition, offset = fields
    _checked_topic(topic)
    return (
        (topic, _integer(partition, "partition", 0, INT32_MAX)),
        _integer(offset, "offset", INT64_MIN, INT64_MAX),
    )


def _topic_partition(entry: _TopicPartitionOffset) -> tuple[str, int]:
    return entry[0]


class OffsetCheckpointFile:
    """``recovery-point-offset-checkpoint`` and friends: an offset per topic-partition."""

    def __init__(self, path: Path) -> None:
        self._file = CheckpointFile[_TopicPartitionOffset](
            path,
            field_count=3,
            format_entry=_format_offset,
            parse_entry=_parse_offset,
            key=_topic_partition,
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Replace the file with ``offsets``, sorted by (topic, partition)."""
        self._file.write(sorted(offsets.items()))

    def read(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): offset}``; {} if the file is missing or empty."""
        return dict(self._file.read())


# -- leader-epoch-checkpoint: epoch start_offset -------------------------------------------------


def _format_epoch(entry: tuple[int, int]) -> tuple[int, int]:
    epoch, start_offset = entry
    return (
        _checked_integer(epoch, "epoch", 0, INT32_MAX),
        _checked_integer(start_offset, "start offset", 0, INT64_MAX),
    )


def _parse_epoch(fields: list[str]) -> tuple[int, int]:
    epoch, start_offset = fields
    return (
        _integer(epoch, "epoch", 0, INT32_MAX),
        _integer(start_offset, "start offset", 0, INT64_MAX),
    )


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint``: ``(leader_epoch, start_offset)`` pairs, in order."""

    def __init__(self, path: Path) -> None:
        self._file = CheckpointFile[tuple[int, int]](
            path, field_count=2, format_entry=_format_epoch, parse_entry=_parse_epoch
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, entries: Sequence[tuple[int, int]]) -> None:
        """Replace the file with ``entries``, kept in the order given."""
        self._file.write(list(entries))

    def read(self) -> list[tuple[int, int]]:
        """The ``(epoch, start_offset)`` entries in file order; [] if missing or empty."""
        return self._file.read()
