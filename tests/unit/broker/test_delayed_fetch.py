"""Long-poll Fetch as a DelayedFetch in the broker's purgatory: answered by the append that
brings min_bytes, by a deleted topic, or at max_wait_ms on the broker's clock; a read_committed
fetch is answered by the marker that moves the last stable offset."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import fetch, produce
from broker.broker import Broker
from broker.config import BrokerConfig
from protocol.errors import ErrorCode
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.fetch_response import FetchResponse
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.produce_response import ProduceResponse
from protocol.records import Record, encode_batch
from storage.clock import ManualClock
from storage.producer_state import EndMarker
from tests.unit.broker.helpers import create_topic, delete_topic
from tests.unit.broker.test_transaction_apis import context


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock) -> Iterator[Broker]:
    properties = {"log.dirs": str(tmp_path),  # transactional batches without a coordinator
                  "transaction.partition.verification.enable": "false"}
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=clock)
    broker.startup()
    create_topic(broker, "t", num_partitions=1)
    yield broker
    broker.shutdown()


def long_poll(broker: Broker, *, isolation_level: int = 0, max_wait_ms: int = 500) -> Awaitable[Any]:
    request = FetchRequest(max_wait_ms=max_wait_ms, min_bytes=1, isolation_level=isolation_level,
                           topics=[FetchTopic(topic="t", partitions=[
                               FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    result = fetch.handle(context(broker, 1, 12), request)
    assert isinstance(result, Awaitable), "nothing to read yet: the fetch waits"
    return result


def produce_one(broker: Broker, **batch: Any) -> None:
    records = encode_batch([Record(offset=0, timestamp=0, key=None, value=b"v")], **batch)
    response = produce.handle(context(broker, 0, 9), ProduceRequest(
        acks=-1, timeout_ms=1000, transactional_id=None,
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=records)])]))
    assert isinstance(response, ProduceResponse)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def partition_of(answer: Any) -> Any:
    response = answer.response if not isinstance(answer, FetchResponse) else answer
    return response.responses[0].partitions[0]


def test_an_append_answers_the_long_poll_at_once(broker: Broker) -> None:
    async def scenario() -> Any:
        waiting = asyncio.ensure_future(long_poll(broker))
        await asyncio.sleep(0)
        assert not waiting.done()
        produce_one(broker)
        return await asyncio.wait_for(waiting, 5)  # the broker's clock never moved

    answer = asyncio.run(scenario())
    assert (partition_of(answer).error_code, partition_of(answer).high_watermark) == (0, 1)
    assert broker.fetch_reaper.purgatory.delayed() == 0


def test_max_wait_is_counted_on_the_brokers_clock(broker: Broker, clock: ManualClock) -> None:
    async def scenario() -> Any:
        waiting = asyncio.ensure_future(long_poll(broker, max_wait_ms=200))
        clock.advance(199)
        assert broker.fetch_reaper.purgatory.expire_due() == 0
        clock.advance(1)
        return await asyncio.wait_for(waiting, 5)

    answer = asyncio.run(scenario())
    assert (partition_of(answer).error_code, partition_of(answer).high_watermark) == (0, 0)


def test_a_deleted_topic_answers_its_long_polls(broker: Broker) -> None:
    async def scenario() -> Any:
        waiting = asyncio.ensure_future(long_poll(broker))
        await asyncio.sleep(0)
        delete_topic(broker, "t")
        return await asyncio.wait_for(waiting, 5)

    assert partition_of(asyncio.run(scenario())).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_read_committed_waits_for_the_marker(broker: Broker) -> None:
    async def scenario() -> Any:
        waiting = asyncio.ensure_future(long_poll(broker, isolation_level=1))
        await asyncio.sleep(0)
        produce_one(broker, producer_id=4, producer_epoch=0, base_sequence=0, is_transactional=True)
        await asyncio.sleep(0)
        assert not waiting.done()  # the high watermark moved, the last stable offset did not
        broker.transactions.markers.write_marker(("t", 0), 4, 0, EndMarker(False, 0))
        return await asyncio.wait_for(waiting, 5)

    answer = asyncio.run(scenario())
    assert (partition_of(answer).error_code, partition_of(answer).last_stable_offset) == (0, 2)
