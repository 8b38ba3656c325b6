"""One partition's replication state on this broker: the log, leader epoch and high watermark.

Invariants:
- ``log_start_offset <= high_watermark <= log_end_offset``;
- on a single node the ISR is this node alone, so every append is fully replicated at once and
  ``append_as_leader`` moves the high watermark to the log end offset. It is kept as its own
  number (not read off the log) so that replication can hold it back until followers catch up;
- a partition starts from the high watermark checkpointed in ``replication-offset-checkpoint``
  (``replication.high_watermark_checkpoint``; 0 when missing), bounded by its log, as Kafka's
  ``Partition.createLog``; as a leader whose ISR is itself alone it then moves it to the log end
  offset at once (Kafka's ``maybeIncrementLeaderHW`` on becoming leader);
- consumers read below the high watermark only (``read`` caps at it); read_committed consumers
  below the last stable offset, ``min(first offset of the oldest open transaction, high
  watermark)`` (Kafka's ``UnifiedLog.lastStableOffset``). How far a fetch reads is its
  ``FetchIsolation``.

Appends come through ``replication.append`` (the one entry point), which then checks the
delayed operations watching this partition (``replication.purgatory``); this class knows
nothing of them. Owned by the broker's event loop.
"""

from __future__ import annotations

import enum
from uuid import UUID

from protocol.errors import (
    FencedLeaderEpochError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    UnknownLeaderEpochError,
)
from storage.log import AppendResult, Log
from storage.producer_state import AppendOrigin, EndMarker
from storage.segment import FetchSlice
from storage.transaction_index import AbortedTxn

__all__ = [
    "HIGH_WATERMARK", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "FetchIsolation", "Partition",
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
UNDEFINED_EPOCH_OFFSET = -1


class Partition:
    def __init__(
        self, log: Log, *, topic_id: UUID, leader_epoch: int = 0, node_id: int = 0,
        high_watermark_checkpoint: int = 0,
    ) -> None:
        self.log = log
        self.topic = log.topic
        self.partition = log.partition
        self.topic_id = topic_id
        self.leader_epoch = leader_epoch
        self.leader_id = node_id
        self.replicas: tuple[int, ...] = (node_id,)
        self.isr: tuple[int, ...] = (node_id,)
        # Kafka's UnifiedLog.updateHighWatermark: the checkpoint, within [log start, log end].
        self.initial_high_watermark = min(max(high_watermark_checkpoint, log.log_start_offset),
                                          log.log_end_offset)
        self.high_watermark = self.initial_high_watermark
        self.maybe_advance_high_watermark()

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

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_verified: bool = False,
    ) -> AppendResult:
        """Append client (or coordinator) batches, then move the high watermark."""
        result = self.log.append_as_leader(
            records, leader_epoch=self.leader_epoch, origin=origin,
            transaction_verified=transaction_verified,
        )
        self.maybe_advance_high_watermark()
        return result

    def append_end_marker(self, producer_id: int, producer_epoch: int, marker: EndMarker) -> AppendResult:
        """Write a transaction's COMMIT or ABORT marker, then move the high watermark."""
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
        """Single node: the ISR is this node, so the high watermark is the log end offset
        (Kafka's ``maybeIncrementLeaderHW``). True when it moved."""
        new = self.log.log_end_offset
        if new <= self.high_watermark:
            return False
        self.high_watermark = new
        return True

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
        ``offset`` (-1: the high watermark); returns the low watermark (the log start offset;
        on one node no replica lags). Segments below it go at the next retention run."""
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
        return self.log_start_offset

    def check_current_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's ``checkCurrentLeaderEpoch``: -1 = not given; older -> FENCED_LEADER_EPOCH,
        newer -> UNKNOWN_LEADER_EPOCH."""
        if current_leader_epoch == -1:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError()
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError()

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch (Kafka's ``lastOffsetForLeaderEpoch``): (epoch, end offset).

        There is no leader-epoch cache yet: the only epoch known is the current one, as if the
        cache held one entry starting at the log start offset. So: the current epoch -> the log
        end offset; an undefined (-1) or later epoch -> (-1, -1); an earlier epoch -> that epoch
        and the start of the first known epoch (Kafka's answer for an epoch below the cache).
        """
        self.check_current_leader_epoch(current_leader_epoch)
        if leader_epoch == UNDEFINED_EPOCH or leader_epoch > self.leader_epoch:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if leader_epoch == self.leader_epoch:
            return leader_epoch, self.log_end_offset
        return leader_epoch, self.log_start_offset

    def make_leader(self, *, leader_id: int, leader_epoch: int, replicas: tuple[int, ...],
                    isr: tuple[int, ...]) -> None:
        """Kafka's ``Partition.makeLeader`` as the metadata image says (this node leads)."""
        self.leader_id, self.leader_epoch = leader_id, leader_epoch
        self.replicas, self.isr = replicas, isr

    def make_follower(self, *, leader_id: int, leader_epoch: int, replicas: tuple[int, ...],
                      isr: tuple[int, ...]) -> None:
        """Kafka's ``Partition.makeFollower``: another node leads; recorded only (fetching
        from the leader is the follower fetcher's work)."""
        self.leader_id, self.leader_epoch = leader_id, leader_epoch
        self.replicas, self.isr = replicas, isr

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.partition}, epoch={self.leader_epoch}, "
            f"hw={self.high_watermark}, leo={self.log_end_offset})"
        )
