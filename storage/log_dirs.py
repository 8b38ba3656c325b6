"""Partition directories inside a ``log.dirs`` entry: their names, and the entry's health.

Names (Kafka's ``LocalLog``):

    <topic>-<partition>                 a partition's log
    <topic>-<partition>.<uuid>-delete   a deleted partition, removed in the background
    <topic>-<partition>.<uuid>-stray    a log set aside as not this broker's (for instance its
                                        topic id is not the topic's id in the metadata image):
                                        never served, never deleted, kept for the operator

``<uuid>`` is 32 hex digits; the topic is cut short so the whole name fits in 255 bytes (the
limit of most file systems), as Kafka does.

``DirectoryHealth`` is shared by every log in one ``log.dirs`` entry: the first I/O error sets
``offline_reason`` and it stays set (sticky) until restart; owned by the ``LogManager``, written
by whichever thread hit the error.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import KafkaStorageError

DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
MAX_DIR_NAME_LENGTH = 255


@dataclass
class DirectoryHealth:
    """Shared by every log in one ``log.dirs`` entry: the first I/O error takes it offline."""

    path: Path
    offline_reason: str | None = None

    def check(self) -> None:
        if self.offline_reason is not None:
            raise KafkaStorageError(f"log directory {self.path} is offline: {self.offline_reason}")


def parse_topic_partition(name: str) -> tuple[str, int]:
    """``my-topic-3`` → (``my-topic``, 3); a name without a partition suffix is rejected."""
    topic, separator, partition = name.rpartition("-")
    if not separator or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return topic, int(partition)


def aside_directory_name(topic: str, partition: int, suffix: str) -> str:
    """``<topic>-<partition>.<uuid><suffix>`` (``-delete`` or ``-stray``), at most 255 bytes."""
    tail = f"-{partition}.{uuid.uuid4().hex}{suffix}"
    return topic[: MAX_DIR_NAME_LENGTH - len(tail)] + tail
