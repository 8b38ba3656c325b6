"""White-box replication events for the fault harness (issue 13): off unless the environment
variable ``SAMSA_FAULT_EVENTS`` names a file when the process starts.

When on, each event is one JSON line appended to that file: ``{"event": ..., "node": ...,
"wall_ms": ..., ...}`` with the fields of ``tests/faults/history.py``'s events — ``leader`` /
``follower`` (topic, partition, epoch, leader, isr), ``isr`` (the ISR the controller committed,
with the leader epoch), ``high_watermark`` (at most one line per partition per
``HIGH_WATERMARK_EVERY_MS``, the newest value; the harness needs where it went, not every step),
``append`` (the first leader append of each leader epoch: who accepted writes in it),
``truncate`` (a follower cut its log: to which offset, and why) and ``fenced`` / ``unfenced``.
Lines are written unbuffered (one ``write`` each), so a ``kill -9`` loses at most the line being
written. Off, every call is one attribute test.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

__all__ = ["EVENTS", "EventLog"]

HIGH_WATERMARK_EVERY_MS = 200
ENVIRONMENT_VARIABLE = "SAMSA_FAULT_EVENTS"


class EventLog:
    """Where this process's events go (nowhere when ``path`` is None)."""

    def __init__(self, path: str | None) -> None:
        self.enabled = bool(path)
        self.node_id = -1
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else -1
        self._last_high_watermark_ms: dict[tuple[str, int], int] = {}
        self._appended_epochs: set[tuple[str, int, int]] = set()

    @classmethod
    def from_environment(cls) -> EventLog:
        return cls(os.environ.get(ENVIRONMENT_VARIABLE) or None)

    def emit(self, event: str, **fields: Any) -> None:
        if not self.enabled:
            return
        line = {"event": event, "node": self.node_id, "wall_ms": time.time_ns() // 1_000_000,
                **fields}
        os.write(self._fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())

    def high_watermark(self, topic: str, partition: int, offset: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic_ns() // 1_000_000
        key = (topic, partition)
        if now - self._last_high_watermark_ms.get(key, -HIGH_WATERMARK_EVERY_MS) >= HIGH_WATERMARK_EVERY_MS:
            self._last_high_watermark_ms[key] = now
            self.emit("high_watermark", topic=topic, partition=partition, offset=offset)

    def leader_append(self, topic: str, partition: int, epoch: int, base_offset: int) -> None:
        """The first append this node accepted as leader in ``epoch``."""
        if not self.enabled or (topic, partition, epoch) in self._appended_epochs:
            return
        self._appended_epochs.add((topic, partition, epoch))
        self.emit("append", topic=topic, partition=partition, epoch=epoch, offset=base_offset)


EVENTS = EventLog.from_environment()
