"""An in-process ``SharePersister`` over a ``ShareStateStore`` with no log: the records the
store returns are applied at once, with increasing offsets, as if appended and committed.

What runs until the share coordinator's persister (``broker.share.network_persister``) is
wired, and what unit tests of the share-partition leader use. Nothing survives the process:
a restarted broker starts every share partition afresh (``share.auto.offset.reset``).

The store's checks are the coordinator's (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH,
INVALID_REQUEST), raised as ``protocol.errors.KafkaError``. Owned by the event loop; every
method completes without yielding.
"""

from __future__ import annotations

from broker.share.persister import SharePersister, ShareStateSummary
from broker.share.state_records import SharePartitionKey
from broker.share.state_store import AppendRecord, ShareStateStore
from broker.share.values import ShareSnapshot, StateBatch

__all__ = ["MemorySharePersister"]


class MemorySharePersister(SharePersister):
    def __init__(self, store: ShareStateStore | None = None) -> None:
        self.store = store or ShareStateStore()
        self._next_offset = 0
        self.write_count = 0  # how many writes were applied (tests read it)

    def _apply(self, records: list[AppendRecord]) -> None:
        for key, value in records:
            self.store.apply(key, value, self._next_offset)
            self._next_offset += 1

    async def initialize_state(self, key: SharePartitionKey, *, state_epoch: int, start_offset: int) -> None:
        self._apply(self.store.initialize_state(key, state_epoch=state_epoch, start_offset=start_offset))

    async def read_state(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareSnapshot | None:
        return self.store.read_state(key, leader_epoch=leader_epoch)

    async def write_state(
        self,
        key: SharePartitionKey,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        state_batches: tuple[StateBatch, ...],
    ) -> None:
        self._apply(self.store.write_state(key, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                           start_offset=start_offset, state_batches=state_batches))
        self.write_count += 1

    async def delete_state(self, key: SharePartitionKey) -> None:
        self._apply(self.store.delete_state(key))

    async def read_summary(self, key: SharePartitionKey, *, leader_epoch: int) -> ShareStateSummary | None:
        state = self.store.state(key)
        if state is None:
            return None
        snapshot = state.snapshot
        return ShareStateSummary(state_epoch=snapshot.state_epoch, leader_epoch=snapshot.leader_epoch,
                                 start_offset=snapshot.start_offset)
