"""Start-up clean-up of a partition directory: leftovers of interrupted operations.

Kafka's rules (``LogLoader.removeTempFilesAndCollectSwapFiles``), applied before segments load:

- ``*.deleted``: a segment whose deletion was scheduled; unlinked.
- ``*.tmp``: a half-written checkpoint or snapshot; unlinked.
- ``*.cleaned``: output of a cleaning that did not finish; unlinked, together with every ``.swap``
  file whose base offset is >= the smallest ``.cleaned`` base offset (that cleaning never reached
  the swap step for all of its files, so the originals are still whole).
- ``<base>.log.swap``: a cleaning that reached the swap step; it is completed: every regular
  segment file in the swap segment's offset range is removed and the swap file takes the regular
  name. Its indexes are rebuilt by the caller (``recover``), so index ``.swap`` files are dropped
  (the ``.txnindex`` too: the log rebuilds it from the markers while replaying producer state;
  and the ``.keyindex``: rebuilt at the next key read).

The cleaner (``storage.cleaner``) writes ``.cleaned`` files, fsyncs them, renames them to
``.swap``, renames the old segments to ``.deleted``, then renames the ``.log.swap`` file last: a
crash at any step leaves either the old segments or the new one, never both and never neither.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from protocol.errors import CorruptMessageError, InvalidRecordError
from protocol.records import BATCH_HEADER_SIZE, read_batch_header
from storage.key_index import KEY_INDEX_SUFFIX
from storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
)
from storage.transaction_index import TXN_INDEX_SUFFIX

TEMP_SUFFIX = ".tmp"

logger = logging.getLogger("samsa.storage.recovery")


@dataclass
class DirectoryCleanup:
    removed: list[Path] = field(default_factory=list)
    completed_swaps: list[int] = field(default_factory=list)
    # The directory's file names once cleaned up (one listing serves the whole load).
    names: list[str] = field(default_factory=list)


def clean_partition_directory(directory: Path, names: list[str] | None = None) -> DirectoryCleanup:
    """Resolve leftovers as described in the module docstring; returns what was done.
    ``names``: the directory's listing, if the caller has one."""
    outcome = DirectoryCleanup()
    names = sorted(os.listdir(directory) if names is None else names)
    cleaned_bases: list[int] = []
    swaps: list[Path] = []
    for name in names:
        if name.endswith((DELETED_SUFFIX, TEMP_SUFFIX)):
            _remove(directory / name, outcome)
        elif name.endswith(CLEANED_SUFFIX):
            cleaned_bases.append(_base_offset(name))
            _remove(directory / name, outcome)
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(directory / name)
    _remove_orphaned_indexes(directory, names, outcome)
    min_cleaned = min(cleaned_bases, default=None)
    for path in swaps:
        base = _base_offset(path.name)
        is_log = path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX)
        if (min_cleaned is not None and base >= min_cleaned) or not is_log:
            _remove(path, outcome)
        else:
            _complete_swap(directory, path, base)
            outcome.completed_swaps.append(base)
    changed = outcome.removed or outcome.completed_swaps
    outcome.names = sorted(os.listdir(directory)) if changed else names
    return outcome


def _remove_orphaned_indexes(directory: Path, names: list[str], outcome: DirectoryCleanup) -> None:
    """Index files whose ``.log`` is gone (a crash while a segment was being renamed)."""
    logs = {name[: -len(LOG_SUFFIX)] for name in names if name.endswith(LOG_SUFFIX)}
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, KEY_INDEX_SUFFIX):
        for name in names:
            if name.endswith(suffix) and name[: -len(suffix)] not in logs:
                _remove(directory / name, outcome)


def _complete_swap(directory: Path, swap_log: Path, base: int) -> None:
    next_offset = _next_offset_of(swap_log, base)
    for path in directory.iterdir():
        if not path.name.endswith(SEGMENT_SUFFIXES):
            continue
        segment_base = _base_offset(path.name)
        if base <= segment_base < max(next_offset, base + 1):
            logger.info("completing swap of %s: removing replaced %s", swap_log, path)
            path.unlink()
    final = directory / swap_log.name[: -len(SWAP_SUFFIX)]
    os.replace(swap_log, final)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, KEY_INDEX_SUFFIX):
        (directory / (final.name[: -len(LOG_SUFFIX)] + suffix)).unlink(missing_ok=True)
    logger.info("completed interrupted segment swap: %s", final)


def _next_offset_of(log_file: Path, base: int) -> int:
    """Offset after the last whole batch header in ``log_file`` (no CRC check)."""
    next_offset = base
    size = log_file.stat().st_size
    with open(log_file, "rb") as handle:
        position = 0
        while position + BATCH_HEADER_SIZE <= size:
            handle.seek(position)
            try:
                header = read_batch_header(handle.read(BATCH_HEADER_SIZE))
            except (CorruptMessageError, InvalidRecordError):
                break
            next_offset = header.next_offset
            position += header.size_in_bytes
    return next_offset


def _base_offset(name: str) -> int:
    return int(name.split(".", 1)[0])


def _remove(path: Path, outcome: DirectoryCleanup) -> None:
    logger.info("removing leftover file %s", path)
    path.unlink(missing_ok=True)
    outcome.removed.append(path)
