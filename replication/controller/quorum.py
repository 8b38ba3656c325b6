"""``QuorumController``: the ``Controller`` of a KRaft cluster (Kafka's ``QuorumController``).

This node's controller is *active* while its Raft node leads the quorum and its image holds
every record committed before its epoch began (Kafka's controller also waits to replay up to
its epoch start before it writes). Only the active controller plans and proposes; everywhere
else, and whenever leadership is lost, operations fail with NOT_CONTROLLER (retriable: brokers
forward admin requests to the active controller, clients retry).

Operations are planned and proposed one at a time, in the order asked: an operation is planned
against the committed image only once the previous one is committed and applied, so a plan
always sees the effects of the operations before it (two CreateTopics of one name cannot both
be planned as new). Kafka applies proposed records to its in-memory state speculatively and
reverts on failure; planning against the committed image gives the same outcome with no undo,
at the cost of one commit round trip per operation.

A proposal whose records were handed to the quorum when leadership was lost answers
NOT_CONTROLLER even though its records may still commit under the next leader; a retry then
answers what the committed image says (e.g. TOPIC_ALREADY_EXISTS), as with Kafka.

Wiring (``broker.quorum``): ``on_leader_change`` from the Raft node's listener,
``on_applied(offset)`` from the metadata loader after each committed batch is applied.

Owned by the broker's event loop.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from protocol.errors import NotControllerError
from replication.controller.planning import Plan, PlanningController
from replication.controller.proposal import Proposal
from replication.metadata.image import MetadataImage
from replication.metadata.records import encode_metadata_record
from storage.config import LogConfig

__all__ = ["QuorumClient", "QuorumController"]

logger = logging.getLogger("samsa.replication.controller")

T = TypeVar("T")


class QuorumClient(Protocol):
    """What the controller needs of the Raft node (``replication.raft.node.RaftNode``)."""

    def propose_records(self, records: Sequence[bytes]) -> int:
        """Append one batch as leader; its last offset. Raises if this node does not lead."""
        ...


@dataclass(slots=True)
class _Operation:
    plan: Plan[Any]
    proposal: Proposal[Any]


@dataclass(slots=True)
class _InFlight:
    last_offset: int
    value: Any
    proposal: Proposal[Any]


class QuorumController(PlanningController):
    def __init__(
        self,
        *,
        node_id: int,
        default_num_partitions: int,
        default_replication_factor: int,
        default_config: Callable[[], LogConfig],
        image: Callable[[], MetadataImage],
        quorum: QuorumClient | None = None,
    ) -> None:
        super().__init__(node_id=node_id, default_num_partitions=default_num_partitions,
                         default_replication_factor=default_replication_factor,
                         default_config=default_config)
        self._image = image
        self.quorum = quorum  # set before the Raft node starts (it needs the log opened first)
        self._queue: deque[_Operation] = deque()
        self._in_flight: _InFlight | None = None
        self._leading_epoch: int | None = None  # the epoch this node leads, if it does
        self._epoch_start_offset = -1  # last offset written before that epoch began
        self._applied_offset = -1  # last committed offset applied to the image

    @property
    def image(self) -> MetadataImage:
        return self._image()

    @property
    def active(self) -> bool:
        """Leading, with everything committed before the epoch applied."""
        return self._leading_epoch is not None and self._applied_offset >= self._epoch_start_offset

    # -- events from the quorum and the loader ------------------------------------------------

    def on_leader_change(self, epoch: int, leader_id: int | None, log_end_offset: int) -> None:
        """A new epoch: leading it (from ``log_end_offset`` on) or not."""
        if leader_id == self.node_id:
            self._leading_epoch = epoch
            self._epoch_start_offset = log_end_offset - 1
            logger.info("controller %d leads epoch %d; active once offset %d is applied",
                        self.node_id, epoch, self._epoch_start_offset)
        else:
            if self._leading_epoch is not None:
                logger.info("controller %d resigned: epoch %d is led by %s", self.node_id,
                            epoch, leader_id)
            self._leading_epoch = None
            self._fail_pending()
        self._pump()

    def on_applied(self, last_offset: int) -> None:
        """Committed records up to ``last_offset`` are in the image."""
        self._applied_offset = max(self._applied_offset, last_offset)
        in_flight = self._in_flight
        if in_flight is not None and last_offset >= in_flight.last_offset:
            self._in_flight = None
            in_flight.proposal.resolve(in_flight.value)
        self._pump()

    # -- proposing ----------------------------------------------------------------------------

    def _plan_and_propose(self, plan: Plan[T], *, validate_only: bool = False) -> Proposal[T]:
        proposal: Proposal[T] = Proposal()
        if self._leading_epoch is None:
            proposal.fail(NotControllerError())
            return proposal
        if validate_only:  # nothing is written: the committed image is what it validates against
            return self._validate(plan)
        self._queue.append(_Operation(plan, proposal))
        self._pump()
        return proposal

    @staticmethod
    def _validate(plan: Plan[T]) -> Proposal[T]:
        try:
            value, _ = plan()
        except Exception as error:
            return Proposal.refused(error)
        return Proposal.committed(value)

    def _pump(self) -> None:
        """Plan and propose queued operations while nothing is in flight."""
        while self._queue and self._in_flight is None and self.active:
            operation = self._queue.popleft()
            try:
                value, records = operation.plan()
            except Exception as error:  # a Kafka refusal, or a bug the caller reports
                operation.proposal.fail(error)
                continue
            if not records:
                operation.proposal.resolve(value)
                continue
            assert self.quorum is not None, "the quorum is set at start-up"
            try:
                last_offset = self.quorum.propose_records(
                    [encode_metadata_record(record) for record in records])
            except Exception as error:
                logger.info("controller %d could not propose: %s", self.node_id, error)
                operation.proposal.fail(NotControllerError())
                continue
            self._in_flight = _InFlight(last_offset, value, operation.proposal)

    def _fail_pending(self) -> None:
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            in_flight.proposal.fail(NotControllerError())
        while self._queue:
            self._queue.popleft().proposal.fail(NotControllerError())
