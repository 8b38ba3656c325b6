"""The share-group half of the group coordinator (``broker.group.share_coordinator``): the
heartbeat routed to ``ShareGroup``, the group-type conflicts with classic groups, one timer per
group at the earliest session deadline, the epoch records written (and a failed write undone),
partition loading and unloading, and the records replayed at load. Time is a ``ManualClock``
and timers the fake ``call_later`` of the classic coordinator's tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest

from broker.group.coordinator import GroupCoordinator
from broker.group.loading import LoadedPartition
from broker.group.share_records import (
    InitializedTopics,
    ShareGroupRecord,
    share_group_epoch_record,
    share_group_partitions_record,
    share_group_tombstones,
)
from broker.group.values import GroupConfig, JoinRequest, Protocol
from broker.share.share_group import TopicMetadata
from protocol.errors import ErrorCode, NotLeaderOrFollowerError
from protocol.records import Record
from replication.metadata.group_config import ShareGroupSettings
from storage.clock import ManualClock
from tests.unit.broker.test_group_coordinator import FakeTimers

TOPIC = uuid.UUID(int=7)
TOPICS = {"orders": TopicMetadata(TOPIC, 4)}
SESSION_MS = 45_000


@dataclass
class RecordingStore:
    """What ``OffsetStore`` would append, kept as the records a load would replay."""

    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    fail: bool = False

    def store_share_group(self, group_id: str, epoch: int, initialized: InitializedTopics | None) -> None:
        if self.fail:
            raise NotLeaderOrFollowerError("moved")
        self.records.append(share_group_epoch_record(group_id, epoch))
        if initialized is not None:
            self.records.append(share_group_partitions_record(group_id, initialized))

    def delete_share_group(self, group_id: str) -> None:
        self.records.extend(share_group_tombstones(group_id))

    def replay(self) -> dict[str, ShareGroupRecord]:
        loaded = LoadedPartition(0)
        for offset, (key, value) in enumerate(self.records):
            loaded.replay(Record(offset=offset, timestamp=0, key=key, value=value))
        return loaded.share_groups


def make(store: RecordingStore | None = None) -> tuple[GroupCoordinator, FakeTimers]:
    timers = FakeTimers(ManualClock())
    coordinator = GroupCoordinator(config=GroupConfig(), clock=timers.clock, call_later=timers.call_later,
                                   share_store=store)
    return coordinator, timers


def join(coordinator: GroupCoordinator, member_id: str, group_id: str = "q", epoch: int = 0):
    return coordinator.share.heartbeat(group_id, member_id, epoch, ["orders"] if epoch == 0 else None,
                                       topics=TOPICS)


def partitions_of(result) -> set[int]:
    assert result.assignment is not None
    return set(result.assignment.get(TOPIC, ()))


def test_two_members_split_the_partitions_and_one_leaving_gives_the_other_all() -> None:
    coordinator, _ = make()
    a = join(coordinator, "a")
    assert (a.error, a.member_epoch, partitions_of(a)) == (ErrorCode.NONE, 1, {0, 1, 2, 3})
    b = join(coordinator, "b")
    assert b.member_epoch == 2 and len(partitions_of(b)) == 2
    a2 = join(coordinator, "a", epoch=1)
    assert partitions_of(a2) == {0, 1, 2, 3} - partitions_of(b)
    left = coordinator.share.heartbeat("q", "b", -1, None, topics=TOPICS)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    a3 = join(coordinator, "a", epoch=2)
    assert (a3.member_epoch, partitions_of(a3)) == (3, {0, 1, 2, 3})


def test_session_expiry_runs_on_the_group_timer_and_tells_the_hooks() -> None:
    coordinator, timers = make()
    removed: list[tuple[str, tuple[str, ...]]] = []
    coordinator.share.on_members_removed.append(lambda group_id, members: removed.append((group_id, members)))
    join(coordinator, "a")
    join(coordinator, "b")
    assert len(timers.armed) == 1  # one timer per group, at the earliest deadline
    timers.advance(SESSION_MS - 1)
    assert join(coordinator, "a", epoch=1).error is ErrorCode.NONE  # a heartbeats; b does not
    timers.advance(1)
    assert removed == [("q", ("b",))]
    assert set(coordinator.share.groups["q"].members) == {"a"}
    assert len(timers.armed) == 1  # re-armed for a's deadline
    timers.advance(SESSION_MS)
    assert coordinator.share.groups["q"].members == {}
    assert timers.armed == []  # an Empty group has no timer


def test_group_settings_come_from_the_group_configs() -> None:
    coordinator, _ = make()
    coordinator.share.settings = lambda group_id: ShareGroupSettings(heartbeat_interval_ms=7000, max_size=1)
    assert join(coordinator, "a").heartbeat_interval_ms == 7000
    assert join(coordinator, "b").error is ErrorCode.GROUP_MAX_SIZE_REACHED


def test_a_group_id_names_one_type_of_group() -> None:
    coordinator, _ = make()
    request = JoinRequest(member_id="", client_id="c", protocol_type="consumer",
                          protocols=(Protocol("range", b""),), session_timeout_ms=10_000,
                          rebalance_timeout_ms=10_000, require_known_member_id=False)
    coordinator.get_or_create_group("classic")
    conflict = join(coordinator, "a", group_id="classic")
    assert (conflict.error, conflict.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                        "Group classic is not a share group.")
    join(coordinator, "a")
    response = coordinator.join("q", request)
    assert not isinstance(response, type(None))
    assert getattr(response, "error_code", None) is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert coordinator.heartbeat("q", "a", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert "q" not in coordinator.groups


@pytest.mark.parametrize(
    ("group_id", "member_id", "epoch", "topics", "error"),
    [
        ("", "a", 0, ["orders"], ErrorCode.INVALID_REQUEST),
        ("q", "", 0, ["orders"], ErrorCode.INVALID_REQUEST),
        ("q", "a", 0, None, ErrorCode.INVALID_REQUEST),
        ("q", "a", 3, None, ErrorCode.GROUP_ID_NOT_FOUND),  # no such share group
        ("q", "a", -1, None, ErrorCode.GROUP_ID_NOT_FOUND),
    ],
)
def test_request_errors_before_the_group_exists(
    group_id: str, member_id: str, epoch: int, topics: list[str] | None, error: ErrorCode
) -> None:
    coordinator, _ = make()
    result = coordinator.share.heartbeat(group_id, member_id, epoch, topics, topics=TOPICS)
    assert result.error is error
    assert coordinator.share.groups == {}


def test_a_loading_or_moved_partition_answers_before_the_group_changes() -> None:
    coordinator, _ = make()
    join(coordinator, "a")
    coordinator.begin_loading([0])
    assert join(coordinator, "b").error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    coordinator.fail_loading(0)
    assert join(coordinator, "b").error is ErrorCode.NOT_COORDINATOR
    assert set(coordinator.share.groups["q"].members) == {"a"}


def test_epoch_records_are_written_and_replayed_as_an_empty_group() -> None:
    store = RecordingStore()
    coordinator, _ = make(store)
    join(coordinator, "a")
    join(coordinator, "b")
    join(coordinator, "a", epoch=1)  # no epoch change: nothing written
    assert len(store.records) == 3  # epoch 1 + partitions, epoch 2
    loaded = store.replay()
    assert loaded["q"].epoch == 2
    assert loaded["q"].initialized == {TOPIC: ("orders", frozenset(range(4)))}

    fresh, _ = make(store)
    fresh.complete_loading(0, {}, share_groups=loaded)
    group = fresh.share.groups["q"]
    assert (group.group_epoch, group.members) == (2, {})
    stale = join(fresh, "a", epoch=2)  # a member of the old coordinator rejoins
    assert stale.error is ErrorCode.UNKNOWN_MEMBER_ID
    rejoined = join(fresh, "a")
    assert (rejoined.member_epoch, partitions_of(rejoined)) == (3, {0, 1, 2, 3})
    assert fresh.share.share_partitions("q") == {TOPIC: ("orders", frozenset(range(4)))}


def test_a_failed_write_fails_the_heartbeat_and_changes_nothing() -> None:
    store = RecordingStore()
    coordinator, _ = make(store)
    join(coordinator, "a")
    store.fail = True
    failed = join(coordinator, "b")
    assert failed.error is ErrorCode.NOT_COORDINATOR
    group = coordinator.share.groups["q"]
    assert (set(group.members), group.group_epoch) == ({"a"}, 1)
    store.fail = False
    assert join(coordinator, "b").member_epoch == 2
    store.fail = True
    assert join(coordinator, "c", group_id="new").error is ErrorCode.NOT_COORDINATOR
    assert "new" not in coordinator.share.groups


def test_delete_needs_an_empty_group_and_writes_tombstones() -> None:
    store = RecordingStore()
    coordinator, _ = make(store)
    join(coordinator, "a")
    assert coordinator.share.check_delete("q") is ErrorCode.NON_EMPTY_GROUP
    assert coordinator.share.check_delete("nope") is ErrorCode.GROUP_ID_NOT_FOUND
    coordinator.share.heartbeat("q", "a", -1, None, topics=TOPICS)
    assert coordinator.share.delete("q") is ErrorCode.NONE
    assert "q" not in coordinator.share.groups
    assert store.replay() == {}


def test_unload_forgets_the_partitions_share_groups_and_their_timers() -> None:
    coordinator, timers = make()
    join(coordinator, "a")
    assert coordinator.unload(0) == ["q"]
    assert coordinator.share.groups == {} and timers.armed == []


def test_offset_commits_to_a_share_group_are_group_id_not_found() -> None:
    from broker.group.offsets import validate_offset_commit

    coordinator, _ = make()
    join(coordinator, "a")

    class FakeBroker:
        group_coordinator = coordinator
        clock = ManualClock()

    error = validate_offset_commit(FakeBroker(), "q", generation_id=-1, member_id="",  # type: ignore[arg-type]
                                   group_instance_id=None, api_version=9)
    assert error is ErrorCode.GROUP_ID_NOT_FOUND

