"""``samsa.segments.describe_log_segments``: the client side of SamsaDescribeLogSegments, against
a real broker (each partition asked of its leader, unknown partitions refused at once)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa._cluster import Cluster
from samsa._loop import LoopThread
from samsa.config import parse_config
from samsa.errors import UnknownTopicOrPartitionError
from samsa.segments import PartitionLayout, describe_log_segments
from samsa.types import TopicPartition

pytestmark = pytest.mark.integration

QUIET = {"log_level": 3}


def describe(broker: Any, partitions: list[TopicPartition]) -> dict[TopicPartition, PartitionLayout]:
    loop = LoopThread("test-segments")
    cluster = Cluster(parse_config("admin", {"bootstrap.servers": broker.bootstrap}))
    try:
        return loop.run(describe_log_segments(cluster, partitions), timeout=60)
    finally:
        loop.run(cluster.close(), timeout=10)
        loop.close()


def test_the_layout_of_every_partition_from_its_leader(broker: Any) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic("laid-out", 2, 1, config={"segment.bytes": "4096"})])[
        "laid-out"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "batch.size": 1024,
                         "linger.ms": 5, **QUIET})
    for number in range(400):
        producer.produce("laid-out", b"%099d" % number, partition=0)
    assert producer.flush(30) == 0

    first, second = TopicPartition("laid-out", 0), TopicPartition("laid-out", 1)
    layouts = describe(broker, [second, first, first])
    assert sorted(layouts) == [first, second]
    layout = layouts[first]
    assert (layout.log_start_offset, layout.high_watermark, layout.last_stable_offset) == (
        0, 400, 400)
    assert len(layout.segments) > 3
    assert [s.base_offset for s in layout.segments[1:]] == [s.end_offset
                                                            for s in layout.segments[:-1]]
    assert layout.segments[-1].end_offset == 400
    directory = broker.log_dir / "laid-out-0"
    for segment in layout.segments:
        path = directory / f"{segment.base_offset:020d}.log"
        assert path.stat().st_size == segment.size_in_bytes
    assert layouts[second].high_watermark == 0


def test_an_unknown_partition_fails_at_once(broker: Any) -> None:
    started = time.monotonic()
    with pytest.raises(UnknownTopicOrPartitionError, match="no-such-topic-0"):
        describe(broker, [TopicPartition("no-such-topic", 0)])
    assert time.monotonic() - started < 10  # not retried until default.api.timeout.ms
