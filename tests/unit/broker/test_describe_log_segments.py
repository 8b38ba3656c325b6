"""The SamsaDescribeLogSegments handler against real logs and a fake broker (no sockets): the
layout per partition, and each per-partition error."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from broker.apis import RequestContext, describe_log_segments
from protocol.errors import ErrorCode, UnsupportedVersionError
from protocol.messages.request_header import RequestHeader
from protocol.messages.samsa_describe_log_segments_request import (
    DescribeLogSegmentsTopic,
    SamsaDescribeLogSegmentsRequest,
)
from protocol.records import Record, encode_batch
from replication.partition import Partition
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import crash

NODE_ID = 1


@dataclass
class FakeReplicaManager:
    partitions: dict[tuple[str, int], Partition] = field(default_factory=dict)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))


@dataclass
class FakeBroker:
    replica_manager: FakeReplicaManager
    node_id: int = NODE_ID
    authorizer: None = None  # no authorization (broker.auth)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[FakeBroker]:
    clock = ManualClock()
    manager = FakeReplicaManager()
    for topic, index, batches in (("a", 0, 3), ("a", 1, 0), ("b", 0, 1)):
        log = Log.open(tmp_path / f"{topic}-{index}", LogConfig(), clock=clock)
        for i in range(batches):
            log.append_as_leader(encode_batch([Record(0, 1000 + i, None, b"v")]))
            log.roll()
        partition = Partition(log, topic_id=uuid.uuid4(), node_id=NODE_ID)
        partition.maybe_advance_high_watermark()
        manager.partitions[(topic, index)] = partition
    yield FakeBroker(manager)
    for partition in manager.partitions.values():
        crash(partition.log)  # releases the files, also of a log whose directory went offline


def describe(broker: FakeBroker, topics: dict[str, list[int]] | None) -> Any:
    request = SamsaDescribeLogSegmentsRequest(topics=None if topics is None else [
        DescribeLogSegmentsTopic(name=name, partitions=indexes) for name, indexes in topics.items()
    ])
    context = RequestContext(RequestHeader(client_id="t"), 0, cast(Any, broker), "peer")
    response = describe_log_segments.handle(context, request)
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


def test_each_segment_with_offsets_and_timestamps(broker: FakeBroker) -> None:
    answer = describe(broker, {"a": [0]})[("a", 0)]
    assert (answer.error_code, answer.log_start_offset, answer.high_watermark,
            answer.last_stable_offset) == (0, 0, 3, 3)
    assert [(s.base_offset, s.end_offset, s.first_timestamp, s.max_timestamp)
            for s in answer.segments] == [(0, 1, 1000, 1000), (1, 2, 1001, 1001),
                                          (2, 3, 1002, 1002), (3, 3, -1, -1)]
    sizes = [s.size_in_bytes for s in answer.segments]
    log = broker.replica_manager.partitions[("a", 0)].log
    assert sizes[:3] == [segment.size for segment in log.segments[:3]]
    assert sizes[3] == 0


def test_null_topics_describe_every_partition(broker: FakeBroker) -> None:
    answers = describe(broker, None)
    assert sorted(answers) == [("a", 0), ("a", 1), ("b", 0)]
    assert all(answer.error_code == 0 for answer in answers.values())


def test_errors_are_per_partition(broker: FakeBroker) -> None:
    broker.replica_manager.partitions[("a", 1)].leader_id = -1  # no leader known: no role yet
    broker.replica_manager.partitions[("a", 0)].leader_id = NODE_ID + 1  # a follower answers
    broker.replica_manager.partitions[("b", 0)].log.health.offline_reason = "OSError: disk gone"
    answers = describe(broker, {"a": [0, 1, 9], "b": [0], "missing": [0]})
    assert {key: answer.error_code for key, answer in answers.items()} == {
        ("a", 0): 0,
        ("a", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ("a", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("b", 0): ErrorCode.KAFKA_STORAGE_ERROR,
        ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert answers[("a", 1)].segments == [] and answers[("a", 1)].high_watermark == -1


def test_error_response_reports_every_partition_and_the_whole_request() -> None:
    request = SamsaDescribeLogSegmentsRequest(topics=[DescribeLogSegmentsTopic("a", [0, 1])])
    response = describe_log_segments.error_response(request, UnsupportedVersionError())
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    codes = [p.error_code for p in response.topics[0].partitions]
    assert codes == [ErrorCode.UNSUPPORTED_VERSION] * 2
    everything = describe_log_segments.error_response(
        SamsaDescribeLogSegmentsRequest(topics=None), UnsupportedVersionError()
    )
    assert everything.error_code == ErrorCode.UNSUPPORTED_VERSION and everything.topics == []
