"""The clean-shutdown marker (``storage.clean_shutdown``) and the broker epoch the log manager
reads from it at start-up (Kafka's ``readBrokerEpochFromCleanShutdownFiles``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.clean_shutdown import CLEAN_SHUTDOWN_FILE, read_broker_epoch, write_clean_shutdown
from storage.clock import ManualClock
from storage.log_manager import LogManager


@settings(max_examples=50, deadline=None)
@given(epoch=st.integers(min_value=-1, max_value=2**63 - 1))
def test_written_epoch_reads_back(tmp_path_factory: pytest.TempPathFactory, epoch: int) -> None:
    directory = tmp_path_factory.mktemp("dir")
    write_clean_shutdown(directory, epoch)
    assert read_broker_epoch(directory) == epoch


@pytest.mark.parametrize("content", [
    b"", b"not json", b"[]", b'{"version":0}', b'{"version":0,"brokerEpoch":"7"}',
    b'{"version":0,"brokerEpoch":true}',
])
def test_unreadable_markers_prove_no_epoch(tmp_path: Path, content: bytes) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(content)
    assert read_broker_epoch(tmp_path) is None


def test_missing_marker_proves_no_epoch(tmp_path: Path) -> None:
    assert read_broker_epoch(tmp_path) is None


def test_kafka_written_marker(tmp_path: Path) -> None:
    """Kafka 4.3.1 writes Jackson's compact JSON; unknown fields are ignored."""
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(b'{"version":0,"brokerEpoch":17,"x":1}')
    assert read_broker_epoch(tmp_path) == 17


def _started(dirs: list[Path]) -> LogManager:
    manager = LogManager(dirs, clock=ManualClock(0))
    manager.startup()
    return manager


@pytest.mark.parametrize(("markers", "expected"), [
    ({0: 9, 1: 9}, 9),
    ({0: 9, 1: 8}, -1),  # epochs differ
    ({0: 9}, -1),  # one directory was not stopped cleanly
    ({}, -1),
    ({0: None, 1: None}, -1),  # markers without an epoch (Samsa before, or corrupt)
])
def test_previous_broker_epoch_needs_every_directory(
    tmp_path: Path, markers: dict[int, int | None], expected: int,
) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    for index, epoch in markers.items():
        dirs[index].mkdir()
        if epoch is None:
            (dirs[index] / CLEAN_SHUTDOWN_FILE).write_bytes(b"")
        else:
            write_clean_shutdown(dirs[index], epoch)
    manager = _started(dirs)
    assert manager.previous_broker_epoch == expected
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    manager.shutdown(broker_epoch=11)
    assert _started(dirs).previous_broker_epoch == 11
