"""``partition.metadata``: the topic id a partition directory belongs to (Kafka's
``PartitionMetadataFile``), byte for byte as Kafka writes it.

Layout: UTF-8 text, two lines, no newline after the second::

    version: 0
    topic_id: <topic id>

where ``<topic id>`` is Kafka's ``Uuid.toString()``: the 16 bytes in URL-safe base64 without
padding (22 characters). Kafka writes it when a partition's log is created, before anything is
appended; a log whose file names another topic id than the metadata image's for its topic name
is not that topic's data (the topic was deleted and re-created while the directory was away).

Writes replace the file atomically: ``partition.metadata.tmp`` is written and fsynced, renamed
over the file, and the directory fsynced (a stale ``.tmp`` is removed when the log next loads).
Reads are strict and every error names the file: the keys must be ``version`` and ``topic_id``
(``key: value``, as Kafka's reader splits them on ``:`` and whitespace), the version a decimal
integer >= 0 (a newer version is read as Kafka reads it, for downgrades: its first two lines,
anything after ignored; version 0 allows nothing after), the topic id canonical and not the
zero id.

No state: whoever owns the log (the log manager, for the broker) calls these; OSError is left
to the caller, which takes the log directory offline.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from storage.errors import CorruptPartitionMetadataError
from storage.fsync import fsync, fsync_directory

PARTITION_METADATA_FILE = "partition.metadata"
CURRENT_VERSION = 0
ZERO_TOPIC_ID = UUID(int=0)
# Kafka's Uuid.METADATA_TOPIC_ID (Uuid(0, 1)): the topic id of ``__cluster_metadata``.
METADATA_TOPIC_ID = UUID(int=1)

_TOPIC_ID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")
_LINE = re.compile(r"([^:\s]+):\s+(\S+)")
_DIGITS = re.compile(r"[0-9]+")
_LINE_END = re.compile(r"\r\n|\r|\n")


def topic_id_to_string(topic_id: UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def topic_id_from_string(text: str) -> UUID:
    """The inverse of ``topic_id_to_string``; ValueError unless ``text`` is its exact output."""
    if not _TOPIC_ID_TEXT.fullmatch(text):
        raise ValueError(f"topic id {text!r} is not 22 characters of URL-safe base64")
    try:
        topic_id = UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    except (binascii.Error, ValueError) as error:
        raise ValueError(f"topic id {text!r} does not decode to 16 bytes") from error
    if topic_id_to_string(topic_id) != text:
        raise ValueError(f"topic id {text!r} is not in canonical form")
    return topic_id


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic_id: UUID
    version: int = CURRENT_VERSION

    def encode(self) -> bytes:
        return f"version: {self.version}\ntopic_id: {topic_id_to_string(self.topic_id)}".encode()


def partition_metadata_path(directory: Path) -> Path:
    return directory / PARTITION_METADATA_FILE


def decode_partition_metadata(data: bytes, path: Path) -> PartitionMetadata:
    """Parse the file's bytes; CorruptPartitionMetadataError (naming ``path``) if malformed."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorruptPartitionMetadataError(path, f"not UTF-8 text ({error.reason})") from None
    lines = _LINE_END.split(text)  # Java's readLine: \n, \r\n or \r, nothing else
    version = _integer(path, _field(path, lines, 0, "version"))
    topic_id_text = _field(path, lines, 1, "topic_id")
    if version == CURRENT_VERSION and any(line.strip() for line in lines[2:]):
        raise CorruptPartitionMetadataError(path, f"unexpected line 3: {lines[2]!r}")
    try:
        topic_id = topic_id_from_string(topic_id_text)
    except ValueError as error:
        raise CorruptPartitionMetadataError(path, str(error)) from None
    if topic_id == ZERO_TOPIC_ID:
        raise CorruptPartitionMetadataError(path, "the topic id is the zero id")
    return PartitionMetadata(topic_id, version)


def _field(path: Path, lines: list[str], index: int, key: str) -> str:
    if index >= len(lines):
        raise CorruptPartitionMetadataError(path, f"line {index + 1} ({key}) is missing")
    match = _LINE.fullmatch(lines[index])
    if match is None or match.group(1) != key:
        raise CorruptPartitionMetadataError(
            path, f"line {index + 1} is {lines[index]!r}, expected '{key}: <value>'"
        )
    return match.group(2)


def _integer(path: Path, text: str) -> int:
    if not _DIGITS.fullmatch(text):
        raise CorruptPartitionMetadataError(path, f"version {text!r} is not a decimal integer >= 0")
    return int(text)


def read_partition_metadata(directory: Path) -> PartitionMetadata | None:
    """The file in ``directory``; None when there is none (a directory written before the
    file existed, or never assigned a topic id)."""
    path = partition_metadata_path(directory)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode_partition_metadata(data, path)


def write_partition_metadata(directory: Path, topic_id: UUID) -> None:
    """Replace the file in ``directory``: temp file, fsync, rename, fsync the directory."""
    path = partition_metadata_path(directory)
    temp = path.with_name(PARTITION_METADATA_FILE + ".tmp")
    with open(temp, "wb") as handle:
        handle.write(PartitionMetadata(topic_id).encode())
        handle.flush()
        fsync(handle.fileno(), temp)
    os.replace(temp, path)
    fsync_directory(directory)
