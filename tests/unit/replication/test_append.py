"""The one append entry point: Kafka's per-partition checks in order, one bad partition never
fails another, and an append completes the delayed operations watching its partition."""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterator
from pathlib import Path

import pytest

from protocol.errors import (
    ErrorCode,
    InvalidProducerEpochError,
    KafkaError,
)
from protocol.records import Record, encode_batch
from replication.append import PartitionAppend, ReplicaAppender, verified
from replication.partition import Partition
from replication.purgatory import DelayedOperation, DelayedOperationPurgatory
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.producer_state import AppendOrigin, EndMarker

TOPICS = ["orders", "__consumer_offsets"]


class Fetching(DelayedOperation):
    def __init__(self, partition: Partition, min_offset: int) -> None:
        super().__init__(500)
        self.partition = partition
        self.min_offset = min_offset
        self.completions = 0

    def try_complete(self) -> bool:
        return self.partition.high_watermark >= self.min_offset and self.force_complete()

    def on_complete(self) -> None:
        self.completions += 1


class FetchingCommitted(Fetching):
    def try_complete(self) -> bool:
        return self.partition.last_stable_offset >= self.min_offset and self.force_complete()


@pytest.fixture
def hosted(tmp_path: Path) -> Iterator[dict[tuple[str, int], Partition]]:
    clock = ManualClock()
    partitions = {
        (topic, 0): Partition(Log.open(tmp_path / f"{topic}-0", LogConfig(segment_bytes=4096),
                                       clock=clock), topic_id=uuid.uuid4())
        for topic in TOPICS
    }
    yield partitions
    for partition in partitions.values():
        partition.log.close()


def appender_for(
    hosted: dict[tuple[str, int], Partition],
) -> tuple[ReplicaAppender, DelayedOperationPurgatory[DelayedOperation]]:
    purgatory = DelayedOperationPurgatory[DelayedOperation]("Fetch", clock=ManualClock())
    return ReplicaAppender(lambda topic, index: hosted.get((topic, index)),
                           fetch_purgatory=purgatory), purgatory


def batch(count: int = 2, size: int = 1) -> bytes:
    return encode_batch([Record(offset=i, timestamp=0, key=b"k", value=b"v" * size)
                         for i in range(count)])


def codes(outcomes: list[PartitionAppend]) -> list[ErrorCode]:
    return [ErrorCode(outcome.error.code) if outcome.error is not None else ErrorCode.NONE
            for outcome in outcomes]


def test_each_partition_is_checked_alone_in_kafkas_order(hosted: dict[tuple[str, int], Partition]) -> None:
    appender, _ = appender_for(hosted)
    outcomes = appender.append_records(
        [(("orders", 0), batch()), (("__consumer_offsets", 0), batch()), (("missing", 0), batch()),
         (("orders", 1), None), (("orders", 0), batch(3))],
        required_acks=-1, origin=AppendOrigin.CLIENT,
    )
    assert codes(outcomes) == [
        ErrorCode.NONE,
        ErrorCode.INVALID_TOPIC_EXCEPTION,  # for clients only
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # before the missing records
        ErrorCode.NONE,  # a partition named twice is appended twice
    ]
    first, second = outcomes[0].result, outcomes[4].result
    assert first is not None and (first.first_offset, outcomes[0].required_offset) == (0, 2)
    assert second is not None and (second.first_offset, outcomes[4].required_offset) == (2, 5)
    assert hosted[("orders", 0)].high_watermark == 5


def test_records_checks_and_the_coordinators_origin(hosted: dict[tuple[str, int], Partition]) -> None:
    appender, _ = appender_for(hosted)
    assert codes(appender.append_records([(("orders", 0), None)], required_acks=1,
                                         origin=AppendOrigin.CLIENT)) == [ErrorCode.INVALID_RECORD]
    assert codes(appender.append_records([(("orders", 0), batch(size=5000))], required_acks=1,
                                         origin=AppendOrigin.CLIENT)) == [ErrorCode.RECORD_LIST_TOO_LARGE]
    assert codes(appender.append_records([(("__consumer_offsets", 0), batch())], required_acks=-1,
                                         origin=AppendOrigin.COORDINATOR)) == [ErrorCode.NONE]
    assert codes(appender.append_records([(("orders", 0), batch())], required_acks=2,
                                         origin=AppendOrigin.CLIENT)) == [ErrorCode.INVALID_REQUIRED_ACKS]
    assert hosted[("orders", 0)].log_end_offset == 0


def test_verification_decides_or_refuses(hosted: dict[tuple[str, int], Partition]) -> None:
    appender, _ = appender_for(hosted)
    transactional = encode_batch([Record(offset=0, timestamp=0, key=b"k", value=b"v")],
                                 producer_id=9, producer_epoch=0, base_sequence=0,
                                 is_transactional=True)

    def refuse(partition: Partition, records: object) -> bool:
        raise InvalidProducerEpochError("fenced")

    refused = appender.append_records([(("orders", 0), transactional)], required_acks=-1,
                                      origin=AppendOrigin.CLIENT, verify=refuse)
    assert codes(refused) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    accepted = appender.append_records([(("orders", 0), transactional)], required_acks=-1,
                                       origin=AppendOrigin.CLIENT, verify=verified)
    assert codes(accepted) == [ErrorCode.NONE]
    assert hosted[("orders", 0)].last_stable_offset == 0  # the transaction is open


def test_an_append_completes_the_operations_watching_its_partition(
    hosted: dict[tuple[str, int], Partition],
) -> None:
    appender, purgatory = appender_for(hosted)
    orders, offsets = hosted[("orders", 0)], hosted[("__consumer_offsets", 0)]
    waiting: dict[Hashable, Fetching] = {"orders": Fetching(orders, 1), "offsets": Fetching(offsets, 1)}
    purgatory.try_complete_else_watch(waiting["orders"], [("orders", 0)])
    purgatory.try_complete_else_watch(waiting["offsets"], [("__consumer_offsets", 0)])
    appender.append_records([(("orders", 0), batch())], required_acks=1, origin=AppendOrigin.CLIENT)
    assert (waiting["orders"].completions, waiting["offsets"].completions) == (1, 0)
    transactional = encode_batch([Record(offset=0, timestamp=0, key=b"k", value=b"v")],
                                 producer_id=3, producer_epoch=0, is_transactional=True)
    appender.append_records([(("__consumer_offsets", 0), transactional)], required_acks=-1,
                            origin=AppendOrigin.COORDINATOR, verify=verified)
    assert waiting["offsets"].completions == 1
    read_committed = FetchingCommitted(offsets, 2)
    purgatory.try_complete_else_watch(read_committed, [("__consumer_offsets", 0)])
    appender.append_end_marker(("__consumer_offsets", 0), 3, 0, EndMarker(False, 0))
    assert read_committed.completions == 1  # the marker moved the last stable offset
    with pytest.raises(KafkaError) as missing:
        appender.append_end_marker(("gone", 0), 3, 0, EndMarker(False, 0))
    assert missing.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class Counting(DelayedOperation):
    """Never ready: counts how often the purgatory asks."""

    def __init__(self) -> None:
        super().__init__(500)
        self.tries = 0

    def try_complete(self) -> bool:
        self.tries += 1
        return False

    def on_complete(self) -> None:
        pass


def test_the_purgatory_is_checked_once_after_every_partition_is_appended(
    hosted: dict[tuple[str, int], Partition],
) -> None:
    appender, purgatory = appender_for(hosted)
    both = Counting()
    purgatory.try_complete_else_watch(both, [("orders", 0), ("__consumer_offsets", 0)])
    appender.append_records(
        [(("orders", 0), batch()), (("__consumer_offsets", 0), batch()), (("orders", 0), batch())],
        required_acks=1, origin=AppendOrigin.COORDINATOR)
    assert both.tries == 2  # once when watched, once for the whole request
    appender.append_records([(("missing", 0), batch())], required_acks=1,
                            origin=AppendOrigin.CLIENT)
    assert both.tries == 2  # nothing appended: nothing checked
