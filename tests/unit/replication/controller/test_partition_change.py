"""``build_partition_change``: Kafka's PartitionChangeBuilder rules, table-driven."""

from __future__ import annotations

import uuid

import pytest

from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from replication.controller.partition_change import Election, build_partition_change
from replication.metadata.image import RECOVERING, PartitionImage, merge_partition

TOPIC_ID = uuid.UUID(int=7)


def partition(replicas: list[int], isr: list[int], leader: int, **fields: object) -> PartitionImage:
    return PartitionImage(0, tuple(replicas), tuple(isr), leader, 5, 9, **fields)  # type: ignore[arg-type]


def build(part: PartitionImage, active: set[int], **targets: object) -> PartitionChangeRecord | None:
    return build_partition_change(TOPIC_ID, part, is_acceptable_leader=active.__contains__,
                                  **targets)  # type: ignore[arg-type]


def fields(record: PartitionChangeRecord | None) -> dict[str, object] | None:
    """The fields a record sets (None: no record)."""
    if record is None:
        return None
    defaults = PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID)
    return {name: getattr(record, name) for name in (
        "isr", "leader", "replicas", "removing_replicas", "adding_replicas",
        "leader_recovery_state", "eligible_leader_replicas")
        if getattr(record, name) != getattr(defaults, name)}


CASES: list[tuple[str, PartitionImage, set[int], dict[str, object], dict[str, object] | None]] = [
    # (name, partition, active brokers, targets, expected fields)
    ("nothing to do", partition([1, 2, 3], [1, 2, 3], 1), {1, 2, 3}, {}, None),
    ("isr shrink keeps the leader, no epoch bump",
     partition([1, 2, 3], [1, 2, 3], 1), {1, 2, 3}, {"isr": [1, 2]}, {"isr": [1, 2]}),
    ("isr expand", partition([1, 2, 3], [1], 1), {1, 2, 3}, {"isr": [1, 2, 3]},
     {"isr": [1, 2, 3]}),
    ("leader out of the isr: next replica in assignment order",
     partition([1, 2, 3], [1, 2, 3], 1), {2, 3}, {"isr": [3, 2]}, {"isr": [3, 2], "leader": 2}),
    ("the last isr member goes: isr kept, no leader",
     partition([1, 2], [1], 1), {2}, {"isr": []}, {"leader": -1}),
    ("online election keeps a live leader over the preferred one",
     partition([1, 2], [1, 2], 2), {1, 2}, {}, None),
    ("preferred election moves to the first replica",
     partition([1, 2], [1, 2], 2), {1, 2}, {"election": Election.PREFERRED}, {"leader": 1}),
    ("preferred election without the preferred replica keeps the leader",
     partition([1, 2], [2], 2), {1, 2}, {"election": Election.PREFERRED}, None),
    ("preferred election of a leaderless partition takes the next in the isr",
     partition([1, 2, 3], [3], -1), {2, 3}, {"election": Election.PREFERRED}, {"leader": 3}),
    ("no unclean election unless asked",
     partition([1, 2], [1], -1), {2}, {}, None),
    ("unclean election: isr reset, leader recovering",
     partition([1, 2], [1], -1), {2}, {"election": Election.UNCLEAN},
     {"leader": 2, "isr": [2], "leader_recovery_state": RECOVERING}),
    ("an unclean election prefers the isr", partition([1, 2, 3], [3], -1), {2, 3},
     {"election": Election.UNCLEAN}, {"leader": 3}),
    ("dropping a replica bumps the leader epoch",
     partition([1, 2, 3], [1, 2, 3], 1), {1, 2, 3}, {"replicas": [1, 2], "isr": [1, 2]},
     {"replicas": [1, 2], "isr": [1, 2], "leader": 1}),
    ("reassignment starts", partition([1, 2], [1, 2], 1), {1, 2, 3, 4},
     {"replicas": [3, 4, 1, 2], "removing": [1, 2], "adding": [3, 4]},
     {"replicas": [3, 4, 1, 2], "removing_replicas": [1, 2], "adding_replicas": [3, 4]}),
    ("reassignment completes when the targets join the isr, leader moves",
     partition([3, 4, 1, 2], [1, 2], 1, removing_replicas=(1, 2), adding_replicas=(3, 4)),
     {1, 2, 3, 4}, {"isr": [1, 2, 3, 4]},
     {"isr": [3, 4], "leader": 3, "replicas": [3, 4], "removing_replicas": [],
      "adding_replicas": []}),
    ("reassignment waits for every target", partition(
        [3, 4, 1, 2], [1, 2], 1, removing_replicas=(1, 2), adding_replicas=(3, 4)),
     {1, 2, 3, 4}, {"isr": [1, 2, 3]}, {"isr": [1, 2, 3]}),
    ("a reorder completes at once", partition([1, 2], [1, 2], 1), {1, 2},
     {"replicas": [2, 1]}, {"replicas": [2, 1]}),
    ("leader recovered", partition([1], [1], 1, leader_recovery_state=RECOVERING), {1},
     {"leader_recovery_state": 0}, {"leader_recovery_state": 0}),
    ("elr left by another writer is cleared",
     partition([1, 2], [1, 2], 1, eligible_leader_replicas=(2,)), {1, 2}, {},
     {"eligible_leader_replicas": []}),
]


@pytest.mark.parametrize(("name", "part", "active", "targets", "expected"), CASES,
                         ids=[case[0] for case in CASES])
def test_partition_change(name: str, part: PartitionImage, active: set[int],
                          targets: dict[str, object], expected: dict[str, object] | None) -> None:
    record = build(part, active, **targets)
    assert fields(record) == expected
    if record is not None:
        after = merge_partition(part, record)
        assert after.partition_epoch == part.partition_epoch + 1
        bumped = record.leader != -2
        assert after.leader_epoch == part.leader_epoch + bumped
        assert after.leader == -1 or after.leader in after.isr
        assert set(after.isr) <= set(after.replicas) and after.isr
