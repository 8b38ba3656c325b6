"""Checkpoint files: Kafka's exact text, round trips, atomic replacement, every corruption."""

from __future__ import annotations

import os
import pickle
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from storage.errors import CorruptCheckpointError, StorageError

PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

# Kafka's legal topic names: [a-zA-Z0-9._-], at most 249 characters, not "." or "..".
topic_names = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=249,
).filter(lambda name: name not in (".", ".."))
partitions = st.integers(0, 2**31 - 1)
offsets = st.integers(-(2**63), 2**63 - 1)
epochs = st.integers(0, 2**31 - 1)
start_offsets = st.integers(0, 2**63 - 1)


# -- round trips and Kafka's exact text -----------------------------------------------------------


@PROPERTY_SETTINGS
@given(checkpoint=st.dictionaries(st.tuples(topic_names, partitions), offsets, max_size=30))
def test_offset_checkpoint_round_trip(
    tmp_path: Path, checkpoint: dict[tuple[str, int], int]
) -> None:
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / RECOVERY_POINT_OFFSET_CHECKPOINT
    OffsetCheckpointFile(path).write(checkpoint)
    assert OffsetCheckpointFile(path).read() == checkpoint
    lines = path.read_text().splitlines()
    assert lines[:2] == ["0", str(len(checkpoint))]
    expected = [
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(checkpoint.items())
    ]
    assert lines[2:] == expected


@PROPERTY_SETTINGS
@given(entries=st.lists(st.tuples(epochs, start_offsets), max_size=30))
def test_leader_epoch_checkpoint_round_trip(tmp_path: Path, entries: list[tuple[int, int]]) -> None:
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / LEADER_EPOCH_CHECKPOINT
    LeaderEpochCheckpointFile(path).write(entries)
    assert LeaderEpochCheckpointFile(path).read() == entries  # in the order given


def test_offset_checkpoint_exact_text(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    OffsetCheckpointFile(path).write(
        {("orders", 1): 987, ("__consumer_offsets", 12): 0, ("orders", 0): 1234}
    )
    assert path.read_bytes() == b"0\n3\n__consumer_offsets 12 0\norders 0 1234\norders 1 987\n"


def test_empty_offset_checkpoint_exact_text(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    OffsetCheckpointFile(path).write({})
    assert path.read_bytes() == b"0\n0\n"
    assert OffsetCheckpointFile(path).read() == {}


def test_leader_epoch_checkpoint_exact_text(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    LeaderEpochCheckpointFile(path).write([(0, 0), (3, 1500), (4, 1700)])
    assert path.read_bytes() == b"0\n3\n0 0\n3 1500\n4 1700\n"


def test_same_state_gives_the_same_bytes(tmp_path: Path) -> None:
    state = {("b", 1): 5, ("a", 10): 7, ("a", 2): 9}
    OffsetCheckpointFile(tmp_path / "one").write(state)
    OffsetCheckpointFile(tmp_path / "two").write(dict(reversed(list(state.items()))))
    assert (tmp_path / "one").read_bytes() == (tmp_path / "two").read_bytes()


def test_missing_or_empty_file_reads_as_no_entries(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "missing").read() == {}
    assert LeaderEpochCheckpointFile(tmp_path / "missing").read() == []
    (tmp_path / "empty").touch()  # Kafka creates the file empty before its first write
    assert OffsetCheckpointFile(tmp_path / "empty").read() == {}
    assert LeaderEpochCheckpointFile(tmp_path / "empty").read() == []


# -- atomic replacement ----------------------------------------------------------------------------


def test_stale_temp_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_OFFSET_CHECKPOINT
    temp = tmp_path / (RECOVERY_POINT_OFFSET_CHECKPOINT + ".tmp")
    temp.write_bytes(b"0\n1\nhalf-writ")  # a crash in the middle of an earlier write
    assert OffsetCheckpointFile(path).read() == {}
    OffsetCheckpointFile(path).write({("t", 0): 1})
    temp.write_bytes(b"garbage")
    assert OffsetCheckpointFile(path).read() == {("t", 0): 1}
    OffsetCheckpointFile(path).write({("t", 0): 2})
    assert not temp.exists()
    assert OffsetCheckpointFile(path).read() == {("t", 0): 2}


def test_write_fsyncs_the_file_then_renames_then_fsyncs_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to name file descriptors")
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        events.append(("replace", str(target)))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    LeaderEpochCheckpointFile(path).write([(1, 2)])
    resolved = tmp_path.resolve()
    assert events == [
        ("fsync", str(resolved / (LEADER_EPOCH_CHECKPOINT + ".tmp"))),
        ("replace", str(path)),
        ("fsync", str(resolved)),
    ]


@pytest.mark.parametrize(
    ("offsets_to_write", "error"),
    [
        ({("bad topic", 0): 1}, ValueError),
        ({("", 0): 1}, ValueError),
        ({("..", 0): 1}, ValueError),
        ({("a" * 250, 0): 1}, ValueError),
        ({("tópico", 0): 1}, ValueError),
        ({("t", -1): 1}, ValueError),
        ({("t", 2**31): 1}, ValueError),
        ({("t", 0): 2**63}, ValueError),
        ({("t", 0): "5"}, TypeError),
        ({("t", True): 5}, TypeError),
    ],
)
def test_an_entry_that_cannot_be_written_leaves_the_file_alone(
    tmp_path: Path, offsets_to_write: dict[tuple[str, int], int], error: type[Exception]
) -> None:
    path = tmp_path / RECOVERY_POINT_OFFSET_CHECKPOINT
    OffsetCheckpointFile(path).write({("t", 0): 7})
    with pytest.raises(error):
        OffsetCheckpointFile(path).write({("t", 0): 8, **offsets_to_write})
    assert OffsetCheckpointFile(path).read() == {("t", 0): 7}
    assert not (tmp_path / (RECOVERY_POINT_OFFSET_CHECKPOINT + ".tmp")).exists()


@pytest.mark.parametrize("entry", [(-1, 0), (0, -1), (2**31, 0), (0, 2**63)])
def test_a_leader_epoch_entry_out_of_range_is_not_written(
    tmp_path: Path, entry: tuple[int, int]
) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    with pytest.raises(ValueError):
        LeaderEpochCheckpointFile(path).write([(0, 0), entry])
    assert not path.exists()


# -- corruption: every kind names the file, the line and the reason -------------------------------

OFFSET_CORRUPTIONS: dict[str, tuple[bytes, int, str]] = {
    "unknown version": (b"1\n0\n", 1, "unsupported version 1"),
    "version not a number": (b"v0\n0\n", 1, "version 'v0' is not an integer"),
    "blank first line": (b"\n", 1, "is not an integer"),
    "count missing": (b"0\n", 2, "entry count is missing"),
    "count not a number": (b"0\ntwo\n", 2, "entry count 'two' is not an integer"),
    "negative count": (b"0\n-1\n", 2, "out of range"),
    "fewer entries than the count": (b"0\n2\nt 0 1\n", 2, "entry count is 2 but 1 entries follow"),
    "more entries than the count": (b"0\n0\nt 0 1\n", 2, "entry count is 0 but 1 entries follow"),
    "too few fields": (b"0\n1\nt 0\n", 3, "expected 3 space-separated fields, found 2"),
    "too many fields": (b"0\n1\nt 0 1 2\n", 3, "found 4"),
    "two spaces": (b"0\n1\nt  0 1\n", 3, "found 4"),
    "tab separated": (b"0\n1\nt\t0\t1\n", 3, "found 1"),
    "blank entry line": (b"0\n1\n\n", 3, "found 1"),
    "partition not a number": (b"0\n1\nt p0 1\n", 3, "partition 'p0' is not an integer"),
    "offset not a number": (b"0\n1\nt 0 1.5\n", 3, "offset '1.5' is not an integer"),
    "plus sign": (b"0\n1\nt 0 +1\n", 3, "offset '+1' is not an integer"),
    "underscore digits": (b"0\n1\nt 0 1_000\n", 3, "is not an integer"),
    "negative partition": (b"0\n1\nt -1 1\n", 3, "partition -1 is out of range"),
    "offset beyond int64": (b"0\n1\nt 0 9223372036854775808\n", 3, "out of range"),
    "illegal topic": (b"0\n2\nok 0 1\nno/pe 0 1\n", 4, "illegal topic name 'no/pe'"),
    "duplicate partition": (b"0\n2\nt 0 1\nt 0 2\n", 4, "duplicate entry for ('t', 0)"),
    "no final newline": (b"0\n1\nt 0 1", 3, "no newline at the end"),
    "carriage returns": (b"0\r\n1\r\nt 0 1\r\n", 1, "version '0\\r' is not an integer"),
    "non-ascii byte": (b"0\n1\nt\xc3\xa9 0 1\n", 3, "non-ASCII byte 0xc3"),
    "nul bytes": (b"\0\0\0\0", 1, "no newline at the end"),
}


@pytest.mark.parametrize("case", OFFSET_CORRUPTIONS)
def test_corrupt_offset_checkpoint(tmp_path: Path, case: str) -> None:
    content, line_number, reason = OFFSET_CORRUPTIONS[case]
    path = tmp_path / RECOVERY_POINT_OFFSET_CHECKPOINT
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError) as raised:
        OffsetCheckpointFile(path).read()
    error = raised.value
    assert isinstance(error, StorageError)
    assert (error.path, error.line_number) == (path, line_number)
    assert reason in error.reason
    assert re.search(f"{re.escape(str(path))}, line {line_number}: ", str(error))


LEADER_EPOCH_CORRUPTIONS: dict[str, tuple[bytes, int, str]] = {
    "three fields": (b"0\n1\n0 0 0\n", 3, "expected 2 space-separated fields, found 3"),
    "negative epoch": (b"0\n2\n0 0\n-1 5\n", 4, "epoch -1 is out of range"),
    "negative start offset": (b"0\n1\n0 -5\n", 3, "start offset -5 is out of range"),
    "epoch beyond int32": (b"0\n1\n2147483648 0\n", 3, "out of range"),
    "topic-style line": (b"0\n1\nt 0 1\n", 3, "found 3"),
    "count mismatch": (b"0\n3\n0 0\n1 5\n", 2, "entry count is 3 but 2 entries follow"),
}


@pytest.mark.parametrize("case", LEADER_EPOCH_CORRUPTIONS)
def test_corrupt_leader_epoch_checkpoint(tmp_path: Path, case: str) -> None:
    content, line_number, reason = LEADER_EPOCH_CORRUPTIONS[case]
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(content)
    with pytest.raises(CorruptCheckpointError) as raised:
        LeaderEpochCheckpointFile(path).read()
    assert (raised.value.line_number, raised.value.path) == (line_number, path)
    assert reason in raised.value.reason


def test_corrupt_checkpoint_error_pickles(tmp_path: Path) -> None:
    error = CorruptCheckpointError(tmp_path / "x", 3, "bad")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.line_number, copy.reason, str(copy)) == (
        error.path,
        3,
        "bad",
        str(error),
    )
