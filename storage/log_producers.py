"""A log's producer state and its snapshot files (the I/O side of Kafka's
``ProducerStateManager``; the state itself is ``storage.producer_state.ProducerStateManager``).

Snapshots (``<offset>.snapshot`` in the partition directory) are written when a segment rolls,
on a clean close and after recovery or truncation, and only at an offset above the newest one
written or loaded (Kafka's ``lastSnapOffset``). A rebuild keeps the snapshots inside
(log start offset, log end offset], loads the newest one that reads back whole (corrupt ones are
deleted) and replays the batch headers after it — no record is decoded but a marker's. A
rebuild after recovery also refills the ``.txnindex`` of every recovered segment from the ABORT
markers it replays (Kafka rebuilds it in ``LogSegment.recover`` the same way).

Owned by the ``Log`` and its owner task, like the log's appends.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from pathlib import Path

from protocol.errors import InvalidRecordError
from protocol.records import BatchHeader, ControlRecordType, decode_batch, decode_control_record
from storage.clock import Clock
from storage.producer_snapshot import (
    CorruptSnapshotError,
    delete_snapshot_file,
    encode_snapshot,
    list_snapshot_offsets,
    read_snapshot_file,
    snapshot_path,
    write_snapshot_file,
)
from storage.producer_state import (
    PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    PRODUCER_ID_EXPIRATION_MS,
    CompletedTxn,
    EndMarker,
    ProducerStateManager,
)
from storage.segment import LogSegment
from storage.transaction_index import AbortedTxn

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
        write_snapshot_file(self.directory, offset, encode_snapshot(self.state.producers.values()))
        self.snapshot_offset = offset

    def delete_snapshots(self, offsets: Sequence[int]) -> None:
        """Delete the snapshot files at ``offsets`` (retention: the state itself is kept)."""
        for offset in offsets:
            delete_snapshot_file(self.directory, offset)

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
        recovered_from: int | None = None,
        snapshot_offsets: list[int] | None = None,
    ) -> None:
        """Kafka's ``truncateAndReload`` + ``rebuildProducerState``: drop snapshots outside
        (log start, LEO], load the newest readable one, replay the batch headers after it (unless
        ``replay`` is False: a truncation of a log no producer uses) and snapshot the LEO.

        ``recovered_from``: the base offset of the first segment recovery rebuilt. Snapshots
        above it go too (Kafka's ``recoverSegment``), so the replay passes through every
        recovered segment and refills its ``.txnindex`` from its ABORT markers.
        ``snapshot_offsets``: the snapshot files there are, if the caller listed them."""
        upper = log_end_offset if recovered_from is None else min(log_end_offset, recovered_from)
        if snapshot_offsets is None:
            snapshot_offsets = list_snapshot_offsets(self.directory)
        kept = []
        for offset in snapshot_offsets:
            if offset > upper or offset <= log_start_offset:
                delete_snapshot_file(self.directory, offset)
            else:
                kept.append(offset)
        if recovered_from is not None:
            self.snapshot_offset = 0  # snapshots of the segments replayed are written again
            for segment in segments:  # the replay refills them all, the recovered ones and later
                if segment.base_offset >= recovered_from:
                    segment.txn_index.reset()
        start = self._load_newest_snapshot(log_start_offset, kept)
        if (replay or recovered_from is not None) and start < log_end_offset:
            self._replay_batches(segments, start, recovered_from)
        self.take_snapshot(log_end_offset)

    def _load_newest_snapshot(self, log_start_offset: int, offsets: list[int]) -> int:
        """Load the newest of the snapshots at ``offsets`` that reads back whole (corrupt ones
        are deleted); returns its offset, or the log start offset (and an empty state) when
        there is none."""
        now_ms = self.clock.milliseconds()
        for offset in reversed(offsets):
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

    def _replay_batches(
        self, segments: Sequence[LogSegment], start: int, recovered_from: int | None
    ) -> None:
        """Apply the header of every batch from ``start`` to the end (records are decoded only
        for control batches: what their marker says).

        As Kafka, a snapshot is written on the way at the base of each of the last two segments,
        so that a later truncation replays from there rather than from further back. Segments
        from ``recovered_from`` on get the aborted transactions of their markers indexed.
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
            index = recovered_from is not None and segment.base_offset >= recovered_from
            for batch_position, header in segment.scan_headers(position):
                if header.last_offset >= start:
                    marker = read_marker(segment, batch_position, header)
                    completed = self.state.replay(header, marker)
                    if index:
                        self.index_aborted(segment, completed)

    def index_aborted(self, segment: LogSegment, completed: Sequence[CompletedTxn]) -> None:
        """Add the aborted ones of ``completed`` to ``segment``'s ``.txnindex`` (call after the
        state took the marker in: the LSO recorded is the one after it)."""
        for txn in completed:
            if txn.is_aborted:
                last_stable_offset = self.state.last_stable_offset(txn)
                segment.txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, last_stable_offset)
                )


def read_marker(segment: LogSegment, position: int, header: BatchHeader) -> EndMarker | None:
    """What a control batch's end-transaction record says; None for a data batch, an emptied
    control batch or another control type (KRaft's)."""
    if not is_end_marker_candidate(header):
        return None
    return decode_marker(segment.read_batch_bytes(position, header))


def replicated_markers(
    records: bytes | bytearray | memoryview, positions: Sequence[int], headers: Sequence[BatchHeader]
) -> dict[int, EndMarker]:
    """What the end-transaction markers among replicated batches say, by base offset: a
    follower indexes the ABORTs as the leader did (without them a new leader serves aborted
    data to read_committed consumers)."""
    markers: dict[int, EndMarker] = {}
    view = memoryview(records)
    for position, header in zip(positions, headers, strict=True):
        if is_end_marker_candidate(header):
            marker = decode_marker(view[position:position + header.size_in_bytes])
            if marker is not None:
                markers[header.base_offset] = marker
    return markers


def is_end_marker_candidate(header: BatchHeader) -> bool:
    return header.is_control and header.producer_id >= 0 and header.records_count > 0


def decode_marker(data: bytes | memoryview) -> EndMarker | None:
    batch = decode_batch(data, verify_crc=False)
    try:
        record_type, coordinator_epoch = decode_control_record(batch.records[0])
    except InvalidRecordError:
        return None
    return EndMarker(record_type is ControlRecordType.ABORT, coordinator_epoch)
