"""What the protocol fuzzer (``tests/faults/fuzz.py``, G12) found, replayed against a real broker:
each test is one finding, fixed."""

from __future__ import annotations

import socket
import time

import pytest

from protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.metadata_request import MetadataRequest
from tests.faults.fuzz import call

pytestmark = pytest.mark.integration

POLICY_VIOLATION = 44


@pytest.mark.parametrize("validate_only", [False, True])
def test_a_create_topics_of_2_to_the_31_partitions_is_a_policy_violation(broker, validate_only) -> None:  # type: ignore[no-untyped-def]
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        started = time.monotonic()
        response = call(sock, 19, 7, CreateTopicsRequest(validate_only=validate_only, topics=[
            CreatableTopic(name="huge", num_partitions=2**31 - 1, replication_factor=1)]))
        assert response.topics[0].error_code == POLICY_VIOLATION
        assert time.monotonic() - started < 5
        created = call(sock, 19, 7, CreateTopicsRequest(topics=[
            CreatableTopic(name="small", num_partitions=1, replication_factor=1)]))
        assert created.topics[0].error_code == 0  # the controller is not busy with the first
        grown = call(sock, 37, 3, CreatePartitionsRequest(topics=[
            CreatePartitionsTopic(name="small", count=2**31 - 1)], timeout_ms=5000))
        assert grown.results[0].error_code == POLICY_VIOLATION
        metadata = call(sock, 3, 12, MetadataRequest(topics=None))
        assert {topic.name for topic in metadata.topics} == {"small"}


def test_a_create_topics_whose_topics_together_are_too_large_is_refused_whole(broker) -> None:  # type: ignore[no-untyped-def]
    """Each topic under the bound, the request over it: Kafka bounds the request's records."""
    topics = [CreatableTopic(name=f"wide-{n}", num_partitions=4000, replication_factor=1)
              for n in range(3)]
    with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
        response = call(sock, 19, 7, CreateTopicsRequest(topics=topics))
        assert [topic.error_code for topic in response.topics] == [POLICY_VIOLATION] * 3
        assert "excessively large" in (response.topics[0].error_message or "")
        under = call(sock, 19, 7, CreateTopicsRequest(validate_only=True, topics=topics[:2]))
        assert [topic.error_code for topic in under.topics] == [0, 0]


def test_a_create_partitions_whose_topics_together_grow_too_much_is_refused_whole(broker) -> None:  # type: ignore[no-untyped-def]
    with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
        created = call(sock, 19, 7, CreateTopicsRequest(topics=[
            CreatableTopic(name=name, num_partitions=1, replication_factor=1) for name in "ab"]))
        assert [topic.error_code for topic in created.topics] == [0, 0]
        grow = [CreatePartitionsTopic(name=name, count=6000, assignments=None) for name in "ab"]
        response = call(sock, 37, 3, CreatePartitionsRequest(topics=grow, validate_only=True))
        assert [result.error_code for result in response.results] == [POLICY_VIOLATION] * 2
        one = call(sock, 37, 3, CreatePartitionsRequest(topics=grow[:1], validate_only=True))
        assert [result.error_code for result in one.results] == [0]
