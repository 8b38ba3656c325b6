"""Values going in and out of the share-partition state machine (KIP-932): configuration, the
fetch's and the acknowledgement's input, acquired records, dead-letter outcomes, the persisted
snapshot and the description. All frozen; none is a wire message class, so the state machine
does not depend on the codec (the ShareFetch/ShareAcknowledge handlers and the share
coordinator translate).

Delivery-state codes are Kafka's (``RecordState`` in KIP-932, the ``DeliveryState`` field of
``WriteShareGroupState`` / ``ShareSnapshotValue``): 0 Available, 1 Acquired (never persisted),
2 Acknowledged, 4 Archived. Samsa adds one state, DEAD_LETTERING, persisted as
``DEAD_LETTERING_BASE_CODE + reason`` (100 rejected, 101 delivery-limit, 102 expired): codes
Kafka does not use, chosen well clear of its power-of-two series so a future Kafka state does
not collide; the reason is part of the code so a restart can report the dead letter again with
the reason it was decided for. Only Samsa reads Samsa's ``__share_group_state``.

Holds no state; pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum

__all__ = [
    "DEAD_LETTERING_BASE_CODE",
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquiredRecords",
    "AutoOffsetReset",
    "DeadLetter",
    "DeadLetterReason",
    "FetchedBatch",
    "InFlightBatch",
    "RecordState",
    "SharePartitionConfig",
    "SharePartitionDescription",
    "ShareSnapshot",
    "StateBatch",
    "initial_start_offset",
]

DEAD_LETTERING_BASE_CODE = 100


class RecordState(IntEnum):
    """The state of an in-flight record; the value is its persisted code (DEAD_LETTERING's
    persisted code also carries the reason, see ``StateBatch``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4
    DEAD_LETTERING = DEAD_LETTERING_BASE_CODE


class DeadLetterReason(Enum):
    """Why a record goes to the dead-letter topic; the value is what the dead letter says."""

    REJECTED = "rejected"
    DELIVERY_LIMIT = "delivery-limit"
    EXPIRED = "expired"

    @property
    def delivery_state(self) -> int:
        """The persisted code of a record DEAD_LETTERING for this reason."""
        return DEAD_LETTERING_BASE_CODE + _REASON_ORDER.index(self)

    @classmethod
    def from_delivery_state(cls, code: int) -> DeadLetterReason:
        return _REASON_ORDER[code - DEAD_LETTERING_BASE_CODE]


_REASON_ORDER = (DeadLetterReason.REJECTED, DeadLetterReason.DELIVERY_LIMIT, DeadLetterReason.EXPIRED)


class AcknowledgeType(IntEnum):
    """ShareAcknowledge's ``AcknowledgeTypes``: 0 Gap, 1 Accept, 2 Release, 3 Reject."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class AutoOffsetReset(Enum):
    """``share.auto.offset.reset``: where an uninitialized share partition starts."""

    LATEST = "latest"
    EARLIEST = "earliest"


def initial_start_offset(reset: AutoOffsetReset, *, log_start_offset: int, log_end_offset: int) -> int:
    """The share-partition start offset of a share partition that has no persisted state."""
    return log_start_offset if reset is AutoOffsetReset.EARLIEST else log_end_offset


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    """Kafka's names and defaults (``GroupCoordinatorConfig`` / ``ShareGroupConfig``, the
    record-lock default being Kafka 4.1's 2000). The bounds Kafka enforces (by default a lock
    duration of 15–60 s, ``group.share.min/max.record.lock.duration.ms``; the
    ``group.share.min/max.delivery.count.limit``; 100–4000 record locks) are the
    configuration's business; the state machine only needs positive values, so tests can
    use small windows.

    Samsa's extensions: ``dead_letter_topic`` (records rejected, out of deliveries or expired
    are dead-lettered there) and ``record_expiry_ms`` (a record older than this, by the
    maximum timestamp of the log batch it came in, is never delivered again)."""

    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks
    dead_letter_topic: str | None = None
    record_expiry_ms: int | None = None

    def __post_init__(self) -> None:
        for name in ("record_lock_duration_ms", "delivery_count_limit", "partition_max_record_locks"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")
        if self.record_expiry_ms is not None and self.record_expiry_ms <= 0:
            raise ValueError(f"record_expiry_ms must be positive, not {self.record_expiry_ms}")


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """One record batch a share fetch read from the log: its offsets and, when record expiry
    is configured, the batch's max timestamp (expiry is judged per log batch, from its header,
    so the fetch path never decodes records)."""

    first_offset: int
    last_offset: int
    max_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """ShareFetch's ``AcquiredRecords``: a range handed to one member, all with one count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """ShareAcknowledge's ``AcknowledgementBatch``: one type for the whole range, or one per
    offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A range of records the caller must append to the dead-letter topic, then confirm with
    ``SharePartition.dead_lettered``. ``timestamp_ms`` is when the decision was taken (or, for
    one reported again after a restore, when the state was restored)."""

    first_offset: int
    last_offset: int
    reason: DeadLetterReason
    delivery_count: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    """``ShareSnapshotValue.StateBatches``: a range with one persisted delivery state and count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """What the share coordinator writes to ``__share_group_state`` (``ShareSnapshotValue``;
    the coordinator adds the key and its snapshot epoch)."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class InFlightBatch:
    """One in-flight range as ``describe`` shows it: ``member_id`` and ``lock_deadline_ms`` are
    set only while ACQUIRED; ``reason`` only while DEAD_LETTERING."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int | None = None
    reason: DeadLetterReason | None = None


@dataclass(frozen=True, slots=True)
class SharePartitionDescription:
    """A share partition's state for the group's description. The counters count records
    since this state machine was created or restored (they are not persisted)."""

    start_offset: int
    end_offset: int
    in_flight_record_count: int
    acquired_record_count: int
    dead_lettering_record_count: int
    batches: tuple[InFlightBatch, ...]
    archived_record_count: int
    dead_lettered_record_count: int
    expired_record_count: int
