"""Resident memory of a broker's process tree: now (``tree_rss_bytes``) and the highest value
seen while something runs (``PeakRss``, sampled by a thread).

What is read: ``VmRSS`` of ``/proc/PID/status`` (resident anonymous, file-backed and shared
pages, in KiB) for the root process and each live descendant (``bench.cpu.process_tree``),
summed. Pages shared between processes of the tree count once per process, as ``ps`` shows
them; the brokers compared here are one process each (the JVM, Samsa's Python process, the
peers' binaries), so that sum is the broker's RSS. A JVM started with ``-Xms1G`` reserves its
heap but only pages it touched are resident, so its RSS grows under load like any other's.

A peak is sampled every ``interval_s`` (50 ms) from a daemon thread that only reads /proc; a
spike shorter than the interval can be missed, so a peak is a lower bound. State: a
``PeakRss`` belongs to the thread that entered it; its sampler thread writes ``peak_bytes``,
read after ``__exit__`` has joined it.
"""

from __future__ import annotations

import threading
from types import TracebackType

from bench.cpu import process_tree

KIB = 1024
MIB = 1024 * 1024


def process_rss_bytes(pid: int) -> int:
    """``VmRSS`` of ``pid`` in bytes; 0 if the process is gone (or is a zombie: no VmRSS)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * KIB
    except OSError:
        pass
    return 0


def tree_rss_bytes(root_pid: int) -> int:
    """The summed ``VmRSS`` of ``root_pid`` and its live descendants, in bytes."""
    return sum(process_rss_bytes(pid) for pid in process_tree(root_pid))


class PeakRss:
    """``with PeakRss(pid) as peak: ...``; then ``peak.peak_bytes`` is the highest tree RSS
    sampled while the block ran (sampled at entry and at exit too)."""

    def __init__(self, root_pid: int, interval_s: float = 0.05) -> None:
        self.root_pid = root_pid
        self.interval_s = interval_s
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRss:
        self._take()
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        self._take()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def _take(self) -> None:
        self.peak_bytes = max(self.peak_bytes, tree_rss_bytes(self.root_pid))
