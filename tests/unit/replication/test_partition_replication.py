"""A leader and two followers as real Partitions over real Logs, wired in-process (no sockets):
a state machine appends, lets followers fetch (``fetch_position`` -> ``fetch_for_follower`` ->
``LeaderAnswer`` -> ``apply_answer``), shrinks and expands the ISR through a controller that
commits proposals (answers delivered later, or refused), and moves leadership among the ISR.

After every step: ``log_start <= HW <= LEO`` everywhere; the leader's high watermark is the
smallest log end offset it knows over its maximal ISR (capped by its own, never back within an
epoch); every batch below it is byte-identical on every member of that maximal ISR; acks=all
records (``enough_replicas`` said done, no error) are never lost across leader changes; and a
follower in the ISR is never truncated below the leader's high watermark.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.errors import ErrorCode, KafkaError, NotEnoughReplicasError
from protocol.records import LOG_OVERHEAD, Record, encode_batch
from replication.follower import (
    FollowerOutcome,
    LeaderAnswer,
    apply_answer,
    fetch_position,
    reset_out_of_range,
)
from replication.isr import IsrChange
from replication.partition import Partition
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log

BROKERS = (0, 1, 2)
LAG_MAX_MS = 100  # replica.lag.time.max.ms, short so that the machine's ticks cross it
CONFIG = LogConfig(segment_bytes=2048, min_insync_replicas=2)
TOPIC_ID = uuid.uuid4()


def batches(partition: Partition, end: int | None = None) -> dict[int, bytes]:
    """Every batch of the log below ``end`` (default its log end offset) by base offset."""
    log = partition.log
    limit = log.log_end_offset if end is None else min(end, log.log_end_offset)
    found: dict[int, bytes] = {}
    offset = log.log_start_offset
    while offset < limit:
        piece = log.read(offset, 1 << 30, max_offset=limit)
        assert piece is not None
        data, position = piece.read(), 0
        while position + LOG_OVERHEAD <= len(data):
            base = int.from_bytes(data[position:position + 8], "big")
            length = int.from_bytes(data[position + 8:position + 12], "big")
            batch = data[position:position + LOG_OVERHEAD + length]
            found[base] = batch
            position += len(batch)
            offset = base + int.from_bytes(batch[23:27], "big") + 1  # last offset delta
    return found


@dataclass(frozen=True)
class Answer:
    """The controller's answer to an AlterPartition, on its way to the broker that asked."""

    to: int
    change: IsrChange
    accepted: bool
    partition_epoch: int = 0


@dataclass(frozen=True)
class Waiting:
    """An acks=all append waiting for the high watermark on the broker that took it."""

    leader: int
    required_offset: int
    base_offset: int


class ReplicationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="samsa-rprop-"))
        self.clock = ManualClock()
        self.now_ms = 0
        self.partitions = {
            b: Partition(Log.open(self.directory / f"broker-{b}" / "orders-0", CONFIG,
                                  clock=self.clock),
                         topic_id=TOPIC_ID, node_id=b, role_pending=True)
            for b in BROKERS
        }
        self.leader, self.leader_epoch, self.partition_epoch = 0, 0, 0
        self.controller_isr: tuple[int, ...] = BROKERS  # what the controller committed
        self.answers: list[Answer] = []
        self.waiting: list[Waiting] = []
        self.acked: dict[int, bytes] = {}  # base offset -> the acknowledged batch's bytes
        self.values = 0
        self.refusing = False  # the controller refuses every proposal (OPERATION_NOT_ATTEMPTED)
        self._elect(0)

    def teardown(self) -> None:
        for partition in self.partitions.values():
            partition.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- the model of the leader ----------------------------------------------------------------

    def _elect(self, leader: int) -> None:
        for b, partition in self.partitions.items():
            role = partition.make_leader if b == leader else partition.make_follower
            role(leader_id=leader, leader_epoch=self.leader_epoch, replicas=BROKERS,
                 isr=self.controller_isr, partition_epoch=self.partition_epoch,
                 now_ms=self.now_ms)
        self.leader = leader
        self.known: dict[int, int] = {}  # follower -> the fetch offset the leader last served
        self.leader_isr, self.leader_partition_epoch = self.controller_isr, self.partition_epoch
        self.pending: IsrChange | None = None
        self.epoch_start_high_watermark = self.high_watermark = self.lead.high_watermark

    @property
    def lead(self) -> Partition:
        return self.partitions[self.leader]

    def _maximal_isr(self) -> set[int]:
        isr = set(self.leader_isr)
        if self.pending is not None and self.pending.expanding:
            isr |= set(self.pending.new_isr)
        return isr

    def _expected_high_watermark(self) -> int:
        """The smallest log end offset the leader knows over its maximal ISR, capped by its
        own; never below the last one (within an epoch)."""
        known = [self.known.get(r, -1) for r in self._maximal_isr() if r != self.leader]
        return max(self.high_watermark, min([self.lead.log_end_offset, *known]))

    def _check_high_watermark_exact(self) -> None:
        expected = self._expected_high_watermark()
        assert self.lead.high_watermark == expected, (self.lead, expected, self.known)
        self.high_watermark = expected

    def _proposed(self, change: IsrChange | None) -> None:
        """The leader proposes ``change`` (AlterPartition): the controller commits it at once
        when it names the current leader and partition epochs; its answer travels later."""
        if change is None:
            return
        event("ISR expands" if change.expanding else "ISR shrinks")
        assert self.pending is None, "a second change while one is in flight"
        self.pending = change
        current = (change.leader_epoch, change.partition_epoch) == (
            self.leader_epoch, self.partition_epoch) and not self.refusing
        if current:
            self.partition_epoch += 1
            self.controller_isr = change.new_isr
        self.answers.append(Answer(self.leader, change, current, self.partition_epoch))

    # -- rules ----------------------------------------------------------------------------------

    @rule(count=st.integers(1, 3), all_acks=st.booleans())
    def append(self, count: int, all_acks: bool) -> None:
        records = [Record(offset=i, timestamp=self.clock.milliseconds(), key=None,
                          value=f"value-{self.values + i}".encode()) for i in range(count)]
        self.values += count
        try:
            result = self.lead.append_as_leader(encode_batch(records),
                                                required_acks=-1 if all_acks else 1)
        except NotEnoughReplicasError:
            assert all_acks and len(self.lead.isr) < CONFIG.min_insync_replicas
            return
        if all_acks:
            self.waiting.append(Waiting(self.leader, result.last_offset + 1, result.first_offset))
        self._check_high_watermark_exact()

    @rule(follower=st.sampled_from(BROKERS), max_bytes=st.sampled_from((1, 150, 1 << 20)),
          cut=st.integers(0, 30), lost=st.booleans(), elapsed_ms=st.integers(0, 60))
    def fetch(self, follower: int, max_bytes: int, cut: int, lost: bool, elapsed_ms: int) -> None:
        if follower == self.leader:
            follower = (follower + 1) % len(BROKERS)
        self.now_ms += elapsed_ms
        replica = self.partitions[follower]
        asked = fetch_position(replica)
        try:
            served = self.lead.fetch_for_follower(
                follower, fetch_offset=asked.fetch_offset,
                last_fetched_epoch=asked.last_fetched_epoch,
                current_leader_epoch=asked.current_leader_epoch,
                log_start_offset=asked.log_start_offset, max_bytes=max_bytes, now_ms=self.now_ms)
        except KafkaError as error:
            answer = LeaderAnswer(error_code=error.code)
        else:
            if served.diverging is None:
                self.known[follower] = asked.fetch_offset
            self._proposed(served.isr_change)
            self._check_high_watermark_exact()
            data = served.slice.read() if served.slice is not None else None
            answer = LeaderAnswer(
                high_watermark=self.lead.high_watermark,
                log_start_offset=self.lead.log_start_offset,
                diverging_epoch=served.diverging,
                records=data[:max(0, len(data) - cut)] if data is not None else None)
        if not lost:
            self._follower_applies(follower, asked, answer)

    def _follower_applies(self, follower: int, asked: object, answer: LeaderAnswer) -> None:
        replica = self.partitions[follower]
        in_isr = follower in self.lead.isr
        outcome = apply_answer(replica, asked, answer)  # type: ignore[arg-type]
        event(f"follower {outcome.value}{' (in the ISR)' if in_isr else ''}")
        if outcome is FollowerOutcome.OUT_OF_RANGE:
            reset_out_of_range(replica, self.lead.log_start_offset, self.lead.log_end_offset)
        if outcome in (FollowerOutcome.TRUNCATED, FollowerOutcome.OUT_OF_RANGE) and in_isr:
            assert replica.log_end_offset >= self.lead.high_watermark, (
                f"ISR member {follower} truncated to {replica.log_end_offset} below the "
                f"leader's high watermark {self.lead.high_watermark}")
        assert answer.error_code in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE), answer

    @rule(elapsed_ms=st.integers(0, 150))
    def shrink(self, elapsed_ms: int) -> None:
        self.now_ms += elapsed_ms
        self._proposed(self.lead.maybe_shrink_isr(self.now_ms, LAG_MAX_MS))

    @rule()
    def expand(self) -> None:
        self._proposed(self.lead.maybe_expand_isr())

    @precondition(lambda self: self.answers)
    @rule(data=st.data())
    def answer_arrives(self, data: st.DataObject) -> None:
        answer = self.answers.pop(data.draw(st.integers(0, len(self.answers) - 1)))
        partition, change = self.partitions[answer.to], answer.change
        if answer.accepted:
            partition.isr_committed(leader_epoch=change.leader_epoch,
                                    partition_epoch=answer.partition_epoch, isr=change.new_isr)
        else:
            partition.isr_change_failed(change)
        if answer.to != self.leader or change.leader_epoch != self.leader_epoch:
            return  # an answer for an older epoch settles nothing now
        if not answer.accepted:
            if self.pending == change:
                self.pending = None
            return  # the HW may rise (a joiner is forgotten) but is recomputed at the next event
        if answer.partition_epoch >= self.leader_partition_epoch:
            self.leader_isr = change.new_isr
            self.leader_partition_epoch = answer.partition_epoch
        self.pending = None
        self._check_high_watermark_exact()

    @rule(refusing=st.booleans())
    def controller_refuses(self, refusing: bool) -> None:
        self.refusing = refusing

    @rule(data=st.data(), rounds=st.integers(1, 3))
    def catch_up(self, data: st.DataObject, rounds: int) -> None:
        """Every follower fetches, ``rounds`` times (whole answers, none lost)."""
        for _ in range(rounds):
            for follower in BROKERS:
                if follower != self.leader:
                    self.fetch(follower, 1 << 20, 0, False, data.draw(st.integers(0, 60)))

    @rule(data=st.data(), chance=st.integers(0, 2))
    def elect(self, data: st.DataObject, chance: int) -> None:
        """The controller moves leadership to a member of the ISR it committed (a clean
        election); answers to the old leader's proposals are now for an old epoch. One time
        in three, so that followers have time to fetch."""
        if chance:
            return
        event("leader change")
        leader = data.draw(st.sampled_from(self.controller_isr))
        self.leader_epoch += 1
        self.partition_epoch += 1
        self._elect(leader)

    @rule(data=st.data(), count=st.integers(1, 3))
    def fail_over(self, data: st.DataObject, count: int) -> None:
        """The leader writes batches no follower fetches, then another ISR member takes over:
        the old leader's log now diverges from the new one's."""
        others = [r for r in self.controller_isr if r != self.leader]
        if not others:
            return
        for _ in range(count):
            self.append(1, all_acks=False)
        self.leader_epoch += 1
        self.partition_epoch += 1
        self._elect(data.draw(st.sampled_from(others)))

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def offsets_are_ordered_everywhere(self) -> None:
        for partition in self.partitions.values():
            assert (partition.log_start_offset <= partition.high_watermark
                    <= partition.log_end_offset), partition

    @invariant()
    def leader_high_watermark_is_bounded_by_its_maximal_isr(self) -> None:
        high_watermark = self.lead.high_watermark
        assert high_watermark >= self.high_watermark, "the high watermark moved back"
        known = [self.known.get(r, -1) for r in self._maximal_isr() if r != self.leader]
        bound = min([self.lead.log_end_offset, *known])
        assert high_watermark <= bound or high_watermark == self.epoch_start_high_watermark
        self.high_watermark = high_watermark

    @invariant()
    def below_the_high_watermark_every_isr_member_holds_the_leaders_batches(self) -> None:
        committed = batches(self.lead, self.lead.high_watermark)
        for member in self._maximal_isr() | set(self.controller_isr):
            if member != self.leader:
                replica = batches(self.partitions[member], self.lead.high_watermark)
                assert replica == committed, f"broker {member} differs below the high watermark"

    @invariant()
    def acknowledged_batches_are_never_lost(self) -> None:
        for waiting in list(self.waiting):
            done, error = self.partitions[waiting.leader].enough_replicas(waiting.required_offset)
            if done:
                self.waiting.remove(waiting)
            if done:
                event(f"acks=all {'acknowledged' if error is None else type(error).__name__}")
            if done and error is None:
                assert waiting.leader == self.leader
                self.acked[waiting.base_offset] = batches(self.lead)[waiting.base_offset]
        for member in self.controller_isr:
            held = batches(self.partitions[member])
            for base_offset, batch in self.acked.items():
                assert held.get(base_offset) == batch, f"broker {member} lost acked {base_offset}"


TestReplication = ReplicationMachine.TestCase
TestReplication.settings = settings(max_examples=100, stateful_step_count=60, deadline=None)
