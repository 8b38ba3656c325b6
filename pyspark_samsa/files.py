"""File mode (``samsa.logDirs``): a task reads its offset range from the segment files directly.

For executors on the broker's machines: the partition's directory ``<topic>-<partition>`` is
looked up under the given log directories, and its ``<base_offset>.log`` segment files (names
and layout as ``storage.segment`` writes them) are read with ``os.pread``, starting from the
position the segment's ``.index`` gives for the range's start. The rows are the same as in
network mode (the same decoder, the same range filtering).

Read-only, and safe beside a live broker: files are opened ``O_RDONLY``, nothing is written,
locked, recovered or renamed. The ``.index`` is read with ``pread`` rather than mapped, because
the broker trims the active segment's preallocated index when it rolls, and touching a mapped
page past the new end of file would kill the process (SIGBUS); its unused, zero-filled tail
is recognised and ignored. Reads stop at the range's end, which planning took at or below the
high watermark, so batches still being appended are never looked at. A segment deleted by
retention before it is opened is data loss (``failOnDataLoss``); one deleted after stays
readable through the open descriptor.

read_committed: the aborted transactions overlapping the range are read from the partition's
``.txnindex`` files (Kafka's 34-byte entries, ``storage.transaction_index``) before the range
is walked, and their batches left out (``pyspark_samsa.aborted``). Planning ends such a range at
or below the last stable offset, so every transaction it touches has its marker and entry.

State: none between calls; each ``read`` opens and closes its files.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD
from pyspark_samsa.aborted import AbortedTransactions
from pyspark_samsa.arrow import decode_batches
from pyspark_samsa.loss import report_data_loss
from pyspark_samsa.planning import OffsetRange
from storage.segment import INDEX_SUFFIX, LOG_SUFFIX, parse_base_offset, segment_file_name
from storage.transaction_index import TXN_INDEX_SUFFIX, decode_entries

__all__ = ["FileReader", "aborted_transactions", "index_position"]

CHUNK_BYTES = 1024 * 1024
_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
_BATCH_LENGTH = struct.Struct(">i")


class FileReader:
    """Reads offset ranges from ``log.dirs`` (see the module docstring)."""

    def __init__(self, log_dirs: tuple[str, ...], *, read_committed: bool = False) -> None:
        self.log_dirs = tuple(Path(d) for d in log_dirs)
        self.read_committed = read_committed

    def partition_directory(self, topic: str, partition: int) -> Path:
        name = f"{topic}-{partition}"
        for log_dir in self.log_dirs:
            if (log_dir / name).is_dir():
                return log_dir / name
        dirs = ", ".join(str(d) for d in self.log_dirs)
        raise FileNotFoundError(
            f"samsa.logDirs: no directory {name} under {dirs}; file mode needs every executor "
            "on a machine holding the partition's log (or leave samsa.logDirs unset)")

    def read(self, offsets: OffsetRange, *, include_headers: bool,
             fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
        directory = self.partition_directory(offsets.topic, offsets.partition)
        aborted = aborted_transactions(directory, offsets) if self.read_committed else None
        offset = offsets.start
        while offset < offsets.end:
            bases = _segment_bases(directory)
            earlier = [base for base in bases if base <= offset]
            if not earlier:
                first = min((b for b in bases if b < offsets.end), default=offsets.end)
                _report_missing(offsets, offset, first, fail_on_data_loss)
                offset = first
                continue
            base = earlier[-1]
            following = next((b for b in bases if b > base), None)
            try:
                fd = os.open(directory / segment_file_name(base, LOG_SUFFIX), os.O_RDONLY)
            except FileNotFoundError:
                continue  # deleted (retention) or replaced (compaction) meanwhile: list again
            try:
                position = index_position(directory / segment_file_name(base, INDEX_SUFFIX),
                                          base, offset)
                for decoded_batch, next_offset in _read_segment(fd, position, offset, offsets,
                                                                include_headers, aborted):
                    if decoded_batch is not None:
                        yield decoded_batch
                    offset = next_offset
            finally:
                os.close(fd)
            if offset >= offsets.end:
                return
            if following is None:
                _report_short_log(offsets, offset, fail_on_data_loss)
                return
            offset = max(offset, following)


def aborted_transactions(directory: Path, offsets: OffsetRange) -> AbortedTransactions:
    """The aborted transactions of the partition in ``directory`` that overlap ``offsets``."""
    overlapping = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(TXN_INDEX_SUFFIX):
            continue
        try:
            with open(directory / name, "rb") as index:
                entries = decode_entries(index.read())
        except FileNotFoundError:
            continue  # its segment was deleted meanwhile: its transactions are below the range
        overlapping += [(entry.producer_id, entry.first_offset) for entry in entries
                        if entry.last_offset >= offsets.start and entry.first_offset < offsets.end]
    return AbortedTransactions(overlapping)


def _read_segment(fd: int, position: int, offset: int, offsets: OffsetRange,
                  include_headers: bool, aborted: AbortedTransactions | None,
                  ) -> Iterator[tuple[pa.RecordBatch | None, int]]:
    """(rows, next offset) for each chunk of the segment from ``position`` until the range's
    end or the end of the file."""
    chunk_bytes = CHUNK_BYTES
    while offset < offsets.end:
        chunk = os.pread(fd, chunk_bytes, position)
        if len(chunk) < LOG_OVERHEAD:
            return
        decoded = decode_batches(chunk, start=offset, end=offsets.end, topic=offsets.topic,
                                 partition=offsets.partition, include_headers=include_headers,
                                 aborted=aborted)
        if decoded.reached_end:
            yield decoded.batch, offsets.end
            return
        if decoded.consumed_bytes == 0:
            needed = _BATCH_LENGTH.unpack_from(chunk, 8)[0] + LOG_OVERHEAD
            if len(chunk) < chunk_bytes or needed <= len(chunk):
                return  # the end of the file (a batch still being written is never in range)
            chunk_bytes = max(needed, BATCH_HEADER_SIZE)  # one batch larger than a chunk
            continue
        chunk_bytes = CHUNK_BYTES
        position += decoded.consumed_bytes
        offset = decoded.next_offset if decoded.next_offset is not None else offset
        yield decoded.batch, offset


def _segment_bases(directory: Path) -> list[int]:
    bases = []
    for name in os.listdir(directory):
        if name.endswith(LOG_SUFFIX) and len(name) == 20 + len(LOG_SUFFIX):
            try:
                bases.append(parse_base_offset(name))
            except ValueError:
                continue
    return sorted(bases)


def index_position(path: Path, base_offset: int, offset: int) -> int:
    """The log position of the last ``.index`` entry at or below ``offset`` (0 if none, or if
    the index cannot be read): a position at or before the batch holding ``offset``.

    Entries are (int32 offset - base_offset, int32 position), offsets strictly increasing; a
    live index is preallocated and zero-filled past its entries, so an all-zero entry after
    the first ends it. Binary search with one ``pread`` per probe."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return 0
    try:
        entries = os.fstat(fd).st_size // _INDEX_ENTRY.size
        target = offset - base_offset
        low, high, found = 0, entries - 1, 0
        while low <= high:
            middle = (low + high) // 2
            raw = os.pread(fd, _INDEX_ENTRY.size, middle * _INDEX_ENTRY.size)
            if len(raw) < _INDEX_ENTRY.size:  # trimmed meanwhile
                high = middle - 1
                continue
            relative, position = _INDEX_ENTRY.unpack(raw)
            unused = middle > 0 and relative == 0 and position == 0
            if not unused and relative <= target:
                found, low = position, middle + 1
            else:
                high = middle - 1
        return found
    finally:
        os.close(fd)


def _report_missing(offsets: OffsetRange, offset: int, first: int, fail_on_data_loss: bool) -> None:
    report_data_loss(
        f"Cannot read offset {offset} (TopicPartition: {offsets.topic}-{offsets.partition}): no "
        f"segment file holds it any more, records in [{offset}, {first}) are skipped.",
        fail_on_data_loss=fail_on_data_loss)


def _report_short_log(offsets: OffsetRange, offset: int, fail_on_data_loss: bool) -> None:
    report_data_loss(
        f"Cannot read offset {offset} (TopicPartition: {offsets.topic}-{offsets.partition}): the "
        f"segment files end before it, records in [{offset}, {offsets.end}) are not there.",
        fail_on_data_loss=fail_on_data_loss)
