"""Bounded use of file descriptors and memory maps: an LRU of open segment files and of mapped
indexes, so a broker with tens of thousands of partitions runs under ``RLIMIT_NOFILE``.

Kafka keeps one descriptor per segment ``.log`` for the broker's life and maps indexes lazily
(KAFKA-7283), unmapping them only when the segment closes; it has no cap and relies on a large
``ulimit -n``. Samsa caps both instead:

- ``SegmentFile`` is a segment's ``.log`` by path. ``acquire()`` returns an ``OpenFile`` (one
  descriptor); the ``LeastRecentlyUsed`` of open files (``log.segment.open.files.max``) holds
  the most recently used ones and drops the oldest when full. A dropped file is reopened by the
  next ``acquire()``, under its current name (renames follow ``SegmentFile.path``).
- An ``OpenFile``'s descriptor is closed when its last holder lets go (``__del__``; CPython frees
  it the moment the last reference goes, and an ``OpenFile`` is never part of a cycle). Whoever
  uses the descriptor holds the ``OpenFile`` meanwhile: a ``FetchSlice`` being sent with
  ``os.sendfile``, a flush fsyncing on a worker thread. Eviction, a segment's close and its
  deletion only drop the cache's reference, so none of them can close a descriptor under a
  reader, or let its number be reused while a reader still has it. A segment therefore has at
  most one descriptor in the cache, plus the older ones still held by slices in flight.
- Indexes (``storage.index``) join a second ``LeastRecentlyUsed`` when mapped; eviction unmaps
  them (they are remapped at their next use). Maps hold no descriptor (``storage.mapping``) but
  count against ``vm.max_map_count``.

Thread safety: the LRU has its own lock; evicted members are returned by ``touch`` and released
by the caller after that lock is let go, so a member's own lock is never taken inside it (an
index locks itself, then touches the LRU).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

# Unbounded: what tools and tests that build segments on their own get.
UNBOUNDED = 0


class Evictable(Protocol):
    def evict(self) -> None:
        """Let go of the resource (close, unmap); the next use takes it again."""


class LeastRecentlyUsed:
    """At most ``capacity`` members hold their resource (0: no limit); the least recently used
    one is evicted when a new one comes in."""

    def __init__(self, capacity: int = UNBOUNDED) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, not {capacity}")
        self.capacity = capacity
        self._members: OrderedDict[Evictable, None] = OrderedDict()
        self._lock = threading.Lock()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def touch(self, member: Evictable) -> list[Evictable]:
        """Mark ``member`` as just used; returns the members evicted to make room, whose
        ``evict()`` the caller must call (outside any lock it holds that they take)."""
        with self._lock:
            if member in self._members:
                self._members.move_to_end(member)
                return []
            self._members[member] = None
            evicted: list[Evictable] = []
            while self.capacity and len(self._members) > self.capacity:
                evicted.append(self._members.popitem(last=False)[0])
            self.evictions += len(evicted)
            return evicted

    def discard(self, member: Evictable) -> None:
        with self._lock:
            self._members.pop(member, None)

    def shrink(self, count: int) -> list[Evictable]:
        """Evict the ``count`` least recently used members (a limit was hit: make room)."""
        with self._lock:
            evicted = [self._members.popitem(last=False)[0] for _ in range(min(count, len(self)))]
            self.evictions += len(evicted)
            return evicted


def evict_all(members: list[Evictable]) -> None:
    for member in members:
        member.evict()


class OpenFile:
    """One open descriptor; closed when the last reference goes (or by ``close``, once)."""

    __slots__ = ("fd", "path")

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    def __repr__(self) -> str:
        return f"OpenFile({self.fd}, {self.path})"

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        self.close()


class SegmentFile:
    """A segment's ``.log``, open while it is in ``files`` (the LRU) or held by a reader.

    ``acquire`` on a file that is not open reopens it (``O_RDWR`` or ``O_RDONLY``, never
    ``O_CREAT``: a file that vanished meanwhile is an error, not a new empty segment).
    """

    def __init__(
        self, path: Path, files: LeastRecentlyUsed, *, writable: bool, create: bool = True
    ) -> None:
        self.path = path
        self.files = files
        self.writable = writable
        self._flags = os.O_RDWR if writable else os.O_RDONLY
        self._lock = threading.Lock()
        self._open: OpenFile | None = None
        self._pinned: OpenFile | None = None
        flags = self._flags | (os.O_CREAT if writable and create else 0)
        self._install(OpenFile(os.open(path, flags, 0o644), path))

    def __repr__(self) -> str:
        return f"SegmentFile({self.path})"

    def acquire(self) -> OpenFile:
        """The open descriptor (opened again if the LRU let it go); hold it while using ``fd``."""
        handle = self._pinned or self._open
        if handle is None:
            with self._lock:
                handle = self._open
                if handle is None:
                    handle = OpenFile(os.open(self.path, self._flags), self.path)
                    self._open = handle
        if self._pinned is None:
            evict_all(self.files.touch(self))
        return handle

    def _install(self, handle: OpenFile) -> None:
        self._open = handle
        evict_all(self.files.touch(self))

    @property
    def is_open(self) -> bool:
        return self._open is not None

    def evict(self) -> None:
        """The LRU let go: drop our reference (the descriptor closes once no reader holds it)."""
        with self._lock:
            self._open = None

    def pin(self) -> None:
        """Keep the current descriptor open whatever the LRU does (a segment awaiting deletion
        keeps serving slices handed out before, as Kafka's delayed delete)."""
        self._pinned = self.acquire()
        self.files.discard(self)

    def rename(self, new_path: Path) -> None:
        """Rename the file; an open descriptor follows the inode, a reopen uses the new name."""
        with self._lock:
            os.replace(self.path, new_path)
            self.path = new_path

    def release(self) -> None:
        """Leave the LRU and drop every reference we hold (close or deletion)."""
        self.files.discard(self)
        with self._lock:
            self._open = None
            self._pinned = None

    def close_now(self) -> None:
        """Close our descriptors at once, held by readers or not (a simulated crash in tests)."""
        self.files.discard(self)
        with self._lock:
            for handle in (self._open, self._pinned):
                if handle is not None:
                    handle.close()
            self._open = self._pinned = None
