"""A power loss after a roll can keep a later segment while an earlier one lost its unsynced
tail at a batch boundary: no bad batch shows it, only the hole in the offsets. Recovery ends a
log that is not compacted at the hole; a compacted log (where holes are normal) keeps going."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import client_batch, crash, release_opened_logs

release_logs = pytest.fixture(autouse=True)(release_opened_logs)

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=700, retention_ms=-1, message_timestamp_after_max_ms=2**62)


def filled(directory: Path, config: LogConfig, batches: int = 40) -> Log:
    log = Log.open(directory, config, clock=ManualClock(NOW))
    for index in range(batches):
        log.append_as_leader(client_batch([b"value-%03d" % index] * 2, timestamp=NOW))
    assert len(log.segments) >= 4
    return log


def batch_boundaries(path: Path) -> list[int]:
    data, position, boundaries = path.read_bytes(), 0, [0]
    while position < len(data):
        position += 12 + int.from_bytes(data[position + 8: position + 12], "big")
        boundaries.append(position)
    return boundaries


@settings(max_examples=20, deadline=None)
@given(segment=st.integers(0, 2), boundary=st.integers(0, 100))
def test_a_segment_cut_at_a_batch_boundary_ends_the_log_there(
    tmp_path_factory: pytest.TempPathFactory, segment: int, boundary: int
) -> None:
    directory = tmp_path_factory.mktemp("log") / "t-0"
    log = filled(directory, CONFIG)
    cut = log.segments[segment]
    boundaries = batch_boundaries(cut.log_path)[:-1]  # short of the whole segment
    position = boundaries[boundary % len(boundaries)]
    crash(log)
    os.truncate(cut.log_path, position)
    reopened = Log.open(directory, CONFIG, clock=ManualClock(NOW), had_clean_shutdown=False)
    assert len(reopened.segments) == segment + 1
    headers = [header for _, _, header in reopened.batches(0)]
    assert [header.base_offset for header in headers] == list(range(0, len(headers) * 2, 2))
    assert reopened.log_end_offset == len(headers) * 2 < 80


def test_a_compacted_log_keeps_the_segments_after_a_hole(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=700, retention_ms=-1, cleanup_policy=("compact",),
                       message_timestamp_after_max_ms=2**62)
    directory = tmp_path / "t-0"
    log = Log.open(directory, config, clock=ManualClock(NOW))
    for index in range(40):
        log.append_as_leader(client_batch([b"value-%03d" % index] * 2, timestamp=NOW))
    segments = len(log.segments)
    first = log.segments[0].log_path
    crash(log)
    os.truncate(first, batch_boundaries(first)[1])
    reopened = Log.open(directory, config, clock=ManualClock(NOW), had_clean_shutdown=False)
    assert len(reopened.segments) == segments
    assert reopened.log_end_offset == 80
