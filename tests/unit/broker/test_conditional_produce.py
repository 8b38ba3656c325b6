"""The SamsaConditionalProduce handler on a real single-node broker (logs in a temp dir, a manual
clock, no sockets): each condition, OFFSET_CONFLICT with the actual offset and nothing written,
one partition's conflict beside another's success, idempotent retries, acks, and Produce's
per-partition errors."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import RequestContext, conditional_produce
from broker.broker import Broker
from broker.config import BrokerConfig
from protocol.errors import ErrorCode
from protocol.messages.request_header import RequestHeader
from protocol.messages.samsa_conditional_produce_request import (
    ConditionalProducePartitionData,
    ConditionalProduceTopicData,
    SamsaConditionalProduceRequest,
)
from protocol.records import Record, decode_batch, encode_batch
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic

NOW = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker.create(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}),
                           clock=ManualClock(NOW))
    broker.startup()
    create_topic(broker, "events", num_partitions=2)
    yield broker
    broker.shutdown()


def batch(value: bytes, key: bytes | None = b"k", *, producer_id: int = -1, sequence: int = -1) -> bytes:
    return encode_batch([Record(0, NOW, key, value)], producer_id=producer_id,
                        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence)


def partition(index: int = 0, value: bytes = b"v", **condition: Any) -> ConditionalProducePartitionData:
    records = condition.pop("records", None) or batch(value, condition.pop("record_key", b"k"))
    return ConditionalProducePartitionData(index=index, records=records, **condition)


def send(broker: Broker, *partitions: ConditionalProducePartitionData, acks: int = -1,
         topic: str = "events") -> Any:
    header = RequestHeader(request_api_key=10001, request_api_version=0, client_id="test")
    context = RequestContext(header=header, api_version=0, broker=broker, connection_id="test")
    response = conditional_produce.handle(context, SamsaConditionalProduceRequest(
        acks=acks, timeout_ms=1000,
        topic_data=[ConditionalProduceTopicData(name=topic, partition_data=list(partitions))]))
    if inspect.isawaitable(response):  # a key condition first loads the key indexes off the loop
        response = asyncio.run(_awaited(response))
    answers = response.responses[0].partition_responses
    return answers[0] if len(answers) == 1 else answers


async def _awaited(response: Awaitable[Any]) -> Any:
    return await response


def values(broker: Broker, index: int = 0) -> list[bytes | None]:
    log = broker.replica_manager.partition("events", index).log  # type: ignore[union-attr]
    return [record.value for segment, position, header in log.batches()
            for record in decode_batch(segment.read_batch_bytes(position, header)).records]


def test_the_expected_end_offset_appends_and_a_stale_one_conflicts(broker: Broker) -> None:
    assert (send(broker, partition(value=b"a", expected_end_offset=0)).base_offset) == 0
    assert (send(broker, partition(value=b"b", expected_end_offset=1)).base_offset) == 1
    answer = send(broker, partition(value=b"lost", expected_end_offset=1))
    assert (answer.error_code, answer.current_offset, answer.base_offset) == (
        ErrorCode.OFFSET_CONFLICT, 2, -1)
    assert "expected end offset 1, the log end offset is 2" in answer.error_message
    assert values(broker) == [b"a", b"b"]  # nothing written on a conflict


def test_without_conditions_it_is_a_produce(broker: Broker) -> None:
    send(broker, partition(value=b"a"))
    assert send(broker, partition(value=b"b")).base_offset == 1


def test_the_key_condition_and_minus_one_for_no_record_with_the_key(broker: Broker) -> None:
    first = send(broker, partition(value=b"1", condition_key=b"k", expected_key_offset=-1))
    assert (first.error_code, first.base_offset) == (0, 0)
    send(broker, partition(value=b"other", record_key=b"x"))
    again = send(broker, partition(value=b"2", condition_key=b"k", expected_key_offset=-1))
    assert (again.error_code, again.current_offset) == (ErrorCode.OFFSET_CONFLICT, 0)
    missing = send(broker, partition(value=b"3", condition_key=b"y", expected_key_offset=1))
    assert (missing.error_code, missing.current_offset) == (ErrorCode.OFFSET_CONFLICT, -1)
    ok = send(broker, partition(value=b"2", condition_key=b"k", expected_key_offset=0))
    assert (ok.error_code, ok.base_offset) == (0, 2)
    assert values(broker) == [b"1", b"other", b"2"]


def test_both_conditions_must_hold(broker: Broker) -> None:
    send(broker, partition(value=b"1"))
    stale_key = send(broker, partition(expected_end_offset=1, condition_key=b"k", expected_key_offset=-1))
    assert (stale_key.error_code, stale_key.current_offset) == (ErrorCode.OFFSET_CONFLICT, 0)
    both = send(broker, partition(value=b"2", expected_end_offset=1, condition_key=b"k",
                                  expected_key_offset=0))
    assert (both.error_code, both.base_offset) == (0, 1)


def test_one_partitions_conflict_does_not_stop_another(broker: Broker) -> None:
    send(broker, partition(0, b"a"))
    conflict, appended = send(broker, partition(0, b"lost", expected_end_offset=0),
                              partition(1, b"b", expected_end_offset=0))
    assert (conflict.index, conflict.error_code) == (0, ErrorCode.OFFSET_CONFLICT)
    assert (appended.index, appended.error_code, appended.base_offset) == (1, 0, 0)
    assert values(broker, 0) == [b"a"] and values(broker, 1) == [b"b"]


def test_a_retried_idempotent_append_is_answered_with_its_offset(broker: Broker) -> None:
    records = batch(b"once", producer_id=1000, sequence=0)  # as sent twice by a client
    first = send(broker, partition(records=records, expected_end_offset=0))
    retried = send(broker, partition(records=records, expected_end_offset=0))
    assert (first.error_code, first.base_offset) == (retried.error_code, retried.base_offset) == (0, 0)
    assert values(broker) == [b"once"]


def test_acks_zero_is_refused_acks_one_appends(broker: Broker) -> None:
    refused = send(broker, partition(expected_end_offset=0), acks=0)
    assert refused.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert send(broker, partition(expected_end_offset=0), acks=1).base_offset == 0


def test_produces_per_partition_errors(broker: Broker) -> None:
    unknown = send(broker, partition(5, expected_end_offset=0))
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    no_records = send(broker, ConditionalProducePartitionData(index=0, expected_end_offset=0))
    assert no_records.error_code == ErrorCode.INVALID_RECORD


def test_a_key_condition_loads_the_key_indexes_off_the_loop_first(broker: Broker) -> None:
    log = broker.replica_manager.partition("events", 0).log  # type: ignore[union-attr]
    assert not log.key_reads_prepared()
    header = RequestHeader(request_api_key=10001, request_api_version=0, client_id="test")
    context = RequestContext(header=header, api_version=0, broker=broker, connection_id="test")
    request = SamsaConditionalProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ConditionalProduceTopicData(name="events", partition_data=[
            partition(value=b"a", condition_key=b"k", expected_key_offset=-1)])])
    first = conditional_produce.handle(context, request)
    assert inspect.isawaitable(first)  # prepared on a worker thread, then appended
    assert asyncio.run(_awaited(first)).responses[0].partition_responses[0].base_offset == 0
    assert log.key_reads_prepared()
    second = conditional_produce.handle(context, SamsaConditionalProduceRequest(
        acks=1, timeout_ms=1000, topic_data=[ConditionalProduceTopicData(
            name="events", partition_data=[
                partition(value=b"b", condition_key=b"k", expected_key_offset=0)])]))
    assert not inspect.isawaitable(second)  # answered at once: nothing left to load
    assert second.responses[0].partition_responses[0].base_offset == 1  # type: ignore[union-attr]
