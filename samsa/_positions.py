"""The consumer's assigned partitions and, for each one, where it stands.

For every assigned partition a ``PartitionState`` holds:

- ``position``: the offset of the next record ``poll()`` returns (None until it is known:
  from a committed offset, a reset, or a seek). ``commit()`` without arguments commits it.
- ``fetch_offset``: the offset the next Fetch asks for. It runs ahead of ``position`` by
  what is buffered (fetched, not yet returned): that gap is the prefetch.
- ``epoch``: bumped whenever the position is set from outside (seek, reset, committed
  offset, reassignment). A fetch response carries the epoch its request was built at; a
  stale one is dropped, so a seek never returns records from before it.
- ``buffered``: fetched responses not yet returned, oldest first, all for ``epoch``.
- ``reset_strategy``: set when the position must be looked up with ListOffsets
  ("earliest" / "latest"); ``error``: a failure ``poll()`` raises for this partition.

Invariants: ``position is None`` iff ``fetch_offset is None``; ``buffered`` is empty unless
both are set and every entry was fetched at ``epoch``; ``position <= fetch_offset``.

State: owned by the consumer's event loop task (``AsyncConsumer``); not thread-safe.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from samsa.types import TopicPartition

if TYPE_CHECKING:
    from samsa._fetcher import CompletedFetch
    from samsa.errors import KafkaError

__all__ = ["PartitionState", "SubscriptionState"]

EARLIEST = "earliest"
LATEST = "latest"


@dataclass(slots=True)
class PartitionState:
    position: int | None = None
    fetch_offset: int | None = None
    leader_epoch: int = -1
    epoch: int = 0
    paused: bool = False
    in_flight: bool = False
    retry_at: float = 0.0
    reset_strategy: str | None = None
    error: KafkaError | None = None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    buffered: deque[CompletedFetch] = field(default_factory=deque)

    def seek(self, offset: int, leader_epoch: int = -1) -> None:
        """Move to ``offset``: drop what is buffered and whatever is in flight."""
        self.position = self.fetch_offset = offset
        self.leader_epoch = leader_epoch
        self.epoch += 1
        self.reset_strategy = None
        self.error = None
        self.buffered.clear()

    def request_reset(self, strategy: str) -> None:
        self.position = self.fetch_offset = None
        self.epoch += 1
        self.reset_strategy = strategy
        self.buffered.clear()

    @property
    def has_position(self) -> bool:
        return self.position is not None

    def fetchable(self, now: float, max_buffered: int) -> bool:
        return (self.fetch_offset is not None and not self.paused and not self.in_flight
                and self.error is None and len(self.buffered) < max_buffered
                and self.retry_at <= now)


class SubscriptionState:
    """What the consumer reads: a topic subscription (group-managed) or a manual assignment,
    and the ``PartitionState`` of each assigned partition (insertion ordered)."""

    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset
        self.topics: frozenset[str] = frozenset()
        self.pattern: str | None = None
        self.manual = False
        self.partitions: dict[TopicPartition, PartitionState] = {}

    @property
    def subscribed(self) -> bool:
        """True when a group assigns the partitions (``subscribe``), not ``assign``."""
        return not self.manual and (bool(self.topics) or self.pattern is not None)

    def subscribe(self, topics: Iterable[str], pattern: str | None = None) -> None:
        self.manual = False
        self.topics = frozenset(topics)
        self.pattern = pattern

    def assign_manually(self, partitions: Iterable[TopicPartition]) -> None:
        self.manual = True
        self.topics = frozenset()
        self.pattern = None
        self.set_assignment(partitions)

    def unsubscribe(self) -> None:
        self.manual = False
        self.topics = frozenset()
        self.pattern = None
        self.partitions = {}

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Keep the states of partitions still assigned; new ones start with no position."""
        old = self.partitions
        self.partitions = {tp: old.get(tp) or PartitionState() for tp in partitions}

    def state(self, tp: TopicPartition) -> PartitionState:
        found = self.partitions.get(tp)
        if found is None:
            raise ValueError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return found

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self.partitions)

    def missing_positions(self) -> list[TopicPartition]:
        """Partitions with neither a position nor a reset under way."""
        return [tp for tp, s in self.partitions.items()
                if s.position is None and s.reset_strategy is None]

    def awaiting_reset(self) -> list[TopicPartition]:
        return [tp for tp, s in self.partitions.items() if s.reset_strategy is not None]

    def positions(self) -> dict[TopicPartition, tuple[int, int]]:
        """(position, leader epoch) of every partition that has a position."""
        return {tp: (s.position, s.leader_epoch) for tp, s in self.partitions.items()
                if s.position is not None}

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self.partitions.items() if s.paused}
