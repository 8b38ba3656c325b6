"""Truncating at or past the log end still drops epochs that start there (Kafka's
``UnifiedLog.truncateTo``): found by the replication simulator (seed 36), where a former leader
kept an epoch it assigned at its log end but never wrote, sent it as its last fetched epoch, and
was answered the same diverging epoch for ever."""

from __future__ import annotations

from pathlib import Path

from protocol.records import Record, encode_batch
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log


def test_truncate_at_the_log_end_drops_an_empty_trailing_epoch(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=ManualClock())
    try:
        log.append_as_leader(encode_batch([Record(0, 0, None, b"v")]), leader_epoch=1)
        log.assign_epoch_start_offset(2, log.log_end_offset)  # became leader, wrote nothing
        assert log.leader_epoch_cache.latest_epoch == 2
        assert not log.truncate_to(log.log_end_offset)  # nothing to cut...
        assert log.leader_epoch_cache.latest_epoch == 1  # ...but epoch 2 is gone
    finally:
        log.close()
