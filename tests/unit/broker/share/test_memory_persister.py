"""``MemorySharePersister``: the share coordinator's store behind the ``SharePersister`` calls,
its records applied at once — what is written is read back, and the coordinator's fences hold."""

from __future__ import annotations

import asyncio
from uuid import UUID

import pytest

from broker.share.memory_persister import MemorySharePersister
from broker.share.state_records import SharePartitionKey
from broker.share.values import ShareSnapshot, StateBatch
from protocol.errors import FencedLeaderEpochError, FencedStateEpochError

KEY = SharePartitionKey("group", UUID(int=7), 3)


def run(coroutine):  # type: ignore[no-untyped-def]
    return asyncio.run(coroutine)


def test_a_share_partition_never_initialized_reads_as_none() -> None:
    persister = MemorySharePersister()
    assert run(persister.read_state(KEY, leader_epoch=0)) is None
    assert run(persister.read_summary(KEY, leader_epoch=0)) is None


def test_initialize_then_writes_are_read_back_merged() -> None:
    persister = MemorySharePersister()
    run(persister.initialize_state(KEY, state_epoch=0, start_offset=10))
    assert run(persister.read_state(KEY, leader_epoch=1)) == ShareSnapshot(0, -1, 10, ())
    run(persister.write_state(KEY, state_epoch=0, leader_epoch=1, start_offset=10,
                              state_batches=(StateBatch(10, 14, 0, 1),)))
    run(persister.write_state(KEY, state_epoch=0, leader_epoch=1, start_offset=12,
                              state_batches=(StateBatch(13, 13, 2, 1),)))
    snapshot = run(persister.read_state(KEY, leader_epoch=1))
    assert snapshot == ShareSnapshot(0, 1, 12, (StateBatch(12, 12, 0, 1), StateBatch(13, 13, 2, 1),
                                                StateBatch(14, 14, 0, 1)))
    summary = run(persister.read_summary(KEY, leader_epoch=1))
    assert (summary.state_epoch, summary.leader_epoch, summary.start_offset) == (0, 1, 12)
    assert persister.write_count == 2


def test_an_older_leader_is_fenced_after_a_newer_one_read() -> None:
    persister = MemorySharePersister()
    run(persister.initialize_state(KEY, state_epoch=1, start_offset=0))
    run(persister.read_state(KEY, leader_epoch=5))
    with pytest.raises(FencedLeaderEpochError):
        run(persister.write_state(KEY, state_epoch=1, leader_epoch=4, start_offset=0, state_batches=()))
    with pytest.raises(FencedStateEpochError):
        run(persister.write_state(KEY, state_epoch=0, leader_epoch=5, start_offset=0, state_batches=()))


def test_delete_forgets_the_share_partition() -> None:
    persister = MemorySharePersister()
    run(persister.initialize_state(KEY, state_epoch=0, start_offset=0))
    run(persister.delete_state(KEY))
    assert run(persister.read_state(KEY, leader_epoch=0)) is None
    run(persister.delete_state(KEY))  # nothing left: no records, no error
