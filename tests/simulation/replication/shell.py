"""The shell around each simulated broker: what ``broker.replica_fetcher``, ``broker.replication``
and the Fetch / Produce handlers do in the daemon, over the simulated network and clock.

- **Lifecycle**: register with the controller (a new incarnation id each start; retried while
  the controller refuses it), heartbeat every ``broker.heartbeat.interval.ms`` with the last
  metadata offset applied, fetch the metadata log (a long poll at the controller), apply it
  (``SimBroker.apply_metadata``), and act on role changes.
- **Follower fetch loop**, one per followed partition (a token restarts it when the leader or
  epoch changes, as a partition moves to another fetcher): ``fetch_position`` -> the leader ->
  ``apply_answer``; a failed or timed-out request or an error backs off
  ``replica.fetch.backoff.ms``; OFFSET_OUT_OF_RANGE -> ``reset_out_of_range`` with the leader's
  log start and end (carried in the answer, where the daemon asks ListOffsets).
- **Leader**: a follower's Fetch is served by ``Partition.fetch_for_follower`` (exactly what the
  daemon's Fetch handler calls); nothing to read parks it until an append or
  ``replica.fetch.wait.max.ms`` (then it is served again: Kafka's ``DelayedFetch``). ISR changes
  go to the controller (AlterPartition v3, with broker epochs from the image) and the answer to
  ``isr_committed``; as Kafka's ``Partition.handleAlterPartitionError``, only INELIGIBLE_REPLICA
  / OPERATION_NOT_ATTEMPTED revert it (``isr_change_failed``, then a pause before the next
  proposal), other errors leave it pending until the image settles it, and an unanswered
  request is sent again; ``maybe_shrink_isr`` runs every ``replica.lag.time.max.ms`` / 2. A Produce is
  ``append_as_leader(required_acks=-1)``, then waits (``DelayedProduce``) until
  ``enough_replicas`` says done, checked after every event that may move the high watermark,
  or until its timeout (REQUEST_TIMED_OUT).
- **Disk**: every log is flushed at seeded intervals (Kafka's ``flush.ms``) and, after a roll,
  up to the new active segment (Kafka flushes older segments after a roll); high watermarks are
  checkpointed every ``replica.high.watermark.checkpoint.interval.ms``.

State: owned by the one ``Simulation`` (single-threaded).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from replication.follower import (
    FetchPosition,
    FollowerOutcome,
    LeaderAnswer,
    apply_answer,
    fetch_position,
    reset_out_of_range,
)
from replication.isr import IsrChange
from replication.partition import Partition
from tests.simulation.replication.broker import DelayedProduce, ParkedFetch, SimBroker
from tests.simulation.replication.options import (
    BROKER_HEARTBEAT_INTERVAL_MS,
    HW_CHECKPOINT_INTERVAL_MS,
    PRODUCE_TIMEOUT_MS,
    REPLICA_FETCH_BACKOFF_MS,
    REPLICA_FETCH_WAIT_MAX_MS,
    REPLICA_LAG_TIME_MAX_MS,
)

if TYPE_CHECKING:
    from tests.simulation.replication.simulator import Simulation

CONTROLLER = 100
REPLICA_FETCH_MAX_BYTES = 1 << 20  # replica.fetch.max.bytes
ISR_REFUSED_BACKOFF_MS = 1000 // 20  # broker.replication's REFUSED_BACKOFF_S, scaled
_NOT_APPLIED = {ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED}


@dataclass(frozen=True)
class FetchPayload:
    index: int
    replica_id: int
    position: FetchPosition


@dataclass(frozen=True)
class FetchAnswer:
    answer: LeaderAnswer
    leader_log_start: int = -1  # with OFFSET_OUT_OF_RANGE: what ListOffsets would say
    leader_log_end: int = -1


@dataclass(frozen=True)
class ProducePayload:
    index: int
    records: bytes


@dataclass(frozen=True)
class ProduceAnswer:
    error_code: int
    first_offset: int = -1


class BrokerShell:
    def __init__(self, simulation: Simulation, *, forget_pending_isr: bool = False) -> None:
        self.sim = simulation
        # broken.py's "forget-pending-isr": every failed or unanswered AlterPartition reverts
        # to the committed ISR (what broker.replication did when this simulator was written).
        self.forget_pending_isr = forget_pending_isr

    # -- lifecycle --------------------------------------------------------------------------

    def started(self, broker: SimBroker) -> None:
        sim = self.sim
        now = sim.now_ms
        sim.on_broker(now, broker, self.heartbeat)
        sim.on_broker(now, broker, self.fetch_metadata)
        sim.on_broker(now + REPLICA_LAG_TIME_MAX_MS // 2, broker, self.shrink_isrs)
        sim.on_broker(now + sim.shell_rng.randint(50, 600), broker, self.flush)
        sim.on_broker(now + HW_CHECKPOINT_INTERVAL_MS, broker, self.checkpoint)

    def heartbeat(self, broker: SimBroker) -> None:
        process = broker.process
        assert process is not None
        # One request per interval, each given up after the interval (not request.timeout.ms):
        # a lost heartbeat must not silence the broker for longer than its session.
        self.sim.on_broker(self.sim.now_ms + BROKER_HEARTBEAT_INTERVAL_MS, broker, self.heartbeat)
        if process.heartbeat_out:
            return
        process.heartbeat_out = True
        if process.broker_epoch < 0:
            self.sim.call(broker.broker_id, CONTROLLER, "register",
                          (broker.broker_id, process.incarnation_id),
                          partial(self._registered, broker),
                          timeout_ms=BROKER_HEARTBEAT_INTERVAL_MS)
        else:
            self.sim.call(broker.broker_id, CONTROLLER, "heartbeat",
                          (broker.broker_id, process.broker_epoch, process.metadata_offset),
                          partial(self._heartbeat_answered, broker),
                          timeout_ms=BROKER_HEARTBEAT_INTERVAL_MS)

    def _registered(self, broker: SimBroker, answer: tuple[int, int] | None) -> None:
        process = broker.process
        assert process is not None
        process.heartbeat_out = False
        if answer is not None and answer[0] == ErrorCode.NONE:
            process.broker_epoch = answer[1]
            self.sim.note("registered", broker.broker_id, f"broker epoch {answer[1]}")
            self._roles_changed(broker, broker.apply_metadata([]))

    def _heartbeat_answered(self, broker: SimBroker, answer: Any) -> None:
        assert broker.process is not None
        broker.process.heartbeat_out = False

    def fetch_metadata(self, broker: SimBroker) -> None:
        process = broker.process
        assert process is not None
        if process.metadata_fetching:
            return
        process.metadata_fetching = True
        self.sim.call(broker.broker_id, CONTROLLER, "metadata_log", process.metadata_offset + 1,
                      partial(self._metadata_answered, broker))

    def _metadata_answered(self, broker: SimBroker, records: list[Any] | None) -> None:
        process = broker.process
        assert process is not None
        process.metadata_fetching = False
        delay = REPLICA_FETCH_BACKOFF_MS if records is None else 0
        self.sim.on_broker(self.sim.now_ms + delay, broker, self.fetch_metadata)
        if records:
            self._roles_changed(broker, broker.apply_metadata(records))

    def _roles_changed(self, broker: SimBroker, changed: list[tuple[Partition, bool]]) -> None:
        for partition, role_changed in changed:
            if role_changed:
                self.sim.note("role", broker.broker_id, partition)
            self.complete_waiting(broker, partition)
            if role_changed and not partition.is_leader:
                self.start_fetching(broker, partition.partition)

    # -- the follower's fetch loop ----------------------------------------------------------

    def start_fetching(self, broker: SimBroker, index: int) -> None:
        process = broker.process
        assert process is not None
        token = process.fetch_tokens.get(index, 0) + 1
        process.fetch_tokens[index] = token
        self.fetch(broker, index, token)

    def fetch(self, broker: SimBroker, index: int, token: int) -> None:
        process = broker.process
        assert process is not None
        partition = process.partitions[index]
        if process.fetch_tokens.get(index) != token or partition.is_leader or partition.leader_id < 0:
            return  # this loop ends; a role change starts the next one
        position = fetch_position(partition)
        self.sim.call(broker.broker_id, partition.leader_id, "fetch",
                      FetchPayload(index, broker.broker_id, position),
                      partial(self._fetched, broker, index, token, position))

    def _fetched(self, broker: SimBroker, index: int, token: int, position: FetchPosition,
                 answer: FetchAnswer | None) -> None:
        process = broker.process
        assert process is not None
        if process.fetch_tokens.get(index) != token:
            return  # the partition moved to another leader's fetcher meanwhile
        partition = process.partitions[index]
        outcome = (FollowerOutcome.BACK_OFF if answer is None
                   else apply_answer(partition, position, answer.answer))
        if outcome is FollowerOutcome.OUT_OF_RANGE:
            assert answer is not None
            moved = reset_out_of_range(partition, answer.leader_log_start, answer.leader_log_end)
            self.sim.note("out-of-range", broker.broker_id, partition, f"reset to {moved}")
        elif outcome is FollowerOutcome.TRUNCATED:
            assert answer is not None
            self.sim.note("truncated", broker.broker_id, partition,
                          f"diverging {answer.answer.diverging_epoch}")
        elif outcome in (FollowerOutcome.APPENDED, FollowerOutcome.CAUGHT_UP):
            process.synced_epochs[index] = partition.leader_epoch
            flush_rolled(partition)
        delay = REPLICA_FETCH_BACKOFF_MS if outcome is FollowerOutcome.BACK_OFF else 0
        self.sim.on_broker(self.sim.now_ms + delay, broker, self.fetch, index, token)

    # -- the leader: follower fetches -------------------------------------------------------

    def serve_fetch(self, broker: SimBroker, payload: FetchPayload, reply: Any,
                    *, parked_once: bool = False) -> None:
        process = broker.process
        assert process is not None
        partition = process.partitions.get(payload.index)
        if partition is None:
            reply(FetchAnswer(LeaderAnswer(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)))
            return
        position = payload.position
        try:
            served = partition.fetch_for_follower(
                payload.replica_id, fetch_offset=position.fetch_offset,
                last_fetched_epoch=position.last_fetched_epoch,
                current_leader_epoch=position.current_leader_epoch,
                log_start_offset=position.log_start_offset, max_bytes=REPLICA_FETCH_MAX_BYTES,
                now_ms=self.sim.now_ms)
        except OffsetOutOfRangeError:
            reply(FetchAnswer(LeaderAnswer(error_code=ErrorCode.OFFSET_OUT_OF_RANGE),
                              partition.log_start_offset, partition.log_end_offset))
            return
        except KafkaError as error:
            reply(FetchAnswer(LeaderAnswer(error_code=error.code)))
            return
        if served.isr_change is not None:
            self.propose_isr(broker, partition, served.isr_change)
        if served.high_watermark_moved:
            self.check_delayed_produces(broker, partition)
        if served.slice is None and served.diverging is None and not parked_once:
            parked = ParkedFetch(payload, self.sim.now_ms + REPLICA_FETCH_WAIT_MAX_MS, reply)
            process.parked_fetches.setdefault(payload.index, []).append(parked)
            self.sim.on_broker(parked.deadline_ms, broker, self._unpark, payload.index, parked)
            return
        records = served.slice.read() if served.slice is not None else None
        reply(FetchAnswer(LeaderAnswer(
            high_watermark=partition.high_watermark, log_start_offset=partition.log_start_offset,
            diverging_epoch=served.diverging, records=records)))

    def _unpark(self, broker: SimBroker, index: int, parked: ParkedFetch) -> None:
        process = broker.process
        assert process is not None
        waiting = process.parked_fetches.get(index, [])
        if parked in waiting:
            waiting.remove(parked)
            self.serve_fetch(broker, parked.payload, parked.reply, parked_once=True)

    def complete_parked_fetches(self, broker: SimBroker, index: int) -> None:
        process = broker.process
        assert process is not None
        waiting = process.parked_fetches.pop(index, [])
        for parked in waiting:
            self.serve_fetch(broker, parked.payload, parked.reply, parked_once=True)

    # -- the leader: ISR changes ------------------------------------------------------------

    def shrink_isrs(self, broker: SimBroker) -> None:
        process = broker.process
        assert process is not None
        self.sim.on_broker(self.sim.now_ms + REPLICA_LAG_TIME_MAX_MS // 2, broker, self.shrink_isrs)
        for partition in process.partitions.values():
            if partition.is_leader and partition.followers:
                change = partition.maybe_shrink_isr(self.sim.now_ms, REPLICA_LAG_TIME_MAX_MS)
                if change is not None:
                    self.propose_isr(broker, partition, change)

    def propose_isr(self, broker: SimBroker, partition: Partition, change: IsrChange) -> None:
        process = broker.process
        assert process is not None
        if self.sim.now_ms < process.isr_refused_until.get(partition.partition, 0):
            partition.isr_change_failed()
            return
        self.sim.note("propose-isr", broker.broker_id, partition, list(change.new_isr))
        self._send_isr(broker, partition, change)

    def _send_isr(self, broker: SimBroker, partition: Partition, change: IsrChange) -> None:
        process = broker.process
        assert process is not None
        brokers = process.image.brokers
        members = []
        for broker_id in change.new_isr:
            registration = brokers.get(broker_id)
            members.append(BrokerState(broker_id=broker_id, broker_epoch=(
                -1 if registration is None else registration.epoch)))
        request = AlterPartitionRequest(
            broker_id=broker.broker_id, broker_epoch=process.broker_epoch,
            topics=[TopicData(topic_id=partition.topic_id, partitions=[PartitionData(
                partition_index=partition.partition, leader_epoch=change.leader_epoch,
                new_isr_with_epochs=members, partition_epoch=change.partition_epoch)])])
        self.sim.call(broker.broker_id, CONTROLLER, "alter_partition", request,
                      partial(self._isr_answered, broker, partition, change))

    def _isr_answered(self, broker: SimBroker, partition: Partition, change: IsrChange,
                      answer: Any) -> None:
        """Kafka's ``Partition.handleAlterPartitionError``: only a refusal that says the change
        was not applied (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED) reverts to the committed
        ISR; other errors keep the change pending until the image settles it; an unanswered
        request is sent again (Kafka's ``AlterPartitionManager`` retries), since the controller
        may have committed it."""
        process = broker.process
        assert process is not None
        if (process.partitions.get(partition.partition) is not partition
                or partition.isr_state.pending != change):
            return  # settled meanwhile (by the image, or a role change)
        code, results = answer if answer is not None else (ErrorCode.REQUEST_TIMED_OUT, [])
        if code != ErrorCode.NONE or not results:
            if self.forget_pending_isr:
                partition.isr_change_failed()
                return
            self.sim.on_broker(self.sim.now_ms + REPLICA_FETCH_BACKOFF_MS, broker,
                               self._resend_isr, partition, change)
            return
        result = results[0]
        if result.error_code != ErrorCode.NONE or result.partition is None:
            self.sim.note("isr-refused", broker.broker_id, partition,
                          ErrorCode(result.error_code).name)
            if self.forget_pending_isr or result.error_code in _NOT_APPLIED:
                partition.isr_change_failed()
                process.isr_refused_until[partition.partition] = (
                    self.sim.now_ms + ISR_REFUSED_BACKOFF_MS)
            return
        state = result.partition
        if partition.isr_committed(leader_epoch=state.leader_epoch,
                                   partition_epoch=state.partition_epoch, isr=tuple(state.isr)):
            self.check_delayed_produces(broker, partition)

    def _resend_isr(self, broker: SimBroker, partition: Partition, change: IsrChange) -> None:
        process = broker.process
        assert process is not None
        if (process.partitions.get(partition.partition) is partition and partition.is_leader
                and partition.isr_state.pending == change):
            self._send_isr(broker, partition, change)

    # -- the leader: produce ----------------------------------------------------------------

    def serve_produce(self, broker: SimBroker, payload: ProducePayload, reply: Any) -> None:
        process = broker.process
        assert process is not None
        partition = process.partitions.get(payload.index)
        if partition is None:
            reply(ProduceAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER))
            return
        try:
            result = partition.append_as_leader(payload.records, required_acks=-1)
        except KafkaError as error:
            reply(ProduceAnswer(error.code))
            return
        flush_rolled(partition)
        delayed = DelayedProduce(payload.index, result.last_offset + 1, result.first_offset,
                                 self.sim.now_ms + PRODUCE_TIMEOUT_MS, reply)
        self.complete_parked_fetches(broker, payload.index)
        if not self._try_complete(partition, delayed):
            process.delayed_produces.setdefault(payload.index, []).append(delayed)
            self.sim.on_broker(delayed.deadline_ms, broker, self._expire, delayed)

    def _try_complete(self, partition: Partition, delayed: DelayedProduce) -> bool:
        done, error = partition.enough_replicas(delayed.required_offset)
        if done:
            delayed.reply(ProduceAnswer(ErrorCode.NONE if error is None else error.code,
                                        delayed.first_offset))
        return done

    def check_delayed_produces(self, broker: SimBroker, partition: Partition) -> None:
        process = broker.process
        assert process is not None
        waiting = process.delayed_produces.get(partition.partition)
        if waiting:
            waiting[:] = [d for d in waiting if not self._try_complete(partition, d)]

    def _expire(self, broker: SimBroker, delayed: DelayedProduce) -> None:
        process = broker.process
        assert process is not None
        waiting = process.delayed_produces.get(delayed.index, [])
        if delayed in waiting:
            waiting.remove(delayed)
            delayed.reply(ProduceAnswer(ErrorCode.REQUEST_TIMED_OUT))

    def complete_waiting(self, broker: SimBroker, partition: Partition) -> None:
        """After a role or ISR change from the image: what waits on this partition may be done."""
        self.check_delayed_produces(broker, partition)
        self.complete_parked_fetches(broker, partition.partition)

    # -- disk -------------------------------------------------------------------------------

    def flush(self, broker: SimBroker) -> None:
        process = broker.process
        assert process is not None
        for partition in process.partitions.values():
            partition.log.flush()
            partition.log.purge_deleted_segments(force=True)
        self.sim.on_broker(self.sim.now_ms + self.sim.shell_rng.randint(100, 1000), broker,
                           self.flush)

    def checkpoint(self, broker: SimBroker) -> None:
        broker.checkpoint_high_watermarks()
        self.sim.on_broker(self.sim.now_ms + HW_CHECKPOINT_INTERVAL_MS, broker, self.checkpoint)


def flush_rolled(partition: Partition) -> None:
    """After a roll, the segments before the new active one are flushed (Kafka's ``roll``)."""
    log = partition.log
    active_base = log.active_segment.base_offset
    if active_base > log.recovery_point:
        log.flush(active_base)
