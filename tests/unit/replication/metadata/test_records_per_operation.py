"""One operation writes at most Kafka's ``MAX_RECORDS_PER_USER_OP`` records: a CreateTopics or
CreatePartitions asking for more is POLICY_VIOLATION, refused before anything is placed (the
protocol fuzzer's CreateTopics of 2^27 partitions kept a node's controller worker building
records for minutes, its memory growing, and a validate-only one blocked the event loop)."""

from __future__ import annotations

import time

import pytest

from protocol.errors import PolicyViolationError
from replication.metadata.controller import (
    MAX_RECORDS_PER_USER_OP,
    TopicPlan,
    plan_create_partitions,
    plan_create_topic,
)
from replication.metadata.image import MetadataImage
from storage.config import LogConfig

NODE = 1


def _plan(image: MetadataImage, name: str, partitions: int, **configs: str) -> TopicPlan:
    return plan_create_topic(
        image, name, num_partitions=partitions, replication_factor=-1, configs=configs,
        node_id=NODE, default_num_partitions=1, default_replication_factor=1,
        default_config=LogConfig(),
    )


@pytest.mark.parametrize("partitions", [2**31 - 1, 2**27, MAX_RECORDS_PER_USER_OP])
def test_a_topic_of_too_many_partitions_is_refused_at_once(partitions: int) -> None:
    started = time.monotonic()
    with pytest.raises(PolicyViolationError, match="excessively large batch"):
        _plan(MetadataImage(), "huge", partitions)
    assert time.monotonic() - started < 0.5  # nothing was placed


def test_the_bound_counts_the_topic_and_config_records() -> None:
    plan = _plan(MetadataImage(), "widest", MAX_RECORDS_PER_USER_OP - 1)
    assert len(plan.records) == MAX_RECORDS_PER_USER_OP
    with pytest.raises(PolicyViolationError):
        _plan(MetadataImage(), "configured", MAX_RECORDS_PER_USER_OP - 1, **{"retention.ms": "1"})


def test_growing_a_topic_by_too_many_partitions_is_refused() -> None:
    image = MetadataImage()
    for record in _plan(image, "t", 2).records:
        image.apply(record)
    with pytest.raises(PolicyViolationError):
        plan_create_partitions(image, "t", 2**31 - 1, assignments=None, node_id=NODE)
    _, records = plan_create_partitions(image, "t", 2 + MAX_RECORDS_PER_USER_OP,
                                        assignments=None, node_id=NODE)
    assert len(records) == MAX_RECORDS_PER_USER_OP
