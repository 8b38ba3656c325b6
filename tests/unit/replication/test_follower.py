"""The follower's side and the leader's divergence check (KIP-320): ``diverging_epoch`` answers,
``truncate_on_divergence`` converging over rounds, ``whole_batches`` on a cut response,
``reset_out_of_range`` both ways and ``apply_answer``'s outcomes, over real logs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import ErrorCode
from protocol.records import Record, encode_batch
from replication.follower import (
    FetchPosition,
    FollowerOutcome,
    LeaderAnswer,
    apply_answer,
    fetch_position,
    reset_out_of_range,
    whole_batches,
)
from replication.partition import UNDEFINED_EPOCH, Partition
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log

REPLICAS = (0, 1)


class Replicas:
    """Partitions over real logs in one directory; all closed at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.clock = ManualClock()
        self.opened: list[Partition] = []

    def follower(self, epochs: Sequence[int], *, node_id: int = 1, leader_epoch: int = 9,
                 tag: str = "") -> Partition:
        """A follower (of the other node) whose log holds one single-record batch per entry of
        ``epochs`` (the leader epoch that wrote it), values tagged ``tag``."""
        log = Log.open(self.directory / f"node-{node_id}-{len(self.opened)}" / "orders-0",
                       LogConfig(), clock=self.clock)
        partition = Partition(log, topic_id=uuid.uuid4(), node_id=node_id, role_pending=True)
        partition.make_follower(leader_id=1 - node_id, leader_epoch=leader_epoch, replicas=REPLICAS,
                                isr=REPLICAS)
        for offset, epoch in enumerate(epochs):
            partition.append_as_follower(batch(offset, epoch, f"{tag}{offset}@{epoch}"))
        self.opened.append(partition)
        return partition

    def leader(self, epochs: Sequence[int], *, leader_epoch: int, tag: str = "") -> Partition:
        """Node 0 leading ``leader_epoch`` over a log written in ``epochs`` (as a follower)."""
        partition = self.follower(epochs, node_id=0, leader_epoch=leader_epoch - 1, tag=tag)
        partition.make_leader(leader_id=0, leader_epoch=leader_epoch, replicas=REPLICAS,
                              isr=REPLICAS)
        return partition


def batch(offset: int, epoch: int, value: str) -> bytes:
    return encode_batch([Record(offset=offset, timestamp=0, key=None, value=value.encode())],
                        base_offset=offset, partition_leader_epoch=epoch)


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    made = Replicas(tmp_path)
    yield made
    for partition in made.opened:
        partition.log.close()


def log_bytes(partition: Partition) -> bytes:
    piece = partition.log.read(partition.log_start_offset, 1 << 30)
    return piece.read() if piece is not None else b""


def first_two(partition: Partition) -> bytes:
    piece = partition.log.read(0, 1 << 20, max_offset=2)
    assert piece is not None
    return piece.read()


def fetch_round(leader: Partition, follower: Partition) -> FollowerOutcome:
    """One Fetch of ``follower`` from ``leader``, in-process."""
    asked = fetch_position(follower)
    served = leader.fetch_for_follower(
        follower.node_id, fetch_offset=asked.fetch_offset,
        last_fetched_epoch=asked.last_fetched_epoch,
        current_leader_epoch=asked.current_leader_epoch, log_start_offset=asked.log_start_offset,
        max_bytes=1 << 20, now_ms=0)
    return apply_answer(follower, asked, LeaderAnswer(
        high_watermark=leader.high_watermark, log_start_offset=leader.log_start_offset,
        diverging_epoch=served.diverging,
        records=served.slice.read() if served.slice is not None else None))


# -- the leader's diverging_epoch -----------------------------------------------------------------


def test_a_follower_ahead_in_an_old_epoch_diverges_where_the_leader_left_it(replicas: Replicas) -> None:
    leader = replicas.leader([0, 0, 1, 1], leader_epoch=3)  # epochs 0@0, 1@2, 3@4
    leader.append_as_leader(batch(0, 3, "new"))
    assert leader.log_end_offset == 5
    assert leader.diverging_epoch(1, 6) == (1, 4)  # epoch 1 ended at 4 here; the follower has 6
    assert leader.diverging_epoch(1, 4) is None  # exactly where epoch 1 ended: no divergence
    assert leader.diverging_epoch(0, 2) is None
    assert leader.diverging_epoch(0, 3) == (0, 2)
    assert leader.diverging_epoch(3, 5) is None
    assert leader.diverging_epoch(UNDEFINED_EPOCH, 99) is None  # nothing to check


def test_an_epoch_the_leader_never_had_answers_the_largest_one_below(replicas: Replicas) -> None:
    leader = replicas.leader([0, 0, 1, 1], leader_epoch=3)
    leader.append_as_leader(batch(0, 3, "new"))
    assert leader.diverging_epoch(2, 5) == (1, 4)  # epoch 2 was never led here
    assert leader.diverging_epoch(2, 4) == (1, 4)  # same end, but another epoch: still diverges
    assert leader.diverging_epoch(7, 5) == (3, 5)  # newer than any known here: our latest


def test_an_empty_leader_log_diverges_from_everything_a_follower_has(replicas: Replicas) -> None:
    leader = replicas.leader([], leader_epoch=4)
    assert leader.log.leader_epoch_cache.latest_epoch is None  # an empty log assigns no epoch
    assert leader.diverging_epoch(2, 3) == (2, 0)  # Kafka: an epoch below the (virtual) first entry ends at its start
    assert leader.diverging_epoch(2, 0) is None
    follower = replicas.follower([0, 0, 2], leader_epoch=4)
    assert fetch_round(leader, follower) is FollowerOutcome.TRUNCATED
    assert follower.log_end_offset == 0
    leader.truncate_fully_and_start_at(10)  # empty again, past offset 0
    assert leader.diverging_epoch(2, 12) == (2, 10)
    assert leader.diverging_epoch(2, 3) is None  # behind the log start: OFFSET_OUT_OF_RANGE


# -- truncate_on_divergence ---------------------------------------------------------------------


def test_two_stale_epochs_converge_in_two_rounds(replicas: Replicas) -> None:
    """The leader has epochs 0, 2, 4; the follower 0, then 1 and 3 it led alone. The first
    answer names epoch 2, which the follower lacks: it keeps up to the end of its epoch 1; the
    second names epoch 0; then the logs agree."""
    leader = replicas.leader([0, 0, 2, 2], leader_epoch=4, tag="leader-")
    leader.append_as_leader(batch(0, 4, "leader-4"))
    follower = replicas.follower([0, 0, 1, 3, 3, 3], leader_epoch=4, tag="leader-")
    assert first_two(follower) == first_two(leader)  # the common prefix, epoch 0
    outcomes, ends = [], []
    for _ in range(4):
        outcomes.append(fetch_round(leader, follower))
        ends.append(follower.log_end_offset)
    assert outcomes == [FollowerOutcome.TRUNCATED, FollowerOutcome.TRUNCATED,
                        FollowerOutcome.APPENDED, FollowerOutcome.CAUGHT_UP]
    assert ends == [3, 2, 5, 5]
    assert log_bytes(follower) == log_bytes(leader)
    assert [(e.epoch, e.start_offset) for e in follower.log.leader_epoch_cache.entries] == [
        (0, 0), (2, 2), (4, 4)]


def test_one_stale_epoch_converges_in_one_round(replicas: Replicas) -> None:
    leader = replicas.leader([0, 0], leader_epoch=3, tag="x")
    leader.append_as_leader(batch(0, 3, "x3"))
    follower = replicas.follower([0, 0, 1, 2, 2], leader_epoch=3, tag="x")
    assert fetch_round(leader, follower) is FollowerOutcome.TRUNCATED
    assert follower.log_end_offset == 2
    assert fetch_round(leader, follower) is FollowerOutcome.APPENDED
    assert log_bytes(follower) == log_bytes(leader)


def test_the_leaders_epoch_in_this_log_truncates_to_the_smaller_end(replicas: Replicas) -> None:
    follower = replicas.follower([0, 0, 1, 1, 1])
    follower.high_watermark = 2
    assert follower.truncate_on_divergence(1, 4) == 4  # both know epoch 1: the leader's end
    assert follower.truncate_on_divergence(0, 5) == 2  # our epoch 0 ends before the leader's
    assert follower.log_end_offset == 2


def test_answers_without_an_epoch(replicas: Replicas) -> None:
    follower = replicas.follower([3, 3, 3, 3])
    assert follower.truncate_on_divergence(UNDEFINED_EPOCH, 2) == 2  # the leader holds no epoch
    other = replicas.follower([3, 3, 3])
    other.high_watermark = 1
    assert other.truncate_on_divergence(5, -1) == 1  # no end offset: fall back to the HW
    older = replicas.follower([5, 5, 5])
    # an epoch older than any here: our first batch (epoch 5) already differs from the leader's
    assert older.truncate_on_divergence(2, 1) == 0


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[int], list[int], int]:
    """A leader's and a follower's epochs per offset: a common prefix, then suffixes written in
    disjoint epochs above the prefix's (each epoch has one leader); the common length."""
    common = sorted(draw(st.lists(st.integers(0, 3), max_size=4)))
    floor = common[-1] if common else 0
    later = draw(st.lists(st.integers(floor + 1, floor + 6), unique=True, max_size=5))
    split = draw(st.integers(0, len(later)))
    leader_epochs, follower_epochs = sorted(later[:split]), sorted(later[split:])
    leader = common + [e for e in leader_epochs for _ in range(draw(st.integers(1, 2)))]
    follower = common + [e for e in follower_epochs for _ in range(draw(st.integers(1, 2)))]
    return leader, follower, len(common)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_divergent_logs_converge_without_losing_the_common_prefix(
    replicas: Replicas, history: tuple[list[int], list[int], int],
) -> None:
    leader_epochs, follower_epochs, common = history
    newest = max([*leader_epochs, *follower_epochs, 0]) + 1
    leader = replicas.leader(leader_epochs, leader_epoch=newest, tag="p")
    follower = replicas.follower(follower_epochs, leader_epoch=newest, tag="p")
    truncations = 0
    for _ in range(len(follower_epochs) + 2):
        outcome = fetch_round(leader, follower)
        assert follower.log_end_offset >= common, "truncated into the common prefix"
        truncations += outcome is FollowerOutcome.TRUNCATED
    assert log_bytes(follower) == log_bytes(leader)
    assert truncations <= len(set(follower_epochs[common:])) + 1


# -- whole_batches, reset_out_of_range, apply_answer --------------------------------------------


def test_whole_batches_keeps_the_complete_batches_of_a_cut_response() -> None:
    parts = [batch(i, 0, "v" * (i + 1)) for i in range(3)]
    response = b"".join(parts)
    ends = [sum(len(p) for p in parts[:k]) for k in range(4)]
    for cut in range(len(response) + 1):
        kept = whole_batches(response[:cut])
        assert bytes(kept) == response[:max(e for e in ends if e <= cut)]
    assert bytes(whole_batches(None)) == b"" and bytes(whole_batches(b"")) == b""
    broken = bytearray(response)
    broken[ends[1] + 8:ends[1] + 12] = (0).to_bytes(4, "big")  # a zero length: stop there
    assert bytes(whole_batches(broken)) == parts[0]


def test_reset_out_of_range_both_ways(replicas: Replicas) -> None:
    ahead = replicas.follower([0] * 6)
    assert reset_out_of_range(ahead, leader_start=0, leader_end=4) == 4
    assert ahead.log_end_offset == 4
    behind = replicas.follower([0] * 3)
    assert reset_out_of_range(behind, leader_start=10, leader_end=20) == 10
    assert (behind.log_start_offset, behind.log_end_offset, behind.high_watermark) == (10, 10, 10)
    assert behind.log.leader_epoch_cache.latest_epoch is None
    within = replicas.follower([0] * 3)
    assert reset_out_of_range(within, leader_start=0, leader_end=5) is None
    assert within.log_end_offset == 3


def test_apply_answer_outcomes(replicas: Replicas) -> None:
    follower = replicas.follower([0, 0])
    asked = fetch_position(follower)
    assert asked == FetchPosition(2, 0, 9, 0)
    moved = FetchPosition(1, 0, 9, 0)
    assert apply_answer(follower, moved, LeaderAnswer()) is FollowerOutcome.STALE
    old_epoch = FetchPosition(2, 0, 8, 0)
    assert apply_answer(follower, old_epoch, LeaderAnswer()) is FollowerOutcome.STALE
    for code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                 ErrorCode.UNKNOWN_LEADER_EPOCH):
        assert apply_answer(follower, asked, LeaderAnswer(error_code=code)) is FollowerOutcome.BACK_OFF
    out_of_range = LeaderAnswer(error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    assert apply_answer(follower, asked, out_of_range) is FollowerOutcome.OUT_OF_RANGE
    cut = LeaderAnswer(high_watermark=2, log_start_offset=0, records=batch(2, 0, "x")[:20])
    assert apply_answer(follower, asked, cut) is FollowerOutcome.CAUGHT_UP  # nothing whole
    assert (follower.log_end_offset, follower.high_watermark) == (2, 2)
    ahead = LeaderAnswer(high_watermark=9, log_start_offset=0, records=batch(2, 0, "x"))
    assert apply_answer(follower, asked, ahead) is FollowerOutcome.APPENDED
    assert (follower.log_end_offset, follower.high_watermark) == (3, 3)  # capped by the log end
