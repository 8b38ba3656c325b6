"""One partition's replication state on this broker: the log, leader epoch and high watermark.

Invariants:
- ``log_start_offset <= high_watermark <= log_end_offset``;
- on a single node the ISR is this node alone, so every append is fully replicated at once and
  ``append_as_leader`` moves the high watermark to the log end offset. It is kept as its own
  number (not read off the log) so that replication can hold it back until followers catch up;
- consumers read below the high watermark only (``read`` caps at it).

Waiters are the delayed operations (long-poll fetches) to wake when the high watermark moves:
opaque callables. ``append_as_leader`` returns the waiters to wake instead of calling them, so
this class stays sans-IO; the broker calls them. Owned by the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from storage.log import AppendResult, Log
from storage.segment import FetchSlice

__all__ = ["Partition", "Waiter"]

Waiter = Callable[[], None]


class Partition:
    def __init__(self, log: Log, *, topic_id: UUID, leader_epoch: int = 0, node_id: int = 0) -> None:
        self.log = log
        self.topic = log.topic
        self.partition = log.partition
        self.topic_id = topic_id
        self.leader_epoch = leader_epoch
        self.leader_id = node_id
        self.replicas: tuple[int, ...] = (node_id,)
        self.isr: tuple[int, ...] = (node_id,)
        self.high_watermark = log.log_end_offset
        self._waiters: dict[int, Waiter] = {}

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """No transactions yet: the last stable offset is the high watermark."""
        return self.high_watermark

    def append_as_leader(self, records: bytes | bytearray | memoryview) -> tuple[AppendResult, list[Waiter]]:
        """Append client batches; returns the result and the waiters to wake."""
        result = self.log.append_as_leader(records, leader_epoch=self.leader_epoch)
        return result, self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> list[Waiter]:
        """Single node: the ISR is this node, so the high watermark is the log end offset."""
        new = self.log.log_end_offset
        if new <= self.high_watermark:
            return []
        self.high_watermark = new
        return self.take_waiters()

    def read(
        self, offset: int, max_bytes: int, *, min_one_message: bool, up_to_high_watermark: bool = True
    ) -> FetchSlice | None:
        limit = self.high_watermark if up_to_high_watermark else None
        return self.log.read(offset, max_bytes, max_offset=limit, min_one_message=min_one_message)

    def add_waiter(self, key: int, waiter: Waiter) -> None:
        self._waiters[key] = waiter

    def remove_waiter(self, key: int) -> None:
        self._waiters.pop(key, None)

    def take_waiters(self) -> list[Waiter]:
        waiters = list(self._waiters.values())
        self._waiters.clear()
        return waiters

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.partition}, epoch={self.leader_epoch}, "
            f"hw={self.high_watermark}, leo={self.log_end_offset})"
        )
