"""Share groups (KIP-932, "queues for Kafka"), sans-IO: ``SharePartition`` keeps the delivery
state of one topic partition for one share group — which records are available, acquired by
which member until when, acknowledged or archived, and how often each was delivered — plus
Samsa's dead-letter topic and record expiry. The ShareFetch/ShareAcknowledge handlers, the
share coordinator and ``__share_group_state`` drive it; none of them lives here.
"""

from broker.share.share_partition import SharePartition
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
    "InFlightBatch",
    "RecordState",
    "SharePartition",
    "SharePartitionConfig",
    "SharePartitionDescription",
    "ShareSnapshot",
    "StateBatch",
    "initial_start_offset",
]
