"""``LocalController``: the single-node ``Controller`` (``replication.controller.interface``).

A proposal is planned from the image (``replication.controller.planning``), written to the local
metadata log as one batch and fsynced (``MetadataLog.write``), then committed: applied to the
image, its delta published to the image's listeners (the replica manager), and resolved. A
planning refusal (a Kafka error) or a failed write resolves the proposal with that error and
nothing is applied.

Two modes:
- synchronous (until ``use_executor``: start-up, unit tests, tools): every proposal is committed
  when it is handed back;
- off the loop (``use_executor``, once the broker serves; issue 18): operations are queued and
  run one at a time, as the quorum controller runs them. The storage worker plans the head
  operation against the committed image, writes and fsyncs its batch and stages it
  (``replication.metadata.staging``: the delta and every touched topic's new partition map);
  the loop then commits it (``MetadataLog.commit``: O(topics touched), no decoding), resolves
  the proposal and starts the next. So a CreateTopics of any size costs the loop only the
  commit, and each plan sees every operation before it. The worker may read the image because
  nothing mutates it while an operation is in flight: on a single node every metadata write
  comes through this queue. A validate-only request is planned at once on the loop against the
  committed image, as the quorum controller does.

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
from replication.metadata.image import MetadataImage
from replication.metadata.log import AppendedBatch, MetadataLog
from replication.metadata.staging import StagedBatch, stage_batch

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "LocalController"]

logger = logging.getLogger("samsa.replication.controller")

T = TypeVar("T")


@dataclass(slots=True)
class _Operation:
    plan: Plan[Any]
    proposal: Proposal[Any]
    last_offset_is_value: bool = False  # ``propose``: resolves with the batch's last offset


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

    def start(self, metadata_log: MetadataLog) -> None:
        self.metadata_log = metadata_log
        self._queue: deque[_Operation] = deque()
        self._in_flight: _Operation | None = None
        self._idle: asyncio.Event | None = None

    def use_executor(self, executor: Executor, loop: asyncio.AbstractEventLoop) -> None:
        """From now on, plan and write on ``executor`` (the storage worker), commit on ``loop``."""
        self._executor, self._loop = executor, loop

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
        return self._submit(_Operation(lambda: (None, records), Proposal(), True))

    def _plan_and_propose(self, plan: Plan[T], *, validate_only: bool = False) -> Proposal[T]:
        if validate_only:  # nothing is written: the committed image is what it validates against
            try:
                value, _ = plan()
            except Exception as error:  # a Kafka refusal, or a bug the caller reports (and logs)
                return Proposal.refused(error)
            return Proposal.committed(value)
        return self._submit(_Operation(plan, Proposal()))

    def _submit(self, operation: _Operation) -> Proposal[Any]:
        assert self.metadata_log is not None, "start() first"
        if self._executor is None:
            self._settle(operation, self._write_operation(operation))
        else:
            self._queue.append(operation)
            self._pump()
        return operation.proposal

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
            value, records = operation.plan()
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
