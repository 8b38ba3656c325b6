"""Start-up verification of a log's segments: every batch's CRC and the order of its header
fields, so a damaged segment below the recovery point is cut instead of served.

Kafka has no such check: it trusts every segment below the recovery point (a clean shutdown
trusts all of them) and finds a bit flip there only when a consumer's CRC check fails. Samsa
adds ``samsa.log.verify.on.startup`` (a Samsa extension, not a Kafka key):

- ``unclean`` (default): verify every segment when the log directory was not shut down cleanly
  (no ``.kafka_cleanshutdown``), which is when damage is likeliest (a crash, a power loss, a
  disk that failed under the process) and start-up already reads the unflushed tail;
- ``always``: verify at every start-up (a clean shutdown too);
- ``never``: Kafka's behaviour.

Cost: one sequential read of the log plus CRC-32C (``crc32c``, hardware-accelerated) and a
61-byte header parse per batch; ``bench/verify_startup.py`` measures it per GB.

What a batch must satisfy (``find_damage``), in log order across segments:

1. its header parses, it lies wholly inside the file, and its CRC-32C (bytes 21..end) matches;
2. its base offset is >= its segment's base offset (the file name) and its last offset fits
   the segment (``< base + 2**31``);
3. its base offset is above the previous batch's last offset;
4. its partition leader epoch is >= the previous batch's (epochs never go down along a log;
   -1, "no epoch", is not compared);
5. the last batch of a segment ends below the next segment's base offset;
6. its partition leader epoch is >= -1;
7. a segment that is not the last one has not lost its tail: its ``.timeindex`` was trimmed
   and given its final entry (max timestamp, offset of it) when the next segment was rolled, so
   an entry naming both an offset past the segment's last batch and a timestamp above all of
   its batches' is a witness of batches cut from the end (two fields: one flipped bit in the
   index cannot fake both). A cut exactly at a batch boundary passes rules 1-5 otherwise.

Rule 7 fails to see a lost tail whose batches did not hold the segment's largest timestamp (a
producer's clock going backwards); compaction leaves gaps that look the same, so a gap between
segments is not damage by itself. The CRC does not cover the first 21 bytes (base offset, batch
length, partition leader epoch, magic, the CRC itself), so a flip there passes rule 1 and shows
up only against a neighbour: with rules 3-5 either batch of the pair may be the damaged one, so
the cut is made *before* the earlier of the two. Everything from the cut on is dropped, so what
stays is a prefix of the original batches, each one checked. Not seen: a flip that lowers the
very first batch's epoch to another valid one (no neighbour before it), or a batch's epoch to
the previous epoch exactly where the epoch changes; the ``leader-epoch-checkpoint`` then
disagrees with the batches and is rebuilt from them (``storage.leader_epoch``), reported.

The scan also returns where each leader epoch starts (``Verification.epoch_starts``), so the
leader epoch cache is checked against the batches at no extra read.

Owner: the ``LogLoader``, while the log is not yet shared (no locks).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from protocol.records import BatchHeader
from storage.leader_epoch import EpochStart
from storage.segment import LogSegment, check_batch

VERIFY_UNCLEAN = "unclean"
VERIFY_ALWAYS = "always"
VERIFY_NEVER = "never"
VERIFY_MODES = (VERIFY_UNCLEAN, VERIFY_ALWAYS, VERIFY_NEVER)
NO_EPOCH = -1
_TIME_INDEX_ENTRY = struct.Struct(">qi")  # storage.index.TimeIndex's entry


def should_verify(mode: str, *, had_clean_shutdown: bool) -> bool:
    if mode not in VERIFY_MODES:
        raise ValueError(f"samsa.log.verify.on.startup must be one of {VERIFY_MODES}, not {mode!r}")
    return mode == VERIFY_ALWAYS or (mode == VERIFY_UNCLEAN and not had_clean_shutdown)


@dataclass(frozen=True, slots=True)
class BatchDamage:
    """Where a log must be cut: ``segment_index``/``position`` is the first batch not kept and
    ``offset`` the log end offset after the cut; ``found_in``/``found_at`` is the batch whose
    check failed (the cut may be one batch earlier, see the module docstring)."""

    segment_index: int
    path: Path
    position: int
    offset: int
    found_in: Path
    found_at: int
    reason: str

    def describe(self) -> str:
        return (f"{self.found_in} at position {self.found_at}: {self.reason}; the log is cut at "
                f"{self.path.name} position {self.position} (offset {self.offset})")


@dataclass(frozen=True, slots=True)
class Verification:
    """What ``verify_segments`` found: the first damage (None if none) and where each epoch
    begins in the batches before it (``storage.leader_epoch`` checks its file against these)."""

    damage: BatchDamage | None
    epoch_starts: tuple[EpochStart, ...]


@dataclass(frozen=True, slots=True)
class _Batch:
    segment_index: int
    path: Path
    position: int
    header: BatchHeader


class _Scan:
    """The walk over every batch in log order; ``previous`` is the last batch accepted,
    ``max_timestamp`` the largest batch max timestamp of the current segment."""

    def __init__(self) -> None:
        self.previous: _Batch | None = None
        self.epoch_starts: list[EpochStart] = []
        self.max_timestamp = -1

    def accept(self, batch: _Batch) -> None:
        self.max_timestamp = max(self.max_timestamp, batch.header.max_timestamp)
        epoch = batch.header.partition_leader_epoch
        latest = self.epoch_starts[-1].epoch if self.epoch_starts else NO_EPOCH
        if epoch > latest:
            previous_last = -1 if self.previous is None else self.previous.header.last_offset
            self.epoch_starts.append(EpochStart(epoch, batch.header.base_offset, previous_last))
        self.previous = batch


def verify_segments(segments: Sequence[LogSegment]) -> Verification:
    """Walk every batch of ``segments`` (oldest first) by the rules of the module docstring."""
    scan = _Scan()
    damage = _first_damage(segments, scan)
    return Verification(damage, tuple(scan.epoch_starts))


def find_damage(segments: Sequence[LogSegment]) -> BatchDamage | None:
    """The first place the rules of the module docstring fail; None if every batch passes."""
    return verify_segments(segments).damage


def _first_damage(segments: Sequence[LogSegment], scan: _Scan) -> BatchDamage | None:
    for index, segment in enumerate(segments):
        scan.max_timestamp = -1
        damage = _verify_segment(index, segment, scan)
        if damage is not None:
            return damage
        previous = scan.previous
        if index + 1 < len(segments) and segment.size == 0:
            emptied = _emptied(index, segment, segments[index + 1].base_offset, scan.previous)
            if emptied is not None:
                return emptied
        if index + 1 < len(segments) and previous is not None and previous.segment_index == index:
            overlap = _overlap_problem(previous.header, segments[index + 1].base_offset)
            if overlap is not None:
                return _cut_at(previous, previous, overlap)
            lost = _lost_tail(segment, previous.header, scan.max_timestamp,
                              segments[index + 1].base_offset)
            if lost is not None:
                following = segments[index + 1]
                return BatchDamage(index + 1, following.log_path, 0, previous.header.next_offset,
                                   segment.log_path, segment.size, lost)
    return None


def _lost_tail(
    segment: LogSegment, last: BatchHeader, max_timestamp: int, next_base_offset: int
) -> str | None:
    """Rule 7: the final time index entry of a closed segment against its batches."""
    entry = _last_time_index_entry(segment.time_index_path)
    if entry is None:
        return None
    timestamp, offset = entry
    if last.last_offset < offset < next_base_offset and timestamp > max_timestamp:
        return (f"{segment.time_index_path.name} names offset {offset} at timestamp {timestamp}, "
                f"past the last batch (last offset {last.last_offset}, max timestamp "
                f"{max_timestamp}): the end of the segment was cut off")
    return None


def _emptied(
    index: int, segment: LogSegment, next_base_offset: int, previous: _Batch | None
) -> BatchDamage | None:
    """Rule 7 for a closed segment with no batch left: a rolled segment held at least one, so
    a well-formed time index naming an offset in its range says they were cut off."""
    entry = _last_time_index_entry(segment.time_index_path)
    if entry is None or not segment.base_offset <= entry[1] < next_base_offset:
        return None
    offset = segment.base_offset if previous is None else previous.header.next_offset
    return BatchDamage(index, segment.log_path, 0, offset,
                       segment.time_index_path, 0,
                       f"the segment is empty but its time index names offset {entry[1]}")


def _last_time_index_entry(path: Path) -> tuple[int, int] | None:
    """(timestamp, absolute offset) of the file's last 12-byte entry; None when it has none
    or is not a well-formed time index (whole entries, timestamps increasing, offsets not
    decreasing and >= the base offset): a damaged index is no witness."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if not data or len(data) % _TIME_INDEX_ENTRY.size:
        return None
    entries = list(_TIME_INDEX_ENTRY.iter_unpack(data))
    ordered = all(a[0] < b[0] and 0 <= a[1] <= b[1] for a, b in pairwise(entries))
    if not ordered or entries[0][1] < 0:
        return None
    timestamp, relative = entries[-1]
    return timestamp, int(path.name.split(".", 1)[0]) + relative


def _overlap_problem(last: BatchHeader, next_base_offset: int) -> str | None:
    if last.last_offset < next_base_offset:
        return None
    return (f"last offset {last.last_offset} is not below the next segment's base offset "
            f"{next_base_offset}")


def _verify_segment(index: int, segment: LogSegment, scan: _Scan) -> BatchDamage | None:
    if segment.size == 0:
        return None  # an empty segment that is not the last is _emptied's business
    handle = segment.log_file.acquire()  # held: the LRU cannot close it meanwhile
    with mmap.mmap(handle.fd, segment.size, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        try:
            return _verify_batches(index, segment, view, scan)
        finally:
            view.release()


def _verify_batches(
    index: int, segment: LogSegment, view: memoryview, scan: _Scan
) -> BatchDamage | None:
    position = 0
    while position < len(view):
        header, reason = check_batch(view, position)
        if header is None:
            return _cut_here(index, segment, position, scan.previous, reason or "unreadable")
        own = _own_problem(segment, header)
        if own is not None:
            return _cut_here(index, segment, position, scan.previous, own)
        batch = _Batch(index, segment.log_path, position, header)
        if scan.previous is not None:
            pair = _pair_problem(scan.previous.header, header)
            if pair is not None:
                return _cut_at(scan.previous, batch, pair)
        scan.accept(batch)
        position += header.size_in_bytes
    return None


def _own_problem(segment: LogSegment, header: BatchHeader) -> str | None:
    if header.base_offset < segment.base_offset:
        return (f"base offset {header.base_offset} is below the segment's base offset "
                f"{segment.base_offset}")
    if not segment.can_hold_offset(header.last_offset):
        return f"last offset {header.last_offset} does not fit the segment"
    if header.partition_leader_epoch < NO_EPOCH:
        return f"partition leader epoch {header.partition_leader_epoch} is negative"
    return None


def _pair_problem(earlier: BatchHeader, later: BatchHeader) -> str | None:
    if later.base_offset <= earlier.last_offset:
        return (f"base offset {later.base_offset} does not follow the previous batch's last "
                f"offset {earlier.last_offset}")
    epoch, earlier_epoch = later.partition_leader_epoch, earlier.partition_leader_epoch
    if NO_EPOCH not in (epoch, earlier_epoch) and epoch < earlier_epoch:
        return (f"partition leader epoch {epoch} is below the previous batch's "
                f"{earlier_epoch}")
    return None


def _cut_here(
    index: int, segment: LogSegment, position: int, previous: _Batch | None, reason: str
) -> BatchDamage:
    offset = segment.base_offset if previous is None else previous.header.next_offset
    return BatchDamage(index, segment.log_path, position, offset, segment.log_path, position,
                       reason)


def _cut_at(cut: _Batch, found: _Batch, reason: str) -> BatchDamage:
    return BatchDamage(cut.segment_index, cut.path, cut.position, cut.header.base_offset,
                       found.path, found.position, f"{reason} (either header may be damaged)")
