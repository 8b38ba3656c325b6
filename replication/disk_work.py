"""The replica manager's admin disk work (creating and deleting partition logs), off the loop.

Issue 18: creating or deleting thousands of partitions must not stall the event loop that
serves produce and fetch. The replica manager decides on the loop (O(what changes), no file
touched) and hands the files to ``DiskWork``, which runs them on the broker's storage executor
and hands each completion back to the loop.

Invariants:
- a job names the partitions it touches (``keys``) and runs only after every earlier job that
  named one of them has finished (it waits on their futures first). So a log deleted and then
  re-created under the same name is renamed aside before the new directory is made, and a
  deletion of a log still being created finds it created. Waiting cannot deadlock: an
  executor's queue is FIFO, so an earlier job has always started before a later one waits;
- ``on_done`` runs on the loop (``call_soon_threadsafe``) with the job's value or the exception
  it raised, then the job counts as settled: ``settled(topics)`` is an awaitable that resolves
  once every job naming those topics, submitted so far, is settled (None: none is pending).

Threads: ``submit``, ``settled``, ``drain`` and every ``on_done`` run on the event loop that
owns the replica manager; a job's ``work`` runs on an executor thread and must touch nothing the
loop owns except what the job was handed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from concurrent.futures import Executor
from typing import Any, TypeVar

__all__ = ["DiskWork"]

logger = logging.getLogger("samsa.replication.disk_work")

T = TypeVar("T")
TopicPartition = tuple[str, int]


class DiskWork:
    def __init__(self, executor: Executor, loop: asyncio.AbstractEventLoop) -> None:
        self.executor = executor
        self.loop = loop
        self._tails: dict[TopicPartition, concurrent.futures.Future[Any]] = {}
        self._pending: dict[str, set[asyncio.Future[None]]] = {}  # topic -> its unsettled jobs
        self._unsettled: set[asyncio.Future[None]] = set()  # every job, with topics or not
        self.jobs_submitted = 0

    def submit(
        self,
        keys: Collection[TopicPartition],
        work: Callable[[], T],
        on_done: Callable[[T | BaseException], None],
    ) -> None:
        """Run ``work`` on the executor after the earlier jobs on ``keys``; then ``on_done``."""
        previous = {self._tails[key] for key in keys if key in self._tails}

        def run() -> T:
            concurrent.futures.wait(previous)
            return work()

        future = self.executor.submit(run)
        self.jobs_submitted += 1
        for key in keys:
            self._tails[key] = future
        settled = self.loop.create_future()
        self._unsettled.add(settled)
        topics = {topic for topic, _ in keys}
        for topic in topics:
            self._pending.setdefault(topic, set()).add(settled)
        future.add_done_callback(lambda done: self.loop.call_soon_threadsafe(
            self._finish, keys, topics, done, on_done, settled))

    def _finish(
        self,
        keys: Collection[TopicPartition],
        topics: Iterable[str],
        done: concurrent.futures.Future[T],
        on_done: Callable[[T | BaseException], None],
        settled: asyncio.Future[None],
    ) -> None:
        for key in keys:
            if self._tails.get(key) is done:
                del self._tails[key]
        error = done.exception()
        try:
            on_done(error if error is not None else done.result())
        except Exception:
            logger.exception("completing disk work on %d partition(s) failed", len(keys))
        finally:
            settled.set_result(None)  # never cancelled: waiters wait on it without owning it
            self._unsettled.discard(settled)
            for topic in topics:
                waiting = self._pending.get(topic)
                if waiting is not None:
                    waiting.discard(settled)
                    if not waiting:
                        del self._pending[topic]

    def settled(self, topics: Iterable[str]) -> Awaitable[None] | None:
        """Resolves once the jobs on ``topics`` submitted so far are settled; None if none."""
        waiting = {job for topic in topics for job in self._pending.get(topic, ())}
        if not waiting:
            return None
        return _all(waiting)

    def pending_on(self, topic: str) -> bool:
        """Whether a job naming ``topic`` is not settled yet."""
        return topic in self._pending

    def pending(self) -> bool:
        return bool(self._unsettled)

    async def drain(self) -> None:
        """Wait until every job is settled, those its completions submit too (a clean stop)."""
        while self._unsettled:
            await _all(set(self._unsettled))


async def _all(jobs: Collection[asyncio.Future[None]]) -> None:
    """Wait for ``jobs``; a waiter cancelled meanwhile (its client went away) leaves them
    alone (``asyncio.gather`` would cancel them, and their completion would then fail)."""
    await asyncio.wait(jobs)
