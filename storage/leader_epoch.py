"""The leader epoch cache of one partition (Kafka's ``LeaderEpochFileCache``) and its
``leader-epoch-checkpoint`` file.

State: an ordered list of ``EpochEntry(epoch, start_offset)``, the first offset each leader
epoch wrote. Invariant (after every call): epochs and start offsets both strictly increase, every
epoch and start offset is >= 0.

On disk (``storage.checkpoint.LeaderEpochCheckpointFile``, Kafka's text format)::

    0                 <- version
    2                 <- entry count
    0 0               <- epoch start_offset, ordered by epoch
    3 1500

Rules, as Kafka's:
- ``assign(epoch, start_offset)`` does nothing when the latest entry already has that epoch and a
  start offset <= ``start_offset`` (the common case: one more batch of the current epoch).
  Otherwise entries that conflict with the new one (epoch >= it or start offset >= its) are
  removed from the end, and it is appended. So a batch of an older epoch written at a higher
  offset (a misbehaving leader) replaces the newer entries rather than breaking the order.
- ``end_offset_for(epoch, log_end_offset)`` answers OffsetsForLeaderEpoch and KRaft's
  divergence check: ``UNDEFINED_EPOCH`` asks nothing ((-1, -1)); the latest epoch ends at the
  log end offset; an epoch above every known one is unknown ((-1, -1)); otherwise the answer is
  the largest known epoch <= the one asked (or the one asked if none is known below it: the log
  start was cut) and the start offset of the next known epoch.
- ``truncate_from_end(end_offset)`` drops entries starting at or above ``end_offset``;
  ``truncate_from_start(start_offset)`` drops entries starting at or below it and re-adds the
  last dropped epoch at ``start_offset``, so the epoch of the new first offset stays known.

Durability: every change is written at once (temp file, fsync, rename, directory fsync: see
``storage.checkpoint``), before the caller writes the batches that caused it, so the file never
misses an epoch the log holds. It may name epochs the log lost in a crash (the file was written,
the batch not yet flushed): the log, when it opens, truncates the cache to what it recovered
(``load_leader_epoch_cache``). A missing, empty (over a non-empty log) or corrupt file
(``CorruptCheckpointError`` naming the file and line, logged as an error) is rebuilt from the
batch headers, which are the truth (Kafka rebuilds from the log as it recovers segments). So is
a well-formed file that disagrees with the batches (a bit flip that turned one digit into
another) when the start-up verification (``storage.verification``) read them all: Samsa's check,
Kafka has none.

Threads: the owner appends and truncates; log retention (a worker thread) truncates from the
start. Every change and every read of the list takes ``_lock``.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from protocol.records import BatchHeader
from storage.checkpoint import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from storage.errors import CorruptCheckpointError

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "EpochStart",
    "LeaderEpochFileCache",
    "load_leader_epoch_cache",
]

logger = logging.getLogger("samsa.storage.leader_epoch")

UNDEFINED_EPOCH = -1  # Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH / UNDEFINED_EPOCH
UNDEFINED_EPOCH_OFFSET = -1  # Kafka's EpochEndOffset.UNDEFINED_EPOCH_OFFSET


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """The epoch list, written to ``checkpoint`` on every change (None: memory only)."""

    def __init__(
        self,
        checkpoint: LeaderEpochCheckpointFile | None = None,
        entries: Iterable[EpochEntry] = (),
    ) -> None:
        self.checkpoint = checkpoint
        self._lock = threading.RLock()
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for entry in entries:  # as Kafka's constructor: each through assign's rules
            self._assign(entry.epoch, entry.start_offset)

    @classmethod
    def read(cls, path: Path) -> LeaderEpochFileCache:
        """The cache in ``path``; CorruptCheckpointError (file, line, reason) if malformed."""
        checkpoint = LeaderEpochCheckpointFile(path)
        return cls(checkpoint, (EpochEntry(epoch, start) for epoch, start in checkpoint.read()))

    # -- reading --------------------------------------------------------------------------------

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        with self._lock:
            return tuple(map(EpochEntry, self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int | None:
        with self._lock:
            return self._epochs[-1] if self._epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset``: the last entry starting at or below it."""
        with self._lock:
            index = bisect.bisect_right(self._starts, offset) - 1
            return self._epochs[index] if index >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: (epoch, end offset); see the module docstring."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._epochs and self._epochs[-1] == requested_epoch:
                return requested_epoch, log_end_offset
            higher = bisect.bisect_right(self._epochs, requested_epoch)
            if higher == len(self._epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if higher == 0:
                return requested_epoch, self._starts[0]
            return self._epochs[higher - 1], self._starts[higher]

    # -- changing -------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` wrote from ``start_offset``; True (and written) if it changed."""
        with self._lock:
            if not self._assign(epoch, start_offset):
                return False
            self._write()
            return True

    def assign_all(self, entries: Iterable[tuple[int, int]]) -> bool:
        """``assign`` each (epoch, start offset) in order, skipping epochs < 0 (a batch with no
        leader epoch); one write at the end. True if anything changed."""
        with self._lock:
            changed = False
            for epoch, start_offset in entries:
                if epoch >= 0:
                    changed = self._assign(epoch, start_offset) or changed
            if changed:
                self._write()
            return changed

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry: epoch {epoch}, start offset {start_offset}")
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return False
        removed = []
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            removed.append(EpochEntry(self._epochs.pop(), self._starts.pop()))
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            logger.warning("new leader epoch entry %s removed conflicting entries %s",
                           EpochEntry(epoch, start_offset), removed[::-1])
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop the entries starting at or above ``end_offset`` (the log was truncated there)."""
        with self._lock:
            if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
                return False
            keep = bisect.bisect_left(self._starts, end_offset)
            del self._epochs[keep:], self._starts[keep:]
            self._write()
            return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop the entries starting at or below ``start_offset``; the last one dropped comes
        back starting at ``start_offset`` (the new log start offset)."""
        with self._lock:
            if not self._starts or self._starts[0] > start_offset:
                return False
            drop = bisect.bisect_right(self._starts, start_offset)
            epoch = self._epochs[drop - 1]
            if drop == 1 and self._starts[0] == start_offset:
                return False
            del self._epochs[:drop], self._starts[:drop]
            self._epochs.insert(0, epoch)
            self._starts.insert(0, start_offset)
            self._write()
            return True

    def clear(self) -> None:
        """Forget every entry (the log restarts empty: Kafka's ``clearAndFlush``)."""
        with self._lock:
            self._epochs.clear()
            self._starts.clear()
            self._write()

    def _write(self) -> None:
        if self.checkpoint is not None:
            self.checkpoint.write(list(zip(self._epochs, self._starts, strict=True)))


@dataclass(frozen=True, slots=True)
class EpochStart:
    """Where a scan of the batches saw a partition leader epoch above every earlier one begin:
    ``start_offset`` is that batch's base offset, ``previous_last_offset`` the last offset of the
    batch before it (-1 if none), so a cache entry anywhere in between (a gap compaction left)
    agrees with it."""

    epoch: int
    start_offset: int
    previous_last_offset: int


def load_leader_epoch_cache(
    directory: Path,
    batches_from: Callable[[int], Iterable[BatchHeader]],
    *,
    log_start_offset: int,
    log_end_offset: int,
    recovered_from: int | None,
    scanned_epochs: Sequence[EpochStart] | None = None,
) -> LeaderEpochFileCache:
    """Open a log's cache: read ``leader-epoch-checkpoint`` (rebuilt from the batch headers,
    ``batches_from(offset)``, if the file is missing or corrupt), then bring it in line with
    the log: batches recovered from ``recovered_from`` on add epochs newer than the latest
    known (as Kafka's ``LogSegment.recover``), entries at or past the log end offset and
    below the log start offset go. ``scanned_epochs``, the epochs the start-up verification saw
    in the whole log, is what the cache must then hold (``_disagreement``); when it does not
    (a bit flip that left the file well-formed), the file is reported and rebuilt from it."""
    path = directory / LEADER_EPOCH_CHECKPOINT
    try:
        cache = LeaderEpochFileCache.read(path) if path.exists() else None
    except CorruptCheckpointError as error:
        logger.error("%s; rebuilding the leader epoch cache from the log", error)
        cache = None
    if cache is not None and cache.latest_epoch is None and log_start_offset < log_end_offset:
        cache = None  # an empty file (Kafka creates one before its first write) over a log
    if cache is not None and recovered_from is not None:
        cache.assign_all(_newer_epochs(cache.latest_epoch, batches_from(recovered_from)))
    if cache is not None and scanned_epochs is not None:
        cache = _checked(cache, path, scanned_epochs, log_start_offset, log_end_offset)
    if cache is None:
        cache = LeaderEpochFileCache(LeaderEpochCheckpointFile(path))
        if scanned_epochs is None:
            cache.assign_all(_newer_epochs(None, batches_from(log_start_offset)))
        else:
            cache.assign_all((start.epoch, start.start_offset) for start in scanned_epochs)
    cache.truncate_from_end(log_end_offset)
    cache.truncate_from_start(log_start_offset)
    return cache


def _checked(
    cache: LeaderEpochFileCache, path: Path, scanned: Sequence[EpochStart],
    log_start_offset: int, log_end_offset: int,
) -> LeaderEpochFileCache | None:
    """``cache`` if it agrees with the scanned epochs over [log start, log end); else None."""
    expected = LeaderEpochFileCache(
        entries=(EpochEntry(start.epoch, start.start_offset) for start in scanned))
    for candidate in (cache, expected):
        candidate.truncate_from_end(log_end_offset)
        candidate.truncate_from_start(log_start_offset)
    problem = _disagreement(cache.entries, expected.entries, scanned)
    if problem is None:
        return cache
    logger.error("%s does not match the log's batches (%s); rebuilding the leader epoch cache "
                 "from them", path, problem)
    return None


def _disagreement(
    found: Sequence[EpochEntry], expected: Sequence[EpochEntry], scanned: Sequence[EpochStart]
) -> str | None:
    if [entry.epoch for entry in found] != [entry.epoch for entry in expected]:
        return (f"epochs {[entry.epoch for entry in found]}, the batches have "
                f"{[entry.epoch for entry in expected]}")
    lowest = {start.epoch: start.previous_last_offset + 1 for start in scanned}
    for line, (entry, truth) in enumerate(zip(found, expected, strict=True), 3):
        low = min(lowest.get(truth.epoch, truth.start_offset), truth.start_offset)
        if not low <= entry.start_offset <= truth.start_offset:
            return (f"line {line} starts epoch {entry.epoch} at {entry.start_offset}, the "
                    f"batches at {truth.start_offset}")
    return None


def _newer_epochs(latest: int | None, headers: Iterable[BatchHeader]) -> Iterator[tuple[int, int]]:
    """(epoch, base offset) of each batch whose epoch is above every one before it."""
    for header in headers:
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            latest = epoch
            yield epoch, header.base_offset
