"""Share groups (KIP-932, "queues for Kafka"), sans-IO: ``SharePartition`` keeps the delivery
state of one topic partition for one share group — which records are available, acquired by
which member until when, acknowledged or archived, and how often each was delivered — plus
Samsa's dead-letter topic and record expiry. The ShareFetch/ShareAcknowledge handlers, the
share coordinator and ``__share_group_state`` drive it; none of them lives here.

``ShareStateStore`` is the share coordinator's state of one ``__share_group_state`` partition
(replayed from its records, turning Write/Initialize/Delete/ReadShareGroupState into records
to append), ``state_records`` the records' bytes and ``state_batches`` the rule that combines
state batches. ``ShareGroup`` is one share group's membership (what ShareGroupHeartbeat
decides: members, epochs, the target assignment, session expiry) and ``share_assignor`` the
``simple`` assignor it uses. All sans-IO: the caller owns the log.
"""

from broker.share.share_assignor import assign_share_partitions
from broker.share.share_group import (
    HeartbeatResult,
    ShareGroup,
    ShareGroupConfig,
    ShareGroupDescription,
    ShareGroupMember,
    ShareGroupState,
    TopicMetadata,
)
from broker.share.share_partition import SharePartition
from broker.share.state_records import SharePartitionKey
from broker.share.state_store import ShareState, ShareStateStore, ShareStateStoreConfig
from broker.share.values import (
    DEAD_LETTERING_BASE_CODE,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    AutoOffsetReset,
    DeadLetter,
    DeadLetterReason,
    FetchedBatch,
    InFlightBatch,
    RecordState,
    SharePartitionConfig,
    SharePartitionDescription,
    ShareSnapshot,
    StateBatch,
    initial_start_offset,
)

__all__ = [
    "DEAD_LETTERING_BASE_CODE",
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquiredRecords",
    "AutoOffsetReset",
    "DeadLetter",
    "DeadLetterReason",
    "FetchedBatch",
    "HeartbeatResult",
    "InFlightBatch",
    "RecordState",
    "ShareGroup",
    "ShareGroupConfig",
    "ShareGroupDescription",
    "ShareGroupMember",
    "ShareGroupState",
    "SharePartition",
    "SharePartitionConfig",
    "SharePartitionDescription",
    "SharePartitionKey",
    "ShareSnapshot",
    "ShareState",
    "ShareStateStore",
    "ShareStateStoreConfig",
    "StateBatch",
    "TopicMetadata",
    "assign_share_partitions",
    "initial_start_offset",
]
