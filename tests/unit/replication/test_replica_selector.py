"""KIP-392's preferred read replica: the rack-aware pick against a brute-force model of Kafka's
rules, and the candidates a leader offers (ISR, holding the fetch offset, reachable)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.records import Record, encode_batch
from replication.partition import Partition
from replication.replica_selector import ReplicaView, preferred_read_replica, rack_aware_select
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log

RACKS = st.sampled_from([None, "", "a", "b", "c"])


def _model(client_rack: str | None, replicas: list[ReplicaView], leader: ReplicaView) -> ReplicaView:
    """Kafka's rules spelt out: the leader unless it is outside the client's rack and some
    replica is inside; then every same-rack replica no other same-rack one beats."""
    if not client_rack:
        return leader
    same = [r for r in replicas if r.rack == client_rack]
    if not same or leader in same:
        return leader
    for candidate in same:
        beaten = any(
            other.log_end_offset > candidate.log_end_offset
            or (other.log_end_offset == candidate.log_end_offset
                and other.time_since_last_caught_up_ms < candidate.time_since_last_caught_up_ms)
            or (other.log_end_offset == candidate.log_end_offset
                and other.time_since_last_caught_up_ms == candidate.time_since_last_caught_up_ms
                and other.broker_id > candidate.broker_id)
            for other in same if other is not candidate)
        if not beaten:
            return candidate
    raise AssertionError("no maximum")


@st.composite
def _views(draw: st.DrawFn) -> tuple[list[ReplicaView], ReplicaView]:
    count = draw(st.integers(1, 5))
    views = [ReplicaView(broker_id, draw(RACKS), draw(st.integers(0, 3)),
                         0 if broker_id == 0 else draw(st.integers(0, 3)))
             for broker_id in range(count)]
    return views, views[0]


@settings(max_examples=300)
@given(_views(), RACKS)
def test_rack_aware_select_follows_the_model(
    views: tuple[list[ReplicaView], ReplicaView], client_rack: str | None,
) -> None:
    replicas, leader = views
    assert rack_aware_select(client_rack, replicas, leader) == _model(client_rack, replicas, leader)


def test_the_leader_in_the_client_rack_wins_over_a_more_caught_up_follower() -> None:
    leader = ReplicaView(1, "a", 5, 0)
    follower = ReplicaView(2, "a", 9, 0)
    assert rack_aware_select("a", [leader, follower], leader) == leader
    assert rack_aware_select("b", [leader, follower], leader) == leader  # nobody in rack b
    assert rack_aware_select("", [leader, follower], leader) == leader  # no client rack


@contextmanager
def _leader(replicas: tuple[int, ...], isr: tuple[int, ...]) -> Iterator[Partition]:
    """Node 1 leading a partition of ``replicas`` with 10 records."""
    with TemporaryDirectory() as directory:
        clock = ManualClock()
        log = Log.open(Path(directory) / "t-0", LogConfig(), clock=clock)
        partition = Partition(log, topic_id=uuid.uuid4(), node_id=1, role_pending=True)
        partition.make_leader(leader_id=1, leader_epoch=0, replicas=replicas, isr=isr)
        records = [Record(offset=i, timestamp=clock.now_ms, key=None, value=b"v") for i in range(10)]
        partition.append_as_leader(encode_batch(records))
        try:
            yield partition
        finally:
            log.close()


def _fetched(partition: Partition, broker_id: int, offset: int, *, start: int = 0,
             now_ms: int = 0) -> None:
    partition.follower_fetched(broker_id, fetch_offset=offset, log_start_offset=start,
                               leader_end_offset=partition.log_end_offset, now_ms=now_ms)


RACKS_BY_ID = {1: "a", 2: "b", 3: "c"}


def test_an_in_sync_follower_in_the_client_rack_is_preferred() -> None:
    with _leader((1, 2, 3), (1, 2, 3)) as partition:
        _fetched(partition, 2, 10)
        _fetched(partition, 3, 10)
        pick = {rack: preferred_read_replica(partition, client_rack=rack, racks=RACKS_BY_ID,
                                             fetch_offset=4, now_ms=100)
                for rack in ("a", "b", "c", "d", "", None)}
        assert pick == {"a": None, "b": 2, "c": 3, "d": None, "": None, None: None}


def test_followers_out_of_the_isr_behind_the_offset_or_unreachable_are_not_offered() -> None:
    with _leader((1, 2, 3), (1, 2)) as partition:
        _fetched(partition, 2, 6, start=3)
        _fetched(partition, 3, 10)

        def pick(rack: str, offset: int, racks: dict[int, str | None] = RACKS_BY_ID) -> int | None:
            return preferred_read_replica(partition, client_rack=rack, racks=racks,
                                          fetch_offset=offset, now_ms=0)

        assert pick("c", 4) is None  # 3 is not in the ISR
        assert pick("b", 4) == 2
        assert pick("b", 7) is None  # 2 has offsets below 6 only
        assert pick("b", 2) is None  # 2's log starts at 3
        assert pick("b", 4, {1: "a", 3: "c"}) is None  # 2 is fenced or lacks the listener


def test_the_most_caught_up_follower_of_the_rack_is_preferred() -> None:
    with _leader((1, 2, 3), (1, 2, 3)) as partition:
        _fetched(partition, 2, 8)
        _fetched(partition, 3, 10)
        racks = {1: "a", 2: "b", 3: "b"}
        assert preferred_read_replica(partition, client_rack="b", racks=racks, fetch_offset=0,
                                      now_ms=0) == 3


def test_a_follower_names_no_preferred_read_replica(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), clock=ManualClock())
    partition = Partition(log, topic_id=uuid.uuid4(), node_id=2, role_pending=True)
    partition.make_follower(leader_id=1, leader_epoch=0, replicas=(1, 2), isr=(1, 2))
    assert preferred_read_replica(partition, client_rack="b", racks={1: "a", 2: "b"},
                                  fetch_offset=0, now_ms=0) is None
    log.close()
