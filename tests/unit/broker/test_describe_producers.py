"""DescribeProducers called directly on a real broker (logs in a temp dir, a manual clock, no
sockets): an idempotent and a transactional producer as the partition's producer state holds
them, the open transaction's first offset, and the errors per topic and partition."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import describe_producers, init_producer_id
from broker.broker import Broker
from protocol.errors import ErrorCode
from protocol.messages.describe_producers_request import DescribeProducersRequest, TopicRequest
from protocol.messages.describe_producers_response import ProducerState
from protocol.messages.init_producer_id_request import InitProducerIdRequest
from protocol.messages.init_producer_id_response import InitProducerIdResponse
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic
from tests.unit.broker.test_transaction_apis import (
    NOW,
    add_partitions,
    context,
    end,
    make_broker,
    send,
)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = make_broker(tmp_path, ManualClock(NOW))
    create_topic(broker, "t", num_partitions=2)
    yield broker
    broker.shutdown()


Described = dict[tuple[str, int], "list[ProducerState] | ErrorCode"]


def describe(broker: Broker, *topics: tuple[str, list[int]]) -> Described:
    response = describe_producers.handle(context(broker, 61, 0), DescribeProducersRequest(
        topics=[TopicRequest(name=name, partition_indexes=indexes) for name, indexes in topics]))
    return {(topic.name, p.partition_index): p.active_producers if p.error_code == 0
            else ErrorCode(p.error_code)
            for topic in response.topics for p in topic.partitions}


def test_no_producer_yet_is_an_empty_list(broker: Broker) -> None:
    assert describe(broker, ("t", [0, 1])) == {("t", 0): [], ("t", 1): []}


def test_a_transactional_producer_with_an_open_then_a_committed_transaction(broker: Broker) -> None:
    response = init_producer_id.handle(context(broker, 22, 4), InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60_000))
    assert isinstance(response, InitProducerIdResponse)
    pid, epoch = response.producer_id, response.producer_epoch
    add_partitions(broker, pid, epoch, [0])
    assert send(broker, pid, epoch, 0, 0, [b"a", b"b", b"c"]) == 0
    open_state = ProducerState(producer_id=pid, producer_epoch=epoch, last_sequence=2,
                               last_timestamp=NOW, coordinator_epoch=-1,
                               current_txn_start_offset=0)
    assert describe(broker, ("t", [0, 1])) == {("t", 0): [open_state], ("t", 1): []}
    assert end(broker, pid, epoch, commit=True) == 0
    described = describe(broker, ("t", [0]))[("t", 0)]
    assert isinstance(described, list)
    [committed] = described
    assert committed.current_txn_start_offset == -1
    assert (committed.producer_id, committed.last_sequence) == (pid, 2)
    assert committed.coordinator_epoch >= 0  # the marker's


def test_errors_per_topic_and_partition(broker: Broker) -> None:
    assert describe(broker, ("t", [7]), ("missing", [0]), ("bad/name", [0])) == {
        ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("bad/name", 0): ErrorCode.INVALID_TOPIC_EXCEPTION,
    }
