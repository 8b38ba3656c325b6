"""SharePartition against a brute-force model (one dict entry per offset), driven by hypothesis:
records appear in a log (with compaction gaps), members fetch and acquire, acknowledge held,
random and malformed ranges, time passes, locks and records expire, members leave, the log
start offset moves, dead letters are confirmed, and the state is snapshotted and restored.

After every step the partition must agree with the model record by record, and the invariants
of KIP-932 and of Samsa's dead letters must hold. The last tests show the checker catches two
deliberately broken rules."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from broker.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    DeadLetterReason,
    FetchedBatch,
    RecordState,
    SharePartition,
    SharePartitionConfig,
)
from broker.share.share_partition import _Batch
from protocol.errors import InvalidRecordStateError, InvalidRequestError, KafkaError

MEMBERS = ("member-a", "member-b", "member-c")
LOCK_MS = 1_000
EXPIRY_MS = 5_000
WITH_DEAD_LETTERS = SharePartitionConfig(
    record_lock_duration_ms=LOCK_MS, delivery_count_limit=3, partition_max_record_locks=12,
    dead_letter_topic="orders.dead-letters", record_expiry_ms=EXPIRY_MS,
)
WITHOUT_DEAD_LETTERS = SharePartitionConfig(
    record_lock_duration_ms=LOCK_MS, delivery_count_limit=2, partition_max_record_locks=8,
)
DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass
class ModelRecord:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int | None = None
    timestamp_ms: int | None = None
    reason: DeadLetterReason | None = None

    def view(self) -> tuple[object, ...]:
        return self.state, self.delivery_count, self.member_id, self.lock_deadline_ms, self.reason


class Model:
    """The rules of KIP-932 and Samsa's extensions, one offset at a time, as plainly as they
    can be written."""

    def __init__(self, config: SharePartitionConfig, start_offset: int) -> None:
        self.config = config
        self.start_offset = self.end_offset = start_offset
        self.records: dict[int, ModelRecord] = {}
        self.new_dead_letters: list[tuple[int, DeadLetterReason, int]] = []

    def _archive(self, offset: int, reason: DeadLetterReason) -> None:
        record = self.records[offset]
        record.member_id = record.lock_deadline_ms = None
        if self.config.dead_letter_topic is None:
            record.state = RecordState.ARCHIVED
        else:
            record.state, record.reason = RecordState.DEAD_LETTERING, reason
            self.new_dead_letters.append((offset, reason, record.delivery_count))

    def _end_delivery(self, offset: int) -> None:
        record = self.records[offset]
        if record.delivery_count >= self.config.delivery_count_limit:
            self._archive(offset, DeadLetterReason.DELIVERY_LIMIT)
        else:
            record.state, record.member_id, record.lock_deadline_ms = RecordState.AVAILABLE, None, None

    def _expire_records(self, now_ms: int) -> None:
        if self.config.record_expiry_ms is None:
            return
        for offset, record in sorted(self.records.items()):
            if record.state is RecordState.AVAILABLE and record.timestamp_ms is not None \
                    and now_ms >= record.timestamp_ms + self.config.record_expiry_ms:
                self._archive(offset, DeadLetterReason.EXPIRED)

    def _advance(self) -> None:
        while self.start_offset < self.end_offset and self.records[self.start_offset].state in DONE:
            del self.records[self.start_offset]
            self.start_offset += 1

    def deadlines(self, now_ms: int) -> None:
        for offset, record in sorted(self.records.items()):
            if record.state is RecordState.ACQUIRED and record.lock_deadline_ms is not None \
                    and now_ms >= record.lock_deadline_ms:
                self._end_delivery(offset)
        self._expire_records(now_ms)
        self._advance()

    def _ingest(self, fetched: FetchedBatch) -> None:
        for offset in range(max(fetched.first_offset, self.start_offset), min(fetched.last_offset + 1, self.end_offset)):
            if self.records[offset].timestamp_ms is None:
                self.records[offset].timestamp_ms = fetched.max_timestamp_ms
        first = max(fetched.first_offset, self.end_offset)
        last = min(fetched.last_offset, self.start_offset + self.config.partition_max_record_locks - 1)
        if first > last:
            return
        for offset in range(self.end_offset, first):
            self.records[offset] = ModelRecord(RecordState.ARCHIVED, 0)
        for offset in range(first, last + 1):
            self.records[offset] = ModelRecord(RecordState.AVAILABLE, 0, timestamp_ms=fetched.max_timestamp_ms)
        self.end_offset = last + 1
        self._advance()

    def acquire(self, member_id: str, fetched: list[FetchedBatch], now_ms: int, max_records: int) -> list[tuple[int, int]]:
        self.deadlines(now_ms)
        for each in fetched:
            self._ingest(each)
        self._expire_records(now_ms)
        acquired: list[tuple[int, int]] = []
        for each in fetched:
            for offset in range(each.first_offset, each.last_offset + 1):
                record = self.records.get(offset)
                if len(acquired) < max_records and record is not None and record.state is RecordState.AVAILABLE:
                    record.state, record.member_id = RecordState.ACQUIRED, member_id
                    record.lock_deadline_ms = now_ms + self.config.record_lock_duration_ms
                    record.delivery_count += 1
                    acquired.append((offset, record.delivery_count))
        self._advance()
        return acquired

    def acknowledge(self, member_id: str, batches: list[AcknowledgementBatch], now_ms: int) -> type[KafkaError] | None:
        self.deadlines(now_ms)
        previous_last = -1
        for batch in batches:
            first, last, types = batch.first_offset, batch.last_offset, batch.acknowledge_types
            if first > last or first <= previous_last or len(types) not in (1, last - first + 1) \
                    or any(each not in (0, 1, 2, 3) for each in types):
                return InvalidRequestError
            previous_last = last
            for offset in range(first, last + 1):
                record = self.records.get(offset)
                if record is None or record.state is not RecordState.ACQUIRED or record.member_id != member_id:
                    return InvalidRecordStateError
        for batch in batches:
            for position, offset in enumerate(range(batch.first_offset, batch.last_offset + 1)):
                types = batch.acknowledge_types
                self._acknowledge_one(offset, AcknowledgeType(types[0] if len(types) == 1 else types[position]))
        self._expire_records(now_ms)
        self._advance()
        return None

    def _acknowledge_one(self, offset: int, acknowledge_type: AcknowledgeType) -> None:
        record = self.records[offset]
        if acknowledge_type is AcknowledgeType.ACCEPT:
            record.state, record.member_id, record.lock_deadline_ms = RecordState.ACKNOWLEDGED, None, None
        elif acknowledge_type is AcknowledgeType.RELEASE:
            self._end_delivery(offset)
        elif acknowledge_type is AcknowledgeType.REJECT:
            self._archive(offset, DeadLetterReason.REJECTED)
        else:
            record.state, record.member_id, record.lock_deadline_ms = RecordState.ARCHIVED, None, None

    def release_member(self, member_id: str, now_ms: int) -> None:
        self.deadlines(now_ms)
        for offset, record in sorted(self.records.items()):
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                self._end_delivery(offset)
        self._expire_records(now_ms)
        self._advance()

    def advance_log_start_offset(self, log_start_offset: int) -> None:
        if log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            del self.records[offset]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self._advance()

    def dead_lettered(self, offsets: list[int]) -> None:
        for offset in offsets:
            record = self.records.get(offset)
            if record is not None and record.state is RecordState.DEAD_LETTERING:
                record.state, record.reason = RecordState.ARCHIVED, None
        self._advance()

    def restore(self) -> None:
        """A restart: locks and timestamps are lost; pending dead letters are reported again."""
        for offset, record in sorted(self.records.items()):
            record.timestamp_ms = None
            if record.state is RecordState.ACQUIRED:
                self._end_delivery(offset)
            elif record.state is RecordState.DEAD_LETTERING:
                assert record.reason is not None
                self.new_dead_letters.append((offset, record.reason, record.delivery_count))
        self._advance()

    def take_new_dead_letters(self) -> list[tuple[int, DeadLetterReason, int]]:
        taken, self.new_dead_letters = self.new_dead_letters, []
        return sorted(taken, key=lambda each: each[0])


def machine_for(partition_class: type[SharePartition], config: SharePartitionConfig) -> type[RuleBasedStateMachine]:
    class SharePartitionMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.now_ms = 1_000_000
            self.last_call_ms = self.now_ms
            self.log: list[tuple[int, int, int]] = []  # (first_offset, last_offset, max_timestamp_ms)
            self.log_start_offset = self.log_end_offset = 0
            self.partition = partition_class(config, start_offset=0)
            self.model = Model(config, 0)
            self.delivery_counts: dict[int, int] = {}
            self.ever_dead_lettering: set[int] = set()
            self.ever_acknowledged: set[int] = set()
            self.unconfirmed: set[int] = set()  # reported, not yet confirmed, since the last restore
            self.calls_since_restart = 0

        # ---- the log and time -------------------------------------------------------------

        @initialize(counts=st.lists(st.integers(1, 5), min_size=1, max_size=4))
        def log_has_records(self, counts: list[int]) -> None:
            for count in counts:
                self.append(count=count, gap=0, age_ms=0)

        @rule(count=st.integers(1, 5), gap=st.sampled_from([0, 0, 0, 1, 3]),
              age_ms=st.sampled_from([0, 0, 0, LOCK_MS, EXPIRY_MS - 1, EXPIRY_MS]))
        def append(self, count: int, gap: int, age_ms: int) -> None:
            first = self.log_end_offset + (gap if self.log else 0)
            self.log.append((first, first + count - 1, self.now_ms - age_ms))
            self.log_end_offset = first + count

        @rule(elapsed_ms=st.sampled_from([0, 100, LOCK_MS // 2, LOCK_MS - 1, LOCK_MS, 2 * LOCK_MS, EXPIRY_MS]),
              call_expire=st.booleans())
        def time_passes(self, elapsed_ms: int, call_expire: bool) -> None:
            """Time passes; the shell's timer may or may not fire (every call applies deadlines)."""
            self.now_ms += elapsed_ms
            if call_expire:
                self.partition.expire(self.now_ms)
                self.model.deadlines(self.now_ms)
                self.after_call()

        @precondition(lambda self: self.log_end_offset - self.log_start_offset > 8)
        @rule(moved=st.integers(1, 3))
        def log_start_moves(self, moved: int) -> None:
            self.log_start_offset = min(self.log_start_offset + moved, self.log_end_offset)
            self.log = [each for each in self.log if each[1] >= self.log_start_offset]
            self.partition.advance_log_start_offset(self.log_start_offset)
            self.model.advance_log_start_offset(self.log_start_offset)
            self.unconfirmed = {offset for offset in self.unconfirmed if offset >= self.log_start_offset}
            self.check_dead_letters()

        # ---- members ----------------------------------------------------------------------

        @rule(member_id=st.sampled_from(MEMBERS), batch_count=st.integers(1, 6), max_records=st.integers(1, 8),
              produced=st.integers(0, 4), then=st.none() | st.sampled_from(AcknowledgeType))
        def share_fetch(self, member_id: str, batch_count: int, max_records: int, produced: int,
                        then: AcknowledgeType | None) -> None:
            """A member fetches, after ``produced`` more records were appended to the log, and
            maybe acknowledges all it got at once (as its next ShareFetch would)."""
            if produced:
                self.append(count=produced, gap=0, age_ms=0)
            read_from = max(self.model.start_offset, self.log_start_offset)
            fetched = [FetchedBatch(first, last, timestamp_ms) for first, last, timestamp_ms in self.log
                       if last >= read_from][:batch_count]
            held_by_others = {offset for offset, record in self.model.records.items()
                              if record.state is RecordState.ACQUIRED and record.member_id != member_id
                              and record.lock_deadline_ms is not None and record.lock_deadline_ms > self.now_ms}
            expected = self.model.acquire(member_id, fetched, self.now_ms, max_records)
            acquired = self.partition.acquire(member_id, fetched, now_ms=self.now_ms, max_records=max_records)
            got = [(offset, each.delivery_count) for each in acquired
                   for offset in range(each.first_offset, each.last_offset + 1)]
            assert got == expected
            assert not held_by_others & {offset for offset, _ in got}, "acquired from another member's lock"
            self.after_call()
            if then is not None and acquired:
                self.check_acknowledge(member_id, [AcknowledgementBatch(each.first_offset, each.last_offset, (then,))
                                                   for each in acquired])

        @rule(data=st.data(), type_codes=st.lists(st.sampled_from([0, 1, 2, 3]), min_size=1, max_size=4),
              by_owner=st.booleans())
        def acknowledge_held(self, data: st.DataObject, type_codes: list[int], by_owner: bool) -> None:
            held = sorted(offset for offset, record in self.model.records.items() if record.state is RecordState.ACQUIRED)
            if not held:
                return
            first = data.draw(st.sampled_from(held))
            owner = self.model.records[first].member_id
            last = first
            while last + 1 in self.model.records and self.model.records[last + 1].member_id == owner and last - first < 5:
                last += 1
            last = data.draw(st.integers(first, last))
            member_id = owner if by_owner else data.draw(st.sampled_from(MEMBERS))
            count = last - first + 1
            types = (tuple(type_codes[0] for _ in range(1)) if len(type_codes) == 1 or count == 1
                     else tuple(type_codes[position % len(type_codes)] for position in range(count)))
            self.check_acknowledge(str(member_id), [AcknowledgementBatch(first, last, types)])

        @rule(member_id=st.sampled_from(MEMBERS), from_start=st.integers(-2, 14), length=st.sampled_from([0, 1, 1, 2, 3, 5]),
              types=st.lists(st.sampled_from([0, 1, 2, 3, 1, 2, 3, 4]), min_size=1, max_size=3) | st.just([]),
              second=st.none() | st.tuples(st.integers(-2, 6), st.integers(0, 3), st.integers(0, 4)))
        def acknowledge_anything(self, member_id: str, from_start: int, length: int, types: list[int],
                                 second: tuple[int, int, int] | None) -> None:
            """Any range near the window, well formed or not, held or not."""
            first = self.model.start_offset + from_start
            batches = [AcknowledgementBatch(first, first + length - 1 if length else first - 1, tuple(types))]
            if second is not None:
                start = first + length + second[0]
                batches.append(AcknowledgementBatch(start, start + second[1], (second[2],)))
            self.check_acknowledge(member_id, batches)

        def check_acknowledge(self, member_id: str, batches: list[AcknowledgementBatch]) -> None:
            expected = self.model.acknowledge(member_id, batches, self.now_ms)
            try:
                self.partition.acknowledge(member_id, batches, now_ms=self.now_ms)
                error: type[KafkaError] | None = None
            except (InvalidRecordStateError, InvalidRequestError) as exception:
                error = type(exception)
            assert error is expected, (batches, error, expected)
            self.after_call()

        @precondition(lambda self: self.calls_since_restart >= 3)
        @rule(member_id=st.sampled_from(MEMBERS))
        def member_leaves(self, member_id: str) -> None:
            self.partition.release_member(member_id, now_ms=self.now_ms)
            self.model.release_member(member_id, self.now_ms)
            self.after_call()

        # ---- dead letters and restarts ------------------------------------------------------

        @rule(data=st.data())
        def confirm_dead_letters(self, data: st.DataObject) -> None:
            if not self.unconfirmed:
                return
            offsets = data.draw(st.lists(st.sampled_from(sorted(self.unconfirmed)), min_size=1, unique=True))
            for offset in offsets:
                self.partition.dead_lettered(offset, offset)
            self.model.dead_lettered(offsets)
            self.unconfirmed -= set(offsets)
            self.check_dead_letters()

        @rule(first=st.integers(0, 30), length=st.integers(1, 4))
        def confirm_again(self, first: int, length: int) -> None:
            """Confirming what is not DEAD_LETTERING (a redo after a restart) changes nothing."""
            offsets = [offset for offset in range(first, first + length) if offset not in self.unconfirmed]
            for offset in offsets:
                self.partition.dead_lettered(offset, offset)
            self.model.dead_lettered([])
            self.check_dead_letters()

        @precondition(lambda self: self.calls_since_restart >= 5)
        @rule()
        def restart(self) -> None:
            snapshot = self.partition.snapshot()
            self.partition = partition_class.restore(snapshot, config, now_ms=self.now_ms)
            self.model.restore()
            self.unconfirmed = set()
            self.after_call()
            self.calls_since_restart = 0

        # ---- checks -----------------------------------------------------------------------

        def after_call(self) -> None:
            self.last_call_ms = self.now_ms
            self.calls_since_restart += 1
            self.check_dead_letters()

        def check_dead_letters(self) -> None:
            reported = sorted(((offset, each.reason, each.delivery_count)
                               for each in self.partition.take_dead_letters()
                               for offset in range(each.first_offset, each.last_offset + 1)), key=lambda each: each[0])
            assert reported == self.model.take_new_dead_letters()
            for offset, _, _ in reported:
                assert offset not in self.unconfirmed, f"dead letter {offset} reported twice"
                assert offset not in self.ever_acknowledged, f"acknowledged {offset} dead-lettered"
                self.unconfirmed.add(offset)
                self.ever_dead_lettering.add(offset)

        @invariant()
        def agrees_with_the_model(self) -> None:
            description = self.partition.describe(self.last_call_ms)
            assert (description.start_offset, description.end_offset) == (self.model.start_offset, self.model.end_offset)
            states = {offset: (batch.state, batch.delivery_count, batch.member_id, batch.lock_deadline_ms, batch.reason)
                      for batch in description.batches for offset in range(batch.first_offset, batch.last_offset + 1)}
            assert states == {offset: record.view() for offset, record in self.model.records.items()}

        @invariant()
        def first_available_offset_is_the_descriptions(self) -> None:
            """The fetch path's shortcut against the whole view, at a time whose deadlines (locks
            and record expiry) may be due and not yet applied."""
            expected = next((batch.first_offset for batch in self.partition.describe(self.now_ms).batches
                             if batch.state is RecordState.AVAILABLE), None)
            assert self.partition.first_available_offset(self.now_ms) == expected

        @invariant()
        def kafka_invariants_hold(self) -> None:
            description = self.partition.describe(self.last_call_ms)
            assert description.in_flight_record_count <= config.partition_max_record_locks
            batches = description.batches
            assert not batches or batches[0].state not in DONE
            for batch in batches:
                offsets = range(batch.first_offset, batch.last_offset + 1)
                if batch.state in (RecordState.AVAILABLE, RecordState.ACQUIRED):
                    assert not self.ever_dead_lettering.intersection(offsets), "a dead letter is deliverable"
                    assert batch.state is RecordState.ACQUIRED or batch.delivery_count < config.delivery_count_limit
                if batch.state is RecordState.ACKNOWLEDGED:
                    self.ever_acknowledged.update(offsets)
                assert (batch.member_id is not None) == (batch.state is RecordState.ACQUIRED)
                for offset in offsets:
                    assert batch.delivery_count >= self.delivery_counts.get(offset, 0), "a delivery count fell"
                    self.delivery_counts[offset] = batch.delivery_count

    return SharePartitionMachine


MACHINE_SETTINGS = settings(max_examples=150, stateful_step_count=40, deadline=None,
                            suppress_health_check=[HealthCheck.too_slow])

WithDeadLetters = machine_for(SharePartition, WITH_DEAD_LETTERS)
WithDeadLetters.TestCase.settings = MACHINE_SETTINGS
TestWithDeadLetters = WithDeadLetters.TestCase

WithoutDeadLetters = machine_for(SharePartition, WITHOUT_DEAD_LETTERS)
WithoutDeadLetters.TestCase.settings = MACHINE_SETTINGS
TestWithoutDeadLetters = WithoutDeadLetters.TestCase


# ---- the checker catches broken rules -------------------------------------------------------


class ForgetsToCountRedeliveries(SharePartition):
    """Broken: a record acquired again keeps its old delivery count."""

    def _lock(self, batch: _Batch, member_id: str, now_ms: int) -> None:
        super()._lock(batch, member_id, now_ms)
        if batch.delivery_count > 1:
            batch.delivery_count -= 1


class LetsAnyMemberAcknowledge(SharePartition):
    """Broken: a member may acknowledge records another member holds."""

    def _may_acknowledge(self, batch: _Batch, member_id: str) -> bool:
        return batch.state is RecordState.ACQUIRED


BREAKING_SETTINGS = settings(max_examples=300, stateful_step_count=40, deadline=None, derandomize=True,
                             database=None, report_multiple_bugs=False, print_blob=False,
                             suppress_health_check=list(HealthCheck))


# slow: hypothesis searches until it finds the broken rule (46-67 s each on a loaded 2-core VM)
@pytest.mark.slow
@pytest.mark.parametrize("broken", [ForgetsToCountRedeliveries, LetsAnyMemberAcknowledge])
def test_the_checker_catches_a_broken_rule(broken: type[SharePartition]) -> None:
    with pytest.raises(AssertionError):
        run_state_machine_as_test(machine_for(broken, WITH_DEAD_LETTERS), settings=BREAKING_SETTINGS)
