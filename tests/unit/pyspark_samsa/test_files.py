"""File mode on segment files laid out as the broker writes them (``<topic>-<partition>/``,
``<base>.log`` + ``.index`` with a preallocated, zero-filled tail on the active segment)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from protocol.records import Record, encode_batch
from pyspark_samsa.files import FileReader, index_position
from pyspark_samsa.loss import DataLossError
from pyspark_samsa.planning import OffsetRange

TIMESTAMP = 1_700_000_000_000


def write_segment(directory: Path, base: int, count: int, *, per_batch: int = 10,
                  index_every: int = 3, preallocate: int = 0) -> None:
    """``count`` records from ``base``; an index entry every ``index_every`` batches."""
    log = bytearray()
    entries = []
    for number, first in enumerate(range(base, base + count, per_batch)):
        records = [Record(offset, TIMESTAMP + offset, None, b"value-%d" % offset)
                   for offset in range(first, min(first + per_batch, base + count))]
        if number and number % index_every == 0:
            entries.append(struct.pack(">ii", records[-1].offset - base, len(log)))
        log += encode_batch(records)
    (directory / f"{base:020d}.log").write_bytes(bytes(log))
    index = b"".join(entries)
    (directory / f"{base:020d}.index").write_bytes(index + bytes(max(preallocate - len(index), 0)))


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "logs" / "events-2"
    directory.mkdir(parents=True)
    write_segment(directory, 0, 400)
    write_segment(directory, 400, 300)
    write_segment(directory, 700, 250, preallocate=10 * 1024)  # the active segment
    return directory


def offsets_read(reader: FileReader, start: int, end: int, *, fail: bool = True) -> list[int]:
    batches = reader.read(OffsetRange("events", 2, start, end), include_headers=False,
                          fail_on_data_loss=fail)
    return [offset for batch in batches for offset in batch.column("offset").to_pylist()]


@pytest.mark.parametrize(("start", "end"), [(0, 950), (0, 400), (123, 456), (400, 401),
                                             (699, 701), (888, 950), (950, 950)])
def test_ranges_read_across_segments(partition_dir: Path, start: int, end: int) -> None:
    reader = FileReader((str(partition_dir.parent.parent / "elsewhere"), str(partition_dir.parent)))
    assert offsets_read(reader, start, end) == list(range(start, end))


def test_the_index_gives_a_position_at_or_before_the_offset(partition_dir: Path) -> None:
    index = partition_dir / f"{700:020d}.index"
    log = (partition_dir / f"{700:020d}.log").read_bytes()
    entries = [struct.unpack_from(">ii", index.read_bytes(), i * 8) for i in range(8)]
    used = [entry for entry in entries if entry != (0, 0)]
    assert used  # entries, then the zero-filled tail
    for offset in range(700, 950, 7):
        position = index_position(index, 700, offset)
        base_offset = struct.unpack_from(">q", log, position)[0]
        assert base_offset <= offset
        assert position == max([p for relative, p in used if relative + 700 <= offset], default=0)
    assert index_position(partition_dir / "missing.index", 0, 5) == 0


def test_a_missing_directory_says_what_file_mode_needs(tmp_path: Path) -> None:
    reader = FileReader((str(tmp_path),))
    with pytest.raises(FileNotFoundError, match="no directory events-2 under"):
        offsets_read(reader, 0, 10)


def test_deleted_segments_are_data_loss(partition_dir: Path) -> None:
    for suffix in (".log", ".index"):
        (partition_dir / f"{0:020d}{suffix}").unlink()
    reader = FileReader((str(partition_dir.parent),))
    with pytest.raises(DataLossError, match=r"records in \[100, 400\) are skipped"):
        offsets_read(reader, 100, 500)
    assert offsets_read(reader, 100, 500, fail=False) == list(range(400, 500))


def test_a_log_ending_before_the_range_is_data_loss(partition_dir: Path) -> None:
    reader = FileReader((str(partition_dir.parent),))
    with pytest.raises(DataLossError, match=r"records in \[950, 990\) are not there"):
        offsets_read(reader, 900, 990)
    assert offsets_read(reader, 900, 990, fail=False) == list(range(900, 950))
