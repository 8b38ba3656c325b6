"""A fault run's history: every client operation and white-box broker event, as JSON lines.

Jepsen's model: a client *invokes* an operation and later learns its outcome, one of

- ``ok``: it happened (an acknowledged send, a poll's records, a committed transaction);
- ``fail``: it definitely did not happen (an error the client knows left nothing behind, an
  aborted transaction);
- ``info``: unknown (a timeout, a lost connection): it may or may not have happened.

Each line is one :class:`Op` (``type`` one of ``invoke``/``ok``/``fail``/``info``) or one broker
event (``type`` ``event``). Fields by ``f`` (the operation):

``send``    invoke: topic, key, value (unique per run), [partition]; ok: partition, offset;
            a send in a transaction carries ``txn`` (the transaction's id).
``poll``    ok: records = [[topic, partition, offset, key, value], ...] in the order polled;
            ``group`` and ``isolation`` (``read_committed``/``read_uncommitted``); a consumer
            that was assigned partitions anew or seeked logs ``f: "assign"`` (ok, partitions =
            [[topic, partition], ...]) before its next poll, so a jump back after it is not
            an anomaly.
``commit``  invoke/ok: group, offsets = [[topic, partition, offset], ...] (the next offset).
``offsets`` ok: group, offsets as for ``commit``: the committed offsets read back (OffsetFetch).
``txn``     invoke: txn (an id unique per run); ok = committed, fail = aborted, info = unknown.
            The txn's sends are ``send`` ops that carry ``txn``.
``final``   one ok per partition read after the run, from the log start to the high
            watermark: topic, partition, log_start, high_watermark, isolation, records as for
            ``poll``.

``process`` names the client (a string, unique per client instance); ``time`` is
``time.monotonic_ns()`` of the harness process; ``node`` is a node id where one applies.

Events (``type: "event"``, written by the harness from the brokers' event files and its own
fault schedule): ``event`` is ``leader`` / ``follower`` (topic, partition, epoch, node),
``isr`` (topic, partition, isr, epoch, node), ``high_watermark`` (topic, partition, offset,
node), ``truncate`` (topic, partition, offset, node), ``fenced`` (node), ``fault`` (name,
nodes, and what the fault did) and ``heal``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

__all__ = ["History", "read_history"]

OP_TYPES = frozenset({"invoke", "ok", "fail", "info", "event"})


class History:
    """Append-only JSON-lines writer, safe to share between client threads (one lock; each line
    is flushed so a killed harness leaves every completed line on disk)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: TextIO = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, type: str, f: str | None = None, **fields: Any) -> dict[str, Any]:
        if type not in OP_TYPES:
            raise ValueError(f"unknown history line type {type!r}")
        line: dict[str, Any] = {"type": type, "time": time.monotonic_ns()}
        if f is not None:
            line["f"] = f
        line.update(fields)
        text = json.dumps(line, separators=(",", ":"))
        with self._lock:
            self._file.write(text + "\n")
            self._file.flush()
        return line

    def invoke(self, f: str, **fields: Any) -> dict[str, Any]:
        return self.write("invoke", f, **fields)

    def ok(self, f: str, **fields: Any) -> dict[str, Any]:
        return self.write("ok", f, **fields)

    def fail(self, f: str, **fields: Any) -> dict[str, Any]:
        return self.write("fail", f, **fields)

    def info(self, f: str, **fields: Any) -> dict[str, Any]:
        return self.write("info", f, **fields)

    def event(self, event: str, **fields: Any) -> dict[str, Any]:
        return self.write("event", event=event, **fields)

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_history(path: Path | Iterable[Path]) -> Iterator[dict[str, Any]]:
    """Every line of one history file (or several, concatenated in the order given)."""
    paths = [path] if isinstance(path, Path) else list(path)
    for one in paths:
        with one.open(encoding="utf-8") as file:
            for number, text in enumerate(file, 1):
                if not text.strip():
                    continue
                try:
                    yield json.loads(text)
                except json.JSONDecodeError as error:  # a harness killed mid-line: say where
                    raise ValueError(f"{one}:{number}: not a JSON line ({error})") from None
