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

Periodic work (``tick``, called by the quorum member every 250 ms while this node runs): fence
brokers whose session expired, one per operation; the auto leader rebalance every
``leader.imbalance.check.interval.seconds`` once the image shows an imbalance
(``auto.leader.rebalance.enable``, ``elections.plan_balance_partition_leaders`` with
``leader.imbalance.per.broker.percentage``); unclean elections of leaderless partitions whose
topic allows them every ``unclean.leader.election.interval.ms`` once some partition is leaderless
(``elections.plan_elect_unclean_leaders``). The two elections are scheduled as Kafka's
``ImbalanceSchedule`` (``replication.controller.periodic``) and are cancelled on resignation.

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

from protocol.codec import Message
from protocol.errors import NotControllerError
from protocol.messages.alter_partition_request import AlterPartitionRequest
from protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol.messages.broker_registration_request import BrokerRegistrationRequest
from replication.controller.alter_partition import AlterPartitionResult, plan_alter_partition
from replication.controller.cluster_control import (
    HeartbeatPlan,
    plan_broker_heartbeat,
    plan_fence_stale_broker,
    plan_register_broker,
)
from replication.controller.elections import (
    DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
    imbalanced_partitions,
    plan_balance_partition_leaders,
    plan_elect_unclean_leaders,
)
from replication.controller.heartbeats import BrokerHeartbeatManager
from replication.controller.partition_change import partitions_where
from replication.controller.periodic import PeriodicOperation
from replication.controller.planning import Plan, PlanningController
from replication.controller.proposal import Proposal
from replication.metadata.bootstrap import BootstrapMetadata
from replication.metadata.image import (
    NO_LEADER,
    MetadataImage,
    PartitionImage,
    cluster_id_record,
    feature_level_records,
)
from replication.metadata.records import encode_metadata_record
from storage.config import LogConfig

__all__ = ["QuorumClient", "QuorumController"]

logger = logging.getLogger("samsa.replication.controller")

T = TypeVar("T")
UNCLEAN_LEADER_ELECTION_INTERVAL_MS = 300_000  # Kafka's unclean.leader.election.interval.ms


class QuorumClient(Protocol):
    """What the controller needs of the Raft node (``replication.raft.node.RaftNode``)."""

    def propose_records(self, records: Sequence[bytes]) -> int:
        """Append one batch as leader; its last offset. Raises if this node does not lead."""
        ...

    @property
    def end_offset(self) -> int:
        """Where the next batch will start (a broker's epoch is its registration's offset)."""
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
    records: Sequence[Message]


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
        clock_ms: Callable[[], int],
        new_cluster_id: Callable[[], str],
        session_timeout_ms: int = 9000,
        leader_imbalance_check_interval_ms: int | None = None,
        leader_imbalance_per_broker_percentage: int = DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
        unclean_leader_election_interval_ms: int = UNCLEAN_LEADER_ELECTION_INTERVAL_MS,
    ) -> None:
        """``leader_imbalance_check_interval_ms`` None: no auto leader rebalance."""
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
        self._clock_ms = clock_ms
        self._new_cluster_id = new_cluster_id
        # this node's bootstrap.checkpoint, if formatted with one (set at start-up)
        self.bootstrap: BootstrapMetadata | None = None
        self._activated_epoch: int | None = None  # the epoch whose activation ran
        self._fencing_queued = False
        self.heartbeats = BrokerHeartbeatManager(session_timeout_ms)
        self.leader_imbalance_per_broker_percentage = leader_imbalance_per_broker_percentage
        self.leader_balance = PeriodicOperation(leader_imbalance_check_interval_ms)
        self.unclean_elections = PeriodicOperation(unclean_leader_election_interval_ms)

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
            now_ms, image = self._clock_ms(), self.image
            for record in in_flight.records:  # the sessions follow what was committed
                self.heartbeats.replay(record, image, now_ms)
            in_flight.proposal.resolve(in_flight.value)
        self._pump()

    # -- proposing ----------------------------------------------------------------------------

    def _plan_and_propose(
        self, plan: Plan[T], *, validate_only: bool = False, records_hint: int | None = None,
    ) -> Proposal[T]:
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

    def _activate(self) -> None:
        """Once per led epoch, when active: sessions from the image (every registered broker
        gets a fresh session, as Kafka's ``BrokerHeartbeatManager`` on failover), and a new
        cluster's id committed before anything else, with its finalized features
        (``metadata.version``, as Kafka's bootstrap records: its tools refuse a log without)."""
        if self._activated_epoch == self._leading_epoch:
            return
        self._activated_epoch = self._leading_epoch
        self.heartbeats.activate(self.image, self._clock_ms())
        if self.image.cluster_id is None:
            cluster_id = self._new_cluster_id()
            logger.info("controller %d: a new cluster: id %s", self.node_id, cluster_id)
            records = [cluster_id_record(cluster_id), *self._first_records()]
            self._queue.appendleft(_Operation(lambda: (cluster_id, records), Proposal()))

    def _first_records(self) -> list[Message]:
        """What follows a new cluster's id: the bootstrap records when the metadata log is
        empty and this node was formatted with a ``bootstrap.checkpoint`` (Kafka's controller
        writes them when its log is empty), else the image's finalized features."""
        if self.bootstrap is None or self.image.last_offset >= 0:
            return list(feature_level_records(self.image))
        logger.info("controller %d: writing the bootstrap metadata from %s (metadata.version "
                    "%s, %d records)", self.node_id, self.bootstrap.source,
                    self.bootstrap.metadata_version, len(self.bootstrap.records))
        return list(self.bootstrap.records)

    def _pump(self) -> None:
        """Plan and propose queued operations while nothing is in flight."""
        if self.active:
            self._activate()
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
            self._in_flight = _InFlight(last_offset, value, operation.proposal, records)

    # -- brokers: registration, heartbeats, fencing (KIP-631) ----------------------------------

    def register_broker(self, request: BrokerRegistrationRequest) -> Proposal[int]:
        """BrokerRegistration: resolves with the broker's new epoch."""
        def plan() -> tuple[int, Sequence[Message]]:
            cluster_id = self.image.cluster_id
            if cluster_id is None:
                raise NotControllerError("the cluster id is not committed yet")
            assert self.quorum is not None
            planned = plan_register_broker(
                self.image, self.heartbeats, request, cluster_id=cluster_id,
                next_offset=self.quorum.end_offset, now_ms=self._clock_ms())
            return planned.broker_epoch, planned.records

        return self._plan_and_propose(plan)

    def broker_heartbeat(self, request: BrokerHeartbeatRequest) -> Proposal[HeartbeatPlan]:
        """BrokerHeartbeat: resolves with the response's fields once its records commit."""
        def plan() -> tuple[HeartbeatPlan, Sequence[Message]]:
            assert self.quorum is not None
            planned = plan_broker_heartbeat(self.image, self.heartbeats, request,
                                            now_ms=self._clock_ms(),
                                            next_offset=self.quorum.end_offset)
            return planned, planned.records

        return self._plan_and_propose(plan)

    # -- partitions: AlterPartition (KIP-497) --------------------------------------------------

    def alter_partition(
        self, request: AlterPartitionRequest, *, version: int
    ) -> Proposal[list[AlterPartitionResult]]:
        """AlterPartition: per-partition results once the ISR changes are committed; refused
        with STALE_BROKER_EPOCH for the whole request (``alter_partition``)."""
        return self._plan_and_propose(
            lambda: plan_alter_partition(self.image, request, version=version))

    # -- timers -------------------------------------------------------------------------------

    def tick(self) -> None:
        """Timers (the quorum member calls this periodically): fencing of expired sessions, the
        auto leader rebalance and unclean elections (see the module docstring)."""
        if not self.active:
            return
        self._maybe_fence_stale_broker()
        image, now_ms = self.image, self._clock_ms()
        percentage = self.leader_imbalance_per_broker_percentage
        self._run_periodic(
            self.leader_balance, image, now_ms, "auto leader rebalance",
            needed=lambda: bool(imbalanced_partitions(image, percentage)),
            planner=lambda: plan_balance_partition_leaders(
                self.image, imbalance_percentage=percentage))
        self._run_periodic(
            self.unclean_elections, image, now_ms, "unclean leader elections",
            needed=lambda: next(partitions_where(image, _leaderless), None) is not None,
            planner=lambda: plan_elect_unclean_leaders(self.image))

    def _run_periodic(
        self, schedule: PeriodicOperation, image: MetadataImage, now_ms: int, name: str, *,
        needed: Callable[[], bool], planner: Callable[[], tuple[list[Message], bool]],
    ) -> None:
        if schedule.needs_check(image.last_offset):
            schedule.check(image.last_offset, now_ms, needed=needed())
        if not schedule.take_due(now_ms):
            return

        def plan() -> tuple[bool, Sequence[Message]]:
            records, more = planner()
            logger.info("controller %d: %s: %d partition change(s)%s", self.node_id, name,
                        len(records), "; more to do at once" if more else "")
            return more, records

        proposal = self._plan_and_propose(plan)
        proposal.add_done_callback(lambda more: schedule.finished(more=more))

    def _maybe_fence_stale_broker(self) -> None:
        """Fence the broker whose session expired longest ago, one per operation (Kafka's
        ``maybeFenceOneStaleBroker``), again at once while one was fenced."""
        if not self.active or self._fencing_queued:
            return
        next_check = self.heartbeats.next_check_time_ms()
        if next_check is None or next_check > self._clock_ms():
            return
        self._fencing_queued = True

        def plan() -> tuple[int | None, Sequence[Message]]:
            self._fencing_queued = False
            broker_id, records = plan_fence_stale_broker(self.image, self.heartbeats,
                                                         self._clock_ms())
            if broker_id is not None:
                logger.info("controller %d: fencing broker %d (session expired)",
                            self.node_id, broker_id)
            return broker_id, records

        proposal = self._plan_and_propose(plan)
        proposal.add_done_callback(
            lambda fenced: self._maybe_fence_stale_broker() if fenced is not None else None)

    def _fail_pending(self) -> None:
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            in_flight.proposal.fail(NotControllerError())
        while self._queue:
            self._queue.popleft().proposal.fail(NotControllerError())
        self._fencing_queued = False
        self.leader_balance.cancel()
        self.unclean_elections.cancel()


def _leaderless(partition: PartitionImage) -> bool:
    return partition.leader == NO_LEADER
