"""Delayed operations and their purgatory (Kafka's ``DelayedOperation`` and
``DelayedOperationPurgatory``), sans-IO: time is the injected clock, nothing here sleeps.

A delayed operation is a request that cannot be answered yet: a long-poll Fetch waiting for
``min_bytes`` (``broker.apis.fetch.DelayedFetch``), and later an ``acks=all`` Produce waiting
for the ISR to reach its offsets (a DelayedProduce). It is *watched* under keys (a
topic-partition) and completes in exactly one of two ways:

- by completion: whoever moves a partition's log end offset, high watermark or last stable
  offset calls ``check_and_complete(*keys)``, which asks each operation watched under those
  keys to ``try_complete()`` (once, however many of its keys moved); an operation that can
  finish calls ``force_complete()``;
- by expiry: ``expire_due()`` (called by the shell's timer, ``broker.purgatory_reaper``) force
  completes every operation whose deadline, ``delay_ms`` after it was watched on the clock's
  monotonic milliseconds, has come (``deadline <= now``), then calls its ``on_expiration()``.

Invariants: ``on_complete()`` runs exactly once per operation (``force_complete`` returns True
once and False ever after); ``on_expiration()`` runs at most once, only after ``on_complete()``
and only for an operation that expired; a completed operation is no longer watched under any of
its keys. As in Kafka, the order inside ``force_complete`` is: mark completed, then
``on_complete()``.

Owned by the broker's event loop (one thread): unlike Kafka there are no locks; the operations'
callbacks run inside the call that completed them.
"""

from __future__ import annotations

import heapq
import itertools
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from storage.clock import Clock

__all__ = ["PURGE_INTERVAL", "DelayedOperation", "DelayedOperationPurgatory"]

# Completed operations leave the deadline heap lazily; after this many completions the heap is
# rebuilt without them (Kafka's fetch.purgatory.purge.interval.requests default, 1000).
PURGE_INTERVAL = 1000


class DelayedOperation(ABC):
    """One delayed operation; subclasses say when it can finish and what finishing does."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.watch_keys: tuple[Hashable, ...] = ()
        self._completed = False

    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now (runs ``on_complete``); False when it already was completed."""
        if self._completed:
            return False
        self._completed = True
        self.on_complete()
        return True

    @abstractmethod
    def try_complete(self) -> bool:
        """Check whether the operation can finish; if so call ``force_complete()`` and return
        its result, else return False."""

    @abstractmethod
    def on_complete(self) -> None:
        """Finish the operation (answer the request): runs exactly once."""

    def on_expiration(self) -> None:  # noqa: B027 - optional hook, as Kafka's is abstract but often empty
        """Called after ``on_complete`` when the operation completed by expiry."""


T = TypeVar("T", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[T]):
    """Operations watched by key, with deadlines on ``clock.monotonic_ms()``."""

    def __init__(self, name: str, *, clock: Clock) -> None:
        self.name = name
        self.clock = clock
        self._watchers: dict[Hashable, list[T]] = {}
        self._deadlines: list[tuple[int, int, T]] = []  # a heap: (deadline ms, tie-break, op)
        self._sequence = itertools.count()
        self._completed_since_purge = 0

    def try_complete_else_watch(self, operation: T, keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can; else watch it under ``keys`` until it completes
        or its deadline. True when it completed in this call."""
        if operation.try_complete():
            return True
        operation.watch_keys = tuple(dict.fromkeys(keys))
        for key in operation.watch_keys:
            self._watchers.setdefault(key, []).append(operation)
        deadline = self.clock.monotonic_ms() + operation.delay_ms
        heapq.heappush(self._deadlines, (deadline, next(self._sequence), operation))
        return False

    def check_and_complete(self, *keys: Hashable) -> int:
        """Something about ``keys`` moved: try each operation watched under any of them, once
        (an operation watching several of them is read once); the number that completed."""
        completed = 0
        watching = dict.fromkeys(op for key in keys for op in self._watchers.get(key, ()))
        for operation in watching:
            if operation.is_completed:
                self._unwatch(operation)
            elif operation.try_complete():
                completed += 1
                self._unwatch(operation)
        self._completed_since_purge += completed
        if self._completed_since_purge >= PURGE_INTERVAL:
            self._purge_completed()
        return completed

    def expire_due(self) -> int:
        """Force complete, then expire, every operation whose deadline has come; how many."""
        now_ms = self.clock.monotonic_ms()
        expired = 0
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            operation = heapq.heappop(self._deadlines)[2]
            self._unwatch(operation)
            if operation.force_complete():
                expired += 1
                operation.on_expiration()
        return expired

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of an operation not yet completed (None: nothing waits)."""
        while self._deadlines and self._deadlines[0][2].is_completed:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def force_complete_all(self) -> int:
        """Complete every waiting operation now (shutdown: long polls answer at once)."""
        operations = [entry[2] for entry in self._deadlines]
        self._deadlines.clear()
        self._watchers.clear()
        return sum(operation.force_complete() for operation in operations)

    def watched(self, key: Hashable) -> int:
        """How many operations not yet completed are watched under ``key``."""
        return sum(not operation.is_completed for operation in self._watchers.get(key, ()))

    def delayed(self) -> int:
        """How many operations wait (Kafka's ``numDelayed``)."""
        return sum(not entry[2].is_completed for entry in self._deadlines)

    def _purge_completed(self) -> None:
        self._deadlines = [entry for entry in self._deadlines if not entry[2].is_completed]
        heapq.heapify(self._deadlines)
        self._completed_since_purge = 0

    def _unwatch(self, operation: T) -> None:
        for key in operation.watch_keys:
            watchers = self._watchers.get(key)
            if watchers is None:
                continue
            try:
                watchers.remove(operation)
            except ValueError:
                continue
            if not watchers:
                del self._watchers[key]
