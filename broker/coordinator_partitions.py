"""Which partitions of an internal topic this node's coordinator serves (the partition contexts
of Kafka's ``CoordinatorRuntime``, ``scheduleLoadOperation`` / ``scheduleUnloadOperation``), and
which leadership changes of a metadata delta concern it (``coordinator_elections``).

A coordinator (groups over ``__consumer_offsets``, transactions over ``__transaction_state``)
serves the keys of a partition only while this node leads that partition. Per partition:

    (none)    not served: NOT_COORDINATOR (on a single node, ``owns_all``: served, the
              partition is new or has nothing to load)
    LOADING   elected; its log is being replayed: COORDINATOR_LOAD_IN_PROGRESS
    ACTIVE    loaded: served
    FAILED    its load failed: NOT_COORDINATOR (until a later election loads it again)

Transitions, with the partition's leader epoch as Kafka keeps it:
- ``elect(index, epoch)``: this node leads the partition at ``epoch``. Ignored unless ``epoch``
  is newer than the one known (a delta that touched the partition without moving its
  leadership repeats the epoch). A partition not served, or FAILED, starts LOADING (True: the
  caller starts a load); one LOADING or ACTIVE keeps its state and takes the new epoch.
- ``resign(index, epoch)``: another node leads (``epoch``), or the partition left this node
  (None). Ignored when ``epoch`` is not newer than the one known (Kafka's rule: an old
  resignation must not unload a newer election); otherwise the partition is forgotten (True:
  the caller drops its groups / transactions).
- ``complete_loading(index, epoch)`` / ``fail_loading(index, epoch)``: the end of a load that
  started at ``epoch``; False (and no change) when the partition was resigned or re-elected
  meanwhile, so a stale load is never applied.

A single node (no ``process.roles``) never hears elections: ``owns_all`` makes every partition
without an entry served, and its start-up loads use ``begin_loading`` with no epoch (-1).

``pending`` (set by the broker): a partition that is otherwise served but cannot take writes
yet — its internal topic is being created (asked for on first use) or its log is still being
created on the storage worker — answers COORDINATOR_LOAD_IN_PROGRESS, so a group's first
JoinGroup waits for it rather than failing at its SyncGroup (Kafka's coordinator is not active
for a partition until it is hosted and loaded).

Sans-IO values and a plain class; owned by the event loop (start-up marks partitions from the
start-up thread before the loop serves).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode
from replication.metadata.delta import LocalReplicaChanges

__all__ = [
    "NO_EPOCH",
    "CoordinatorElections",
    "CoordinatorPartitions",
    "PartitionState",
    "coordinator_elections",
]

NO_EPOCH = -1


class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


class CoordinatorPartitions:
    def __init__(self, *, owns_all: bool = False) -> None:
        self.owns_all = owns_all
        self.pending: Callable[[int], bool] | None = None  # see the module docstring
        self._states: dict[int, PartitionState] = {}
        self._epochs: dict[int, int] = {}

    # -- leadership ---------------------------------------------------------------------------

    def elect(self, index: int, leader_epoch: int) -> bool:
        """This node leads ``index`` at ``leader_epoch``; True when a load must start."""
        if index in self._epochs and leader_epoch <= self._epochs[index]:
            return False
        self._epochs[index] = leader_epoch
        if self._states.get(index) in (PartitionState.LOADING, PartitionState.ACTIVE):
            return False
        self._states[index] = PartitionState.LOADING
        return True

    def resign(self, index: int, leader_epoch: int | None) -> bool:
        """Another node leads ``index`` (None: it left this node); True when it was served
        here and is now forgotten."""
        if index not in self._epochs:
            return False
        if leader_epoch is not None and leader_epoch <= self._epochs[index]:
            return False
        del self._epochs[index]
        del self._states[index]
        return True

    # -- loading ------------------------------------------------------------------------------

    def begin_loading(self, index: int, leader_epoch: int = NO_EPOCH) -> None:
        self._states[index] = PartitionState.LOADING
        self._epochs[index] = leader_epoch

    def complete_loading(self, index: int, leader_epoch: int = NO_EPOCH) -> bool:
        """The load of ``index`` begun at ``leader_epoch`` ended; False when it is stale."""
        if not self.is_loading_at(index, leader_epoch):
            return False
        self._states[index] = PartitionState.ACTIVE
        return True

    def fail_loading(self, index: int, leader_epoch: int = NO_EPOCH) -> bool:
        if not self.is_loading_at(index, leader_epoch):
            return False
        self._states[index] = PartitionState.FAILED
        return True

    def is_loading_at(self, index: int, leader_epoch: int) -> bool:
        return self._states.get(index) is PartitionState.LOADING and \
            self._epochs.get(index) == leader_epoch

    # -- what requests see --------------------------------------------------------------------

    def state(self, index: int) -> PartitionState | None:
        return self._states.get(index)

    def epoch(self, index: int) -> int | None:
        return self._epochs.get(index)

    def is_loading(self, index: int) -> bool:
        return self._states.get(index) is PartitionState.LOADING

    @property
    def loading(self) -> bool:
        return PartitionState.LOADING in self._states.values()

    def loading_partitions(self) -> list[int]:
        return sorted(i for i, state in self._states.items() if state is PartitionState.LOADING)

    def error(self, index: int) -> ErrorCode | None:
        """What a request for a key of ``index`` is answered (None: served)."""
        state = self._states.get(index)
        if state is PartitionState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if state is PartitionState.ACTIVE or (state is None and self.owns_all):
            if self.pending is not None and self.pending(index):
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            return None
        return ErrorCode.NOT_COORDINATOR


@dataclass(frozen=True, slots=True)
class CoordinatorElections:
    """One delta's leadership changes of one internal topic, for its coordinator."""

    elected: tuple[tuple[int, int], ...] = ()  # (partition, leader epoch) led here now
    resigned: tuple[tuple[int, int | None], ...] = ()  # (partition, leader epoch or None)


def coordinator_elections(changes: LocalReplicaChanges, topic: str) -> CoordinatorElections:
    """Kafka's ``BrokerMetadataPublisher`` for the coordinators: partitions of ``topic`` this
    node leads after the delta are elections, those it follows or lost are resignations."""
    elected = tuple((state.partition.partition_id, state.partition.leader_epoch)
                    for state in changes.leaders if state.topic == topic)
    resigned: list[tuple[int, int | None]] = [
        (state.partition.partition_id, state.partition.leader_epoch)
        for state in changes.followers if state.topic == topic]
    resigned += [(index, None) for name, index in changes.deletes if name == topic]
    return CoordinatorElections(elected, tuple(resigned))

