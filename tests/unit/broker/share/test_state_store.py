"""``ShareStateStore`` request by request: which record each write becomes, the fences, the
Initialize/Delete/Read requests and replay's corner cases."""

from __future__ import annotations

from uuid import UUID

import pytest

from broker.share.state_records import (
    RecordType,
    SharePartitionKey,
    ShareSnapshotRecord,
    ShareUpdateRecord,
    decode_share_state_record,
    encode_share_state_record,
    record_key,
)
from broker.share.state_store import (
    AppendRecord,
    ShareState,
    ShareStateStore,
    ShareStateStoreConfig,
)
from broker.share.values import ShareSnapshot, StateBatch
from protocol.errors import FencedLeaderEpochError, FencedStateEpochError, InvalidRequestError

KEY = SharePartitionKey("group", UUID(int=1), 0)
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


class Coordinator:
    """The store with an in-memory log: appends what a request returns, then applies it."""

    def __init__(self, updates_per_snapshot: int = 2) -> None:
        self.store = ShareStateStore(ShareStateStoreConfig(updates_per_snapshot))
        self.log: list[AppendRecord] = []

    def append(self, records: list[AppendRecord]) -> list[AppendRecord]:
        for key, value in records:
            self.store.apply(key, value, len(self.log))
            self.log.append((key, value))
        return records

    def write(self, *batches: StateBatch, state_epoch: int = 0, leader_epoch: int = 0,
              start_offset: int = 0) -> object:
        records = self.append(self.store.write_state(
            KEY, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            state_batches=batches))
        assert len(records) == 1
        return decode_share_state_record(*records[0])


def test_the_first_write_is_a_snapshot_then_updates_then_a_snapshot_every_n() -> None:
    coordinator = Coordinator(updates_per_snapshot=2)
    first = coordinator.write(StateBatch(0, 4, AVAILABLE, 1))
    assert isinstance(first, ShareSnapshotRecord) and first.snapshot_epoch == 0
    second = coordinator.write(StateBatch(5, 9, ACKNOWLEDGED, 1))
    assert second == ShareUpdateRecord(KEY, 0, 0, 0, (StateBatch(5, 9, ACKNOWLEDGED, 1),))
    third = coordinator.write(StateBatch(2, 2, ARCHIVED, 1), start_offset=1)
    # everything since the snapshot, cut at the new start offset
    assert third == ShareUpdateRecord(KEY, 0, 0, 1, (StateBatch(2, 2, ARCHIVED, 1), StateBatch(5, 9, ACKNOWLEDGED, 1)))
    fourth = coordinator.write(StateBatch(3, 3, AVAILABLE, 2), start_offset=-1)  # -1: unchanged
    assert fourth == ShareSnapshotRecord(KEY, 1, ShareSnapshot(0, 0, 1, (
        StateBatch(1, 1, AVAILABLE, 1), StateBatch(2, 2, ARCHIVED, 1), StateBatch(3, 3, AVAILABLE, 2),
        StateBatch(4, 4, AVAILABLE, 1), StateBatch(5, 9, ACKNOWLEDGED, 1))))
    assert coordinator.store.state(KEY) == ShareState(fourth.snapshot, 1)
    assert isinstance(coordinator.write(start_offset=-1), ShareUpdateRecord)


def test_a_new_state_epoch_or_a_start_offset_moving_back_is_a_snapshot() -> None:
    coordinator = Coordinator(updates_per_snapshot=500)
    coordinator.write(StateBatch(10, 14, AVAILABLE, 1), start_offset=10)
    back = coordinator.write(StateBatch(5, 6, AVAILABLE, 1), start_offset=5)
    assert back == ShareSnapshotRecord(KEY, 1, ShareSnapshot(0, 0, 5, (
        StateBatch(5, 6, AVAILABLE, 1), StateBatch(10, 14, AVAILABLE, 1))))
    newer = coordinator.write(state_epoch=1, start_offset=-1)
    assert isinstance(newer, ShareSnapshotRecord) and newer.snapshot.state_epoch == 1 and newer.snapshot_epoch == 2


@pytest.mark.parametrize(("state_epoch", "leader_epoch", "error"), [
    (3, 4, FencedLeaderEpochError),
    (2, 5, FencedStateEpochError),
    (2, 4, FencedLeaderEpochError),  # the leader epoch is checked first, as in Kafka
    (-1, 4, FencedLeaderEpochError),  # an epoch of -1 is not checked; the other one is
    (2, -1, FencedStateEpochError),
])
def test_older_epochs_are_fenced_and_append_nothing(state_epoch: int, leader_epoch: int, error: type[Exception]) -> None:
    coordinator = Coordinator()
    coordinator.write(StateBatch(0, 0, AVAILABLE, 1), state_epoch=3, leader_epoch=5)
    before = coordinator.store.states()
    with pytest.raises(error):
        coordinator.store.write_state(KEY, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                      start_offset=0, state_batches=())
    assert coordinator.store.states() == before


def test_a_read_fences_older_leaders_in_memory_only() -> None:
    coordinator = Coordinator()
    assert coordinator.store.read_state(KEY, leader_epoch=0) is None
    coordinator.write(StateBatch(0, 0, AVAILABLE, 1), leader_epoch=1)
    assert coordinator.store.read_state(KEY, leader_epoch=3) == ShareSnapshot(0, 1, 0, (StateBatch(0, 0, AVAILABLE, 1),))
    with pytest.raises(FencedLeaderEpochError):
        coordinator.store.read_state(KEY, leader_epoch=2)
    with pytest.raises(FencedLeaderEpochError):
        coordinator.store.write_state(KEY, state_epoch=0, leader_epoch=2, start_offset=0, state_batches=())
    reloaded = ShareStateStore()
    for offset, (key, value) in enumerate(coordinator.log):
        reloaded.apply(key, value, offset)
    assert reloaded.read_state(KEY, leader_epoch=2) is not None  # the read's fence is not in the log


def test_initialize_replaces_the_state_and_is_fenced_by_an_older_state_epoch() -> None:
    coordinator = Coordinator()
    coordinator.write(StateBatch(0, 9, ACKNOWLEDGED, 1), state_epoch=1, leader_epoch=4)
    with pytest.raises(FencedStateEpochError):
        coordinator.store.initialize_state(KEY, state_epoch=0, start_offset=0)
    (record,) = coordinator.append(coordinator.store.initialize_state(KEY, state_epoch=2, start_offset=20))
    # a start offset given: the delivery-complete count is known (0)
    assert decode_share_state_record(*record) == ShareSnapshotRecord(
        KEY, 1, ShareSnapshot(2, 4, 20, ()), delivery_complete_count=0)
    assert coordinator.store.state(KEY) == ShareState(ShareSnapshot(2, 4, 20, ()), 1, delivery_complete_count=0)


def test_delete_writes_both_tombstones_and_forgets_the_share_partition() -> None:
    coordinator = Coordinator()
    assert coordinator.store.delete_state(KEY) == []
    coordinator.write(StateBatch(0, 0, AVAILABLE, 1), state_epoch=5, leader_epoch=5)
    coordinator.write(StateBatch(1, 1, AVAILABLE, 1), state_epoch=5, leader_epoch=5)
    records = coordinator.append(coordinator.store.delete_state(KEY))
    assert records == [(record_key(RecordType.SHARE_SNAPSHOT, KEY), None), (record_key(RecordType.SHARE_UPDATE, KEY), None)]
    assert coordinator.store.state(KEY) is None and coordinator.store.states() == {}
    assert coordinator.store.last_redundant_offset() == len(coordinator.log)
    assert isinstance(coordinator.write(), ShareSnapshotRecord)  # starts afresh: epochs forgotten


def test_the_last_redundant_offset_is_the_oldest_latest_snapshot() -> None:
    coordinator = Coordinator(updates_per_snapshot=1)
    assert coordinator.store.last_redundant_offset() == 0
    coordinator.write()  # 0: snapshot
    coordinator.write()  # 1: update
    other = SharePartitionKey("group", UUID(int=1), 1)
    coordinator.append(coordinator.store.initialize_state(other, state_epoch=0, start_offset=0))  # 2
    coordinator.write()  # 3: snapshot of KEY
    assert coordinator.store.last_redundant_offset() == 2


@pytest.mark.parametrize("key, batch", [
    (SharePartitionKey("group", UUID(int=1), -1), None),
    (KEY, StateBatch(5, 4, AVAILABLE, 1)),
    (KEY, StateBatch(-1, 4, AVAILABLE, 1)),
])
def test_malformed_requests_are_invalid(key: SharePartitionKey, batch: StateBatch | None) -> None:
    with pytest.raises(InvalidRequestError):
        ShareStateStore().write_state(key, state_epoch=0, leader_epoch=0, start_offset=0,
                                      state_batches=() if batch is None else (batch,))


def test_replay_skips_unknown_record_types_wraps_the_snapshot_epoch_and_starts_from_a_lone_update() -> None:
    store = ShareStateStore(ShareStateStoreConfig(0))
    store.apply(b"\x00\x09whatever", b"\x00\x00", 0)
    assert store.states() == {}
    store.apply(*encode_share_state_record(ShareUpdateRecord(KEY, 7, 3, 10, (StateBatch(10, 11, AVAILABLE, 1),))), 1)
    assert store.state(KEY) == ShareState(ShareSnapshot(-1, 3, 10, (StateBatch(10, 11, AVAILABLE, 1),)), 7)
    store.apply(*encode_share_state_record(ShareSnapshotRecord(KEY, 65535, ShareSnapshot(0, 3, 0, ()))), 2)
    (record,) = store.write_state(KEY, state_epoch=0, leader_epoch=3, start_offset=0, state_batches=())
    decoded = decode_share_state_record(*record)
    assert isinstance(decoded, ShareSnapshotRecord) and decoded.snapshot_epoch == 65536  # an int32, not a uint16
    store.apply(*encode_share_state_record(ShareSnapshotRecord(KEY, 2**31 - 1, ShareSnapshot(0, 3, 0, ()))), 3)
    (record,) = store.write_state(KEY, state_epoch=0, leader_epoch=3, start_offset=0, state_batches=())
    decoded = decode_share_state_record(*record)
    assert isinstance(decoded, ShareSnapshotRecord) and decoded.snapshot_epoch == -(2**31)  # Java's int + 1


def test_the_config_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="snapshot_update_records_per_snapshot"):
        ShareStateStoreConfig(-1)


def test_snapshots_carry_the_write_time_and_every_record_the_delivery_complete_count() -> None:
    store = ShareStateStore(ShareStateStoreConfig(1))
    log: list[AppendRecord] = []

    def append(records: list[AppendRecord]) -> object:
        for key, value in records:
            store.apply(key, value, len(log))
            log.append((key, value))
        return decode_share_state_record(*records[-1])

    initialized = append(store.initialize_state(KEY, state_epoch=0, start_offset=-1, timestamp_ms=1000))
    assert isinstance(initialized, ShareSnapshotRecord)
    assert (initialized.create_timestamp, initialized.write_timestamp, initialized.delivery_complete_count) == (
        1000, 1000, -1)  # no start offset: the count is not known
    assert isinstance(append(store.initialize_state(KEY, state_epoch=1, start_offset=5, timestamp_ms=1500)),
                      ShareSnapshotRecord)
    assert store.state(KEY) == ShareState(ShareSnapshot(1, -1, 5, ()), 1, 1500, 1500, 0)
    update = append(store.write_state(KEY, state_epoch=1, leader_epoch=0, start_offset=5,
                                      state_batches=(), delivery_complete_count=3, timestamp_ms=2000))
    assert isinstance(update, ShareUpdateRecord) and update.delivery_complete_count == 3
    assert store.state(KEY) == ShareState(ShareSnapshot(1, 0, 5, ()), 1, 1500, 1500, 3)  # updates carry no time
    snapshot = append(store.write_state(KEY, state_epoch=1, leader_epoch=0, start_offset=6,
                                        state_batches=(), delivery_complete_count=4, timestamp_ms=3000))
    assert isinstance(snapshot, ShareSnapshotRecord)
    assert store.state(KEY) == ShareState(ShareSnapshot(1, 0, 6, ()), 2, 3000, 3000, 4)


def test_epochs_of_minus_one_are_not_fenced() -> None:
    coordinator = Coordinator()
    coordinator.write(state_epoch=3, leader_epoch=5)
    with pytest.raises(FencedLeaderEpochError):
        coordinator.write(state_epoch=3, leader_epoch=4)
    with pytest.raises(FencedStateEpochError):
        coordinator.write(state_epoch=2, leader_epoch=5)
    coordinator.write(state_epoch=-1, leader_epoch=-1)
    assert coordinator.store.state(KEY) == ShareState(ShareSnapshot(3, 5, 0, ()), 0)
