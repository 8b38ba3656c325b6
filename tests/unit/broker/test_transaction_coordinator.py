"""The transaction coordinator, sans-IO: a hypothesis state machine against a model of Kafka's
rules (epochs, fencing, timeouts, expiry, markers), with the transaction log and the marker
writer faked; the log must always replay to the state in memory. Then the failure paths one by
one (a failed log write, markers to retry, a load in the middle of a commit)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.transaction.coordinator import TransactionConfig, TransactionCoordinator
from broker.transaction.metadata import (
    IllegalTransactionStateError,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
)
from broker.transaction.state_log import (
    decode_transaction_record,
    transaction_log_key,
    transaction_log_value,
)
from protocol.errors import ErrorCode, KafkaError, KafkaStorageError
from storage.clock import ManualClock

S = TransactionState
IDS = st.sampled_from(["a", "b"])
PARTITIONS = st.frozensets(st.sampled_from([("t", 0), ("t", 1), ("u", 0)]), min_size=1, max_size=2)
TIMEOUT_MS = 60_000
CONFIG = TransactionConfig(transactional_id_expiration_ms=3_600_000)


@dataclass
class FakeLog:
    records: list[tuple[str, TxnTransit]] = field(default_factory=list)
    fail_next: KafkaError | None = None

    def append(self, transactional_id: str, transit: TxnTransit) -> None:
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        self.records.append((transactional_id, transit))

    def coordinator_epoch(self, transactional_id: str) -> int:
        return 3

    def replay(self) -> dict[str, TransactionMetadata]:
        """What a restart would load: the log's records through the real record codec."""
        loaded: dict[str, TransactionMetadata] = {}
        for transactional_id, transit in self.records:
            decoded = decode_transaction_record(
                transaction_log_key(transactional_id), transaction_log_value(transit))
            assert decoded is not None
            if decoded[1] is None:
                loaded.pop(transactional_id, None)
            else:
                loaded[transactional_id] = decoded[1]
        return loaded


@dataclass
class FakeMarkers:
    written: list[tuple[int, int, bool, tuple[tuple[str, int], ...]]] = field(default_factory=list)
    retry: set[tuple[str, int]] = field(default_factory=set)

    def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                      commit: bool, partitions: list[tuple[str, int]]) -> set[tuple[str, int]]:
        assert coordinator_epoch == 3
        done = tuple(p for p in partitions if p not in self.retry)
        if done:
            self.written.append((producer_id, producer_epoch, commit, done))
        return {p for p in partitions if p in self.retry}


def coordinator_with(clock: ManualClock, log: FakeLog | None = None,
                     markers: FakeMarkers | None = None) -> TransactionCoordinator:
    ids = itertools.count(100)
    return TransactionCoordinator(config=CONFIG, clock=clock, log=log or FakeLog(),
                                  markers=markers or FakeMarkers(),
                                  allocate_producer_id=lambda: next(ids))


@dataclass
class Model:
    producer_id: int
    epoch: int = -1
    last_epoch: int = -1
    state: TransactionState = S.EMPTY
    partitions: frozenset[tuple[str, int]] = frozenset()
    start_ms: int = -1
    updated_ms: int = 0


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.log = FakeLog()
        self.markers = FakeMarkers()
        self.coordinator = coordinator_with(self.clock, self.log, self.markers)
        self.model: dict[str, Model] = {}
        self.expected_markers: list[tuple[int, int, bool, tuple[tuple[str, int], ...]]] = []
        self.next_id = 100

    def _abort_with_fence(self, model: Model) -> None:
        model.epoch += 1
        model.last_epoch = -1  # the fence forgets the last epoch; completing keeps it (TV 0/1)
        self.expected_markers.append((model.producer_id, model.epoch, False, tuple(sorted(model.partitions))))
        model.state, model.partitions = S.COMPLETE_ABORT, frozenset()
        model.updated_ms = self.clock.milliseconds()

    @rule(transactional_id=IDS)
    def init_producer_id(self, transactional_id: str) -> None:
        result = self.coordinator.init_producer_id(transactional_id, TIMEOUT_MS)
        model = self.model.get(transactional_id)
        if model is None:
            model = self.model[transactional_id] = Model(self.next_id)
            self.next_id += 1
        if model.state is S.ONGOING:
            assert result.error is ErrorCode.CONCURRENT_TRANSACTIONS
            self._abort_with_fence(model)
            return
        model.epoch, model.last_epoch = model.epoch + 1, -1
        model.state, model.start_ms = S.EMPTY, -1
        model.updated_ms = self.clock.milliseconds()
        assert (result.error, result.producer_id, result.producer_epoch) == (
            ErrorCode.NONE, model.producer_id, model.epoch)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def init_with_the_producers_epoch(self, data: st.DataObject) -> None:
        """KIP-360: the producer names its id and epoch; the last epoch is a retry."""
        transactional_id = data.draw(st.sampled_from(sorted(self.model)))
        model = self.model[transactional_id]
        epoch = data.draw(st.sampled_from(sorted({model.epoch, model.last_epoch, model.epoch - 1})))
        result = self.coordinator.init_producer_id(
            transactional_id, TIMEOUT_MS, (model.producer_id, epoch))
        if model.state is S.ONGOING:
            assert result.error is ErrorCode.CONCURRENT_TRANSACTIONS
            self._abort_with_fence(model)
        elif model.epoch == -1 or epoch == model.epoch:
            model.epoch, model.last_epoch = model.epoch + 1, model.epoch
            model.state, model.updated_ms = S.EMPTY, self.clock.milliseconds()
            assert (result.error, result.producer_epoch) == (ErrorCode.NONE, model.epoch)
        elif epoch == model.last_epoch:
            assert (result.error, result.producer_epoch) == (ErrorCode.NONE, model.epoch)
            model.state, model.updated_ms = S.EMPTY, self.clock.milliseconds()
        else:
            assert result.error is ErrorCode.PRODUCER_FENCED

    @precondition(lambda self: self.model)
    @rule(data=st.data(), partitions=PARTITIONS, stale=st.booleans())
    def add_partitions(self, data: st.DataObject, partitions: frozenset[tuple[str, int]], stale: bool) -> None:
        transactional_id = data.draw(st.sampled_from(sorted(self.model)))
        model = self.model[transactional_id]
        epoch = model.epoch - 1 if stale else model.epoch
        error = self.coordinator.add_partitions(transactional_id, model.producer_id, epoch, partitions)
        if stale:
            assert error is ErrorCode.PRODUCER_FENCED
            return
        assert error is ErrorCode.NONE
        if model.state is S.ONGOING and partitions <= model.partitions:
            return  # already there: nothing written
        if model.state is not S.ONGOING:
            model.start_ms = self.clock.milliseconds()
        model.state, model.partitions = S.ONGOING, model.partitions | partitions
        model.updated_ms = self.clock.milliseconds()

    @precondition(lambda self: self.model)
    @rule(data=st.data(), commit=st.booleans(), stale=st.booleans())
    def end_transaction(self, data: st.DataObject, commit: bool, stale: bool) -> None:
        transactional_id = data.draw(st.sampled_from(sorted(self.model)))
        model = self.model[transactional_id]
        epoch = model.epoch - 1 if stale else model.epoch
        result = self.coordinator.end_transaction(transactional_id, model.producer_id, epoch,
                                                  commit=commit)
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if stale:
            assert result.error is ErrorCode.PRODUCER_FENCED
        elif model.state is S.ONGOING:
            assert result.error is ErrorCode.NONE
            self.expected_markers.append(
                (model.producer_id, model.epoch, commit, tuple(sorted(model.partitions))))
            model.state, model.partitions = done, frozenset()
            model.updated_ms = self.clock.milliseconds()
        elif model.state is done:
            assert result.error is ErrorCode.NONE  # a retry
        else:
            assert result.error is ErrorCode.INVALID_TXN_STATE

    @rule(elapsed_ms=st.sampled_from([1_000, 30_000, 61_000]))
    def time_passes_and_timed_out_transactions_abort(self, elapsed_ms: int) -> None:
        self.clock.advance(elapsed_ms)
        now = self.clock.milliseconds()
        aborted = self.coordinator.abort_timed_out_transactions()
        in_order = [self.model[t] for t in self.coordinator.transactions]  # the coordinator's order
        expected = [m for m in in_order if m.state is S.ONGOING and m.start_ms + TIMEOUT_MS < now]
        assert aborted == len(expected)
        for model in expected:
            self._abort_with_fence(model)

    @rule()
    def an_hour_passes_and_idle_ids_expire(self) -> None:
        self.clock.advance(3_600_000)
        now = self.clock.milliseconds()
        self.coordinator.expire_transactional_ids()
        for transactional_id, model in list(self.model.items()):
            if model.state is not S.ONGOING and model.updated_ms <= now - CONFIG.transactional_id_expiration_ms:
                del self.model[transactional_id]

    @invariant()
    def state_matches_the_model(self) -> None:
        assert sorted(self.coordinator.transactions) == sorted(self.model)
        for transactional_id, model in self.model.items():
            txn = self.coordinator.transactions[transactional_id]
            assert txn.pending_state is None
            assert (txn.producer_id, txn.producer_epoch, txn.state, frozenset(txn.partitions)) == (
                model.producer_id, model.epoch, model.state, model.partitions)
            assert txn.last_producer_epoch == model.last_epoch

    @invariant()
    def markers_are_the_models(self) -> None:
        assert self.markers.written == self.expected_markers

    @invariant()
    def the_log_replays_to_the_state_in_memory(self) -> None:
        loaded = self.log.replay()
        assert sorted(loaded) == sorted(self.coordinator.transactions)
        for transactional_id, txn in self.coordinator.transactions.items():
            replayed = loaded[transactional_id]
            assert (replayed.producer_id, replayed.producer_epoch, replayed.state,
                    replayed.partitions, replayed.timeout_ms, replayed.start_timestamp_ms) == (
                txn.producer_id, txn.producer_epoch, txn.state, txn.partitions, txn.timeout_ms,
                txn.start_timestamp_ms)


TestCoordinatorMachine = CoordinatorMachine.TestCase
TestCoordinatorMachine.settings = settings(max_examples=120, stateful_step_count=30, deadline=None)


def test_requests_for_unknown_ids_and_bad_arguments() -> None:
    coordinator = coordinator_with(ManualClock())
    assert coordinator.init_producer_id("", TIMEOUT_MS).error is ErrorCode.INVALID_REQUEST
    assert coordinator.init_producer_id("x", 900_001).error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert coordinator.init_producer_id("x", 0).error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert coordinator.add_partitions("x", 1, 0, [("t", 0)]) is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert coordinator.end_transaction("x", 1, 0, commit=True).error is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert coordinator.describe("x") is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    result = coordinator.init_producer_id("x", TIMEOUT_MS)
    assert coordinator.add_partitions("x", result.producer_id + 1, 0, [("t", 0)]) is (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING)


def test_a_failed_log_write_changes_nothing_and_maps_the_error() -> None:
    log = FakeLog()
    coordinator = coordinator_with(ManualClock(), log)
    producer = coordinator.init_producer_id("x", TIMEOUT_MS)
    log.fail_next = KafkaStorageError("disk gone")
    assert coordinator.add_partitions("x", producer.producer_id, 0, [("t", 0)]) is ErrorCode.NOT_COORDINATOR
    txn = coordinator.transactions["x"]
    assert (txn.state, txn.partitions, txn.pending_state) == (S.EMPTY, set(), None)
    assert coordinator.add_partitions("x", producer.producer_id, 0, [("t", 0)]) is ErrorCode.NONE


def test_a_failed_fence_is_not_bumped_twice() -> None:
    log = FakeLog()
    markers = FakeMarkers()
    coordinator = coordinator_with(ManualClock(), log, markers)
    producer = coordinator.init_producer_id("x", TIMEOUT_MS)
    coordinator.add_partitions("x", producer.producer_id, 0, [("t", 0)])
    log.fail_next = KafkaStorageError("disk gone")
    assert coordinator.init_producer_id("x", TIMEOUT_MS).error is ErrorCode.NOT_COORDINATOR
    assert coordinator.transactions["x"].has_failed_epoch_fence
    assert coordinator.init_producer_id("x", TIMEOUT_MS).error is ErrorCode.CONCURRENT_TRANSACTIONS
    assert markers.written == [(producer.producer_id, 1, False, (("t", 0),))]  # epoch 1, once
    assert coordinator.init_producer_id("x", TIMEOUT_MS).producer_epoch == 2


def test_markers_to_retry_keep_the_transaction_completing() -> None:
    markers = FakeMarkers(retry={("t", 1)})
    coordinator = coordinator_with(ManualClock(), markers=markers)
    producer = coordinator.init_producer_id("x", TIMEOUT_MS)
    pid = producer.producer_id
    coordinator.add_partitions("x", pid, 0, [("t", 0), ("t", 1)])
    assert coordinator.end_transaction("x", pid, 0, commit=True).error is ErrorCode.NONE
    txn = coordinator.transactions["x"]
    assert (txn.state, txn.partitions) == (S.PREPARE_COMMIT, {("t", 1)})
    assert coordinator.add_partitions("x", pid, 0, [("t", 0)]) is ErrorCode.CONCURRENT_TRANSACTIONS
    assert coordinator.end_transaction("x", pid, 0, commit=True).error is ErrorCode.CONCURRENT_TRANSACTIONS
    assert coordinator.end_transaction("x", pid, 0, commit=False).error is ErrorCode.INVALID_TXN_STATE
    assert coordinator.verify_partitions("x", pid, 0, [("t", 1)]) == {("t", 1): ErrorCode.CONCURRENT_TRANSACTIONS}
    markers.retry.clear()
    assert coordinator.complete_pending() == 1
    assert txn.state is S.COMPLETE_COMMIT
    assert markers.written == [(pid, 0, True, (("t", 0),)), (pid, 0, True, (("t", 1),))]


def test_a_load_completes_a_commit_left_half_done() -> None:
    log = FakeLog()
    clock = ManualClock()
    coordinator = coordinator_with(clock, log, FakeMarkers(retry={("t", 0)}))
    producer = coordinator.init_producer_id("x", TIMEOUT_MS)
    coordinator.add_partitions("x", producer.producer_id, 0, [("t", 0)])
    coordinator.end_transaction("x", producer.producer_id, 0, commit=True)
    markers = FakeMarkers()
    restarted = coordinator_with(clock, log, markers)  # a restart: the log is all there is
    restarted.load(log.replay())
    assert restarted.transactions["x"].state is S.PREPARE_COMMIT
    restarted.complete_pending()
    assert restarted.transactions["x"].state is S.COMPLETE_COMMIT
    assert markers.written == [(producer.producer_id, 0, True, (("t", 0),))]


def test_verify_partitions_says_which_are_in_the_transaction() -> None:
    coordinator = coordinator_with(ManualClock())
    pid = coordinator.init_producer_id("x", TIMEOUT_MS).producer_id
    coordinator.add_partitions("x", pid, 0, [("t", 0)])
    assert coordinator.verify_partitions("x", pid, 0, [("t", 0), ("t", 1)]) == {
        ("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.TRANSACTION_ABORTABLE}
    assert coordinator.verify_partitions("x", pid, 1, [("t", 0)]) == {("t", 0): ErrorCode.PRODUCER_FENCED}
    assert coordinator.verify_partitions("", pid, 0, [("t", 0)]) == {("t", 0): ErrorCode.INVALID_REQUEST}


def test_list_and_describe() -> None:
    clock = ManualClock()
    coordinator = coordinator_with(clock)
    a = coordinator.init_producer_id("a", TIMEOUT_MS).producer_id
    coordinator.init_producer_id("b", TIMEOUT_MS)
    coordinator.add_partitions("a", a, 0, [("t", 1), ("t", 0)])
    clock.advance(5_000)
    described = coordinator.describe("a")
    assert isinstance(described, TransactionMetadata)
    assert (described.state.display_name, sorted(described.partitions)) == ("Ongoing", [("t", 0), ("t", 1)])
    assert [t.transactional_id for t in coordinator.list_transactions(states=[S.ONGOING])] == ["a"]
    assert [t.transactional_id for t in coordinator.list_transactions(producer_ids=[a])] == ["a"]
    # Kafka's filter keeps ids with no transaction (start -1) whatever the duration.
    listed = coordinator.list_transactions(duration_filter_ms=4_000)
    assert sorted(t.transactional_id for t in listed) == ["a", "b"]
    assert [t.transactional_id for t in coordinator.list_transactions(duration_filter_ms=6_000)] == ["b"]
    assert S.from_display_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE
    assert S.from_display_name("Nope") is None


def test_the_state_machine_refuses_illegal_moves() -> None:
    txn = TransactionMetadata("x", producer_id=1, timeout_ms=TIMEOUT_MS, last_update_timestamp_ms=0,
                              producer_epoch=0)
    with pytest.raises(IllegalTransactionStateError):
        txn.prepare_abort_or_commit(S.PREPARE_COMMIT, 0)  # Empty cannot commit
    transit = txn.prepare_add_partitions(frozenset({("t", 0)}), 0)
    with pytest.raises(IllegalTransactionStateError, match="pending"):
        txn.prepare_add_partitions(frozenset({("t", 1)}), 0)
    txn.complete_transition(transit)
    with pytest.raises(IllegalTransactionStateError):
        txn.complete_transition(transit)  # nothing pending
