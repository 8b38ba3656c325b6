"""Group commit: the flushes ``flush.messages`` asks for, one round of syncs per log dir at a time.

Kafka flushes inside the append when ``flush.messages`` unflushed records accumulate
(``UnifiedLog.append``: ``if (unflushedMessages >= flushInterval) flush()``, under the log's
lock, for a leader's and a follower's append alike), so its produce answer and its follower's
next fetch position both follow the fsync. Samsa keeps that promise without blocking the event
loop, and without one fsync per append:

- an append past the threshold calls ``flush(log, offset)``, which returns a future that
  completes once ``log.recovery_point >= offset`` (everything below ``offset`` is fsynced), or
  fails with KAFKA_STORAGE_ERROR if the sync failed (the log dir went offline: a failed fsync
  is a log dir failure, as in Kafka);
- each log dir (a disk) has one ``LogDirFlusher`` with its own threads. While a round of
  syncs runs, appends go on and the logs they dirty are collected; when the round ends, the
  waiters it covers are woken and the next round syncs every log collected meanwhile, each up
  to its log end offset at the time the round starts (one ``Log.flush`` per log: fdatasync of
  each dirty segment and its indexes; the logs of a round in parallel on ``SYNC_THREADS``
  threads). So N producers on M partitions of one disk cost about one sync per partition per
  round, not one per append.

Who waits: Produce (``broker.apis.produce``) answers acks=1 and acks=-1 only after the flush
covering its append (acks=0 has no answer; its flush is still requested); the follower's fetcher
(``broker.replica_fetcher``) sends its next Fetch, which reports its log end offset as its
position, only after the flush covering what it appended, so acks=-1 means every ISR member
synced. The default ``flush.messages`` (Long.MAX_VALUE) never asks: nothing waits.

Owned by the broker's event loop; only ``Log.flush`` runs on the flusher's threads (one log
on one thread at a time: a log is in at most one round).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

from protocol.errors import KafkaStorageError
from storage.log import Log

__all__ = ["GroupCommit", "LogDirFlusher"]

logger = logging.getLogger("samsa.broker.group_commit")

Waiter = tuple[int, "asyncio.Future[None]"]
# A round's logs are synced by up to this many threads at once: the disk takes concurrent
# fdatasyncs together (bench.durability's limits: 8 files synced by 8 threads reach about
# 2.5x the rounds/s of one thread syncing them in turn, near one syncfs, without syncfs
# writing back every other dirty file on the file system).
SYNC_THREADS = 8


class LogDirFlusher:
    """One log dir's flusher: at most one round of syncs at a time (see the module docstring)."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.rounds = 0  # rounds of syncs run (a test and bench counter)
        self.logs_flushed = 0  # Log.flush calls made by those rounds
        self._dirty: dict[Log, list[Waiter]] = {}
        self._running = False

    def flush(self, log: Log, offset: int) -> asyncio.Future[None]:
        """A future done when everything in ``log`` below ``offset`` is fsynced."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if _covered(log, offset):
            future.set_result(None)
            return future
        self._dirty.setdefault(log, []).append((offset, future))
        if not self._running:
            self._start_round()
        return future

    def _start_round(self) -> None:
        batch, self._dirty = self._dirty, {}
        targets = [(log, log.log_end_offset) for log in batch]
        self._running = True
        self.rounds += 1
        self.logs_flushed += len(targets)
        loop = asyncio.get_running_loop()
        syncing = asyncio.gather(*(loop.run_in_executor(self.executor, _sync_one, log, target)
                                   for log, target in targets))
        syncing.add_done_callback(lambda done: self._round_done(batch, done))

    def _round_done(
        self, batch: dict[Log, list[Waiter]], done: asyncio.Future[list[BaseException | None]]
    ) -> None:
        self._running = False
        failures = (done.result() if not done.cancelled() and done.exception() is None
                    else [None] * len(batch))
        for (log, waiters), failure in zip(batch.items(), failures, strict=True):
            for offset, future in waiters:
                if future.done():
                    continue
                if failure is not None:
                    future.set_exception(_storage_error(log, failure))
                elif _covered(log, offset):
                    future.set_result(None)
                else:  # appended past the round's target meanwhile: the next round covers it
                    self._dirty.setdefault(log, []).append((offset, future))
        if self._dirty:
            self._start_round()


def _covered(log: Log, offset: int) -> bool:
    """Everything below ``offset`` is synced, or was truncated away (the log became a follower
    of a leader whose log diverged: those offsets are gone, what replaced them is not waited
    for here; acks=-1 learns the outcome from the produce purgatory)."""
    return log.recovery_point >= min(offset, log.log_end_offset)


def _sync_one(log: Log, target: int) -> BaseException | None:
    """On a flusher thread: ``log`` up to ``target``; the error if that failed (that log only)."""
    try:
        log.flush(target)
    except Exception as error:  # KafkaStorageError: the log dir is offline now
        logger.error("flushing %s failed: %s", log.directory.name, error)
        return error
    return None


def _storage_error(log: Log, failure: BaseException) -> KafkaStorageError:
    if isinstance(failure, KafkaStorageError):
        return failure
    return KafkaStorageError(f"flushing {log.directory.name} failed: {failure}")


class GroupCommit:
    """The broker's flushers, one per log dir, each with its own thread (made when first
    needed). ``executor_for`` is for tests: an executor per log dir."""

    def __init__(self, executor_for: Callable[[Path], Executor] | None = None) -> None:
        self._executor_for = executor_for or _thread_for
        self.flushers: dict[Path, LogDirFlusher] = {}

    def flush(self, log: Log, offset: int) -> asyncio.Future[None]:
        """Everything in ``log`` below ``offset`` fsynced (see ``LogDirFlusher.flush``)."""
        log_dir = log.directory.parent
        flusher = self.flushers.get(log_dir)
        if flusher is None:
            flusher = self.flushers[log_dir] = LogDirFlusher(self._executor_for(log_dir))
        return flusher.flush(log, offset)

    def close(self) -> None:
        for flusher in self.flushers.values():
            if isinstance(flusher.executor, ThreadPoolExecutor):
                flusher.executor.shutdown(wait=True)
        self.flushers.clear()


def _thread_for(log_dir: Path) -> Executor:
    return ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix=f"samsa-flush-{log_dir.name}")
