"""The seam between a share partition's leader and the share coordinator (Kafka's ``Persister``):
what the leader of a topic partition asks of ``__share_group_state`` about one share partition,
in domain values, never wire messages.

The broker's implementation (``broker.share.network_persister``) finds the share coordinator of
the share partition (the leader of its ``__share_group_state`` partition: FindCoordinator key
type SHARE, key ``"<group id>:<topic id>:<partition>"``), calls it in process when that is
this node, and otherwise sends it Initialize/Read/Write/Delete/ReadShareGroupStateSummary.

Every method raises ``protocol.errors.KafkaError`` for the error the coordinator answered
(FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, ...), after the retries the implementation makes for the
retriable ones within its own deadline. A write returns only once the records are committed
(replicated to the ``__share_group_state`` partition's ISR), so what a caller acknowledged on
the strength of a write survives the coordinator's loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from broker.share.state_records import SharePartitionKey
from broker.share.values import ShareSnapshot, StateBatch

__all__ = ["SharePersister", "ShareStateSummary"]


@dataclass(frozen=True, slots=True)
class ShareStateSummary:
    """ReadShareGroupStateSummary's answer for one share partition (the admin's view)."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = -1


class SharePersister(Protocol):
    async def initialize_state(self, key: SharePartitionKey, *, state_epoch: int, start_offset: int) -> None:
        """Create (or reset, with a higher state epoch) the share partition's state."""
        ...

    async def read_state(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareSnapshot | None:
        """The persisted state, and fence older leaders at ``leader_epoch``; None: never
        initialized (or deleted)."""
        ...

    async def write_state(
        self,
        key: SharePartitionKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        state_batches: tuple[StateBatch, ...],
    ) -> None:
        """Persist a change: the start offset and the state batches that changed."""
        ...

    async def delete_state(self, key: SharePartitionKey) -> None: ...

    async def read_summary(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareStateSummary | None: ...
