"""The one place Samsa makes files durable: fsync, fdatasync, directory fsync, and the ledger.

Every fsync in storage/, broker/ and replication/ goes through here, so a fault harness can
know what an OS crash (power loss) could not take away. The hook is the *fsync ledger*, OFF
unless the environment variable ``SAMSA_FSYNC_LEDGER=<path>`` is set when this module is first
imported (the broker's start-up). When on, every successful sync appends one JSON line to the
ledger file (``O_APPEND``, one ``write`` per line, not itself fsynced: the harness reads it
after a process kill, when the page cache still holds it):

``["f", path, inode, length]``  the file ``path`` (absolute) with that inode was synced: its
                                first ``length`` bytes are durable (the size taken *before*
                                the sync, so bytes appended while it ran are not claimed);
``["d", path, {name: inode}]``  the directory ``path`` was synced: those entries (listed
                                *before* the sync) are durable. An entry created or renamed
                                in after the listing is durable only after a later record.

A memory-mapped index flushed with ``msync`` is recorded by its caller (``record_synced``).
``tests.faults.power`` reads the ledger to cut files as a crash would.

Errors are the caller's: an ``OSError`` from a sync propagates (the log turns it into a log
directory failure, KAFKA_STORAGE_ERROR, as Kafka does). Thread-safe: syncs run on worker
threads; each ledger line is one ``os.write`` on an ``O_APPEND`` descriptor.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "LEDGER_ENVIRONMENT_VARIABLE",
    "fdatasync",
    "fsync",
    "fsync_directory",
    "fsync_path",
    "ledger_enabled",
    "open_ledger",
    "record_synced",
]

LEDGER_ENVIRONMENT_VARIABLE = "SAMSA_FSYNC_LEDGER"

_ledger_fd: int | None = None


def open_ledger(path: str | Path | None) -> None:
    """Turn the ledger on (appending to ``path``) or off (None). Start-up and tests only."""
    global _ledger_fd
    if _ledger_fd is not None:
        os.close(_ledger_fd)
        _ledger_fd = None
    if path:
        _ledger_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def ledger_enabled() -> bool:
    return _ledger_fd is not None


def fsync(fd: int, path: str | Path) -> None:
    """fsync the open file ``fd`` (named ``path``): data and metadata."""
    _sync(fd, path, os.fsync)


def fdatasync(fd: int, path: str | Path) -> None:
    """fdatasync the open file ``fd`` (named ``path``): its data and size, not its times.

    Enough for appended data (the size is metadata it must write to make the bytes readable);
    where the platform has none (macOS), fsync."""
    _sync(fd, path, getattr(os, "fdatasync", os.fsync))


def fsync_path(path: str | Path) -> None:
    """Open ``path`` read-only, fsync it, close it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        _sync(fd, path, os.fsync)
    finally:
        os.close(fd)


def fsync_directory(directory: str | Path) -> None:
    """fsync a directory: the entries it has now (creations, renames, removals) are durable."""
    entries = _listing(directory) if _ledger_fd is not None else None
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    if entries is not None:
        _record(["d", os.path.abspath(directory), entries])


def record_synced(path: str | Path, length: int) -> None:
    """A caller synced ``path`` by other means (``msync`` of a mapped index): ``length`` bytes."""
    if _ledger_fd is not None:
        try:
            inode = os.stat(path).st_ino
        except FileNotFoundError:  # removed meanwhile: nothing to claim
            return
        _record(["f", os.path.abspath(path), inode, length])


def _sync(fd: int, path: str | Path, sync: Callable[[int], None]) -> None:
    if _ledger_fd is None:
        sync(fd)
        return
    status = os.fstat(fd)  # before the sync: only bytes already written are claimed durable
    sync(fd)
    _record(["f", os.path.abspath(path), status.st_ino, status.st_size])


def _listing(directory: str | Path) -> dict[str, int]:
    with os.scandir(directory) as entries:
        return {entry.name: entry.inode() for entry in entries}


def _record(line: list[object]) -> None:
    fd = _ledger_fd
    if fd is not None:
        os.write(fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())


open_ledger(os.environ.get(LEDGER_ENVIRONMENT_VARIABLE))
