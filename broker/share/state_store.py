"""The share coordinator's state of one ``__share_group_state`` partition, sans-IO (Kafka's
``ShareCoordinatorShard``): every share partition's persisted state, rebuilt by replaying the
partition's records, and the records that the Write/Initialize/DeleteShareGroupState requests
turn into.

The caller owns the log. ``write_state``, ``initialize_state`` and ``delete_state`` change
nothing: they check the request and return the records to append (key, value bytes; see
``broker.share.state_records``). The caller appends them and hands each back to ``apply``
with its offset — the only way the state changes, at start-up (replaying the partition) as
after a write, so the state is always the replay of the log applied so far. The caller must
apply a write's records before asking for the next write. Owned by one task, the share
coordinator's.

Replay (``apply``): a ShareSnapshot replaces the share partition's state; a ShareUpdate is
laid over it (``broker.share.state_batches``: cut at the update's start offset unless -1,
the highest (delivery count, state) wins per offset; the update's start offset and leader
epoch replace the state's unless -1); a snapshot tombstone removes the share partition.

Writing (``write_state``): the first write of a share partition is a snapshot (epoch 0); then
updates, until ``snapshot_update_records_per_snapshot`` (Kafka's
``share.coordinator.snapshot.update.records.per.snapshot``, 500) updates followed the latest
snapshot, when the write is a snapshot of the whole state with the next snapshot epoch. A
write whose leader epoch is below the highest seen for the share partition (by writes,
snapshots and reads) is refused with FENCED_LEADER_EPOCH; one whose state epoch is below the
highest snapshot's, with FENCED_STATE_EPOCH, checked in that order, as Kafka does.

Where Samsa writes differently from Kafka, and why — the topic may be compacted:

- Snapshots and updates have different keys (record types 0 and 1), so compaction keeps a
  share partition's latest snapshot and its latest update, and drops the updates between.
  Kafka's updates carry only what the write changed, so replaying a compacted log would lose
  those. Samsa's update carries everything changed since the latest snapshot (the previous
  update's batches combined with the write's), its start offset and its leader epoch are the
  state's after the write, never -1. Combining is a join (associative, commutative,
  idempotent), so the latest update alone gives the same state as every update since the
  snapshot; an update older than the latest snapshot is replayed before it and replaced.
  Replay by Kafka's rules (every update, in order) gives the same state too.
- That needs the start offset not to move back between two snapshots (cutting at a lower
  offset brings nothing back, but the latest update alone would not have been cut by the
  higher one), and the state epoch to be in a record (an update has none). So a write that
  moves the start offset back, or raises the state epoch, is written as a snapshot. (Kafka's
  code of the vendored commit writes the latter as an update, so a reload forgets the new
  state epoch.)
- An update is at most as large as the state it is laid over, so with a snapshot every N
  updates the records of one share partition stay within N + 1 times its state.

A topic that deletes instead of compacting (which, as far as recalled and not checked here, is
what Kafka 4.x does: ``cleanup.policy=delete``, the coordinator deleting the records it no
longer needs) can drop everything below ``last_redundant_offset()``: the oldest of the share
partitions' latest snapshots.

Not persisted, as in Kafka: the leader epoch a read raised the fence to. Forgotten with the
share partition: its epochs, once ``delete_state``'s tombstones are applied (nothing is left
to remember them by once compaction removes the records), so the next write or initialize
starts afresh. The snapshot epoch is an int32 on disk; it is incremented as Kafka's Java ``int``
is, so past 2**31 - 1 it wraps to -2**31 (four billion snapshots of one share partition).

Timestamps (milliseconds, passed in by the caller: the store reads no clock): a snapshot
carries the state's create timestamp and its own write timestamp, both the time of the write
that made it (Kafka's rule for every snapshot a write or an initialize makes); updates carry
none. The delivery-complete count of the latest write (-1: not known; Initialize sets 0 when
it is given a start offset, -1 when not) is in every record and replaces the state's.

Fences, as Kafka's: a leader epoch or state epoch of -1 in a write is not checked against
(nor does it move) the fence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.share.state_batches import combine_state_batches
from broker.share.state_records import (
    RecordType,
    SharePartitionKey,
    ShareSnapshotRecord,
    ShareStateRecord,
    ShareStateTombstone,
    ShareUpdateRecord,
    decode_share_state_record,
    encode_share_state_record,
)
from broker.share.values import ShareSnapshot, StateBatch
from protocol.errors import FencedLeaderEpochError, FencedStateEpochError, InvalidRequestError

__all__ = ["AppendRecord", "ShareState", "ShareStateStore", "ShareStateStoreConfig"]

AppendRecord = tuple[bytes, bytes | None]
"""One record for the caller to append to ``__share_group_state``: key and value bytes."""

_INT32_MIN = -(1 << 31)
_INT32_SPAN = 1 << 32


@dataclass(frozen=True, slots=True)
class ShareStateStoreConfig:
    snapshot_update_records_per_snapshot: int = 500  # share.coordinator.snapshot.update.records.per.snapshot

    def __post_init__(self) -> None:
        if self.snapshot_update_records_per_snapshot < 0:
            raise ValueError("snapshot_update_records_per_snapshot must be at least 0, "
                             f"not {self.snapshot_update_records_per_snapshot}")


@dataclass(frozen=True, slots=True)
class ShareState:
    """One share partition's persisted state, as the replay so far has built it."""

    snapshot: ShareSnapshot
    snapshot_epoch: int
    create_timestamp: int = 0
    write_timestamp: int = 0
    delivery_complete_count: int = -1


@dataclass(slots=True)
class _Entry:
    state: ShareState
    snapshot_offset: int  # the log offset of the latest snapshot
    updates_since_snapshot: int
    changes_since_snapshot: tuple[StateBatch, ...]  # every update's batches since, combined
    leader_epoch_fence: int
    state_epoch_fence: int


class ShareStateStore:
    def __init__(self, config: ShareStateStoreConfig | None = None) -> None:
        self.config = config or ShareStateStoreConfig()
        self._entries: dict[SharePartitionKey, _Entry] = {}
        self._next_offset = 0

    # ------------------------------------------------------------ replay

    def apply(self, key: bytes, value: bytes | None, offset: int) -> None:
        """Replay one record of the partition (records of unknown types are skipped)."""
        record = decode_share_state_record(key, value)
        if record is not None:
            self.apply_record(record, offset)
        self._next_offset = max(self._next_offset, offset + 1)

    def apply_record(self, record: ShareStateRecord, offset: int) -> None:
        if isinstance(record, ShareSnapshotRecord):
            self._apply_snapshot(record, offset)
        elif isinstance(record, ShareUpdateRecord):
            self._apply_update(record, offset)
        elif record.record_type is RecordType.SHARE_SNAPSHOT:
            self._entries.pop(record.key, None)
        self._next_offset = max(self._next_offset, offset + 1)

    def _apply_snapshot(self, record: ShareSnapshotRecord, offset: int) -> None:
        snapshot = record.snapshot
        previous = self._entries.get(record.key)
        self._entries[record.key] = _Entry(
            state=ShareState(snapshot, record.snapshot_epoch, record.create_timestamp,
                             record.write_timestamp, record.delivery_complete_count),
            snapshot_offset=offset,
            updates_since_snapshot=0,
            changes_since_snapshot=(),
            leader_epoch_fence=max(snapshot.leader_epoch, previous.leader_epoch_fence if previous else -1),
            state_epoch_fence=max(snapshot.state_epoch, previous.state_epoch_fence if previous else -1),
        )

    def _apply_update(self, record: ShareUpdateRecord, offset: int) -> None:
        entry = self._entries.get(record.key)
        if entry is None:  # no snapshot before it (not written by Samsa): Kafka starts from it
            empty = ShareSnapshot(state_epoch=-1, leader_epoch=-1, start_offset=-1, state_batches=())
            entry = _Entry(ShareState(empty, record.snapshot_epoch), offset, 0, (), -1, -1)
            self._entries[record.key] = entry
        current = entry.state.snapshot
        start_offset = current.start_offset if record.start_offset == -1 else record.start_offset
        leader_epoch = current.leader_epoch if record.leader_epoch == -1 else record.leader_epoch
        batches = self._combine(current.state_batches, record.state_batches, start_offset=start_offset)
        entry.state = ShareState(
            ShareSnapshot(current.state_epoch, leader_epoch, start_offset, batches), entry.state.snapshot_epoch,
            entry.state.create_timestamp, entry.state.write_timestamp, record.delivery_complete_count)
        entry.changes_since_snapshot = self._combine(
            entry.changes_since_snapshot, record.state_batches, start_offset=start_offset)
        entry.updates_since_snapshot += 1
        entry.leader_epoch_fence = max(entry.leader_epoch_fence, record.leader_epoch)

    def _combine(
        self, current: Iterable[StateBatch], new: Iterable[StateBatch], *, start_offset: int
    ) -> tuple[StateBatch, ...]:
        """The merge rule (a method so that tests can show what a broken one does)."""
        return combine_state_batches(current, new, start_offset=start_offset)

    # ------------------------------------------------------------ requests

    def write_state(
        self,
        key: SharePartitionKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        state_batches: Iterable[StateBatch],
        delivery_complete_count: int = -1,
        timestamp_ms: int = 0,
    ) -> list[AppendRecord]:
        """WriteShareGroupState for one share partition: the records to append (one)."""
        batches = tuple(state_batches)
        _check_request(key, batches)
        entry = self._entries.get(key)
        self._check_fences(entry, state_epoch=state_epoch, leader_epoch=leader_epoch)
        if entry is None:
            snapshot = ShareSnapshot(state_epoch, leader_epoch, start_offset,
                                     self._combine((), batches, start_offset=start_offset))
            return [encode_share_state_record(ShareSnapshotRecord(
                key, 0, snapshot, timestamp_ms, timestamp_ms, delivery_complete_count))]
        current = entry.state.snapshot
        new_start = current.start_offset if start_offset == -1 else start_offset
        new_leader = current.leader_epoch if leader_epoch == -1 else leader_epoch
        new_state_epoch = current.state_epoch if state_epoch == -1 else state_epoch
        if (new_state_epoch != current.state_epoch or new_start < current.start_offset
                or entry.updates_since_snapshot >= self.config.snapshot_update_records_per_snapshot):
            snapshot = ShareSnapshot(new_state_epoch, new_leader, new_start,
                                     self._combine(current.state_batches, batches, start_offset=new_start))
            return [encode_share_state_record(ShareSnapshotRecord(
                key, _next_epoch(entry), snapshot, timestamp_ms, timestamp_ms, delivery_complete_count))]
        update = ShareUpdateRecord(
            key, entry.state.snapshot_epoch, new_leader, new_start,
            self._update_batches(entry, batches, start_offset=new_start), delivery_complete_count,
        )
        return [encode_share_state_record(update)]

    def _update_batches(
        self, entry: _Entry, batches: tuple[StateBatch, ...], *, start_offset: int
    ) -> tuple[StateBatch, ...]:
        """What an update carries: every change since the latest snapshot (see the module
        docstring: that is what lets compaction keep only the latest update)."""
        return self._combine(entry.changes_since_snapshot, batches, start_offset=start_offset)

    def initialize_state(
        self, key: SharePartitionKey, *, state_epoch: int, start_offset: int, timestamp_ms: int = 0
    ) -> list[AppendRecord]:
        """InitializeShareGroupState: a snapshot of the share partition with no in-flight
        records from ``start_offset`` (-1: not known yet) at ``state_epoch``, replacing any
        state; refused with FENCED_STATE_EPOCH below the recorded state epoch."""
        _check_request(key, ())
        entry = self._entries.get(key)
        if entry is not None and entry.state_epoch_fence > state_epoch:
            raise FencedStateEpochError(f"{key}: state epoch {state_epoch} < {entry.state_epoch_fence}")
        leader_epoch = entry.state.snapshot.leader_epoch if entry is not None else -1
        snapshot = ShareSnapshot(state_epoch, leader_epoch, start_offset, ())
        epoch = 0 if entry is None else _next_epoch(entry)
        delivery_complete_count = -1 if start_offset == -1 else 0
        return [encode_share_state_record(ShareSnapshotRecord(
            key, epoch, snapshot, timestamp_ms, timestamp_ms, delivery_complete_count))]

    def delete_state(self, key: SharePartitionKey) -> list[AppendRecord]:
        """DeleteShareGroupState: tombstones for both of the share partition's keys (none if
        it has no state)."""
        _check_request(key, ())
        if key not in self._entries:
            return []
        return [encode_share_state_record(ShareStateTombstone(record_type, key)) for record_type in RecordType]

    def read_state(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareSnapshot | None:
        """ReadShareGroupState: the state (None: never written), refused with
        FENCED_LEADER_EPOCH below the highest leader epoch seen; fences older leaders from
        then on (in memory only)."""
        _check_request(key, ())
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.leader_epoch_fence > leader_epoch:
            raise FencedLeaderEpochError(f"{key}: leader epoch {leader_epoch} < {entry.leader_epoch_fence}")
        entry.leader_epoch_fence = leader_epoch
        return entry.state.snapshot

    def _check_fences(self, entry: _Entry | None, *, state_epoch: int, leader_epoch: int) -> None:
        if entry is None:
            return
        if leader_epoch != -1 and entry.leader_epoch_fence > leader_epoch:
            raise FencedLeaderEpochError(f"leader epoch {leader_epoch} < {entry.leader_epoch_fence}")
        if state_epoch != -1 and entry.state_epoch_fence > state_epoch:
            raise FencedStateEpochError(f"state epoch {state_epoch} < {entry.state_epoch_fence}")

    # ------------------------------------------------------------ views

    def state(self, key: SharePartitionKey) -> ShareState | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.state

    def states(self) -> dict[SharePartitionKey, ShareState]:
        return {key: entry.state for key, entry in self._entries.items()}

    def last_redundant_offset(self) -> int:
        """Every record below this offset can be deleted without changing what a replay of
        the rest builds: the oldest of the share partitions' latest snapshots (everything
        applied, when there is no share partition)."""
        return min((entry.snapshot_offset for entry in self._entries.values()), default=self._next_offset)


def _next_epoch(entry: _Entry) -> int:
    """Kafka's ``snapshotEpoch() + 1`` on a Java int: two's-complement wrap past 2**31 - 1."""
    return (entry.state.snapshot_epoch + 1 - _INT32_MIN) % _INT32_SPAN + _INT32_MIN


def _check_request(key: SharePartitionKey, batches: tuple[StateBatch, ...]) -> None:
    if key.partition < 0:
        raise InvalidRequestError(f"{key}: the partition id cannot be a negative number")
    for batch in batches:
        if not 0 <= batch.first_offset <= batch.last_offset:
            raise InvalidRequestError(f"{key}: state batch {batch.first_offset}-{batch.last_offset}")
