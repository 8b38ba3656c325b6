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

import fcntl
import os
import uuid
from collections.abc import Iterable
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


LOCK_FILE = ".lock"  # Kafka's name: a directory's lock, held by the broker process using it


class LogDirLockedError(Exception):
    """Another process holds ``directory``'s lock: it is some other broker's."""

    def __init__(self, directory: Path) -> None:
        super().__init__(
            f"cannot lock {directory / LOCK_FILE}: another broker process is using the log "
            f"directory {directory} (stop it, or give this broker its own log.dirs)")
        self.directory = directory


def lock_log_dirs(directories: Iterable[Path]) -> list[int]:
    """Take each directory's ``.lock`` (created with the directory if missing) for as long as
    the process lives, as Kafka's ``LogManager.lockLogDirs``: two brokers on one directory would
    append to the same segments and overwrite each other's checkpoints. An exclusive ``flock``,
    released by the kernel when the process ends, however it ends. Returns the descriptors
    (``unlock_log_dirs`` lets go earlier); ``LogDirLockedError`` if one is held elsewhere."""
    held: list[int] = []
    try:
        for directory in directories:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            held.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LogDirLockedError(directory) from None
    except BaseException:
        unlock_log_dirs(held)
        raise
    return held


def unlock_log_dirs(descriptors: Iterable[int]) -> None:
    for fd in descriptors:
        os.close(fd)  # closing the last descriptor of the open file releases its flock
