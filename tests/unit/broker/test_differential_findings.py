"""What the differential test against Apache Kafka 4.3.1 found Samsa answering differently
(tests/integration/kafka/test_differential.py), each checked here on a broker over a temp dir:

- ListOffsets answers Kafka's leader epoch for each kind of lookup: the current epoch for
  latest, the epoch that wrote the record found by timestamp or max timestamp, the first cached
  epoch for earliest, and -1 when nothing is found. Samsa answered the current leader epoch
  for all of them.
- A Fetch partition that fails (OFFSET_OUT_OF_RANGE...) carries high watermark, last stable
  offset and log start offset -1, as Kafka's; Samsa filled in the partition's. One refused
  before any read (unknown partition) carries an empty aborted-transactions list, one whose
  read failed none (null), as Kafka's.
- A Produce partition refused for a sequence or epoch error carries the partition's log
  start offset, as Kafka's (those it expects of an append, a corrupt batch..., -1); Samsa
  answered -1 for all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import RequestContext, fetch, list_offsets, produce
from broker.broker import Broker
from broker.config import BrokerConfig
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.fetch_response import FetchResponse
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_offsets_response import ListOffsetsResponse
from protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from protocol.messages.produce_response import ProduceResponse
from protocol.messages.request_header import RequestHeader
from protocol.records import Record, encode_batch
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic

LATEST, EARLIEST, MAX_TIMESTAMP, LATEST_TIERED = -1, -2, -3, -5
T0 = 1_700_000_000_000
NEW_EPOCH = 3


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """Topic ``t``: partition 0 holds 3 records written at epoch 0, then its leader epoch
    moves to NEW_EPOCH; partition 1 is empty."""
    broker = Broker.create(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}),
                           clock=ManualClock())
    broker.startup()
    create_topic(broker, "t", num_partitions=2)
    partition = broker.replica_manager.partition("t", 0)
    assert partition is not None and partition.leader_epoch == 0
    partition.append_as_leader(encode_batch(
        [Record(offset=i, timestamp=T0 + i, key=None, value=b"v") for i in range(3)]))
    partition.make_leader(leader_id=partition.leader_id, leader_epoch=NEW_EPOCH,
                          replicas=partition.replicas, isr=partition.isr)
    yield broker
    broker.shutdown()


def context(broker: Broker, api_key: int, version: int) -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1)
    return RequestContext(header=header, api_version=version, broker=broker, connection_id="test")


def lookup(broker: Broker, partition: int, timestamp: int, version: int = 7) -> tuple[int, int]:
    """(offset, leader epoch) as a client at ``version`` decodes them."""
    request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name="t", partitions=[
        ListOffsetsPartition(partition_index=partition, timestamp=timestamp)])])
    response = list_offsets.handle(context(broker, 2, version), request)
    (answer,) = ListOffsetsResponse.decode(response.encode(version), version).topics[0].partitions
    assert answer.error_code == 0
    return answer.offset, answer.leader_epoch


@pytest.mark.parametrize(("timestamp", "expected"), [
    (LATEST, (3, NEW_EPOCH)),  # the partition's current epoch
    (EARLIEST, (0, 0)),  # the first cached epoch
    (T0 + 1, (1, 0)),  # the epoch that wrote the record found
    (MAX_TIMESTAMP, (2, 0)),
    (T0 + 99, (-1, -1)),  # nothing found
    (LATEST_TIERED, (-1, -1)),
])
def test_the_leader_epoch_is_the_one_of_the_offset_answered(
        broker: Broker, timestamp: int, expected: tuple[int, int]) -> None:
    assert lookup(broker, 0, timestamp) == expected


@pytest.mark.parametrize(("timestamp", "expected"), [
    (LATEST, (0, 0)), (EARLIEST, (0, 0)), (T0, (-1, -1)),
    (MAX_TIMESTAMP, (-1, -1)),
])
def test_an_empty_partition(broker: Broker, timestamp: int, expected: tuple[int, int]) -> None:
    assert lookup(broker, 1, timestamp) == expected


def test_versions_before_4_carry_no_epoch(broker: Broker) -> None:
    assert lookup(broker, 0, T0 + 1, version=3) == (1, -1)


@pytest.mark.parametrize(("partition", "fetch_offset", "expected"), [
    (0, 3, (0, 3, 3, 0, [])),  # the log end: nothing to read, the offsets known
    (0, 4, (1, -1, -1, -1, None)),  # OFFSET_OUT_OF_RANGE: the read failed
    (0, -1, (1, -1, -1, -1, None)),
    (7, 0, (3, -1, -1, -1, [])),  # UNKNOWN_TOPIC_OR_PARTITION: refused before any read
])
def test_a_failed_fetch_partition_carries_no_offsets(
        broker: Broker, partition: int, fetch_offset: int, expected: tuple[Any, ...]) -> None:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                           isolation_level=1, session_epoch=-1, topics=[FetchTopic(
                               topic="t", partitions=[FetchPartition(
                                   partition=partition, fetch_offset=fetch_offset,
                                   partition_max_bytes=1 << 20)])])
    response = fetch.handle(context(broker, 1, 12), request)
    assert isinstance(response, FetchResponse)
    (answer,) = FetchResponse.decode(response.encode(12), 12).responses[0].partitions
    assert (answer.error_code, answer.high_watermark, answer.last_stable_offset,
            answer.log_start_offset, answer.aborted_transactions) == expected


def produce_to(broker: Broker, records: bytes) -> tuple[int, int, int]:
    """(error code, base offset, log start offset) of one batch produced to ``t``-1."""
    request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[TopicProduceData(
        name="t", partition_data=[PartitionProduceData(index=1, records=records)])])
    response = produce.handle(context(broker, 0, 9), request)
    assert isinstance(response, ProduceResponse)
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset, answer.log_start_offset


def test_a_refused_produce_carries_the_log_start_offset_as_kafka_does(broker: Broker) -> None:
    def idempotent(sequence: int, epoch: int = 0) -> bytes:
        return encode_batch([Record(offset=0, timestamp=T0, key=None, value=b"v")],
                            producer_id=1000, producer_epoch=epoch, base_sequence=sequence)

    assert produce_to(broker, idempotent(0)) == (0, 0, 0)
    assert produce_to(broker, idempotent(5)) == (45, -1, 0)  # OUT_OF_ORDER_SEQUENCE_NUMBER
    corrupt = bytearray(idempotent(1))
    corrupt[-1] ^= 0xFF
    assert produce_to(broker, bytes(corrupt)) == (2, -1, -1)  # CORRUPT_MESSAGE
