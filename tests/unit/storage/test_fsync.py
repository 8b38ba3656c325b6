"""storage.fsync: every sync is recorded in the ledger when it is on, and nothing when off."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import fsync as fsync_module
from storage.checkpoint import OffsetCheckpointFile
from storage.fsync import fdatasync, fsync, fsync_directory, fsync_path, open_ledger, record_synced


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "ledger"
    open_ledger(path)
    yield path
    open_ledger(None)


def lines(ledger: Path) -> list[list[object]]:
    return [json.loads(line) for line in ledger.read_text().splitlines()]


def test_off_by_default_writes_no_ledger(tmp_path: Path) -> None:
    assert not fsync_module.ledger_enabled()
    path = tmp_path / "data"
    path.write_bytes(b"x" * 10)
    fsync_path(path)
    fsync_directory(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_a_file_sync_records_path_inode_and_length(tmp_path: Path, ledger: Path) -> None:
    path = tmp_path / "segment.log"
    with open(path, "wb") as file:
        file.write(b"a" * 100)
        file.flush()
        fdatasync(file.fileno(), path)
        file.write(b"b" * 20)
        file.flush()
        fsync(file.fileno(), path)
    fsync_path(path)
    inode = path.stat().st_ino
    assert lines(ledger) == [["f", str(path), inode, 100], ["f", str(path), inode, 120],
                             ["f", str(path), inode, 120]]


def test_a_directory_sync_records_its_entries_before_the_sync(
    tmp_path: Path, ledger: Path
) -> None:
    data = tmp_path / "d"
    data.mkdir()
    (data / "a").write_bytes(b"")
    os.mkdir(data / "sub")
    fsync_directory(data)
    [line] = lines(ledger)
    assert line == ["d", str(data), {"a": (data / "a").stat().st_ino,
                                     "sub": (data / "sub").stat().st_ino}]


def test_record_synced_names_a_mapped_file_and_skips_a_removed_one(
    tmp_path: Path, ledger: Path
) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(bytes(64))
    record_synced(path, 64)
    record_synced(tmp_path / "gone", 8)
    assert lines(ledger) == [["f", str(path), path.stat().st_ino, 64]]


def test_a_checkpoint_write_records_temp_file_then_directory(tmp_path: Path, ledger: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write({("t", 0): 5})
    kinds = [(line[0], Path(str(line[1])).name) for line in lines(ledger)]
    assert kinds == [("f", path.name + ".tmp"), ("d", tmp_path.name)]
    directory = lines(ledger)[1][2]
    assert isinstance(directory, dict) and directory[path.name] == path.stat().st_ino


def test_a_failed_sync_raises_and_records_nothing(tmp_path: Path, ledger: Path) -> None:
    with pytest.raises(OSError):
        fsync(1_000_000, tmp_path / "nothing")  # not an open descriptor
    assert ledger.read_text() == ""
