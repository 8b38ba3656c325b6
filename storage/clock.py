"""Injected time for storage (Kafka's ``Time``): wall-clock milliseconds and a monotonic clock.

Storage never calls ``time`` directly; it is handed a :class:`Clock`, so tests drive time with
:class:`ManualClock` instead of sleeping.
"""

from __future__ import annotations

import os
import time
from typing import Protocol


class Clock(Protocol):
    def milliseconds(self) -> int:
        """Wall-clock time in milliseconds since the epoch (record timestamps, retention)."""
        ...

    def monotonic_ms(self) -> int:
        """A monotonic clock in milliseconds (intervals: flush.ms, delays)."""
        ...


class SystemClock:
    """The machine's clocks. ``SAMSA_CLOCK_OFFSET_MS`` (read once, at start-up; a fault-harness
    hook, issue 13) shifts the wall clock by that many milliseconds, as a node whose clock is
    wrong would read it; the monotonic clock is never shifted."""

    def __init__(self) -> None:
        self.offset_ms = int(os.environ.get("SAMSA_CLOCK_OFFSET_MS", "0") or 0)

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to; both readings advance together."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms
        self._monotonic_ms = 0

    def milliseconds(self) -> int:
        return self.now_ms

    def monotonic_ms(self) -> int:
        return self._monotonic_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self._monotonic_ms += ms


SYSTEM_CLOCK = SystemClock()
