"""``LocalController``: the single-node ``Controller`` (``replication.controller.interface``).

A proposal is planned from the image (``replication.controller.planning``), written to the local
metadata log as one batch and fsynced (``MetadataLog.write``), then committed: applied to the
image, its delta published to the image's listeners (the replica manager), and resolved. A
planning refusal (a Kafka error) or a failed write resolves the proposal with that error and
nothing is applied.

Two modes:
- synchronous (until ``use_executor``: start-up, unit tests, tools): every proposal is committed
  when it is handed back;
- with a storage worker (``use_executor``, once the broker serves; issue 18): operations run
  one at a time, in order, as the quorum controller runs them. A *small* operation arriving
  while nothing is queued (at most ``INLINE_RECORDS_MAX`` records, by its ``records_hint`` and
  then by what it planned) is still planned, written, fsynced and committed inline: one short
  fsync of the metadata log, and clients see their topic, producer id block or
  ``__consumer_offsets`` at once, as before (Kafka's controller is asynchronous: its brokers
  answer COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE meanwhile, which clients that send one
  request and do not retry never see here). A *large* one (a CreateTopics of thousands of
  partitions), and anything arriving behind another, is queued: the storage worker plans it
  against the committed image (unless it was planned inline and found large), writes and
  fsyncs its batch and stages it (``replication.metadata.staging``: the delta and every touched
  topic's new partition map); the loop then commits it (``MetadataLog.commit``: O(topics
  touched), no decoding), resolves the proposal and starts the next. Each plan sees every
  operation before it. The worker may read the image because nothing mutates it while an
  operation is in flight: on a single node every metadata write comes through here. A
  validate-only request is planned at once against the committed image, as the quorum
  controller does.

Owned by the broker's event loop; the metadata log is set by ``start`` (after it is replayed).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, TypeVar

from protocol.codec import Message
from replication.controller.planning import PRODUCER_ID_BLOCK_SIZE, Plan, PlanningController
from replication.controller.proposal import Proposal
from replication.metadata.bootstrap import BootstrapMetadata
from replication.metadata.image import MetadataImage
from replication.metadata.log import AppendedBatch, MetadataLog
from replication.metadata.staging import StagedBatch, stage_batch

__all__ = ["INLINE_RECORDS_MAX", "PRODUCER_ID_BLOCK_SIZE", "LocalController"]

logger = logging.getLogger("samsa.replication.controller")

T = TypeVar("T")

# An operation of at most this many records, with nothing queued, is committed inline (a few
# hundred microseconds of planning and encoding plus one fsync); Samsa's choice, Kafka has none.
INLINE_RECORDS_MAX = 100


@dataclass(slots=True)
class _Operation:
    plan: Plan[Any]
    proposal: Proposal[Any]
    last_offset_is_value: bool = False  # ``propose``: resolves with the batch's last offset
    planned: tuple[Any, Sequence[Message]] | None = None  # planned inline, found large


@dataclass(frozen=True, slots=True)
class _Written:
    """What the worker hands back: the plan's value and, if it wrote any, the batch."""

    value: Any
    appended: AppendedBatch | None = None
    staged: StagedBatch | None = None


class LocalController(PlanningController):
    metadata_log: MetadataLog | None = None
    _executor: Executor | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    inline_records_max = INLINE_RECORDS_MAX

    def start(self, metadata_log: MetadataLog) -> None:
        self.metadata_log = metadata_log
        self._queue: deque[_Operation] = deque()
        self._in_flight: _Operation | None = None
        self._idle: asyncio.Event | None = None

    def write_bootstrap(self, bootstrap: BootstrapMetadata | None) -> None:
        """At start-up, before serving: an empty metadata log opens with the bootstrap records
        (``replication.metadata.bootstrap``: feature levels, SCRAM users), as Kafka's controller
        writes them into an empty log; a log that has records, or no bootstrap file, is left
        as it is."""
        if bootstrap is None or self.image.last_offset >= 0:
            return
        logger.info("writing the bootstrap metadata from %s (metadata.version %s, %d records)",
                    bootstrap.source, bootstrap.metadata_version, len(bootstrap.records))
        self.propose(bootstrap.records).result()  # synchronous before use_executor: committed

    def use_executor(self, executor: Executor, loop: asyncio.AbstractEventLoop,
                     *, inline_records_max: int = INLINE_RECORDS_MAX) -> None:
        """From now on, operations larger than ``inline_records_max`` records (or queued
        behind another) are planned and written on ``executor`` and committed on ``loop``."""
        self._executor, self._loop = executor, loop
        self.inline_records_max = inline_records_max

    async def drain(self) -> None:
        """A clean stop: wait until every queued operation is resolved."""
        while self._in_flight is not None or self._queue:
            self._idle = asyncio.Event()
            await self._idle.wait()

    @property
    def image(self) -> MetadataImage:
        assert self.metadata_log is not None, "start() first"
        return self.metadata_log.image

    def propose(self, records: Sequence[Message]) -> Proposal[int]:
        """Append ``records`` as one batch; resolves with its last offset once committed. The
        planned operations use it; records planned elsewhere may too."""
        records = list(records)
        return self._submit(_Operation(lambda: (None, records), Proposal(), True), len(records))

    def _plan_and_propose(
        self, plan: Plan[T], *, validate_only: bool = False, records_hint: int | None = None,
    ) -> Proposal[T]:
        if validate_only:  # nothing is written: the committed image is what it validates against
            try:
                value, _ = plan()
            except Exception as error:  # a Kafka refusal, or a bug the caller reports (and logs)
                return Proposal.refused(error)
            return Proposal.committed(value)
        return self._submit(_Operation(plan, Proposal()), records_hint)

    def _submit(self, operation: _Operation, records_hint: int | None) -> Proposal[Any]:
        assert self.metadata_log is not None, "start() first"
        idle = self._in_flight is None and not self._queue
        small = records_hint is None or records_hint <= self.inline_records_max
        if self._executor is None or (idle and small and self._planned_small(operation)):
            self._settle(operation, self._write_operation(operation))
        else:
            self._queue.append(operation)
            self._pump()
        return operation.proposal

    def _planned_small(self, operation: _Operation) -> bool:
        """Plan ``operation`` now; True when it may be written inline (refused, or small)."""
        try:
            operation.planned = operation.plan()
        except Exception:
            return True  # refused: ``_write_operation`` plans it again and resolves it
        return len(operation.planned[1]) <= self.inline_records_max

    # -- one operation at a time -------------------------------------------------------------

    def _pump(self) -> None:
        if self._in_flight is not None or not self._queue:
            if self._in_flight is None and self._idle is not None:
                self._idle.set()
            return
        assert self._executor is not None and self._loop is not None
        operation = self._in_flight = self._queue.popleft()
        loop = self._loop
        future = self._executor.submit(self._write_operation, operation)
        future.add_done_callback(
            lambda done: loop.call_soon_threadsafe(self._written, operation, done))

    def _written(
        self, operation: _Operation, done: concurrent.futures.Future[_Written | BaseException]
    ) -> None:
        """On the loop: the head operation is written (or refused); commit it, start the next."""
        self._in_flight = None
        try:
            outcome: _Written | BaseException = done.result()
        except BaseException as error:  # raised by the plan or the write: the proposal's error
            outcome = error
        try:
            self._settle(operation, outcome)
        finally:
            self._pump()

    def _write_operation(self, operation: _Operation) -> _Written | BaseException:
        """Plan, write and stage (the worker, or inline in synchronous mode); an error is
        returned as the outcome."""
        assert self.metadata_log is not None
        try:
            value, records = operation.planned or operation.plan()
        except Exception as error:  # a Kafka refusal, or a bug the caller reports (and logs)
            return error
        if not records and not operation.last_offset_is_value:
            return _Written(value)
        try:
            appended = self.metadata_log.write(records)
        except Exception as error:
            logger.exception("appending %d record(s) to the metadata log failed", len(records))
            return error
        return _Written(value, appended, stage_batch(self.image, records))

    def _settle(self, operation: _Operation, outcome: _Written | BaseException) -> None:
        """On the owner's thread: commit what was written and resolve the proposal."""
        if isinstance(outcome, BaseException):
            operation.proposal.fail(outcome)
            return
        value = outcome.value
        if outcome.appended is not None and outcome.staged is not None:
            assert self.metadata_log is not None
            self.metadata_log.commit(outcome.appended, outcome.staged)
            if operation.last_offset_is_value:
                value = outcome.appended.last_offset
        operation.proposal.resolve(value)
