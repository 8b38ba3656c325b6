"""``ShareStateStore`` under any sequence of writes, initializations, deletions and reads: the
writer's state equals a per-offset model, the replay of its log by a fresh store, the replay of
the compacted log (latest record per key) and the replay of the log from
``last_redundant_offset``; fenced requests are refused and append nothing. Two broken stores
show the checks bite: one whose merge lets the newest batch win, one that writes Kafka's
delta updates (which compaction loses)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from broker.share.state_batches import combine_state_batches, priority
from broker.share.state_records import SharePartitionKey
from broker.share.state_store import ShareStateStore, ShareStateStoreConfig, _Entry
from broker.share.values import DEAD_LETTERING_BASE_CODE, StateBatch
from protocol.errors import FencedLeaderEpochError, FencedStateEpochError

TOPIC = UUID(int=7)
KEYS = [SharePartitionKey("group", TOPIC, 0), SharePartitionKey("group", TOPIC, 1),
        SharePartitionKey("other", UUID(int=8), 0)]
STATES = [0, 2, 4, DEAD_LETTERING_BASE_CODE, DEAD_LETTERING_BASE_CODE + 1]

batches = st.builds(lambda first, length, state, count: StateBatch(first, first + length, state, count),
                    st.integers(0, 40), st.integers(0, 6), st.sampled_from(STATES), st.integers(0, 3))
Log = list[tuple[int, bytes, bytes | None]]


def nudged(value: int, *, forward: int = 1) -> st.SearchStrategy[int]:
    return st.one_of(st.just(value), st.just(value), st.integers(value, value + forward),
                     st.just(max(value - 1, 0)), st.just(-1))


@dataclass
class Model:
    """One share partition as the requests define it, offset by offset."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    offsets: dict[int, StateBatch] = field(default_factory=dict)
    leader_fence: int = -1
    state_fence: int = -1

    def lay(self, new: Iterable[StateBatch]) -> None:
        for batch in new:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                if offset not in self.offsets or priority(batch) > priority(self.offsets[offset]):
                    self.offsets[offset] = batch
        if self.start_offset != -1:
            self.offsets = {o: b for o, b in self.offsets.items() if o >= self.start_offset}

    def expanded(self) -> dict[int, tuple[int, int]]:
        return {o: (b.delivery_state, b.delivery_count) for o, b in self.offsets.items()}


def expand(batches: Iterable[StateBatch]) -> dict[int, tuple[int, int]]:
    return {o: (b.delivery_state, b.delivery_count) for b in batches for o in range(b.first_offset, b.last_offset + 1)}


def replay(log: Log, config: ShareStateStoreConfig) -> ShareStateStore:
    store = ShareStateStore(config)
    for offset, key, value in log:
        store.apply(key, value, offset)
    return store


def compact(log: Log) -> Log:
    """What the log cleaner keeps: the latest record of every key, in log order."""
    latest = {key: offset for offset, key, _ in log}
    return [(offset, key, value) for offset, key, value in log if latest[key] == offset]


def machine_for(store_class: type[ShareStateStore], config: ShareStateStoreConfig) -> type[RuleBasedStateMachine]:
    class ShareStateMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.store = store_class(config)
            self.log: Log = []
            self.models: dict[SharePartitionKey, Model] = {}

        def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
            for key, value in records:
                offset = len(self.log)
                self.log.append((offset, key, value))
                self.store.apply(key, value, offset)
                event("appended " + ("a tombstone" if value is None else f"record type {key[1]}"))

        @invariant()
        def count_what_compaction_drops(self) -> None:
            event(f"compaction drops {min(len(self.log) - len(compact(self.log)), 5)}+ records")

        @rule(key=st.sampled_from(KEYS), new=st.lists(batches, max_size=4), data=st.data())
        def write(self, key: SharePartitionKey, new: list[StateBatch], data: st.DataObject) -> None:
            # Mostly what a share-partition leader sends (its epochs, a start offset moving on),
            # sometimes a new epoch, an old one, -1 ("unchanged"), or a start offset moving back.
            current = self.models.get(key, Model(0, 0, 0))
            state_epoch = data.draw(nudged(current.state_epoch))
            leader_epoch = data.draw(nudged(current.leader_epoch))
            start_offset = data.draw(nudged(max(current.start_offset, 0), forward=5))
            model = self.models.get(key)
            # -1 is not checked against a fence (Kafka's rule)
            if model is not None and leader_epoch != -1 and model.leader_fence > leader_epoch:
                with pytest.raises(FencedLeaderEpochError):
                    self.store.write_state(key, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                           start_offset=start_offset, state_batches=new)
                return
            if model is not None and state_epoch != -1 and model.state_fence > state_epoch:
                with pytest.raises(FencedStateEpochError):
                    self.store.write_state(key, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                           start_offset=start_offset, state_batches=new)
                return
            self.append(self.store.write_state(key, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                               start_offset=start_offset, state_batches=new))
            if model is None:
                model = self.models[key] = Model(state_epoch, leader_epoch, start_offset)
            else:
                model.state_epoch = model.state_epoch if state_epoch == -1 else state_epoch
                model.leader_epoch = model.leader_epoch if leader_epoch == -1 else leader_epoch
                model.start_offset = model.start_offset if start_offset == -1 else start_offset
            model.lay(new)
            model.leader_fence = max(model.leader_fence, leader_epoch)
            model.state_fence = max(model.state_fence, model.state_epoch)

        @rule(key=st.sampled_from(KEYS), state_epoch=st.integers(0, 4),
              start_offset=st.one_of(st.just(-1), st.integers(0, 30)))
        def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
            model = self.models.get(key)
            if model is not None and model.state_fence > state_epoch:
                with pytest.raises(FencedStateEpochError):
                    self.store.initialize_state(key, state_epoch=state_epoch, start_offset=start_offset)
                return
            self.append(self.store.initialize_state(key, state_epoch=state_epoch, start_offset=start_offset))
            leader_epoch = -1 if model is None else model.leader_epoch
            fences = (-1, -1) if model is None else (model.leader_fence, model.state_fence)
            self.models[key] = Model(state_epoch, leader_epoch, start_offset,
                                     leader_fence=max(fences[0], leader_epoch), state_fence=max(fences[1], state_epoch))

        @rule(key=st.sampled_from(KEYS))
        def delete(self, key: SharePartitionKey) -> None:
            records = self.store.delete_state(key)
            assert len(records) == (2 if key in self.models else 0)
            self.append(records)
            self.models.pop(key, None)

        @rule(key=st.sampled_from(KEYS), leader_epoch=st.integers(-1, 4))
        def read(self, key: SharePartitionKey, leader_epoch: int) -> None:
            model = self.models.get(key)
            if model is None:
                assert self.store.read_state(key, leader_epoch=leader_epoch) is None
            elif model.leader_fence > leader_epoch:
                with pytest.raises(FencedLeaderEpochError):
                    self.store.read_state(key, leader_epoch=leader_epoch)
            else:
                assert self.store.read_state(key, leader_epoch=leader_epoch) == self.store.state(key).snapshot  # type: ignore[union-attr]
                model.leader_fence = leader_epoch

        @invariant()
        def the_writer_holds_the_models_state(self) -> None:
            states = self.store.states()
            assert set(states) == set(self.models)
            for key, model in self.models.items():
                snapshot = states[key].snapshot
                assert (snapshot.state_epoch, snapshot.leader_epoch, snapshot.start_offset) == \
                    (model.state_epoch, model.leader_epoch, model.start_offset)
                assert expand(snapshot.state_batches) == model.expanded()
                assert snapshot.state_batches == combine_state_batches((), snapshot.state_batches, start_offset=-1)

        @invariant()
        def every_replay_builds_the_writers_state(self) -> None:
            states = self.store.states()
            assert replay(self.log, config).states() == states
            assert replay(compact(self.log), config).states() == states
            redundant = self.store.last_redundant_offset()
            assert replay(self.log[redundant:], config).states() == states

    return ShareStateMachine


SNAPSHOT_EVERY_TWO = ShareStateStoreConfig(snapshot_update_records_per_snapshot=2)
MACHINE_SETTINGS = settings(max_examples=150, stateful_step_count=30, deadline=None,
                            suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("updates_per_snapshot", [0, 2, 500])
def test_the_store_against_the_model_and_every_replay(updates_per_snapshot: int) -> None:
    config = ShareStateStoreConfig(snapshot_update_records_per_snapshot=updates_per_snapshot)
    run_state_machine_as_test(machine_for(ShareStateStore, config), settings=MACHINE_SETTINGS)


class NewestBatchWins(ShareStateStore):
    """Broken: lays the new batches over the current ones whatever their delivery counts."""

    def _combine(self, current: Iterable[StateBatch], new: Iterable[StateBatch], *, start_offset: int
                 ) -> tuple[StateBatch, ...]:
        new = tuple(new)
        kept = [b for b in current if not any(n.first_offset <= b.last_offset and b.first_offset <= n.last_offset
                                              for n in new)]
        return combine_state_batches(kept, new, start_offset=start_offset)


class DeltaUpdates(ShareStateStore):
    """Broken for a compacted topic: an update carries only the write's batches, as Kafka's do."""

    def _update_batches(self, entry: _Entry, batches: tuple[StateBatch, ...], *, start_offset: int
                        ) -> tuple[StateBatch, ...]:
        return combine_state_batches((), batches, start_offset=start_offset)


BREAKING_SETTINGS = settings(max_examples=300, stateful_step_count=30, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.too_slow], database=None,
                             report_multiple_bugs=False, phases=[Phase.generate])  # no shrinking: fast


@pytest.mark.parametrize("broken", [NewestBatchWins, DeltaUpdates])
def test_the_checks_catch_a_broken_store(broken: type[ShareStateStore]) -> None:
    with pytest.raises(AssertionError):
        run_state_machine_as_test(machine_for(broken, SNAPSHOT_EVERY_TWO), settings=BREAKING_SETTINGS)
