"""acks=all with replication: ``append_as_leader``'s refusals, ``enough_replicas`` as the ISR
shrinks or leadership moves, ``DelayedProduce`` completed or expired through the produce
purgatory on a manual clock, and ISR answers that belong to an older proposal."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.errors import (
    ErrorCode,
    KafkaError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
)
from protocol.records import Record, encode_batch
from replication.append import ReplicaAppender
from replication.partition import Partition
from replication.purgatory import DelayedOperation, DelayedOperationPurgatory
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.producer_state import AppendOrigin

REPLICAS = (0, 1, 2)
CONFIG = LogConfig(min_insync_replicas=2)


class Cluster:
    """Node 0 leading ``orders-0`` and ``audit-0`` for followers 1 and 2 (partitions on node 0
    only: the followers' fetches are made up, at chosen offsets)."""

    def __init__(self, directory: Path) -> None:
        self.clock = ManualClock()
        self.partitions: dict[tuple[str, int], Partition] = {}
        for topic in ("orders", "audit"):
            log = Log.open(directory / f"{topic}-0", CONFIG, clock=self.clock)
            partition = Partition(log, topic_id=uuid.uuid4(), role_pending=True)
            partition.make_leader(leader_id=0, leader_epoch=1, replicas=REPLICAS, isr=REPLICAS,
                                  partition_epoch=1)
            self.partitions[(topic, 0)] = partition
        fetches = DelayedOperationPurgatory[DelayedOperation]("Fetch", clock=self.clock)
        self.appender = ReplicaAppender(lambda topic, index: self.partitions.get((topic, index)),
                                        fetch_purgatory=fetches)
        self.produces = self.appender.produce_purgatory

    def fetched(self, topic: str, follower: int, offset: int) -> None:
        """``follower`` fetched ``topic`` from ``offset``; the delayed operations are checked."""
        partition = self.partitions[(topic, 0)]
        if partition.follower_fetched(follower, fetch_offset=offset, log_start_offset=0,
                                      leader_end_offset=partition.log_end_offset,
                                      now_ms=self.clock.milliseconds()):
            self.appender.try_complete_delayed((topic, 0))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    yield made
    for partition in made.partitions.values():
        partition.log.close()


def records(count: int = 2) -> bytes:
    return encode_batch([Record(offset=i, timestamp=0, key=None, value=b"v") for i in range(count)])


def code(error: KafkaError | None) -> ErrorCode:
    return ErrorCode.NONE if error is None else ErrorCode(error.code)


# -- append_as_leader and enough_replicas -------------------------------------------------------


def test_acks_all_is_refused_before_the_append_when_the_isr_is_too_small(cluster: Cluster) -> None:
    orders = cluster.partitions[("orders", 0)]
    orders.isr_committed(leader_epoch=1, partition_epoch=2, isr=(0,))
    with pytest.raises(NotEnoughReplicasError):
        orders.append_as_leader(records(), required_acks=-1)
    assert orders.log_end_offset == 0  # nothing written
    assert orders.append_as_leader(records(), required_acks=1).first_offset == 0
    assert orders.high_watermark == 2  # the ISR is the leader alone


def test_a_follower_refuses_appends_and_answers_waiting_produces(cluster: Cluster) -> None:
    orders = cluster.partitions[("orders", 0)]
    orders.append_as_leader(records(), required_acks=-1)
    assert orders.enough_replicas(2) == (False, None)
    orders.make_follower(leader_id=1, leader_epoch=2, replicas=REPLICAS, isr=REPLICAS,
                         partition_epoch=2)
    with pytest.raises(NotLeaderOrFollowerError):
        orders.append_as_leader(records(), required_acks=1)
    done, error = orders.enough_replicas(2)
    assert done and code(error) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_an_isr_shrunk_below_min_insync_answers_not_enough_replicas_after_append(
    cluster: Cluster,
) -> None:
    orders = cluster.partitions[("orders", 0)]
    orders.append_as_leader(records(3), required_acks=-1)
    cluster.fetched("orders", 1, 1)
    assert orders.enough_replicas(3) == (False, None)  # broker 2 is in the ISR, at -1
    change = orders.maybe_shrink_isr(cluster.clock.milliseconds() + 30_001, 30_000)
    assert change is not None and change.new_isr == (0,)  # neither reached the end in time
    assert orders.enough_replicas(3) == (False, None)  # the shrink is only proposed
    assert orders.isr_committed(leader_epoch=1, partition_epoch=2, isr=(0,))
    done, error = orders.enough_replicas(3)
    assert done and code(error) is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_enough_replicas_once_the_isr_reaches_the_offset(cluster: Cluster) -> None:
    orders = cluster.partitions[("orders", 0)]
    orders.append_as_leader(records(3), required_acks=-1)
    cluster.fetched("orders", 1, 3)
    assert orders.enough_replicas(3) == (False, None)
    cluster.fetched("orders", 2, 2)
    assert (orders.high_watermark, orders.enough_replicas(3)) == (2, (False, None))
    assert orders.enough_replicas(2) == (True, None)
    cluster.fetched("orders", 2, 3)
    assert orders.enough_replicas(3) == (True, None)


# -- DelayedProduce through the purgatory -------------------------------------------------------


def produce(cluster: Cluster, timeout_ms: int = 1_000) -> list[dict[tuple[str, int], KafkaError | None]]:
    """An acks=all Produce to both partitions, delayed in the purgatory; what it answered."""
    keys = [("orders", 0), ("audit", 0)]
    outcomes = cluster.appender.append_records([(key, records()) for key in keys],
                                               required_acks=-1, origin=AppendOrigin.CLIENT)
    assert all(outcome.error is None for outcome in outcomes)
    answered: list[dict[tuple[str, int], KafkaError | None]] = []
    delayed = cluster.appender.delay_until_replicated(list(zip(keys, outcomes, strict=True)),
                                                      timeout_ms=timeout_ms, done=answered.append)
    assert delayed is not None
    assert not cluster.produces.try_complete_else_watch(delayed, delayed.required)
    return answered


def test_a_delayed_produce_completes_when_every_partition_is_replicated(cluster: Cluster) -> None:
    answered = produce(cluster)
    for follower in (1, 2):
        cluster.fetched("orders", follower, 2)
    assert answered == []  # audit-0 still waits
    cluster.fetched("audit", 1, 2)
    cluster.fetched("audit", 2, 2)
    assert answered == [{("orders", 0): None, ("audit", 0): None}]
    cluster.clock.advance(5_000)
    assert cluster.produces.expire_due() == 0  # completed: nothing left to expire
    assert answered == [{("orders", 0): None, ("audit", 0): None}]


def test_a_delayed_produce_expires_with_the_partitions_still_short(cluster: Cluster) -> None:
    answered = produce(cluster, timeout_ms=1_000)
    for follower in (1, 2):
        cluster.fetched("orders", follower, 2)
    cluster.clock.advance(999)
    assert cluster.produces.expire_due() == 0
    cluster.clock.advance(1)
    assert cluster.produces.expire_due() == 1
    [outcome] = answered
    assert {key: code(error) for key, error in outcome.items()} == {
        ("orders", 0): ErrorCode.NONE, ("audit", 0): ErrorCode.REQUEST_TIMED_OUT}
    cluster.fetched("audit", 1, 2)
    cluster.fetched("audit", 2, 2)
    assert len(answered) == 1  # answered once


def test_a_delayed_produce_answers_at_once_when_leadership_moves(cluster: Cluster) -> None:
    answered = produce(cluster)
    orders = cluster.partitions[("orders", 0)]
    orders.make_follower(leader_id=1, leader_epoch=2, replicas=REPLICAS, isr=REPLICAS,
                         partition_epoch=2)
    cluster.appender.try_complete_delayed(("orders", 0))  # the role change checks its waiters
    assert answered == []  # audit-0 still waits
    for follower in (1, 2):
        cluster.fetched("audit", follower, 2)
    [outcome] = answered
    assert {key: code(error) for key, error in outcome.items()} == {
        ("orders", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER, ("audit", 0): ErrorCode.NONE}


def test_nothing_is_delayed_when_the_high_watermarks_are_already_there(cluster: Cluster) -> None:
    orders = cluster.partitions[("orders", 0)]
    orders.isr_committed(leader_epoch=1, partition_epoch=2, isr=(0, 1))
    cluster.fetched("orders", 1, 0)
    outcomes = cluster.appender.append_records([(("orders", 0), records())], required_acks=1,
                                               origin=AppendOrigin.CLIENT)
    cluster.fetched("orders", 1, 2)
    assert cluster.appender.delay_until_replicated(
        [(("orders", 0), outcomes[0])], timeout_ms=100, done=lambda _: None) is None


# -- ISR answers settle only their own proposal -------------------------------------------------


def test_an_answer_for_an_older_leader_epoch_keeps_the_joiner_in_the_maximal_isr(
    cluster: Cluster,
) -> None:
    """Regression: node 0 proposed (0, 1, 2) in leader epoch 1, then was elected again (epoch
    2) and proposed it again. The answer to the first proposal arriving now used to forget the
    second, still in flight: the high watermark then moved past broker 2 — which the controller
    was about to count in the ISR — and an acks=all record was acknowledged that broker 2,
    soon an ISR member eligible for election, did not have."""
    orders = cluster.partitions[("orders", 0)]
    orders.isr_committed(leader_epoch=1, partition_epoch=2, isr=(0, 1))
    cluster.fetched("orders", 2, 0)
    first = orders.maybe_expand_isr()
    assert first is not None and first.new_isr == (0, 1, 2)
    orders.make_leader(leader_id=0, leader_epoch=2, replicas=REPLICAS, isr=(0, 1),
                       partition_epoch=3)
    cluster.fetched("orders", 2, 0)
    second = orders.maybe_expand_isr()
    assert second is not None and second.leader_epoch == 2
    orders.append_as_leader(records(), required_acks=-1)
    cluster.fetched("orders", 1, 2)
    orders.isr_committed(leader_epoch=1, partition_epoch=3, isr=(0, 1, 2))  # the first answer
    orders.isr_change_failed(first)  # or its refusal
    assert orders.isr_state.pending == second
    assert 2 in orders.isr_state.maximal_isr
    assert orders.high_watermark == 0 and orders.enough_replicas(2) == (False, None)
    assert orders.isr_committed(leader_epoch=2, partition_epoch=4, isr=(0, 1, 2)) is False
    assert (orders.isr, orders.isr_state.pending) == ((0, 1, 2), None)
    cluster.fetched("orders", 2, 2)
    assert orders.enough_replicas(2) == (True, None)


def test_a_refusal_of_the_pending_change_forgets_it(cluster: Cluster) -> None:
    orders = cluster.partitions[("orders", 0)]
    change = orders.maybe_shrink_isr(cluster.clock.milliseconds() + 30_001, 30_000)
    assert change is not None and orders.isr_state.pending == change
    orders.isr_change_failed(change)
    assert orders.isr_state.pending is None
    assert orders.maybe_shrink_isr(cluster.clock.milliseconds() + 30_001, 30_000) == change
