"""Partition state: the high watermark follows appends on one node; reads stop at the fetch
isolation's offset."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from protocol.records import Record, encode_batch, iter_batches
from replication.partition import FetchIsolation, Partition
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.segment import FetchSlice


def test_append_moves_the_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=clock)
    partition = Partition(log, topic_id=uuid.uuid4(), leader_epoch=3)
    records = [Record(offset=i, timestamp=clock.now_ms, key=None, value=b"v") for i in range(4)]
    result = partition.append_as_leader(encode_batch(records))
    assert (result.first_offset, partition.high_watermark) == (0, 4)
    assert not partition.maybe_advance_high_watermark()  # already at the log end offset
    piece = partition.read(0, 1000, min_one_message=True)
    assert piece is not None and piece.first_offset == 0
    assert partition.read(4, 1000, min_one_message=True) is None
    log.close()


@pytest.mark.parametrize(
    ("replica_id", "read_committed", "isolation"),
    [
        (-1, False, FetchIsolation.HIGH_WATERMARK),
        (-1, True, FetchIsolation.TXN_COMMITTED),
        (0, False, FetchIsolation.LOG_END),
        (2, True, FetchIsolation.LOG_END),  # a follower reads to the log end, whatever it asks
    ],
)
def test_fetch_isolation_of_the_request(
    replica_id: int, read_committed: bool, isolation: FetchIsolation
) -> None:
    assert FetchIsolation.of(replica_id=replica_id, read_committed=read_committed) is isolation


def test_each_isolation_reads_up_to_its_offset(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=clock)
    partition = Partition(log, topic_id=uuid.uuid4())
    plain = [Record(offset=i, timestamp=clock.now_ms, key=None, value=b"v") for i in range(2)]
    partition.append_as_leader(encode_batch(plain))
    transactional = encode_batch(plain, producer_id=7, producer_epoch=0, base_sequence=0,
                                 is_transactional=True)
    partition.append_as_leader(transactional, transaction_verified=True)
    partition.append_as_leader(encode_batch(plain))
    partition.high_watermark = 5  # as replication holds it back until followers catch up
    assert partition.fetch_limit(FetchIsolation.LOG_END) is None
    assert partition.fetch_limit(FetchIsolation.HIGH_WATERMARK) == 5
    assert partition.fetch_limit(FetchIsolation.TXN_COMMITTED) == 2  # the open transaction's start
    last_offsets = {
        isolation: _last_offset(partition.read(0, 1 << 20, min_one_message=True, isolation=isolation))
        for isolation in FetchIsolation
    }
    assert last_offsets == {FetchIsolation.LOG_END: 5, FetchIsolation.HIGH_WATERMARK: 3,
                            FetchIsolation.TXN_COMMITTED: 1}
    log.close()


def _last_offset(piece: FetchSlice | None) -> int:
    assert piece is not None
    return [batch.last_offset for batch in iter_batches(piece.read())][-1]
