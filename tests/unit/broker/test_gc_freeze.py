"""``LongLivedFreezer``: when it freezes, and the assumption it rests on: a deleted partition's
objects are freed by reference counting, with the cyclic collector off."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.gc_freeze import LongLivedFreezer
from protocol.records import Record, encode_batch
from replication.controller.interface import NewTopic, TopicToDelete
from storage.clock import ManualClock
from tests.unit.replication.controller.node import Node


@pytest.fixture
def collector_restored() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()


def test_it_freezes_at_start_and_again_once_enough_partitions_were_added(
        collector_restored: None) -> None:
    hosted = [1000]
    freezer = LongLivedFreezer(lambda: hosted[0], after_new_partitions=100)
    freezer.freeze()
    assert freezer.freezes == 1 and gc.get_freeze_count() > 0
    hosted[0] += 99
    freezer.tick()
    assert freezer.freezes == 1
    hosted[0] += 1
    freezer.tick()
    assert freezer.freezes == 2
    hosted[0] -= 500  # deletions: growth counts from the smaller number
    freezer.tick()
    hosted[0] += 100
    freezer.tick()
    assert freezer.freezes == 3


def test_a_deleted_partition_is_freed_without_the_cyclic_collector(
        tmp_path: Path, collector_restored: None) -> None:
    node = Node.start(tmp_path, ManualClock(1000))
    try:
        node.controller.create_topics([NewTopic("t", num_partitions=3)])
        partition = node.replica_manager.partitions[("t", 1)]
        partition.log.append_as_leader(_batch(), leader_epoch=0)
        partition.log.read(0, 1 << 20)
        hosted: list[weakref.ref[object]] = [
            weakref.ref(partition), weakref.ref(partition.log),
            weakref.ref(partition.log.active_segment)]
        del partition
        gc.collect()
        gc.disable()
        node.controller.delete_topics([TopicToDelete(name="t")])
        assert [ref() for ref in hosted] == [None, None, None]
    finally:
        node.shutdown()


def _batch() -> bytes:
    return encode_batch([Record(offset=0, timestamp=1000, key=b"k", value=b"v")])
