"""One partition's replication state on this broker: the log, its role, leader epoch and high
watermark; as leader, what it knows of its followers and its ISR (``replication.isr``).

Roles (Kafka's ``Partition.makeLeader`` / ``makeFollower``), as the metadata image says:
- **leader**: takes appends (``append_as_leader``; anything else answers
  NOT_LEADER_OR_FOLLOWER), serves followers' fetches (``follower_fetched`` records each
  follower's log end offset), and owns the high watermark: the minimum log end offset over the
  maximal ISR, its own included (Kafka's ``maybeIncrementLeaderHW``). Becoming leader of a new
  epoch writes that epoch's start offset (the log end offset) into the leader-epoch cache
  before anything is appended, so a follower of an older epoch learns where it diverges. It
  proposes ISR changes (``maybe_expand_isr``, ``maybe_shrink_isr``); the broker sends them to
  the controller (AlterPartition) and hands the answer back (``isr_committed`` /
  ``isr_change_failed``).
- **follower**: appends the leader's batches verbatim (``append_as_follower``), truncates where
  its log diverges from the leader's (``truncate_on_divergence``), and takes the leader's high
  watermark and log start offset, capped by its own log end (``follower_high_watermark``).

Invariants:
- ``log_start_offset <= high_watermark <= log_end_offset``; the high watermark only moves back
  when the log is truncated below it (a follower after an unclean election);
- on a single node (``replicas == (node_id,)``) the ISR is this node alone, so the high
  watermark reaches the log end offset inside every append;
- a partition starts from the high watermark checkpointed in ``replication-offset-checkpoint``
  (``replication.high_watermark_checkpoint``; 0 when missing), bounded by its log, as Kafka's
  ``Partition.createLog``;
- consumers read below the high watermark only (``read`` caps at it); read_committed consumers
  below the last stable offset, ``min(first offset of the oldest open transaction, high
  watermark)`` (Kafka's ``UnifiedLog.lastStableOffset``); followers up to the log end offset.
  How far a fetch reads is its ``FetchIsolation``.

Appends come through ``replication.append`` (the one entry point) or the follower fetcher,
which then check the delayed operations watching this partition (``replication.purgatory``);
this class knows nothing of them. Time is passed in (``now_ms``). Owned by the broker's event
loop.
"""

from __future__ import annotations

import contextlib
import enum
from dataclasses import dataclass
from uuid import UUID

from protocol.errors import (
    FencedLeaderEpochError,
    KafkaError,
    KafkaStorageError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    UnknownLeaderEpochError,
)
from replication.events import EVENTS
from replication.isr import FollowerReplica, IsrChange, IsrState
from storage.log import AppendCondition, AppendResult, Log
from storage.producer_state import AppendOrigin, EndMarker
from storage.segment import FetchSlice
from storage.transaction_index import AbortedTxn

__all__ = [
    "HIGH_WATERMARK", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "FetchIsolation", "FollowerFetch",
    "Partition",
]


class FetchIsolation(enum.Enum):
    """How far a fetch may read (Kafka's ``FetchIsolation``): a follower up to the log end
    offset, a read_uncommitted consumer up to the high watermark, a read_committed consumer up
    to the last stable offset."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"

    @classmethod
    def of(cls, *, replica_id: int, read_committed: bool) -> FetchIsolation:
        """Kafka's ``FetchIsolation.of``: a replica id >= 0 is a follower."""
        if replica_id >= 0:
            return cls.LOG_END
        return cls.TXN_COMMITTED if read_committed else cls.HIGH_WATERMARK

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK: delete up to the high watermark
UNDEFINED_EPOCH = -1
NO_LEADER = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class FollowerFetch:
    """What the leader answers a follower for one partition (``fetch_for_follower``): the
    records read, or where the follower's log diverges; whether the high watermark moved and
    the ISR change to propose, if any."""

    slice: FetchSlice | None = None
    diverging: tuple[int, int] | None = None
    high_watermark_moved: bool = False
    isr_change: IsrChange | None = None
    log_start_moved: bool = False  # the follower's log start offset changed (DeleteRecords waits)


class Partition:
    def __init__(
        self, log: Log, *, topic_id: UUID, leader_epoch: int = 0, node_id: int = 0,
        high_watermark_checkpoint: int = 0, role_pending: bool = False,
    ) -> None:
        """By default this node leads alone (a single node). ``role_pending``: no role yet —
        the replica manager gives it one (``make_leader`` / ``make_follower``) at once."""
        self.log = log
        self.topic = log.topic
        self.partition = log.partition
        self.topic_id = topic_id
        self.node_id = node_id
        self.leader_epoch = leader_epoch
        self.leader_id = NO_LEADER if role_pending else node_id
        self.replicas: tuple[int, ...] = (node_id,)
        self.isr_state = IsrState((node_id,), 0)
        self.followers: dict[int, FollowerReplica] = {}  # as leader: every other replica
        self.leader_epoch_start_offset = log.log_end_offset  # as leader: where its epoch began
        # Kafka's UnifiedLog.updateHighWatermark: the checkpoint, within [log start, log end].
        self.initial_high_watermark = min(max(high_watermark_checkpoint, log.log_start_offset),
                                          log.log_end_offset)
        self.high_watermark = self.initial_high_watermark
        self.maybe_advance_high_watermark()

    # -- reading the state ----------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR (what ``min.insync.replicas`` is checked against)."""
        return self.isr_state.isr

    @property
    def partition_epoch(self) -> int:
        return self.isr_state.partition_epoch

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.log.first_unstable_offset
        if first_unstable is not None and first_unstable < self.high_watermark:
            return first_unstable
        return self.high_watermark

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last batch in the log (what a follower's Fetch says it has)."""
        latest = self.log.leader_epoch_cache.latest_epoch
        return UNDEFINED_EPOCH if latest is None else latest

    @property
    def _empty(self) -> bool:
        """No batch was ever written at or above the log start (no epoch known)."""
        return (self.log.leader_epoch_cache.latest_epoch is None
                and self.log_end_offset == self.log_start_offset)

    def check_leader(self) -> None:
        """NOT_LEADER_OR_FOLLOWER unless this node leads the partition."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"node {self.node_id} is not the leader of {self.topic}-{self.partition} "
                f"(leader {self.leader_id}, epoch {self.leader_epoch})")

    def check_current_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's ``checkCurrentLeaderEpoch``: -1 = not given; older -> FENCED_LEADER_EPOCH,
        newer -> UNKNOWN_LEADER_EPOCH."""
        if current_leader_epoch == -1:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError()
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError()

    # -- appends as leader ----------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_verified: bool = False,
        required_acks: int = 1,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        """Append client (or coordinator) batches, then move the high watermark. As Kafka's
        ``appendRecordsToLeader``: NOT_LEADER_OR_FOLLOWER on a follower; NOT_ENOUGH_REPLICAS
        for acks=-1 when the ISR is smaller than ``min.insync.replicas``. ``condition``: a
        conditional append, decided by this leader's log (OFFSET_CONFLICT, nothing written)."""
        self.check_leader()
        if required_acks == -1 and len(self.isr) < self.log.config.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"the ISR of {self.topic}-{self.partition} is {list(self.isr)}, fewer than "
                f"min.insync.replicas ({self.log.config.min_insync_replicas})")
        result = self.log.append_as_leader(
            records, leader_epoch=self.leader_epoch, origin=origin,
            transaction_verified=transaction_verified, condition=condition,
        )
        EVENTS.leader_append(self.topic, self.partition, self.leader_epoch, result.first_offset)
        self.maybe_advance_high_watermark()
        return result

    def append_end_marker(self, producer_id: int, producer_epoch: int, marker: EndMarker) -> AppendResult:
        """Write a transaction's COMMIT or ABORT marker, then move the high watermark."""
        self.check_leader()
        result = self.log.append_end_marker(
            producer_id, producer_epoch, marker, leader_epoch=self.leader_epoch
        )
        self.maybe_advance_high_watermark()
        return result

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        return self.log.producer_state.has_ongoing_transaction(producer_id, producer_epoch)

    def aborted_transactions(self, start_offset: int) -> list[AbortedTxn]:
        """What a read_committed fetch from ``start_offset`` must skip (reads stop at the LSO)."""
        return self.log.aborted_transactions(start_offset, self.last_stable_offset)

    def maybe_advance_high_watermark(self) -> bool:
        """As leader, move the high watermark to the smallest log end offset of the maximal
        ISR (Kafka's ``maybeIncrementLeaderHW``); a follower's is the leader's. True when it
        moved."""
        if not self.is_leader:
            return False
        new = self.log.log_end_offset
        for broker_id in self.isr_state.maximal_isr:
            follower = self.followers.get(broker_id)
            if follower is not None:
                new = min(new, follower.log_end_offset)
        if new <= self.high_watermark:
            return False
        self.high_watermark = new
        EVENTS.high_watermark(self.topic, self.partition, new)
        return True

    def enough_replicas(self, required_offset: int) -> tuple[bool, KafkaError | None]:
        """An acks=-1 append ending at ``required_offset``: (done, error). Done once the high
        watermark reaches it — NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
        ``min.insync.replicas`` meanwhile — or at once NOT_LEADER_OR_FOLLOWER when this node
        no longer leads (Kafka's ``checkEnoughReplicasReachOffset``)."""
        if not self.is_leader:
            return True, NotLeaderOrFollowerError()
        if self.high_watermark < required_offset:
            return False, None
        if len(self.isr) < self.log.config.min_insync_replicas:
            return True, NotEnoughReplicasAfterAppendError(
                f"the ISR of {self.topic}-{self.partition} shrank to {list(self.isr)} after "
                "the append")
        return True, None

    # -- serving followers (leader) -------------------------------------------------------------

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """A follower's Fetch says its log ends at ``fetch_offset`` with a batch of
        ``last_fetched_epoch`` (KIP-320): (epoch, end offset) of this leader's log where the
        follower's diverges, or None when it does not (Kafka's ``readFromLog`` check)."""
        if last_fetched_epoch == UNDEFINED_EPOCH:
            return None
        epoch, end_offset = self.end_offset_for_epoch(last_fetched_epoch)
        if epoch == UNDEFINED_EPOCH:  # the follower's epoch is newer than any known here
            return self.leader_epoch, self.log_end_offset
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The leader-epoch cache's ``end_offset_for``, as if the current leader epoch had been
        written at its start (it is not, for a leader of an empty log: ``make_leader``)."""
        cache = self.log.leader_epoch_cache
        latest = cache.latest_epoch
        if self.is_leader and (latest is None or latest < self.leader_epoch):
            if epoch == self.leader_epoch:
                return epoch, self.log_end_offset
            if epoch > self.leader_epoch:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if latest is None:  # below the only (virtual) entry: it starts at the log end
                return (epoch, self.log_end_offset) if epoch != UNDEFINED_EPOCH else (
                    UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        return cache.end_offset_for(epoch, self.log_end_offset)

    def follower_fetched(self, replica_id: int, *, fetch_offset: int, log_start_offset: int,
                         leader_end_offset: int, now_ms: int) -> bool:
        """Record a follower's Fetch (read when this log ended at ``leader_end_offset``), then
        move the high watermark; True when it moved. NOT_LEADER_OR_FOLLOWER when this node does
        not lead or ``replica_id`` is not a replica (Kafka's ``updateFollowerFetchState``)."""
        self.check_leader()
        follower = self.followers.get(replica_id)
        if follower is None:
            raise NotLeaderOrFollowerError(
                f"broker {replica_id} is not a replica of {self.topic}-{self.partition}")
        follower.fetched(fetch_offset=fetch_offset, log_start_offset=log_start_offset,
                         leader_end_offset=leader_end_offset, now_ms=now_ms)
        return self.maybe_advance_high_watermark()

    def fetch_for_follower(
        self, replica_id: int, *, fetch_offset: int, last_fetched_epoch: int,
        current_leader_epoch: int, log_start_offset: int, max_bytes: int, now_ms: int,
        min_one_message: bool = True,
    ) -> FollowerFetch:
        """A follower's Fetch of this partition, as the leader serves it (Kafka's
        ``Partition.fetchRecords`` for a follower): the epoch and leadership checks, the
        diverging-epoch check (then nothing is read), the read up to the log end offset, the
        follower's progress (``follower_fetched``) and the ISR expansion it allows."""
        self.check_current_leader_epoch(current_leader_epoch)
        self.check_leader()
        diverging = self.diverging_epoch(last_fetched_epoch, fetch_offset)
        if diverging is not None:
            return FollowerFetch(diverging=diverging)
        leader_end = self.log_end_offset
        read = self.read(fetch_offset, max_bytes, min_one_message=min_one_message,
                         isolation=FetchIsolation.LOG_END)
        follower = self.followers.get(replica_id)
        log_start_before = None if follower is None else follower.log_start_offset
        moved = self.follower_fetched(replica_id, fetch_offset=fetch_offset,
                                      log_start_offset=log_start_offset,
                                      leader_end_offset=leader_end, now_ms=now_ms)
        return FollowerFetch(slice=read, high_watermark_moved=moved,
                             isr_change=self.maybe_expand_isr(),
                             log_start_moved=log_start_before != log_start_offset)

    def maybe_expand_isr(self) -> IsrChange | None:
        """The ISR plus the followers that caught up (log end at or above the high watermark
        and the start of this leader's epoch: Kafka's ``isFollowerInSync``), to propose; None
        when nobody joins or a change is in flight."""
        if not self.is_leader or self.isr_state.pending is not None:
            return None
        joining = [
            broker_id for broker_id, follower in self.followers.items()
            if broker_id not in self.isr and follower.log_end_offset >= self.high_watermark
            and follower.log_end_offset >= self.leader_epoch_start_offset
        ]
        if not joining:
            return None
        return self.isr_state.propose((*self.isr, *sorted(joining)), self.leader_epoch)

    def maybe_shrink_isr(self, now_ms: int, lag_max_ms: int) -> IsrChange | None:
        """The ISR without the followers that have not caught up for ``lag_max_ms``
        (``replica.lag.time.max.ms``), to propose; None when all keep up or a change is in
        flight (Kafka's ``maybeShrinkIsr``)."""
        if not self.is_leader or self.isr_state.pending is not None:
            return None
        leader_end = self.log_end_offset
        lagging = {
            broker_id for broker_id in self.isr if broker_id != self.node_id
            and broker_id in self.followers
            and not self.followers[broker_id].caught_up_within(now_ms, lag_max_ms, leader_end)
        }
        if not lagging:
            return None
        return self.isr_state.propose(
            tuple(r for r in self.isr if r not in lagging), self.leader_epoch)

    def isr_committed(self, *, leader_epoch: int, partition_epoch: int,
                      isr: tuple[int, ...]) -> bool:
        """The controller's answer to our AlterPartition: adopt the ISR it committed (if it is
        for this leader epoch); then the high watermark may move. True when it moved. An answer
        for an older leader epoch is ignored: it settles nothing proposed in this one (Kafka
        ignores an AlterPartition answer once the partition state moved on)."""
        if leader_epoch != self.leader_epoch:
            return False
        self.isr_state.committed(isr, partition_epoch)
        self.isr_state.failed()  # answered: whatever was pending is settled
        EVENTS.emit("isr", topic=self.topic, partition=self.partition, epoch=leader_epoch,
                    isr=list(isr), partition_epoch=partition_epoch)
        return self.maybe_advance_high_watermark()

    def isr_change_failed(self, change: IsrChange | None = None) -> None:
        """The controller says it did not make ``change`` (INELIGIBLE_REPLICA,
        OPERATION_NOT_ATTEMPTED): forget it; the next check proposes again. A change other
        than the one pending now is no longer pending: nothing to do. Never for a lost answer:
        the change may be committed, so it stays pending until an answer or the image says."""
        self.isr_state.failed(change)

    # -- following ------------------------------------------------------------------------------

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append the leader's batches verbatim (offsets and epochs are the leader's)."""
        if self.is_leader:
            raise NotLeaderOrFollowerError(f"{self.topic}-{self.partition} is led here")
        return self.log.append_as_follower(records)

    def follower_high_watermark(self, leader_high_watermark: int, leader_log_start: int) -> bool:
        """Take the leader's high watermark (capped by this log's end) and log start offset
        (Kafka's follower ``processPartitionData``); True when the high watermark moved."""
        new = min(leader_high_watermark, self.log_end_offset)
        moved = new != self.high_watermark and new >= 0
        if moved:
            self.high_watermark = max(new, self.log_start_offset)
            EVENTS.high_watermark(self.topic, self.partition, self.high_watermark)
        target = min(leader_log_start, self.high_watermark)
        if target > self.log_start_offset:
            self.log.increment_log_start_offset(target)
        return moved

    def truncate_on_divergence(self, epoch: int, end_offset: int) -> int:
        """The leader says this log diverges after (``epoch``, ``end_offset``): truncate to
        where both logs agree as far as this log's epochs tell (KIP-320; Kafka's
        ``truncateOnFetchResponse``). If this log lacks ``epoch``, it truncates to the end of
        its largest earlier epoch, and its next Fetch (with that epoch) asks again. Never by
        the high watermark (the pre-KIP-101 rule that loses acknowledged records). Returns the
        offset truncated to."""
        log_end = self.log_end_offset
        if end_offset == UNDEFINED_EPOCH_OFFSET:  # the leader knows nothing of our epochs
            target = min(self.high_watermark, log_end)
        elif epoch == UNDEFINED_EPOCH:  # the leader's log holds no epoch: keep what it has
            target = min(end_offset, log_end)
        else:
            local_epoch, local_end = self.log.leader_epoch_cache.end_offset_for(epoch, log_end)
            if local_epoch == epoch:
                target = min(end_offset, local_end, log_end)
            elif local_epoch == UNDEFINED_EPOCH:
                target = min(end_offset, log_end)
            else:
                target = min(local_end, log_end)
        if target < log_end:
            EVENTS.emit("truncate", topic=self.topic, partition=self.partition, offset=target,
                        log_end=log_end, why=f"diverging epoch {epoch} ends at {end_offset}")
        self.truncate_to(target)
        return target

    def truncate_to(self, offset: int) -> None:
        """Truncate the log to ``offset`` (the high watermark follows it down)."""
        if offset < self.log_start_offset:
            self.log.truncate_fully_and_start_at(offset)
        else:
            self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and restart it, empty, at ``offset`` (a follower behind the
        leader's log start)."""
        EVENTS.emit("truncate", topic=self.topic, partition=self.partition, offset=offset,
                    log_end=self.log_end_offset, why="behind the leader's log start")
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

    # -- reads ----------------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        min_one_message: bool,
        isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
    ) -> FetchSlice | None:
        return self.log.read(offset, max_bytes, max_offset=self.fetch_limit(isolation),
                             min_one_message=min_one_message)

    def fetch_limit(self, isolation: FetchIsolation) -> int | None:
        """The offset a fetch with ``isolation`` reads up to (None: the log end)."""
        if isolation is FetchIsolation.TXN_COMMITTED:
            return self.last_stable_offset
        if isolation is FetchIsolation.HIGH_WATERMARK:
            return self.high_watermark
        return None

    def delete_records(self, offset: int) -> int:
        """DeleteRecords (Kafka's ``deleteRecordsOnLeader``): raise the log start offset to
        ``offset`` (-1: the high watermark); returns the low watermark (the smallest log start
        offset of the replicas this leader knows). Segments below it go at the next retention
        run; followers take the new log start from their next Fetch."""
        self.check_leader()
        if not self.log.config.delete:
            raise PolicyViolationError(
                f"Records of partition {self.topic}-{self.partition} can not be deleted due to "
                "the configured policy"
            )
        target = self.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise OffsetOutOfRangeError(
                f"The offset {target} for partition {self.topic}-{self.partition} is not valid"
            )
        if target > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {target} of partition "
                f"{self.topic}-{self.partition} since it is larger than the high watermark "
                f"{self.high_watermark}"
            )
        self.log.increment_log_start_offset(target)
        return self.low_watermark

    @property
    def low_watermark(self) -> int:
        """The smallest log start offset among the replicas (Kafka's ``lowWatermarkIfLeader``,
        which counts the live brokers' replicas: here those in the ISR; a follower not heard
        from yet does not hold it back)."""
        isr = self.isr_state.maximal_isr
        starts = [f.log_start_offset for r, f in self.followers.items()
                  if f.log_start_offset >= 0 and r in isr]
        return min([self.log_start_offset, *starts])

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int, *, fetch_only_from_leader: bool = True,
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch (Kafka's ``lastOffsetForLeaderEpoch``): (epoch, end offset)
        from the leader-epoch cache: the largest epoch <= ``leader_epoch`` this log knows and
        where it ends (the current epoch ends at the log end offset); (-1, -1) for an undefined
        or unknown epoch. A consumer's request (``fetch_only_from_leader``) needs the leader."""
        self.check_current_leader_epoch(current_leader_epoch)
        if fetch_only_from_leader:
            self.check_leader()
        return self.end_offset_for_epoch(leader_epoch)

    # -- roles ----------------------------------------------------------------------------------

    def make_leader(self, *, leader_id: int, leader_epoch: int, replicas: tuple[int, ...],
                    isr: tuple[int, ...], partition_epoch: int = 0, now_ms: int = 0) -> bool:
        """Kafka's ``Partition.makeLeader`` as the metadata image says (this node leads). A new
        leader epoch starts at the log end offset (written to the epoch cache now) and resets
        what is known of the followers; the same epoch only takes the new replicas and ISR.
        True when the high watermark moved."""
        new_epoch = not self.is_leader or leader_epoch != self.leader_epoch
        self.leader_id, self.leader_epoch, self.replicas = leader_id, leader_epoch, replicas
        if new_epoch:
            self.isr_state = IsrState(isr, partition_epoch)
            self.leader_epoch_start_offset = self.log_end_offset
            if leader_epoch >= 0 and not self._empty:  # an empty log: nothing to diverge from
                with contextlib.suppress(KafkaStorageError):  # offline: every use answers so
                    self.log.assign_epoch_start_offset(leader_epoch, self.log_end_offset)
            self.followers = {
                r: FollowerReplica(r, now_ms=now_ms, in_isr=r in isr)
                for r in replicas if r != self.node_id
            }
        else:
            if isr != self.isr:
                EVENTS.emit("isr", topic=self.topic, partition=self.partition, epoch=leader_epoch,
                            isr=list(isr), partition_epoch=partition_epoch)
            self.isr_state.committed(isr, partition_epoch)
            kept = self.followers
            self.followers = {
                r: kept.get(r) or FollowerReplica(r, now_ms=now_ms, in_isr=r in isr)
                for r in replicas if r != self.node_id
            }
        if new_epoch:
            EVENTS.emit("leader", topic=self.topic, partition=self.partition, epoch=leader_epoch,
                        leader=leader_id, isr=list(isr), log_end=self.log_end_offset)
        return self.maybe_advance_high_watermark()

    def make_follower(self, *, leader_id: int, leader_epoch: int, replicas: tuple[int, ...],
                      isr: tuple[int, ...], partition_epoch: int = 0, now_ms: int = 0) -> bool:
        """Kafka's ``Partition.makeFollower``: another node leads (or none); the fetcher
        fetches from it. True when the leader or its epoch changed (the fetcher must restart
        this partition)."""
        changed = leader_id != self.leader_id or leader_epoch != self.leader_epoch
        self.leader_id, self.leader_epoch, self.replicas = leader_id, leader_epoch, replicas
        self.isr_state = IsrState(isr, partition_epoch)
        self.followers = {}
        if changed:
            EVENTS.emit("follower", topic=self.topic, partition=self.partition, epoch=leader_epoch,
                        leader=leader_id, isr=list(isr), log_end=self.log_end_offset)
        return changed

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return (
            f"Partition({self.topic}-{self.partition}, {role}, epoch={self.leader_epoch}, "
            f"isr={list(self.isr)}, hw={self.high_watermark}, leo={self.log_end_offset})"
        )
