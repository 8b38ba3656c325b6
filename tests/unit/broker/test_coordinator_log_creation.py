"""A coordinator elected for an internal partition whose log is still being created off the
event loop (the replica manager's disk work, issue 18) answers NOT_COORDINATOR for that window,
as Kafka's append to a partition it does not host yet (NOT_LEADER_OR_FOLLOWER) does, and
never UNKNOWN_SERVER_ERROR. Found by kafka-python's test_describe_group_exists against a
three-node cluster: "group ... generation 1 not stored: __consumer_offsets-12 is not hosted
here", then SyncGroup answered UNKNOWN_SERVER_ERROR."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker.group.offsets import OFFSETS_TOPIC, OffsetsConfig, OffsetStore, coordinator_error_code
from broker.transaction.state_log import TRANSACTION_STATE_TOPIC, TransactionStateLog
from protocol.errors import ErrorCode, KafkaError
from replication.append import ReplicaAppender
from replication.purgatory import DelayedOperationPurgatory
from storage.clock import ManualClock
from tests.unit.replication.controller.node import Node


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    started = Node.start(tmp_path, ManualClock(1000))
    yield started
    started.shutdown()


def appender(node: Node) -> ReplicaAppender:
    return ReplicaAppender(node.replica_manager.partition, fetch_purgatory=DelayedOperationPurgatory(
        "fetch", clock=ManualClock(1000)))


def test_an_internal_partition_being_created_answers_not_coordinator_then_is_served(
        node: Node) -> None:
    clock = ManualClock(1000)
    offsets = OffsetStore(node.replica_manager, node.controller, config=OffsetsConfig(
        num_partitions=3), clock=clock, appender=appender(node))
    transactions = TransactionStateLog(node.replica_manager, node.controller, num_partitions=3,
                                       segment_bytes=1 << 20, clock=clock, appender=appender(node))
    manager = node.replica_manager

    async def scenario() -> None:
        with ThreadPoolExecutor(1, thread_name_prefix="test-storage") as executor:
            manager.use_executor(executor, asyncio.get_running_loop())
            try:
                offsets.ensure_topic()
                transactions.ensure_topic()
                assert (OFFSETS_TOPIC, 0) in manager.creating
                assert (TRANSACTION_STATE_TOPIC, 0) in manager.creating
                for store in (offsets, transactions):
                    with pytest.raises(KafkaError) as raised:
                        store._partition(0)
                    assert coordinator_error_code(raised.value) == ErrorCode.NOT_COORDINATOR
                settled = manager.settled([OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC])
                assert settled is not None
                await settled
                assert offsets._partition(0).topic == OFFSETS_TOPIC
                assert transactions._partition(0).topic == TRANSACTION_STATE_TOPIC
            finally:
                await manager.drain()
                manager.disk_work = None

    asyncio.run(scenario())
