"""A log's idempotent-producer state and its snapshot files (the I/O side of Kafka's
``ProducerStateManager``; the state itself is ``storage.producer_state.ProducerStateManager``).

Snapshots (``<offset>.snapshot`` in the partition directory) are written when a segment rolls,
on a clean close and after recovery or truncation, and only at an offset above the newest one
written or loaded (Kafka's ``lastSnapOffset``). A rebuild keeps the snapshots inside
(log start offset, log end offset], loads the newest one that reads back whole (corrupt ones are
deleted) and replays the batch headers after it — no record is decoded.

Owned by the ``Log`` and its owner task, like the log's appends.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from pathlib import Path

from storage.clock import Clock
from storage.producer_state import (
    PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    PRODUCER_ID_EXPIRATION_MS,
    CorruptSnapshotError,
    ProducerStateManager,
    delete_snapshot_file,
    list_snapshot_offsets,
    read_snapshot_file,
    snapshot_path,
    write_snapshot_file,
)
from storage.segment import LogSegment

logger = logging.getLogger("samsa.storage.log")


class LogProducers:
    def __init__(
        self,
        directory: Path,
        clock: Clock,
        *,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.directory = directory
        self.clock = clock
        self.state = ProducerStateManager(producer_id_expiration_ms=producer_id_expiration_ms)
        # The offset of the newest snapshot written or loaded: a snapshot is only written higher.
        self.snapshot_offset = 0
        self._last_expiry_check_ms = clock.monotonic_ms()

    def remove_expired(self) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``."""
        self._last_expiry_check_ms = self.clock.monotonic_ms()
        return self.state.remove_expired(self.clock.milliseconds())

    def maybe_expire(self) -> None:
        elapsed = self.clock.monotonic_ms() - self._last_expiry_check_ms
        if elapsed >= PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS:
            self.remove_expired()

    def take_snapshot(self, offset: int) -> None:
        """Kafka's ``takeSnapshot``: the state below ``offset``, unless no newer than the last."""
        if offset <= self.snapshot_offset:
            return
        write_snapshot_file(self.directory, offset, self.state.snapshot_bytes())
        self.snapshot_offset = offset

    def reset(self, offset: int) -> None:
        """The log restarts empty at ``offset``: no state, no snapshot files."""
        for snapshot_offset in list_snapshot_offsets(self.directory):
            delete_snapshot_file(self.directory, snapshot_offset)
        self.state.clear()
        self.snapshot_offset = offset

    def rebuild(
        self,
        segments: Sequence[LogSegment],
        log_start_offset: int,
        log_end_offset: int,
        *,
        replay: bool,
    ) -> None:
        """Kafka's ``truncateAndReload`` + ``rebuildProducerState``: drop snapshots outside
        (log start, LEO], load the newest readable one, replay the batch headers after it (unless
        ``replay`` is False: a truncation of a log no producer uses) and snapshot the LEO."""
        for offset in list_snapshot_offsets(self.directory):
            if offset > log_end_offset or offset <= log_start_offset:
                delete_snapshot_file(self.directory, offset)
        start = self._load_newest_snapshot(log_start_offset)
        if replay and start < log_end_offset:
            self._replay_batches(segments, start)
        self.take_snapshot(log_end_offset)

    def _load_newest_snapshot(self, log_start_offset: int) -> int:
        """Load the newest snapshot that reads back whole (corrupt ones are deleted); returns
        its offset, or the log start offset (and an empty state) when there is none."""
        now_ms = self.clock.milliseconds()
        for offset in reversed(list_snapshot_offsets(self.directory)):
            path = snapshot_path(self.directory, offset)
            try:
                entries = read_snapshot_file(path)
            except CorruptSnapshotError as error:
                logger.warning("deleting corrupt producer snapshot %s: %s", path, error)
                path.unlink(missing_ok=True)
                continue
            self.state.load(entries, now_ms)
            self.snapshot_offset = offset
            return offset
        self.state.clear()
        self.snapshot_offset = log_start_offset
        return log_start_offset

    def _replay_batches(self, segments: Sequence[LogSegment], start: int) -> None:
        """Apply the header of every batch from ``start`` to the end (no record is decoded).

        As Kafka, a snapshot is written on the way at the base of each of the last two segments,
        so that a later truncation replays from there rather than from further back.
        """
        snapshot_bases = {segment.base_offset for segment in segments[-2:]}
        bases = [segment.base_offset for segment in segments]
        first = max(0, bisect.bisect_right(bases, start) - 1)
        for segment in segments[first:]:
            position = 0
            if segment.base_offset > start and segment.base_offset in snapshot_bases:
                self.take_snapshot(segment.base_offset)
            elif segment.base_offset < start:
                position = segment.offset_index.lookup(start)[1]
            for _, header in segment.scan_headers(position):
                if header.last_offset >= start:
                    self.state.replay(header)
