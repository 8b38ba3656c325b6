"""ProducerStateManager against a plain model (Kafka's idempotence rules written out naively),
driven by hypothesis; table-driven edge cases; the snapshot format, golden bytes included."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crc32c
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    OutOfOrderSequenceNumberError,
)
from protocol.records import BatchHeader
from storage.clock import ManualClock
from storage.producer_snapshot import CorruptSnapshotError, decode_snapshot, encode_snapshot
from storage.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    decrement_sequence,
    in_sequence,
)

INT32_MAX = 2**31 - 1
EXPIRATION_MS = 10_000


def header(
    producer_id: int, epoch: int, sequence: int, count: int = 1, *, timestamp: int = 0,
    base_offset: int = 0, transactional: bool = False, control: bool = False,
) -> BatchHeader:
    attributes = (0x10 if transactional else 0) | (0x20 if control else 0)
    return BatchHeader(
        base_offset=base_offset, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
        attributes=attributes, last_offset_delta=count - 1, base_timestamp=timestamp,
        max_timestamp=timestamp, producer_id=producer_id, producer_epoch=epoch,
        base_sequence=sequence, records_count=count,
    )


def add_sequence(sequence: int, increment: int) -> int:
    return (sequence + increment) % (INT32_MAX + 1)


# -- the model -------------------------------------------------------------------------------


@dataclass
class ModelProducer:
    epoch: int
    batches: list[tuple[int, int, int, int]] = field(default_factory=list)  # first/last seq+offset
    timestamp: int = 0


class Model:
    """Kafka's rules for single-batch client appends, as plainly as they can be said."""

    def __init__(self) -> None:
        self.producers: dict[int, ModelProducer] = {}

    def append(
        self, producer_id: int, epoch: int, first: int, count: int, offset: int, timestamp: int
    ) -> tuple[str, int | None]:
        last = add_sequence(first, count - 1)
        known = self.producers.get(producer_id)
        if known is not None and known.epoch == epoch:
            for batch in known.batches:
                if batch[0] == first and batch[1] == last:
                    return "duplicate", batch[2]
        if known is not None:
            if epoch < known.epoch:
                return "INVALID_PRODUCER_EPOCH", None
            if epoch > known.epoch and first != 0:
                return "OUT_OF_ORDER_SEQUENCE_NUMBER", None
            if epoch == known.epoch:
                previous = known.batches[-1][1] if known.batches else -1
                if first != add_sequence(previous, 1) or (previous == -1 and first != 0):
                    return "OUT_OF_ORDER_SEQUENCE_NUMBER", None
        if known is None or known.epoch != epoch:
            known = self.producers[producer_id] = ModelProducer(epoch)
        known.batches = [*known.batches, (first, last, offset, offset + count - 1)][-5:]
        known.timestamp = timestamp
        return "appended", offset

    def expire(self, now_ms: int) -> None:
        for producer_id in [p for p, m in self.producers.items() if now_ms - m.timestamp >= EXPIRATION_MS]:
            del self.producers[producer_id]


def outcome(error: KafkaError) -> str:
    return type(error).__name__.replace("Error", "")


NAMES = {
    "InvalidProducerEpoch": "INVALID_PRODUCER_EPOCH",
    "OutOfOrderSequenceNumber": "OUT_OF_ORDER_SEQUENCE_NUMBER",
}


class ProducerStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.manager = ProducerStateManager(producer_id_expiration_ms=EXPIRATION_MS)
        self.model = Model()
        self.log_end_offset = 0

    def _append(self, producer_id: int, epoch: int, first: int, count: int) -> None:
        now = self.clock.milliseconds()
        batch = header(producer_id, epoch, first, count, timestamp=now)
        try:
            checked = self.manager.check_client_append([batch], self.log_end_offset)
        except (InvalidProducerEpochError, OutOfOrderSequenceNumberError) as error:
            got: tuple[str, int | None] = (NAMES[outcome(error)], None)
        else:
            if checked.duplicate is not None:
                got = ("duplicate", checked.duplicate.first_offset)
            else:
                self.manager.apply(checked)
                got = ("appended", self.log_end_offset)
        expected = self.model.append(producer_id, epoch, first, count, self.log_end_offset, now)
        assert got == expected
        if got[0] == "appended":
            self.log_end_offset += count

    def _next_sequence(self, producer_id: int) -> int:
        known = self.model.producers.get(producer_id)
        return add_sequence(known.batches[-1][1], 1) if known and known.batches else 0

    def _epoch(self, producer_id: int) -> int:
        known = self.model.producers.get(producer_id)
        return known.epoch if known else 0

    @rule(producer_id=st.integers(0, 3), count=st.integers(1, 4))
    def in_order(self, producer_id: int, count: int) -> None:
        self._append(producer_id, self._epoch(producer_id), self._next_sequence(producer_id), count)

    @rule(producer_id=st.integers(0, 3), back=st.integers(0, 6))
    def duplicate(self, producer_id: int, back: int) -> None:
        known = self.model.producers.get(producer_id)
        if not known or not known.batches:
            return
        first, last, _, _ = known.batches[-1 - back % len(known.batches)]
        self._append(producer_id, known.epoch, first, (last - first) % (INT32_MAX + 1) + 1)

    @rule(producer_id=st.integers(0, 3), gap=st.integers(2, 1000), count=st.integers(1, 3))
    def gapped(self, producer_id: int, gap: int, count: int) -> None:
        first = add_sequence(self._next_sequence(producer_id), gap - 1)
        self._append(producer_id, self._epoch(producer_id), first, count)

    @rule(producer_id=st.integers(0, 3), first=st.integers(0, INT32_MAX), count=st.integers(1, 3))
    def any_sequence(self, producer_id: int, first: int, count: int) -> None:
        self._append(producer_id, self._epoch(producer_id), first, count)

    @rule(producer_id=st.integers(0, 3), older=st.integers(1, 3))
    def old_epoch(self, producer_id: int, older: int) -> None:
        epoch = self._epoch(producer_id)
        if epoch >= older:
            self._append(producer_id, epoch - older, self._next_sequence(producer_id), 1)

    @rule(producer_id=st.integers(0, 3), first=st.sampled_from([0, 0, 1, 7]))
    def new_epoch(self, producer_id: int, first: int) -> None:
        self._append(producer_id, self._epoch(producer_id) + 1, first, 1)

    @rule(producer_id=st.integers(0, 3))
    def near_wrap(self, producer_id: int) -> None:
        """A new epoch, then a run up to the sequence wrap at 2**31-1 (unknown producers may
        start anywhere, so a fresh id does it)."""
        fresh = 100 + producer_id
        if fresh not in self.model.producers:
            self._append(fresh, 0, INT32_MAX - 2, 2)

    @rule(ms=st.integers(0, EXPIRATION_MS))
    def advance_and_expire(self, ms: int) -> None:
        self.clock.advance(ms)
        self.manager.remove_expired(self.clock.milliseconds())
        self.model.expire(self.clock.milliseconds())

    @rule()
    def snapshot_round_trip(self) -> None:
        data = encode_snapshot(self.manager.producers.values())
        entries = decode_snapshot(data)
        assert encode_snapshot(entries) == data
        restored = ProducerStateManager(producer_id_expiration_ms=EXPIRATION_MS)
        restored.load(entries, self.clock.milliseconds())
        for producer_id, entry in self.manager.producers.items():
            other = restored.producers[producer_id]
            assert other.producer_epoch == entry.producer_epoch
            assert list(other.batches) == list(entry.batches)[-1:]

    @invariant()
    def same_producers(self) -> None:
        assert set(self.manager.producers) == set(self.model.producers)
        for producer_id, entry in self.manager.producers.items():
            known = self.model.producers[producer_id]
            assert entry.producer_epoch == known.epoch
            got = [(b.first_sequence, b.last_sequence, b.first_offset, b.last_offset)
                   for b in entry.batches]
            assert got == known.batches
            assert len(entry.batches) <= NUM_BATCHES_TO_RETAIN


TestProducerStateMachine = ProducerStateMachine.TestCase
TestProducerStateMachine.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)


# -- edge cases, table-driven ----------------------------------------------------------------


def appended(manager: ProducerStateManager, *batches: BatchHeader, offset: int = 0) -> None:
    manager.apply(manager.check_client_append(list(batches), offset))


@pytest.mark.parametrize(
    ("first_epoch", "first_sequence", "epoch", "sequence", "error"),
    [
        (0, 0, 0, 1, None),  # in order
        (0, 0, 0, 2, OutOfOrderSequenceNumberError),  # a gap
        (0, 0, 0, 0, "duplicate"),
        (3, 0, 2, 1, InvalidProducerEpochError),  # fenced
        (3, 0, 4, 0, None),  # a new epoch restarts at 0
        (3, 0, 4, 5, OutOfOrderSequenceNumberError),  # a new epoch must restart at 0
        (0, INT32_MAX, 0, 0, None),  # wrap from 2**31-1 to 0
        (0, INT32_MAX, 0, 1, OutOfOrderSequenceNumberError),  # 1 skips 0
    ],
)
def test_one_rule_at_a_time(
    first_epoch: int, first_sequence: int, epoch: int, sequence: int, error: object
) -> None:
    manager = ProducerStateManager()
    appended(manager, header(7, first_epoch, first_sequence))
    checked = None
    if isinstance(error, type):
        with pytest.raises(error):
            manager.check_client_append([header(7, epoch, sequence)], 1)
        return
    checked = manager.check_client_append([header(7, epoch, sequence)], 1)
    assert (checked.duplicate is not None) == (error == "duplicate")


def test_unknown_producer_may_start_anywhere_and_any_epoch() -> None:
    """KIP-360: state lost to expiry is not UNKNOWN_PRODUCER_ID; the producer starts again."""
    manager = ProducerStateManager()
    appended(manager, header(1, 5, 1234))
    assert manager.producers[1].last_sequence == 1234
    manager.remove_expired(now_ms=PRODUCER_LIFETIME)
    assert 1 not in manager.producers
    appended(manager, header(1, 2, 99))  # older epoch, any sequence: accepted
    assert manager.producers[1].producer_epoch == 2


PRODUCER_LIFETIME = 86_400_000


def test_only_the_last_five_batches_are_duplicates() -> None:
    manager = ProducerStateManager()
    for sequence in range(7):
        appended(manager, header(1, 0, sequence), offset=sequence)
    for sequence in range(2, 7):
        found = manager.check_client_append([header(1, 0, sequence)], 7).duplicate
        assert found == BatchMetadata(sequence, sequence, 0, 0)
    with pytest.raises(OutOfOrderSequenceNumberError):  # too old to be known as a duplicate
        manager.check_client_append([header(1, 0, 1)], 7)


def test_duplicate_needs_the_same_range_and_epoch() -> None:
    manager = ProducerStateManager()
    appended(manager, header(1, 0, 0, count=3))
    assert manager.check_client_append([header(1, 0, 0, count=3)], 3).duplicate is not None
    with pytest.raises(OutOfOrderSequenceNumberError):
        manager.check_client_append([header(1, 0, 0, count=2)], 3)
    checked = manager.check_client_append([header(1, 1, 0, count=3)], 3)  # new epoch: new data
    assert checked.duplicate is None


def test_several_batches_of_one_producer_in_one_request_chain() -> None:
    manager = ProducerStateManager()
    checked = manager.check_client_append(
        [header(1, 0, 0, count=2), header(1, 0, 2, count=3), header(2, 0, 9)], 10
    )
    manager.apply(checked)
    assert [(b.first_offset, b.last_offset) for b in manager.producers[1].batches] == [
        (10, 11), (12, 14)
    ]
    assert manager.producers[2].batches[0].first_offset == 15
    with pytest.raises(OutOfOrderSequenceNumberError):
        manager.check_client_append([header(1, 0, 5), header(1, 0, 7)], 16)


def test_a_failed_check_changes_nothing() -> None:
    manager = ProducerStateManager()
    appended(manager, header(1, 0, 0))
    with pytest.raises(OutOfOrderSequenceNumberError):
        manager.check_client_append([header(1, 0, 1), header(1, 0, 9)], 1)
    assert manager.producers[1].last_sequence == 0


def test_transactional_client_batches_are_refused() -> None:
    with pytest.raises(InvalidTxnStateError):
        ProducerStateManager().check_client_append([header(1, 0, 0, transactional=True)], 0)


def test_replicas_are_not_checked_and_markers_end_transactions() -> None:
    manager = ProducerStateManager()
    manager.apply(manager.prepare_replica_append([
        header(1, 3, 50, base_offset=10, transactional=True),
        header(1, 2, 7, base_offset=11),  # an old epoch from a replica: taken as it is
    ]))
    entry = manager.producers[1]
    assert (entry.producer_epoch, entry.last_sequence, entry.current_txn_first_offset) == (2, 7, 10)
    manager.replay(header(1, 4, -1, base_offset=12, control=True, timestamp=5))
    entry = manager.producers[1]
    assert (entry.producer_epoch, entry.current_txn_first_offset, len(entry.batches)) == (4, -1, 0)


def test_expiry_spares_open_transactions() -> None:
    manager = ProducerStateManager(producer_id_expiration_ms=100)
    manager.replay(header(1, 0, 0, timestamp=0, transactional=True))
    manager.replay(header(2, 0, 0, timestamp=0))
    manager.replay(header(3, 0, 0, timestamp=50))
    assert manager.remove_expired(now_ms=100) == 1
    assert sorted(manager.producers) == [1, 3]


@pytest.mark.parametrize(
    ("sequence", "decrement", "expected"),
    [(5, 2, 3), (0, 1, INT32_MAX), (1, 3, INT32_MAX - 1), (INT32_MAX, INT32_MAX, 0)],
)
def test_decrement_sequence_wraps(sequence: int, decrement: int, expected: int) -> None:
    assert decrement_sequence(sequence, decrement) == expected


def test_in_sequence() -> None:
    assert in_sequence(-1, 0) and in_sequence(4, 5) and in_sequence(INT32_MAX, 0)
    assert not in_sequence(4, 6) and not in_sequence(INT32_MAX, 1) and not in_sequence(-1, 1)


def test_wrapped_batch_is_found_as_duplicate() -> None:
    manager = ProducerStateManager()
    appended(manager, header(1, 0, INT32_MAX - 1, count=4))  # sequences 2**31-2 .. 1
    entry = manager.producers[1]
    assert (entry.batches[0].first_sequence, entry.last_sequence) == (INT32_MAX - 1, 1)
    assert manager.check_client_append([header(1, 0, INT32_MAX - 1, count=4)], 4).duplicate
    appended(manager, header(1, 0, 2), offset=4)


# -- snapshot format -------------------------------------------------------------------------


def test_snapshot_golden_bytes() -> None:
    """Built by hand from Kafka's ProducerSnapshot.json v1 (non-flexible: int32 array count)."""
    entries = [
        ProducerStateEntry(9, producer_epoch=2, last_timestamp=1_700_000_000_123,
                           batches=[BatchMetadata(41, 1000, 4, 1_700_000_000_123)]),
        ProducerStateEntry(3, producer_epoch=0, last_timestamp=77),  # no batch retained
    ]
    body = struct.pack(">i", 2)
    body += struct.pack(">qhiqiqiq", 3, 0, -1, -1, 0, 77, -1, -1)
    body += struct.pack(">qhiqiqiq", 9, 2, 41, 1000, 4, 1_700_000_000_123, -1, -1)
    expected = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert len(expected) == 2 + 4 + 4 + 2 * 46
    assert encode_snapshot(entries) == expected
    decoded = decode_snapshot(expected)
    assert [(e.producer_id, e.producer_epoch, list(e.batches)) for e in decoded] == [
        (3, 0, []), (9, 2, [BatchMetadata(41, 1000, 4, 1_700_000_000_123)])
    ]
    assert encode_snapshot([]) == struct.pack(">hIi", 1, crc32c.crc32c(b"\0\0\0\0"), 0)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda data: data[:5], "too few"),
        (lambda data: b"\0\2" + data[2:], "version"),
        (lambda data: data[:-1], "do not fit"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "CRC"),
    ],
)
def test_corrupt_snapshots_are_refused(change, reason: str) -> None:  # type: ignore[no-untyped-def]
    data = encode_snapshot([ProducerStateEntry(1, producer_epoch=0,
                                               batches=[BatchMetadata(0, 0, 0, 0)])])
    with pytest.raises(CorruptSnapshotError, match=reason):
        decode_snapshot(change(data))


def test_snapshot_load_drops_expired_producers() -> None:
    data = encode_snapshot([
        ProducerStateEntry(1, producer_epoch=0, last_timestamp=0),
        ProducerStateEntry(2, producer_epoch=0, last_timestamp=500),
    ])
    manager = ProducerStateManager(producer_id_expiration_ms=1000)
    manager.load(decode_snapshot(data), now_ms=1200)
    assert list(manager.producers) == [2]
