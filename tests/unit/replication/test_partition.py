"""Partition state: the high watermark follows appends on one node; waiters are handed back."""

from __future__ import annotations

import uuid
from pathlib import Path

from protocol.records import Record, encode_batch
from replication.partition import Partition
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log


def test_append_moves_the_high_watermark_and_returns_the_waiters(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=clock)
    partition = Partition(log, topic_id=uuid.uuid4(), leader_epoch=3)
    woken: list[str] = []
    partition.add_waiter(1, lambda: woken.append("one"))
    partition.add_waiter(2, lambda: woken.append("two"))
    partition.remove_waiter(2)
    records = [Record(offset=i, timestamp=clock.now_ms, key=None, value=b"v") for i in range(4)]
    result, waiters = partition.append_as_leader(encode_batch(records))
    assert (result.first_offset, partition.high_watermark) == (0, 4)
    for waiter in waiters:
        waiter()
    assert woken == ["one"]
    assert partition.take_waiters() == []
    piece = partition.read(0, 1000, min_one_message=True)
    assert piece is not None and piece.first_offset == 0
    assert partition.read(4, 1000, min_one_message=True) is None
    log.close()
