"""Transactions in the producer state: the first unstable offset, completed transactions and
the LSO an ABORT records, against a brute-force model that rescans the whole log; and the
checks a transactional append goes through (verification, plain batches inside a
transaction, marker epochs and coordinator epochs)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from protocol.records import BatchHeader
from storage.producer_snapshot import decode_snapshot, encode_snapshot
from storage.producer_state import (
    AppendOrigin,
    CompletedTxn,
    EndMarker,
    ProducerStateManager,
)

PRODUCERS = st.sampled_from([1, 2, 3])


def data_header(producer_id: int, sequence: int, *, count: int = 1, epoch: int = 0,
                transactional: bool = True, base_offset: int = 0) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
        attributes=0x10 if transactional else 0, last_offset_delta=count - 1, base_timestamp=0,
        max_timestamp=0, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
        records_count=count,
    )


def marker_header(producer_id: int, offset: int, epoch: int = 0) -> BatchHeader:
    return BatchHeader(
        base_offset=offset, batch_length=70, partition_leader_epoch=0, magic=2, crc=0,
        attributes=0x30, last_offset_delta=0, base_timestamp=0, max_timestamp=0,
        producer_id=producer_id, producer_epoch=epoch, base_sequence=-1, records_count=1,
    )


@dataclass
class Entry:
    offset: int
    producer_id: int
    kind: str  # "txn", "plain", "commit", "abort"


@dataclass
class LogModel:
    """The log as a list; every answer is computed by scanning it from the start."""

    entries: list[Entry] = field(default_factory=list)

    def open_transactions(self, upto: int | None = None) -> dict[int, int]:
        open_: dict[int, int] = {}
        for entry in self.entries[:upto]:
            if entry.kind == "txn":
                open_.setdefault(entry.producer_id, entry.offset)
            elif entry.kind in ("commit", "abort"):
                open_.pop(entry.producer_id, None)
        return open_

    def completed(self, position: int) -> CompletedTxn | None:
        """What the marker at ``position`` ended, if its producer had a transaction open."""
        marker = self.entries[position]
        first = self.open_transactions(position).get(marker.producer_id)
        if first is None:
            return None
        return CompletedTxn(marker.producer_id, first, marker.offset, marker.kind == "abort")

    def last_stable_offset_after(self, position: int) -> int:
        others = [first for pid, first in self.open_transactions(position + 1).items()
                  if pid != self.entries[position].producer_id]
        return min(others, default=self.entries[position].offset + 1)


class TransactionsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.manager = ProducerStateManager()
        self.model = LogModel()
        self.next_offset = 0
        self.sequences: dict[int, int] = {}

    def _append_data(self, producer_id: int, transactional: bool, verified: bool) -> None:
        sequence = self.sequences.get(producer_id, 0)
        header = data_header(producer_id, sequence, count=2, transactional=transactional)
        is_open = producer_id in self.model.open_transactions()
        refused = (transactional and not verified and not is_open) or (not transactional and is_open)
        if refused:
            with pytest.raises(InvalidTxnStateError):
                self.manager.check_client_append([header], self.next_offset,
                                                 transaction_verified=verified)
            return
        append = self.manager.check_client_append([header], self.next_offset,
                                                  transaction_verified=verified)
        self.manager.apply(append)
        self.model.entries.append(
            Entry(self.next_offset, producer_id, "txn" if transactional else "plain"))
        self.sequences[producer_id] = sequence + 2
        self.next_offset += 2

    @rule(producer_id=PRODUCERS)
    def verified_transactional_batch(self, producer_id: int) -> None:
        self._append_data(producer_id, transactional=True, verified=True)

    @rule(producer_id=PRODUCERS)
    def unverified_transactional_batch(self, producer_id: int) -> None:
        self._append_data(producer_id, transactional=True, verified=False)

    @rule(producer_id=PRODUCERS)
    def plain_batch(self, producer_id: int) -> None:
        self._append_data(producer_id, transactional=False, verified=False)

    @rule(producer_id=PRODUCERS, abort=st.booleans())
    def marker(self, producer_id: int, abort: bool) -> None:
        offset = self.next_offset
        append = self.manager.check_marker(
            marker_header(producer_id, offset), EndMarker(abort, 0), offset, timestamp=0)
        self.manager.apply(append)
        self.model.entries.append(Entry(offset, producer_id, "abort" if abort else "commit"))
        self.next_offset += 1
        expected = self.model.completed(len(self.model.entries) - 1)
        assert append.completed == (() if expected is None else (expected,))
        if expected is not None:
            assert self.manager.last_stable_offset(expected) == (
                self.model.last_stable_offset_after(len(self.model.entries) - 1))

    @invariant()
    def first_unstable_offset_is_the_oldest_open_transaction(self) -> None:
        open_ = self.model.open_transactions()
        assert self.manager.ongoing == open_
        assert self.manager.first_unstable_offset == min(open_.values(), default=None)

    @invariant()
    def a_snapshot_keeps_the_open_transactions(self) -> None:
        restored = ProducerStateManager()
        restored.load(decode_snapshot(encode_snapshot(self.manager.producers.values())), now_ms=0)
        assert restored.ongoing == self.manager.ongoing
        assert restored.first_unstable_offset == self.manager.first_unstable_offset


TestTransactionsMachine = TransactionsMachine.TestCase
TestTransactionsMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_a_replayed_log_gives_the_same_transactions_and_completions() -> None:
    manager = ProducerStateManager()
    completed = []
    log = [data_header(1, 0, base_offset=0), data_header(2, 0, base_offset=1),
           marker_header(1, 2), data_header(1, 1, base_offset=3), marker_header(2, 4)]
    markers = {2: EndMarker(True, 5), 4: EndMarker(False, 5)}
    for header in log:
        completed += manager.replay(header, markers.get(header.base_offset))
    assert completed == [CompletedTxn(1, 0, 2, True), CompletedTxn(2, 1, 4, False)]
    assert manager.ongoing == {1: 3} and manager.first_unstable_offset == 3
    assert manager.producers[2].coordinator_epoch == 5


def test_a_marker_with_an_older_epoch_or_coordinator_epoch_is_refused() -> None:
    manager = ProducerStateManager()
    manager.apply(manager.check_client_append([data_header(1, 0, epoch=3)], 0,
                                              transaction_verified=True))
    manager.apply(manager.check_marker(marker_header(1, 1, epoch=3), EndMarker(False, 4), 1,
                                       timestamp=0))
    with pytest.raises(InvalidProducerEpochError):
        manager.check_marker(marker_header(1, 2, epoch=2), EndMarker(True, 4), 2, timestamp=0)
    with pytest.raises(TransactionCoordinatorFencedError):
        manager.check_marker(marker_header(1, 2, epoch=3), EndMarker(True, 3), 2, timestamp=0)


def test_a_fencing_marker_bumps_the_epoch_and_fences_the_old_producer() -> None:
    manager = ProducerStateManager()
    manager.apply(manager.check_client_append([data_header(1, 0, epoch=0)], 0,
                                              transaction_verified=True))
    append = manager.check_marker(marker_header(1, 1, epoch=1), EndMarker(True, 0), 1, timestamp=0)
    manager.apply(append)
    assert append.completed == (CompletedTxn(1, 0, 1, True),)
    with pytest.raises(InvalidProducerEpochError):
        manager.check_client_append([data_header(1, 1, epoch=0)], 2, transaction_verified=True)


def test_coordinator_batches_check_the_epoch_but_not_the_sequence() -> None:
    manager = ProducerStateManager()
    header = data_header(9, -1, epoch=2)  # a transactional offset commit: no sequence
    manager.apply(manager.check_client_append(
        [header], 0, origin=AppendOrigin.COORDINATOR, transaction_verified=True))
    manager.apply(manager.check_client_append(
        [header], 1, origin=AppendOrigin.COORDINATOR, transaction_verified=True))
    assert manager.ongoing == {9: 0}
    with pytest.raises(InvalidProducerEpochError):
        manager.check_client_append([data_header(9, -1, epoch=1)], 2,
                                    origin=AppendOrigin.COORDINATOR, transaction_verified=True)


def test_an_empty_marker_batch_is_ignored_on_replay() -> None:
    manager = ProducerStateManager()
    manager.replay(data_header(1, 0, base_offset=0))
    emptied = BatchHeader(  # a marker whose record the cleaner removed
        base_offset=1, batch_length=61, partition_leader_epoch=0, magic=2, crc=0,
        attributes=0x30, last_offset_delta=0, base_timestamp=0, max_timestamp=0,
        producer_id=1, producer_epoch=0, base_sequence=-1, records_count=0,
    )
    assert manager.replay(emptied, EndMarker(True, 0)) == ()
    assert manager.ongoing == {1: 0}
