"""The asyncio shell of a purgatory: one loop timer at its earliest deadline (Kafka's
``ExpiredOperationReaper``, without the thread).

``watch(operation, keys)`` puts an operation in the purgatory (``replication.purgatory``) and
re-arms the timer when the operation's deadline is the earliest; when the timer fires,
``expire_due()`` expires what is due and the timer is armed for the next deadline. The
purgatory reads the broker's clock; the timer is only the wake-up, so a timer that fires a
little early (the clock counts whole milliseconds) expires nothing and is armed again.

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from replication.purgatory import DelayedOperation, DelayedOperationPurgatory

__all__ = ["PurgatoryReaper"]

MIN_DELAY_SECONDS = 0.001  # one clock tick: an early timer is re-armed, never spins

T = TypeVar("T", bound=DelayedOperation)


class PurgatoryReaper(Generic[T]):
    def __init__(self, purgatory: DelayedOperationPurgatory[T]) -> None:
        self.purgatory = purgatory
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for: int | None = None

    def watch(self, operation: T, keys: Iterable[Hashable]) -> bool:
        """``try_complete_else_watch``, then the timer for the earliest deadline."""
        completed = self.purgatory.try_complete_else_watch(operation, keys)
        if not completed:
            self._arm()
        return completed

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._armed_for = None

    def _arm(self) -> None:
        deadline = self.purgatory.next_deadline_ms()
        if deadline == self._armed_for and self._timer is not None:
            return
        self.stop()
        if deadline is None:
            return
        delay_ms = deadline - self.purgatory.clock.monotonic_ms()
        self._armed_for = deadline
        self._timer = asyncio.get_running_loop().call_later(
            max(delay_ms / 1000, MIN_DELAY_SECONDS), self._fire)

    def _fire(self) -> None:
        self._timer = self._armed_for = None
        self.purgatory.expire_due()
        self._arm()
