"""CreateTopics' manual replica assignments on one node, as Kafka's ``ReplicationControlManager``:
accepted when every replica list is exactly [this node] and the partitions are 0..n-1, refused
with Kafka's error and message otherwise (checked against a brute-force model)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import (
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    KafkaError,
)
from protocol.messages.metadata.partition_record import PartitionRecord
from replication.metadata.controller import TopicPlan, plan_create_topic
from replication.metadata.image import MetadataImage
from storage.config import LogConfig

NODE = 1

Assignments = Sequence[tuple[int, Sequence[int]]]


def _plan(assignments: Assignments, *, partitions: int = -1, factor: int = -1) -> TopicPlan:
    return plan_create_topic(
        MetadataImage(), "t", num_partitions=partitions, replication_factor=factor, configs={},
        node_id=NODE, default_num_partitions=4, default_replication_factor=1,
        default_config=LogConfig(), assignments=assignments,
    )


def test_an_assignment_of_this_node_creates_the_partitions_it_names() -> None:
    plan = _plan([(0, [NODE]), (1, [NODE]), (2, [NODE])])
    assert (plan.num_partitions, plan.replication_factor) == (3, 1)  # not num.partitions (4)
    partitions = [r for r in plan.records if isinstance(r, PartitionRecord)]
    assert [(p.partition_id, p.replicas, p.isr, p.leader) for p in partitions] == [
        (index, [NODE], [NODE], NODE) for index in range(3)
    ]


def test_assignments_may_come_in_any_order() -> None:
    assert _plan([(1, [NODE]), (0, [NODE])]).num_partitions == 2


@pytest.mark.parametrize(
    ("partitions", "factor", "message"),
    [
        (3, -1, "numPartitions was not set to -1"),
        (-1, 1, "replication factor was not set to -1"),
        (3, 1, "replication factor was not set to -1"),  # Kafka checks the factor first
    ],
)
def test_counts_must_be_minus_one_with_assignments(partitions: int, factor: int, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        _plan([(0, [NODE])], partitions=partitions, factor=factor)


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        ([(0, [])], "includes an empty replica list"),
        ([(0, [2])], "includes broker 2, but no such broker is registered"),
        ([(0, [NODE, 2])], "includes broker 2, but no such broker is registered"),
        ([(0, [NODE, NODE])], f"includes the broker {NODE} more than once"),
        ([(0, [NODE]), (0, [NODE])], "multiple manual partition assignments for partition 0"),
        ([(0, [NODE]), (2, [NODE])], "consecutive 0-based integer sequence"),
        ([(1, [NODE])], "consecutive 0-based integer sequence"),
    ],
)
def test_bad_assignments_are_kafkas_invalid_replica_assignment(
    assignments: Assignments, message: str
) -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match=message):
        _plan(assignments)


def _model(assignments: Assignments) -> int | type[KafkaError]:
    """Brute force: the partition count, or the error class Kafka gives."""
    seen: list[int] = []
    for index, replicas in assignments:
        if index in seen or list(replicas) != [NODE]:
            return InvalidReplicaAssignmentError
        seen.append(index)
    if sorted(seen) != list(range(len(seen))):
        return InvalidReplicaAssignmentError
    return len(seen)


@given(st.lists(
    st.tuples(st.integers(0, 4), st.lists(st.sampled_from([NODE, 2]), max_size=3)),
    min_size=1, max_size=6,
))
def test_assignments_match_the_model(assignments: Assignments) -> None:
    expected = _model(assignments)
    if isinstance(expected, int):
        assert _plan(assignments).num_partitions == expected
    else:
        with pytest.raises(expected):
            _plan(assignments)


def test_topic_ids_are_never_reserved_nor_start_with_a_dash() -> None:
    # Kafka's Uuid.randomUuid: ZERO_UUID, METADATA_TOPIC_ID and ids printed with a leading '-'
    # (about 1 in 64) are drawn again
    import base64

    from replication.metadata.controller import random_topic_id

    ids = [random_topic_id() for _ in range(5000)]
    assert all(base64.urlsafe_b64encode(i.bytes)[:1] != b"-" for i in ids)
    assert all(i.int > 1 for i in ids)
