"""Requests for the differential tests (``test_differential.py``), built with Samsa's codec,
and the waits both brokers need: each helper takes a ``Pair`` and works on both brokers.

A ``build(side)`` function makes each broker's own request where they must differ (its
producer id, its topic id): ``each`` sends them and compares the answers. Topic and group
names carry a per-run suffix (``name``), so reruns against long-lived brokers start clean.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from protocol.messages.end_txn_request import EndTxnRequest
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.init_producer_id_request import InitProducerIdRequest
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from protocol.records import Record, encode_batch
from tests.integration.kafka.differential import (
    Allowed,
    Pair,
    Wire,
)

RUN = uuid.uuid4().hex[:6]


def name(stem: str) -> str:
    return f"diff-{stem}-{RUN}"


def span(versions: dict[int, tuple[int, int]], api_key: int, *modern: int,
         least: int = 0) -> list[int]:
    """The oldest and newest common versions (the oldest at least ``least``) and ``modern``."""
    oldest, newest = versions[api_key]
    return sorted({max(oldest, least), newest, *(v for v in modern if oldest <= v <= newest)})


def each(pair: Pair, version: int, build: Any, *, allow: list[Allowed] | None = None) -> tuple[Any, Any]:
    """``build(side)`` makes each broker's own request (its producer id, topic id...)."""
    request = build("kafka")
    kafka = pair.kafka.call(request, version)
    samsa = pair.samsa.call(build("samsa"), version)
    pair.assert_same(request.API_KEY, version, kafka, samsa, allow=allow, request=request)
    return kafka, samsa


def create_topic(pair: Pair, topic: str, partitions: int = 1, **configs: str) -> None:
    request = CreateTopicsRequest(timeout_ms=10000, topics=[CreatableTopic(
        name=topic, num_partitions=partitions, replication_factor=1,
        configs=[CreatableTopicConfig(name=k.replace("_", "."), value=v)
                 for k, v in configs.items()])])
    kafka, _ = pair.compare(request, 7)
    assert kafka.topics[0].error_code == 0
    await_leaders(pair, topic)


def await_leaders(pair: Pair, topic: str, timeout_s: float = 20) -> None:
    """Until both brokers lead every partition of ``topic``: Kafka's Metadata names the leader
    (from its metadata cache) a moment before its replica manager takes the lead, and answers
    NOT_LEADER_OR_FOLLOWER meanwhile, so ListOffsets (answered by the replica manager) too."""
    deadline = time.monotonic() + timeout_s
    described = MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                allow_auto_topic_creation=False)
    for wire in (pair.kafka, pair.samsa):
        while not _leads(wire, described, topic):
            assert time.monotonic() < deadline, f"{topic}: no leader in {timeout_s} s"
            time.sleep(0.02)


def _leads(wire: Wire, described: MetadataRequest, topic: str) -> bool:
    (answer,) = wire.call(described, 12).topics
    if answer.error_code != 0 or any(p.leader_id < 0 for p in answer.partitions):
        return False
    listed = wire.call(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsPartition(partition_index=p.partition_index,
                                                     timestamp=LATEST)
                                for p in answer.partitions])]), LIST_OFFSETS_MODERN)
    return all(p.error_code == 0 for p in listed.topics[0].partitions)


T0 = 1_700_000_000_000  # record timestamps are fixed, so both logs hold the same bytes


def batch(count: int = 2, *, first: int = 0, producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1, transactional: bool = False, value_size: int = 8) -> bytes:
    return encode_batch([Record(offset=i, timestamp=T0 + 1000 * (first + i), key=b"k%d" % i,
                                value=b"v" * value_size) for i in range(count)],
                        producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=base_sequence, is_transactional=transactional)


def produce(topic: str, records: bytes, *, partition: int = 0, acks: int = -1,
            transactional_id: str | None = None) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=10000, transactional_id=transactional_id,
                          topic_data=[TopicProduceData(name=topic, partition_data=[
                              PartitionProduceData(index=partition, records=records)])])


def corrupt(records: bytes) -> bytes:
    damaged = bytearray(records)
    damaged[-1] ^= 0xFF  # the last value byte: the CRC no longer matches
    return bytes(damaged)


def init_producer_id(pair: Pair, transactional_id: str | None = None) -> dict[str, tuple[int, int]]:
    """Each broker's (producer id, epoch) for a new producer, once its coordinator is ready."""
    request = InitProducerIdRequest(transactional_id=transactional_id,
                                    transaction_timeout_ms=60000)
    kafka, samsa = settled(pair, request, 4, lambda response: [response.error_code])
    pair.assert_same(request.API_KEY, 4, kafka, samsa)
    return {"kafka": (kafka.producer_id, kafka.producer_epoch),
            "samsa": (samsa.producer_id, samsa.producer_epoch)}


# Coordinators start on first use (their topic is created then): a client retries these.
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


CONCURRENT_TRANSACTIONS = 51


def settled(pair: Pair, request: Any, version: int, codes: Any) -> tuple[Any, Any]:
    """Each broker's answer once ``codes(answer)`` holds no retriable error; while a broker's
    coordinator is loading the brokers may say so differently (Kafka NOT_COORDINATOR, Samsa
    COORDINATOR_LOAD_IN_PROGRESS): both are retriable, and clients retry both alike."""
    return (settled_one(pair.kafka, request, version, RETRIABLE, codes),
            settled_one(pair.samsa, request, version, RETRIABLE, codes))


def settled_one(wire: Wire, request: Any, version: int, retriable: set[int],
                codes: Any = lambda answer: [answer.error_code], timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while set(codes(answer := wire.call(request, version))) & retriable:
        assert time.monotonic() < deadline, f"still {answer} after {timeout_s} s"
        time.sleep(0.05)
    return answer


def transactional_producer(pair: Pair, transactional_id: str) -> dict[str, tuple[int, int]]:
    """FindCoordinator for the transactional id (which starts the transaction coordinator, as
    a client's first step), then InitProducerId."""
    settled(pair, FindCoordinatorRequest(key_type=1, coordinator_keys=[transactional_id]), 4,
            lambda response: [c.error_code for c in response.coordinators])
    return init_producer_id(pair, transactional_id)


LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


LIST_OFFSETS_MODERN = 7


def compare_list_offsets(pair: Pair, *, version: int, topic: str, timestamps: tuple[int, ...],
                         partitions: tuple[int, ...] = (0,)) -> None:
    for timestamp in timestamps:
        pair.compare(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                                    for p in partitions])]), version)


def fetch(topic: str | dict[str, uuid.UUID], version: int, side: str = "kafka", *,
          offset: int = 0, partition: int = 0, partition_max_bytes: int = 1 << 20,
          max_bytes: int = 50 << 20, isolation_level: int = 0) -> FetchRequest:
    fetched = FetchTopic(partitions=[FetchPartition(partition=partition, fetch_offset=offset,
                                                    partition_max_bytes=partition_max_bytes)])
    if isinstance(topic, dict):
        fetched.topic_id = topic[side]
    else:
        fetched.topic = topic
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                        isolation_level=isolation_level, session_epoch=-1, topics=[fetched])


def topic_ids(pair: Pair, topic: str) -> dict[str, uuid.UUID]:
    request = MetadataRequest(topics=[MetadataRequestTopic(name=topic)])
    return {side: wire.call(request, 12).topics[0].topic_id
            for side, wire in (("kafka", pair.kafka), ("samsa", pair.samsa))}


ProducerIds = dict[str, tuple[int, int]]


def add_partitions(transactional_id: str, producers: ProducerIds, topic: str,
                   partitions: list[int], *, epoch_delta: int = 0,
                   producer_id: int | None = None) -> Any:
    """``build(side)`` of AddPartitionsToTxn v3 (a client's) for each broker's producer."""
    return lambda side: AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producers[side][0] if producer_id is None else producer_id,
        v3_and_below_producer_epoch=producers[side][1] + epoch_delta,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=partitions)])


def end_txn(transactional_id: str, producers: ProducerIds, *, committed: bool,
            epoch_delta: int = 0, producer_id: int | None = None) -> Any:
    return lambda side: EndTxnRequest(
        transactional_id=transactional_id, committed=committed,
        producer_id=producers[side][0] if producer_id is None else producer_id,
        producer_epoch=producers[side][1] + epoch_delta)


def await_stable(pair: Pair, topic: str, offset: int, timeout_s: float = 20) -> None:
    """Until both brokers' last stable offset of ``topic``-0 reaches ``offset`` (the markers
    of a completed transaction are written after EndTxn is answered)."""
    deadline = time.monotonic() + timeout_s
    for wire in (pair.kafka, pair.samsa):
        while stable_offset(wire, topic) < offset:
            assert time.monotonic() < deadline, f"{topic}: not stable at {offset}"
            time.sleep(0.02)


def stable_offset(wire: Wire, topic: str) -> int:
    fetched = wire.call(fetch(topic, 12, isolation_level=1), 12)
    return int(fetched.responses[0].partitions[0].last_stable_offset)


TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def describe(resource_type: int, resource_name: str, keys: list[str] | None = None,
             synonyms: bool = False) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(include_synonyms=synonyms, resources=[DescribeConfigsResource(
        resource_type=resource_type, resource_name=resource_name, configuration_keys=keys)])
