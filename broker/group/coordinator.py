"""The group coordinator: the asyncio shell around the sans-IO ``ClassicGroup`` state machines.

It owns every group of this node (``groups``, by group id), the parked JoinGroup/SyncGroup
requests (one future per (group id, member id), completed from the state machine's
``Effects``) and one timer per group. The timer is armed for the group's ``next_deadline()``;
when it fires, the group is ticked, the completed requests are answered and the timer is armed
again — there is no polling loop. A timer is only moved earlier, never later: a heartbeat pushes
a session deadline back, and the timer then fires early, finds nothing due and re-arms, which
costs less than cancelling and re-creating a timer for every heartbeat.

Persisting (Kafka's GroupMetadataManager writing GroupMetadata records): when a call's effects
carry ``store_group`` (the leader's SyncGroup made the group Stable, or the group became
Empty), the group is written through ``store`` before any parked request is answered, so the
members learn their assignment only once it is in ``__consumer_offsets``. The append is
synchronous, so no other call can step the group in between. If the write fails, the
SyncGroups it would have answered get the error (Kafka's appendGroupMetadataErrorToResponseError);
the members then rejoin, which starts a new rebalance. The same goes for a static member
replaced in a Stable group: the record is rewritten with the new member id before the
JoinGroup is answered, and a failed write fails that JoinGroup. When a call's effects say the
group changed state, its ``current_state_timestamp_ms`` becomes the wall clock's now (Kafka's
currentStateTimestamp, written in the record; offsets of an Empty group expire from it).

Loading and ownership (Kafka's CoordinatorRuntime states, per ``__consumer_offsets``
partition: ``partitions``, a ``broker.coordinator_partitions.CoordinatorPartitions``): a single
node serves every partition and at start-up ``begin_loading`` marks those being loaded
(``broker.group.loading``); in a cluster a partition is served only once this node was elected
its leader and loaded it. While a group's partition (``partition_for``) loads,
``partition_error`` is COORDINATOR_LOAD_IN_PROGRESS and every group call here answers it (after
the INVALID_GROUP_ID check, as Kafka); a partition led elsewhere, or whose load failed, answers
NOT_COORDINATOR. ``complete_loading`` adds the partition's groups (``restore_group``; an Empty
group without protocol type for each group that has only offsets, Kafka's "simple consumer
group") and arms their timers, all in one call. ``unload`` (the partition moved to another
leader) forgets its groups and answers their parked requests NOT_COORDINATOR.

Time is ``clock.monotonic_ms()``; timers are set with ``call_later`` (the running loop's by
default), both injected so tests step time by hand.

Coordinator-level errors, as Kafka's GroupCoordinatorService/GroupMetadataManager: an empty
group id is INVALID_GROUP_ID for JoinGroup, SyncGroup, Heartbeat and LeaveGroup; a JoinGroup
with a non-empty member id for a group that does not exist is UNKNOWN_MEMBER_ID; SyncGroup,
Heartbeat and LeaveGroup for a missing group are UNKNOWN_MEMBER_ID (a share group's id too, as
Kafka answers for a group of another type; JoinGroup for it is INCONSISTENT_GROUP_PROTOCOL).
Share groups are ``share`` (``broker.group.share_coordinator``), under the same partitions;
loading and unloading a partition take its share groups too. A deleted group is removed
from ``groups``.

A member has at most one parked JoinGroup (and one SyncGroup): a newer one replaces the older
waiter, which is then never answered (Kafka overwrites the callback the same way; the client
has given up on it). A future whose waiter went away (connection closed) is skipped.

Owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol as TypingProtocol
from typing import TypeVar

from broker.coordinator_partitions import NO_EPOCH, CoordinatorPartitions
from broker.group.classic import ClassicGroup
from broker.group.group_records import restore_group
from broker.group.offsets import coordinator_error_code
from broker.group.share_coordinator import ShareGroupCoordinator, ShareGroupStore
from broker.group.share_records import ShareGroupRecord
from broker.group.values import (
    NO_MEMBER_ID,
    Effects,
    GroupConfig,
    JoinRequest,
    JoinResponse,
    LeaveMemberResult,
    LeaveOutcome,
    MemberIdentity,
    SyncRequest,
    SyncResponse,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.group_coordinator.group_metadata_value import GroupMetadataValue
from storage.clock import Clock

__all__ = ["CallLater", "GroupCoordinator", "GroupStore", "TimerHandle"]

logger = logging.getLogger("samsa.broker.group.coordinator")

_T = TypeVar("_T")


class GroupStore(TypingProtocol):
    def store_group(self, group: ClassicGroup) -> None:
        """Append the group's GroupMetadata record; raises the append's KafkaError."""


class TimerHandle(TypingProtocol):
    def cancel(self) -> None: ...


CallLater = Callable[[float, Callable[[], None]], TimerHandle]


def _loop_call_later(delay_seconds: float, callback: Callable[[], None]) -> TimerHandle:
    return asyncio.get_running_loop().call_later(delay_seconds, callback)


class GroupCoordinator:
    def __init__(
        self,
        *,
        config: GroupConfig,
        clock: Clock,
        call_later: CallLater = _loop_call_later,
        store: GroupStore | None = None,
        partition_for: Callable[[str], int] = lambda group_id: 0,
        owns_all: bool = True,
        share_store: ShareGroupStore | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.groups: dict[str, ClassicGroup] = {}
        self._clock = clock
        self._call_later = call_later
        self._partition_for = partition_for
        # the __consumer_offsets partitions served here (``broker.coordinator_partitions``)
        self.partitions = CoordinatorPartitions(owns_all=owns_all)
        self._timers: dict[str, tuple[int, TimerHandle]] = {}  # group id -> (deadline, handle)
        self._joins: dict[tuple[str, str], asyncio.Future[JoinResponse]] = {}
        self._syncs: dict[tuple[str, str], asyncio.Future[SyncResponse]] = {}
        # share groups (KIP-932), on the same partitions (``broker.group.share_coordinator``)
        self.share = ShareGroupCoordinator(
            clock=clock, call_later=call_later, partitions=self.partitions, partition_for=partition_for,
            store=share_store,
            is_classic_group=lambda group_id: group_id in self.groups,
        )

    def get_group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create_group(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, config=self.config)
        return group

    # ---- loading ---------------------------------------------------------------------------

    def begin_loading(self, partitions: Iterable[int], leader_epoch: int = NO_EPOCH) -> None:
        for partition in partitions:
            self.partitions.begin_loading(partition, leader_epoch)

    @property
    def loading(self) -> bool:
        """True while any partition is loading (ListGroups then answers LOAD_IN_PROGRESS)."""
        return self.partitions.loading

    def is_loading(self, partition: int) -> bool:
        """True while ``__consumer_offsets-<partition>`` is loading (transaction markers wait)."""
        return self.partitions.is_loading(partition)

    def partition_error(self, group_id: str) -> ErrorCode | None:
        """None when the group's partition is served here: loaded (or, on a single node, never
        loaded: a new topic); COORDINATOR_LOAD_IN_PROGRESS while it loads; NOT_COORDINATOR
        when another node leads it or its load failed."""
        return self.partitions.error(self._partition_for(group_id))

    def complete_loading(
        self, partition: int, groups: Mapping[str, GroupMetadataValue], *,
        simple_groups: Iterable[str] = (), arm_timers: bool = True, leader_epoch: int = NO_EPOCH,
        share_groups: Mapping[str, ShareGroupRecord] | None = None,
    ) -> bool:
        """Add a loaded partition's groups and serve it; False (nothing added) when the load
        is stale: the partition was resigned or elected again meanwhile. ``arm_timers=False``
        when there is no running loop yet (``arm_timers()`` later)."""
        if leader_epoch != NO_EPOCH and not self.partitions.is_loading_at(partition, leader_epoch):
            return False
        now_ms = self._now_ms()
        for group_id, value in groups.items():
            self.groups[group_id] = restore_group(group_id, value, config=self.config, now_ms=now_ms)
        self.share.restore(share_groups or {})
        for group_id in simple_groups:
            if group_id not in self.groups and group_id not in self.share.groups:
                self.get_or_create_group(group_id)
        self.partitions.begin_loading(partition, leader_epoch)  # a single node's, unscheduled
        self.partitions.complete_loading(partition, leader_epoch)
        if arm_timers:
            for group_id in groups:
                self._arm(self.groups[group_id])
        return True

    def fail_loading(self, partition: int, leader_epoch: int = NO_EPOCH) -> None:
        if leader_epoch == NO_EPOCH:
            self.partitions.begin_loading(partition)
        self.partitions.fail_loading(partition, leader_epoch)

    def unload(self, partition: int) -> list[str]:
        """The partition is no longer served here (Kafka's ``onResignation``): forget its
        groups and their timers; parked JoinGroup / SyncGroup requests answer NOT_COORDINATOR,
        so their members find the new coordinator. The group ids unloaded."""
        unloaded = [group_id for group_id in self.groups if self._partition_for(group_id) == partition]
        unloaded_share_groups = self.share.unload(partition)
        for group_id in unloaded:
            del self.groups[group_id]
            self._cancel_timer(group_id)
            for key in [key for key in self._joins if key[0] == group_id]:
                _complete(self._joins.pop(key), JoinResponse(ErrorCode.NOT_COORDINATOR, key[1]))
            for key in [key for key in self._syncs if key[0] == group_id]:
                _complete(self._syncs.pop(key), SyncResponse(ErrorCode.NOT_COORDINATOR))
        return unloaded + unloaded_share_groups

    def arm_timers(self) -> None:
        """Arm every group's timer (on the event loop, once the loaded groups are in)."""
        for group in self.groups.values():
            self._arm(group)

    # ---- the classic protocol ----------------------------------------------------------

    def join(self, group_id: str, request: JoinRequest) -> JoinResponse | asyncio.Future[JoinResponse]:
        """The response, or a future of it when the request is parked."""
        if not group_id:
            return JoinResponse(ErrorCode.INVALID_GROUP_ID, request.member_id)
        unavailable = self.partition_error(group_id)
        if unavailable is not None:
            return JoinResponse(unavailable, request.member_id)
        if group_id in self.share.groups:  # Kafka: a group of another type
            return JoinResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, NO_MEMBER_ID)
        group = self.groups.get(group_id)
        if group is None and request.member_id != NO_MEMBER_ID:
            return JoinResponse(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
        group = group or self.get_or_create_group(group_id)
        outcome = group.join(request, self._now_ms())
        error = self._apply(group, outcome.effects)
        if outcome.response is not None:
            return _failed_join(outcome.response, error)
        return self._park(self._joins, (group_id, outcome.member_id))

    def sync(self, group_id: str, request: SyncRequest) -> SyncResponse | asyncio.Future[SyncResponse]:
        unavailable = self.partition_error(group_id) if group_id else None
        if unavailable is not None:
            return SyncResponse(unavailable)
        group = self.groups.get(group_id) if group_id else None
        if group is None:
            return SyncResponse(ErrorCode.UNKNOWN_MEMBER_ID if group_id else ErrorCode.INVALID_GROUP_ID)
        outcome = group.sync(request, self._now_ms())
        error = self._apply(group, outcome.effects)
        if outcome.response is not None:
            return _failed_sync(outcome.response, error)
        return self._park(self._syncs, (group_id, outcome.member_id))

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, *, group_instance_id: str | None = None
    ) -> ErrorCode:
        unavailable = self.partition_error(group_id) if group_id else None
        if unavailable is not None:
            return unavailable
        group = self.groups.get(group_id) if group_id else None
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID if group_id else ErrorCode.INVALID_GROUP_ID
        error = group.heartbeat(member_id, generation_id, self._now_ms(),
                                group_instance_id=group_instance_id)
        self._arm(group)
        return error

    def leave(self, group_id: str, members: Sequence[MemberIdentity]) -> LeaveOutcome:
        unavailable = self.partition_error(group_id) if group_id else None
        if unavailable is not None:
            return LeaveOutcome(unavailable, ())  # Kafka's LeaveGroup error response: no members
        group = self.groups.get(group_id) if group_id else None
        if group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID if group_id else ErrorCode.INVALID_GROUP_ID
            return LeaveOutcome(error, tuple(
                LeaveMemberResult(m.member_id, m.group_instance_id, error) for m in members))
        outcome = group.leave(members, self._now_ms())
        self._apply(group, outcome.effects)
        return outcome

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups for one group: only an Empty group goes (and leaves ``groups``)."""
        unavailable = self.partition_error(group_id)
        if unavailable is not None:
            return unavailable
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        error = group.delete()
        if error is ErrorCode.NONE:
            del self.groups[group_id]
            self._cancel_timer(group_id)
        return error

    # ---- parked requests and timers ------------------------------------------------------

    def _now_ms(self) -> int:
        return self._clock.monotonic_ms()

    @staticmethod
    def _park(
        parked: dict[tuple[str, str], asyncio.Future[_T]], key: tuple[str, str]
    ) -> asyncio.Future[_T]:
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        parked[key] = future
        return future

    def _apply(self, group: ClassicGroup, effects: Effects) -> ErrorCode:
        """Store the group if asked, answer the parked requests ``effects`` names, then re-arm
        the group's timer; the store's error (NONE when it succeeded or was not asked)."""
        if effects.state_changed:
            group.current_state_timestamp_ms = self._clock.milliseconds()
        error = self._store(group) if effects.store_group else ErrorCode.NONE
        for join in effects.joins:
            _complete(self._joins.pop((group.group_id, join.member_id), None), join.response)
        for sync in effects.syncs:
            _complete(self._syncs.pop((group.group_id, sync.member_id), None),
                      _failed_sync(sync.response, error))
        self._arm(group)
        return error

    def _store(self, group: ClassicGroup) -> ErrorCode:
        if self.store is None:
            return ErrorCode.NONE
        try:
            self.store.store_group(group)
        except KafkaError as e:
            logger.warning("group %s generation %d not stored: %s", group.group_id, group.generation_id, e)
            return ErrorCode(coordinator_error_code(e))
        return ErrorCode.NONE

    def _arm(self, group: ClassicGroup) -> None:
        deadline = group.next_deadline()
        armed = self._timers.get(group.group_id)
        if deadline is None:
            self._cancel_timer(group.group_id)
            return
        if armed is not None and armed[0] <= deadline:
            return  # fires early, finds nothing due and re-arms (see the module docstring)
        if armed is not None:
            armed[1].cancel()
        delay_seconds = max(deadline - self._now_ms(), 0) / 1000
        handle = self._call_later(delay_seconds, lambda: self._on_timer(group.group_id))
        self._timers[group.group_id] = (deadline, handle)

    def _on_timer(self, group_id: str) -> None:
        self._timers.pop(group_id, None)
        group = self.groups.get(group_id)
        if group is not None:
            self._apply(group, group.tick(self._now_ms()))

    def _cancel_timer(self, group_id: str) -> None:
        armed = self._timers.pop(group_id, None)
        if armed is not None:
            armed[1].cancel()


def _failed_join(response: JoinResponse, error: ErrorCode) -> JoinResponse:
    """A static member's replacement that could not be stored fails its JoinGroup (Kafka
    reverts the replacement too; here the client rejoins and is replaced again)."""
    if error is ErrorCode.NONE or response.error_code is not ErrorCode.NONE:
        return response
    return JoinResponse(error, NO_MEMBER_ID, response.generation_id)


def _failed_sync(response: SyncResponse, error: ErrorCode) -> SyncResponse:
    """A successful SyncGroup answer becomes ``error`` when the group could not be stored."""
    if error is ErrorCode.NONE or response.error_code is not ErrorCode.NONE:
        return response
    return SyncResponse(error)


def _complete(future: asyncio.Future[_T] | None, response: _T) -> None:
    if future is not None and not future.done():
        future.set_result(response)

