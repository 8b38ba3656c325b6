"""The broker's periodic storage work, run off the event loop.

    task         interval (Kafka's key)                      work
    retention    log.retention.check.interval.ms            LogManager.run_retention(high watermarks)
    flush        log.flush.scheduler.interval.ms            LogManager.flush_due_logs
    checkpoint   log.flush.offset.checkpoint.interval.ms    LogManager.checkpoint
    high-watermark  replica.high.watermark.checkpoint.interval.ms
                                                             replication-offset-checkpoint (the
                                                             high watermarks taken on the loop,
                                                             written on the storage worker)
    purge        min(log.segment.delete.delay.ms, 10 s)     LogManager.purge_deleted
    key-indexes  1 s (no Kafka key)                         LogManager.write_key_indexes: the
                                                             .keyindex of segments rolled in logs
                                                             read by key (SamsaReadKey)
    cleaner      log.cleaner.backoff.ms (if log.cleaner.enable)   Cleaner.clean, dirtiest log first
    offsets      offsets.retention.check.interval.ms        expire committed offsets (on the loop)
    txn-abort    transaction.abort.timed.out.transaction.cleanup.interval.ms
                                                             abort timed-out transactions, retry
                                                             markers (on the loop)
    txn-expire   transaction.remove.expired.transaction.cleanup.interval.ms
                                                             expire transactional ids (on the loop)
    metadata-snapshot  min(metadata.log.max.snapshot.interval.ms, 60 s)
                                                             a metadata snapshot if one is due by
                                                             time (on the loop; written on the
                                                             storage worker)
    metadata-clean     log.retention.check.interval.ms      metadata.max.retention.* (snapshots,
                                                             metadata log start offset)
    gc-freeze    1 s (no Kafka key)                         freeze the long-lived objects once the
                                                             hosted partitions grew (on the loop;
                                                             ``broker.gc_freeze``; also at start)

Metadata snapshots are also started right after an append that makes one due
(``MetadataLog.on_snapshot_due``): the loop takes a copy of the image (15–35 ms for 10,000
topics), the storage worker encodes and writes the file and then applies the retention rules.

Storage work goes to one worker thread (so these never overlap each other); the cleaner has
its own thread, as Kafka's cleaner threads are separate. Offset expiry runs on the event loop
itself, which owns the offset store (its appends are short, like a commit's). A task whose interval is Long.MAX
(Kafka's "never") is not started. A failure is logged and the task carries on at its next
interval (storage errors are sticky in the log directory, so nothing is retried in a loop).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from broker.broker import Broker
from broker.gc_freeze import LongLivedFreezer
from broker.group.offsets import expire_offsets
from replication.metadata.log import MetadataLog
from storage.config import LONG_MAX

__all__ = ["Scheduler"]

logger = logging.getLogger("samsa.broker.scheduler")

PURGE_INTERVAL_MAX_MS = 10_000
METADATA_SNAPSHOT_CHECK_MAX_MS = 60_000
GC_FREEZE_CHECK_MS = 1000
KEY_INDEX_CHECK_MS = 1000
NEVER_MS = LONG_MAX // 2  # intervals at or above this are Kafka's "never"


class Scheduler:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.storage_executor = ThreadPoolExecutor(1, thread_name_prefix="samsa-storage")
        self.cleaner_executor = ThreadPoolExecutor(1, thread_name_prefix="samsa-cleaner")
        self._tasks: list[asyncio.Task[None]] = []
        self.gc_freezer = LongLivedFreezer(lambda: len(broker.replica_manager.partitions))

    def start(self) -> None:
        config = self.broker.config
        log_manager = self.broker.log_manager
        manager = self.broker.replica_manager
        self._every("retention", config.log_retention_check_interval_ms,
                    lambda: log_manager.run_retention(manager.high_watermarks()))
        self._every("flush", config.log_flush_scheduler_interval_ms, log_manager.flush_due_logs)
        self._every("checkpoint", config.log_flush_offset_checkpoint_interval_ms,
                    log_manager.checkpoint)
        self._every("high-watermark", config.replica_high_watermark_checkpoint_interval_ms,
                    self._checkpoint_high_watermarks, on_loop=True)
        purge_ms = min(config.log_config.file_delete_delay_ms, PURGE_INTERVAL_MAX_MS)
        self._every("purge", max(purge_ms, 100), log_manager.purge_deleted)
        self._every("key-indexes", KEY_INDEX_CHECK_MS, log_manager.write_key_indexes)
        if config.log_cleaner_enable:
            self._every("cleaner", config.log_cleaner_backoff_ms, self._clean_one,
                        executor=self.cleaner_executor)
        self._every("offsets", config.offsets_retention_check_interval_ms,
                    lambda: expire_offsets(self.broker), executor=None, on_loop=True)
        transactions = self.broker.transactions
        self._every("txn-abort",
                    transactions.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                    transactions.abort_timed_out, on_loop=True)
        self._every("txn-expire",
                    transactions.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                    transactions.expire_transactional_ids, on_loop=True)
        self._start_metadata_snapshots()
        self.gc_freezer.freeze()  # what start-up loaded lives as long as the broker
        self._every("gc-freeze", GC_FREEZE_CHECK_MS, self.gc_freezer.tick, on_loop=True)

    def _start_metadata_snapshots(self) -> None:
        metadata_log = self.broker.replica_manager.metadata_log
        assert metadata_log is not None, "the broker starts up before its scheduler"
        metadata_log.on_snapshot_due = self._snapshot_metadata
        interval_ms = metadata_log.config.max_snapshot_interval_ms
        check_ms = min(interval_ms, METADATA_SNAPSHOT_CHECK_MAX_MS) or METADATA_SNAPSHOT_CHECK_MAX_MS
        self._every("metadata-snapshot", max(check_ms, 100), self._snapshot_metadata_if_due,
                    on_loop=True)
        self._every("metadata-clean", self.broker.config.log_retention_check_interval_ms,
                    metadata_log.maybe_clean)

    def _metadata_log(self) -> MetadataLog:
        metadata_log = self.broker.replica_manager.metadata_log
        assert metadata_log is not None
        return metadata_log

    def _snapshot_metadata_if_due(self) -> None:
        if self._metadata_log().snapshot_due() is not None:
            self._snapshot_metadata()

    def _snapshot_metadata(self) -> None:
        """On the loop: copy the image now; encode and write it on the storage worker."""
        metadata_log = self._metadata_log()
        reason = metadata_log.snapshot_due()
        pending = metadata_log.prepare_snapshot()
        if pending is None:
            return
        logger.info("creating metadata snapshot at offset %d because %s",
                    pending.snapshot_id.end_offset, reason)
        future = asyncio.get_running_loop().run_in_executor(
            self.storage_executor, metadata_log.write_snapshot, pending)
        future.add_done_callback(_log_snapshot_failure)

    def _every(
        self, name: str, interval_ms: int, work: Callable[[], Any],
        *, executor: ThreadPoolExecutor | None = None, on_loop: bool = False,
    ) -> None:
        if interval_ms <= 0 or interval_ms >= NEVER_MS:
            return
        task = asyncio.get_running_loop().create_task(
            self._run(name, interval_ms / 1000, work, None if on_loop else executor or self.storage_executor)
        )
        self._tasks.append(task)

    async def _run(
        self, name: str, interval: float, work: Callable[[], Any], executor: ThreadPoolExecutor | None
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            try:
                if executor is None:
                    work()  # state owned by the event loop
                else:
                    await loop.run_in_executor(executor, work)
            except Exception:
                logger.exception("scheduled %s failed", name)

    def _checkpoint_high_watermarks(self) -> None:
        """On the loop, which owns the partitions: take the high watermarks; the storage
        worker writes the files."""
        high_watermarks = self.broker.replica_manager.high_watermarks()
        future = asyncio.get_running_loop().run_in_executor(
            self.storage_executor, self.broker.high_watermark_checkpoints.write, high_watermarks)
        future.add_done_callback(_log_checkpoint_failure)

    def _clean_one(self) -> None:
        """Clean the dirtiest compacted log, if any (Kafka's cleaner thread, one round), below
        each log's last stable offset (open transactions are not cleaned)."""
        self.broker.log_manager.clean_dirtiest_log(self.broker.replica_manager.last_stable_offsets())

    async def stop(self) -> None:
        metadata_log = self.broker.replica_manager.metadata_log
        if metadata_log is not None:
            metadata_log.on_snapshot_due = None  # appends after this start no snapshot
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._shutdown_executors)

    def _shutdown_executors(self) -> None:
        self.cleaner_executor.shutdown(wait=True)
        self.storage_executor.shutdown(wait=True)


def _log_checkpoint_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("writing replication-offset-checkpoint failed", exc_info=future.exception())


def _log_snapshot_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("writing a metadata snapshot failed", exc_info=future.exception())
