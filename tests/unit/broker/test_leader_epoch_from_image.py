"""A PartitionChangeRecord committed through the controller reaches the live partition: requests
that carry the old leader epoch are fenced, the new one is served."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import RequestContext, offset_for_leader_epoch
from broker.broker import Broker
from broker.config import BrokerConfig
from protocol.errors import ErrorCode
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic


def start(log_dir: Path, clock: ManualClock) -> Broker:
    started = Broker.create(BrokerConfig.from_properties({"log.dirs": str(log_dir)}), clock=clock)
    started.startup()
    return started


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    started = start(tmp_path, ManualClock(1000))
    yield started
    started.shutdown()


def end_offset_for(broker: Broker, current_leader_epoch: int, leader_epoch: int) -> tuple[int, int]:
    """OffsetForLeaderEpoch v4 for t-0: (error code, leader epoch)."""
    header = RequestHeader(request_api_key=23, request_api_version=4, client_id="c")
    context = RequestContext(header=header, api_version=4, broker=broker, connection_id="c",
                             principal="User:ANONYMOUS", client_host="127.0.0.1")
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderTopic(
        topic="t", partitions=[OffsetForLeaderPartition(
            partition=0, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])
    result = offset_for_leader_epoch.handle(context, request).topics[0].partitions[0]
    return result.error_code, result.leader_epoch


def test_the_old_leader_epoch_is_fenced_once_a_partition_change_is_committed(broker: Broker) -> None:
    plan = create_topic(broker, "t")
    assert end_offset_for(broker, 0, 0) == (ErrorCode.NONE, 0)
    change = PartitionChangeRecord(partition_id=0, topic_id=plan.topic_id, leader=broker.node_id)
    assert broker.controller.propose([change]).exception() is None
    assert end_offset_for(broker, 0, 0) == (ErrorCode.FENCED_LEADER_EPOCH, -1)
    assert end_offset_for(broker, 1, 1) == (ErrorCode.NONE, 1)
    assert end_offset_for(broker, 2, 1) == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1)


def test_the_new_leader_epoch_survives_a_restart(tmp_path: Path) -> None:
    broker = start(tmp_path, ManualClock(1000))
    plan = create_topic(broker, "t")
    change = PartitionChangeRecord(partition_id=0, topic_id=plan.topic_id, leader=broker.node_id)
    broker.controller.propose([change]).result()
    broker.shutdown()
    restarted = start(tmp_path, ManualClock(2000))
    assert end_offset_for(restarted, 0, 0) == (ErrorCode.FENCED_LEADER_EPOCH, -1)
    assert end_offset_for(restarted, 1, 1) == (ErrorCode.NONE, 1)
    restarted.shutdown()
