"""Read-only inspection of segment files: what ``samsa log dump`` and ``samsa log verify`` show.

Nothing here writes: logs are mapped read-only and indexes opened with ``writable=False``, so a
live broker's files can be inspected. Every problem names the file, the byte position and, where
known, the offset.
"""

from __future__ import annotations

import itertools
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from protocol.errors import CorruptMessageError, InvalidRecordError, KafkaError
from protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Record,
    batch_crc_is_valid,
    decode_batch,
    read_batch_header,
)
from storage.errors import StorageError
from storage.index import OffsetIndex, TimeIndex
from storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, parse_base_offset

LEFTOVER_SUFFIXES = (".cleaned", ".swap", ".deleted", ".tmp")


@dataclass(frozen=True, slots=True)
class Problem:
    path: Path
    position: int | None
    offset: int | None
    reason: str

    def __str__(self) -> str:
        where = [str(self.path)]
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{', '.join(where)}: {self.reason}"


@dataclass(frozen=True, slots=True)
class BatchInfo:
    position: int
    header: BatchHeader
    crc_valid: bool
    records: tuple[Record, ...] | None = None


@dataclass
class SegmentReport:
    log_path: Path
    batches: list[BatchInfo] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    next_offset: int | None = None


def dump_log_file(path: Path, *, records: bool = False,
                  base_offset: int | None = None) -> SegmentReport:
    """Every batch of a ``.log`` file (or a file of the same layout whose first offset is
    ``base_offset``, e.g. a metadata snapshot); stops at the first batch whose framing is
    unreadable."""
    report = SegmentReport(path)
    base_offset = parse_base_offset(path.name) if base_offset is None else base_offset
    size = path.stat().st_size
    if size == 0:
        report.next_offset = base_offset
        return report
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ) as m:
        view = memoryview(m)
        try:
            _scan(view, path, base_offset, report, records)
        finally:
            view.release()
    return report


def _scan(view: memoryview, path: Path, base: int, report: SegmentReport, records: bool) -> None:
    position, previous_last = 0, base - 1
    while position < len(view):
        header = _header_or_problem(view, position, path, report)
        if header is None:
            return
        crc_valid = batch_crc_is_valid(view, position, header)
        if not crc_valid:
            report.problems.append(
                Problem(path, position, header.base_offset, f"CRC mismatch (stored {header.crc})")
            )
        if header.base_offset <= previous_last:
            report.problems.append(
                Problem(path, position, header.base_offset,
                        f"base offset does not follow the previous batch's last offset {previous_last}")
            )
        decoded = _decode(view, position, header, path, report) if records and crc_valid else None
        report.batches.append(BatchInfo(position, header, crc_valid, decoded))
        previous_last = header.last_offset
        report.next_offset = header.next_offset
        position += header.size_in_bytes


def _header_or_problem(
    view: memoryview, position: int, path: Path, report: SegmentReport
) -> BatchHeader | None:
    remaining = len(view) - position
    if remaining < BATCH_HEADER_SIZE:
        report.problems.append(Problem(path, position, None, f"{remaining} trailing bytes"))
        return None
    try:
        header = read_batch_header(view, position)
    except (CorruptMessageError, InvalidRecordError) as error:
        report.problems.append(Problem(path, position, None, str(error)))
        return None
    if header.size_in_bytes > remaining:
        report.problems.append(
            Problem(path, position, header.base_offset,
                    f"batch of {header.size_in_bytes} bytes runs past the end of the file")
        )
        return None
    return header


def _decode(
    view: memoryview, position: int, header: BatchHeader, path: Path, report: SegmentReport
) -> tuple[Record, ...] | None:
    try:
        return decode_batch(view[position : position + header.size_in_bytes]).records
    except KafkaError as error:
        report.problems.append(Problem(path, position, header.base_offset, str(error)))
        return None


def read_offset_index(path: Path) -> list[tuple[int, int]]:
    """The used entries of an ``.index``: up to the first unused (zero) slot, as
    kafka-dump-log reads a live, preallocated index."""
    base = parse_base_offset(path.name)
    index = OffsetIndex(path, base, writable=False)
    try:
        entries = [(entry[0], entry[1]) for entry in map(index.entry, range(index.entries))]
    finally:
        index.close()
    return _used(entries, lambda entry: entry == (base, 0))


def read_time_index(path: Path) -> list[tuple[int, int]]:
    """The used entries of a ``.timeindex`` (up to the first unused slot)."""
    base = parse_base_offset(path.name)
    index = TimeIndex(path, base, writable=False)
    try:
        entries = [(entry[0], entry[1]) for entry in map(index.entry, range(index.entries))]
    finally:
        index.close()
    return _used(entries, lambda entry: entry == (0, base))


def _used(
    entries: list[tuple[int, int]], unused: Callable[[tuple[int, int]], bool]
) -> list[tuple[int, int]]:
    for position, entry in enumerate(entries):
        if position > 0 and unused(entry):
            return entries[:position]
    return entries


def verify_partition_directory(directory: Path) -> list[Problem]:
    """Check every segment and index of one ``<topic>-<partition>`` directory."""
    problems: list[Problem] = []
    previous_next: int | None = None
    for path in sorted(directory.iterdir()):
        if path.name.endswith(LEFTOVER_SUFFIXES):
            problems.append(Problem(path, None, None, "leftover of an interrupted operation"))
    for log_path in sorted(directory.glob(f"*{LOG_SUFFIX}")):
        report = dump_log_file(log_path)
        problems.extend(report.problems)
        base = parse_base_offset(log_path.name)
        if previous_next is not None and base < previous_next:
            problems.append(Problem(log_path, 0, base,
                                    f"segment overlaps the previous one (ends at {previous_next})"))
        previous_next = report.next_offset
        problems.extend(_verify_indexes(log_path, report))
    return problems


def _verify_indexes(log_path: Path, report: SegmentReport) -> list[Problem]:
    stem = log_path.name[: -len(LOG_SUFFIX)]
    problems: list[Problem] = []
    batch_at = {info.position: info.header for info in report.batches}
    index_path = log_path.with_name(stem + INDEX_SUFFIX)
    for entry_offset, position in _entries(index_path, read_offset_index, problems):
        header = batch_at.get(position)
        if header is None:
            problems.append(Problem(index_path, position, entry_offset,
                                    "index entry does not point at a batch boundary"))
        elif header.base_offset > entry_offset or entry_offset > (report.next_offset or 0) - 1:
            problems.append(Problem(index_path, position, entry_offset,
                                    f"index entry offset disagrees with batch at {header.base_offset}"))
    time_path = log_path.with_name(stem + TIME_INDEX_SUFFIX)
    for timestamp, entry_offset in _entries(time_path, read_time_index, problems):
        if entry_offset > (report.next_offset or 0) - 1 and report.batches:
            problems.append(Problem(time_path, None, entry_offset,
                                    f"time index entry ({timestamp}) points past the log end"))
    return problems


def _entries(
    path: Path, reader: Callable[[Path], list[tuple[int, int]]], problems: list[Problem]
) -> list[tuple[int, int]]:
    if not path.exists():
        problems.append(Problem(path, None, None, "index file is missing"))
        return []
    if path.stat().st_size % (8 if path.name.endswith(INDEX_SUFFIX) else 12):
        problems.append(Problem(path, None, None, "length is not a whole number of entries"))
        return []
    try:
        entries = reader(path)
    except (StorageError, OSError, ValueError) as error:
        problems.append(Problem(path, None, None, str(error)))
        return []
    problems.extend(_order_problems(path, entries))
    return entries


def _order_problems(path: Path, entries: list[tuple[int, int]]) -> list[Problem]:
    """Offset index: offsets strictly increase. Time index: timestamps strictly increase and
    offsets never decrease (what appends guarantee)."""
    is_offset_index = path.name.endswith(INDEX_SUFFIX)
    for (first, second), (next_first, next_second) in itertools.pairwise(entries):
        if is_offset_index and next_first <= first:
            return [Problem(path, None, next_first, "index offsets do not increase")]
        if not is_offset_index and (next_first <= first or next_second < second):
            return [Problem(path, None, next_second, "time index entries are out of order")]
    return []


def partition_directories(root: Path) -> Iterator[Path]:
    """``root`` itself when it holds segments, else its ``<topic>-<partition>`` subdirectories."""
    if any(root.glob(f"*{LOG_SUFFIX}")):
        yield root
        return
    for path in sorted(root.iterdir()):
        if path.is_dir() and not path.name.endswith("-delete") and os.access(path, os.R_OK):
            yield path
