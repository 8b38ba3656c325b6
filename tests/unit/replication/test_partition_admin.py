"""Partition: DeleteRecords and OffsetForLeaderEpoch answers, as Kafka's ``Partition``."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from protocol.errors import (
    FencedLeaderEpochError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    UnknownLeaderEpochError,
)
from protocol.records import Record, encode_batch
from replication.partition import Partition
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log


def _partition(tmp_path: Path, count: int = 10, *, config: LogConfig | None = None,
               epoch: int = 0) -> Partition:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", config or LogConfig(), clock=clock)
    partition = Partition(log, topic_id=uuid.uuid4(), leader_epoch=epoch)
    records = [Record(offset=i, timestamp=clock.now_ms, key=b"k", value=b"v") for i in range(count)]
    partition.append_as_leader(encode_batch(records))
    return partition


def test_delete_records_raises_the_log_start_offset(tmp_path: Path) -> None:
    partition = _partition(tmp_path)
    assert partition.delete_records(4) == 4
    assert partition.delete_records(2) == 4  # never backwards
    assert partition.delete_records(-1) == 10  # -1: the high watermark
    partition.log.close()


@pytest.mark.parametrize("offset", [11, -2])
def test_delete_records_out_of_range(tmp_path: Path, offset: int) -> None:
    partition = _partition(tmp_path)
    with pytest.raises(OffsetOutOfRangeError):
        partition.delete_records(offset)
    partition.log.close()


def test_delete_records_refused_on_a_compacted_topic(tmp_path: Path) -> None:
    partition = _partition(tmp_path, config=LogConfig(cleanup_policy=("compact",)))
    with pytest.raises(PolicyViolationError):
        partition.delete_records(1)
    partition.log.close()


@pytest.mark.parametrize(
    ("current", "requested", "expected"),
    [
        (-1, 2, (2, 10)),  # the current epoch: the log end offset
        (2, 2, (2, 10)),
        (-1, 3, (-1, -1)),  # above the current epoch: undefined
        (-1, -1, (-1, -1)),
        (-1, 1, (1, 0)),  # below every known epoch: the first known epoch's start
    ],
)
def test_last_offset_for_leader_epoch(tmp_path: Path, current, requested, expected) -> None:  # type: ignore[no-untyped-def]
    partition = _partition(tmp_path, epoch=2)
    assert partition.last_offset_for_leader_epoch(current, requested) == expected
    partition.log.close()


def test_current_leader_epoch_is_checked(tmp_path: Path) -> None:
    partition = _partition(tmp_path, epoch=2)
    with pytest.raises(FencedLeaderEpochError):
        partition.last_offset_for_leader_epoch(1, 2)
    with pytest.raises(UnknownLeaderEpochError):
        partition.last_offset_for_leader_epoch(3, 2)
    partition.log.close()
