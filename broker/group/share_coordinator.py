"""The share-group half of the group coordinator: the asyncio shell around the sans-IO
``broker.share.ShareGroup`` (membership, epochs, the ``simple`` assignor), as Kafka's
GroupMetadataManager runs share groups beside classic ones.

Where a share group lives: on the same ``__consumer_offsets`` partition as a classic group of
that id would (``partition_for``), served under the same ``CoordinatorPartitions`` as the
classic groups (the ``GroupCoordinator`` that owns this object shares its own), so the
loading / NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS answers are the classic groups'.
A group id names one group of one type: a share heartbeat for a classic group's id is
GROUP_ID_NOT_FOUND "Group X is not a share group." (Kafka's ``getOrMaybeCreateShareGroup``),
and the classic APIs answer a share group's id as Kafka does (``GroupCoordinator``).

ShareGroupHeartbeat, in Kafka's order: the request's own checks (INVALID_REQUEST) and the
partition's state; then a group that does not exist is created by a join (epoch 0) and is
GROUP_ID_NOT_FOUND "Share group X not found." otherwise, leave included; then ``ShareGroup``
decides. Each group's settings (session timeout, heartbeat interval, ``group.share.max.size``)
are read at every heartbeat from ``settings(group_id)`` (the group configs over the broker's
defaults), so a changed group config applies from the next heartbeat.

Persistence (``broker.group.share_records``): when a heartbeat or an expiry changes the group
epoch, the epoch record (type 11) is appended, with the partitions record (type 15) when the
group's subscribed partitions grew, before the response is sent; if the append fails, the
heartbeat is answered with the append's error (Kafka's CoordinatorOperationExceptionHelper) and
the group is put back as it was, so the log and the memory never disagree. Members are not
written: at load a group comes back Empty at its last epoch.

Timers: one per group, armed at ``ShareGroup.next_deadline_ms()`` (the earliest session
deadline), moved only earlier, as ``GroupCoordinator`` does; when it fires, the expired
members are removed (each bumps the epoch, written as above; a failed write is logged and the
next change writes a later epoch) and ``on_members_removed`` hooks are told (group id, member
ids) — what a share-partition leader needs to release their records early. Leaving members are
reported the same way.

Time is ``clock.monotonic_ms()``; owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING
from typing import Protocol as TypingProtocol
from uuid import UUID

from broker.group.offsets import coordinator_error_code
from broker.group.share_records import InitializedTopics, ShareGroupRecord
from broker.share.share_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    HeartbeatResult,
    ShareGroup,
    ShareGroupConfig,
    TopicMetadata,
)
from protocol.errors import ErrorCode, KafkaError
from replication.metadata.group_config import ShareGroupSettings

if TYPE_CHECKING:
    from broker.coordinator_partitions import CoordinatorPartitions
    from broker.group.coordinator import CallLater, TimerHandle
    from storage.clock import Clock

__all__ = ["ShareGroupCoordinator", "ShareGroupStore"]

logger = logging.getLogger("samsa.broker.group.share")


class ShareGroupStore(TypingProtocol):
    def store_share_group(self, group_id: str, epoch: int, initialized: InitializedTopics | None) -> None:
        """Append the epoch record (and the partitions record unless None); raises the
        append's KafkaError."""

    def delete_share_group(self, group_id: str) -> None:
        """Append the group's tombstones; raises the append's KafkaError."""


class ShareGroupCoordinator:
    def __init__(
        self,
        *,
        clock: Clock,
        call_later: CallLater,
        partitions: CoordinatorPartitions,
        partition_for: Callable[[str], int],
        store: ShareGroupStore | None = None,
        settings: Callable[[str], ShareGroupSettings] = lambda group_id: ShareGroupSettings(),
        is_classic_group: Callable[[str], bool] = lambda group_id: False,
    ) -> None:
        self.groups: dict[str, ShareGroup] = {}
        # per group: every share partition it was assigned (type-15 record), by topic id
        self.initialized: dict[str, dict[UUID, tuple[str, frozenset[int]]]] = {}
        self.store = store
        self.settings = settings
        self.partitions = partitions
        self.on_members_removed: list[Callable[[str, tuple[str, ...]], None]] = []
        self._clock = clock
        self._call_later = call_later
        self._partition_for = partition_for
        self._is_classic_group = is_classic_group
        self._timers: dict[str, tuple[int, TimerHandle]] = {}

    def get_group(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def partition_error(self, group_id: str) -> ErrorCode | None:
        return self.partitions.error(self._partition_for(group_id))

    # ---- ShareGroupHeartbeat -----------------------------------------------------------------

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        subscribed_topic_names: Sequence[str] | None,
        *,
        topics: Mapping[str, TopicMetadata],
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        invalid = "GroupId can't be empty." if not group_id.strip() else \
            ShareGroup._invalid_request(member_id, member_epoch, subscribed_topic_names, rack_id)
        if invalid is not None:
            return HeartbeatResult(error=ErrorCode.INVALID_REQUEST, error_message=invalid)
        existing = self.groups.get(group_id)
        refused = self._refused(group_id, existing, member_epoch)
        if refused is not None:
            return refused
        group = existing or ShareGroup(group_id)
        previous = _copy(group) if existing is not None else None
        previous_epoch = group.group_epoch
        group.config = self._group_config(group_id)
        result = group.heartbeat(member_id, member_epoch, subscribed_topic_names, topics=topics,
                                 now_ms=self._now_ms(), rack_id=rack_id, client_id=client_id,
                                 client_host=client_host)
        if result.error is not ErrorCode.NONE:
            return result
        self.groups[group_id] = group
        error = self._persist(group, previous_epoch)
        if error is not ErrorCode.NONE:
            self._restore(group_id, previous)
            return HeartbeatResult(error=error, error_message="the share group could not be stored")
        if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            self._removed(group_id, (member_id,))
        self._arm(group)
        return result

    def _refused(self, group_id: str, existing: ShareGroup | None, member_epoch: int) -> HeartbeatResult | None:
        """After the request's own checks: the partition, then the group's type and existence."""
        unavailable = self.partition_error(group_id)
        if unavailable is not None:
            return HeartbeatResult(error=unavailable)
        if existing is not None:
            return None
        if self._is_classic_group(group_id):
            return HeartbeatResult(error=ErrorCode.GROUP_ID_NOT_FOUND,
                                   error_message=f"Group {group_id} is not a share group.")
        if member_epoch != 0:
            return HeartbeatResult(error=ErrorCode.GROUP_ID_NOT_FOUND,
                                   error_message=f"Share group {group_id} not found.")
        return None

    def _group_config(self, group_id: str) -> ShareGroupConfig:
        settings = self.settings(group_id)
        return ShareGroupConfig(session_timeout_ms=settings.session_timeout_ms,
                                heartbeat_interval_ms=settings.heartbeat_interval_ms,
                                max_size=settings.max_size)

    # ---- persistence ---------------------------------------------------------------------------

    def _persist(self, group: ShareGroup, previous_epoch: int) -> ErrorCode:
        """Write the epoch (and the grown partition set) if the epoch changed."""
        if group.group_epoch == previous_epoch:
            return ErrorCode.NONE
        known = self.initialized.get(group.group_id, {})
        grown = _grow(known, group)
        if self.store is not None:
            try:
                self.store.store_share_group(group.group_id, group.group_epoch,
                                             grown if grown != known else None)
            except KafkaError as e:
                logger.warning("share group %s epoch %d not stored: %s", group.group_id, group.group_epoch, e)
                return ErrorCode(coordinator_error_code(e))
        self.initialized[group.group_id] = grown
        return ErrorCode.NONE

    def _restore(self, group_id: str, previous: ShareGroup | None) -> None:
        if previous is None:
            self.groups.pop(group_id, None)
        else:
            self.groups[group_id] = previous

    # ---- DeleteGroups ----------------------------------------------------------------------------

    def check_delete(self, group_id: str) -> ErrorCode:
        """Whether the share group may be deleted now: NONE, NON_EMPTY_GROUP, or the partition's
        error; GROUP_ID_NOT_FOUND when it is not a share group here."""
        unavailable = self.partition_error(group_id)
        if unavailable is not None:
            return unavailable
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NON_EMPTY_GROUP if group.members else ErrorCode.NONE

    def delete(self, group_id: str) -> ErrorCode:
        """Write the tombstones and forget the group (its share-partition state deleted first,
        by the caller); the check is made again, as members may have joined meanwhile."""
        error = self.check_delete(group_id)
        if error is not ErrorCode.NONE:
            return error
        if self.store is not None:
            try:
                self.store.delete_share_group(group_id)
            except KafkaError as e:
                return ErrorCode(coordinator_error_code(e))
        del self.groups[group_id]
        self.initialized.pop(group_id, None)
        self._cancel_timer(group_id)
        return ErrorCode.NONE

    def share_partitions(self, group_id: str) -> dict[UUID, tuple[str, frozenset[int]]]:
        """The share partitions the group has (or had) assigned: those that may have state."""
        group = self.groups.get(group_id)
        known = self.initialized.get(group_id, {})
        return _grow(known, group) if group is not None else dict(known)

    # ---- the offsets admin APIs (Describe/Alter/DeleteShareGroupOffsets) -----------------------

    def check_alter(self, group_id: str) -> ErrorCode:
        """AlterShareGroupOffsets may go ahead: the partition is served, the id is not a
        classic group's (GROUP_ID_NOT_FOUND), the share group (if any) has no members
        (NON_EMPTY_GROUP). Kafka creates the group when it does not exist."""
        unavailable = self.partition_error(group_id)
        if unavailable is not None:
            return unavailable
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND if self._is_classic_group(group_id) else ErrorCode.NONE
        return ErrorCode.NON_EMPTY_GROUP if group.members else ErrorCode.NONE

    def add_share_partitions(self, group_id: str, added: InitializedTopics) -> ErrorCode:
        """Record share partitions the group has state for (AlterShareGroupOffsets), creating
        the group (Empty) if needed; written before the state is initialized, as Kafka does."""
        known = self.initialized.get(group_id, {})
        grown = dict(known)
        for topic_id, (name, partitions) in added.items():
            grown[topic_id] = (name, grown.get(topic_id, (name, frozenset()))[1] | partitions)
        return self._record_partitions(group_id, grown)

    def remove_share_partitions(self, group_id: str, topic_ids: Iterable[UUID]) -> ErrorCode:
        """Forget the topics' share partitions (DeleteShareGroupOffsets), written before their
        state is deleted."""
        removed = set(topic_ids)
        remaining = {topic_id: value for topic_id, value in self.initialized.get(group_id, {}).items()
                     if topic_id not in removed}
        return self._record_partitions(group_id, remaining)

    def _record_partitions(self, group_id: str, initialized: dict[UUID, tuple[str, frozenset[int]]]) -> ErrorCode:
        group = self.groups.get(group_id) or ShareGroup(group_id)
        if self.store is not None and initialized != self.initialized.get(group_id):
            try:
                self.store.store_share_group(group_id, group.group_epoch, initialized)
            except KafkaError as e:
                return ErrorCode(coordinator_error_code(e))
        self.groups[group_id] = group
        self.initialized[group_id] = initialized
        return ErrorCode.NONE

    # ---- loading -------------------------------------------------------------------------------

    def restore(self, groups: Mapping[str, ShareGroupRecord], *, arm_timers: bool = True) -> None:
        """A loaded partition's share groups: Empty, at their last epoch."""
        del arm_timers  # restored groups have no members, so no deadline
        for group_id, record in groups.items():
            group = ShareGroup(group_id)
            group.group_epoch = group.assignment_epoch = record.epoch
            self.groups[group_id] = group
            self.initialized[group_id] = dict(record.initialized)

    def unload(self, partition: int) -> list[str]:
        unloaded = [group_id for group_id in self.groups if self._partition_for(group_id) == partition]
        for group_id in unloaded:
            del self.groups[group_id]
            self.initialized.pop(group_id, None)
            self._cancel_timer(group_id)
        return unloaded

    # ---- timers --------------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return self._clock.monotonic_ms()

    def _arm(self, group: ShareGroup) -> None:
        deadline = group.next_deadline_ms()
        armed = self._timers.get(group.group_id)
        if deadline is None:
            self._cancel_timer(group.group_id)
            return
        if armed is not None and armed[0] <= deadline:
            return  # fires early, finds nothing due and re-arms
        if armed is not None:
            armed[1].cancel()
        delay_seconds = max(deadline - self._now_ms(), 0) / 1000
        group_id = group.group_id
        self._timers[group_id] = (deadline, self._call_later(delay_seconds, lambda: self._on_timer(group_id)))

    def _on_timer(self, group_id: str) -> None:
        self._timers.pop(group_id, None)
        group = self.groups.get(group_id)
        if group is None:
            return
        previous_epoch = group.group_epoch
        expired = group.expire(self._now_ms())
        if expired:
            logger.info("share group %s: session of %s expired", group_id,
                        ", ".join(member.member_id for member in expired))
            self._persist(group, previous_epoch)
            self._removed(group_id, tuple(member.member_id for member in expired))
        self._arm(group)

    def _removed(self, group_id: str, member_ids: tuple[str, ...]) -> None:
        for hook in self.on_members_removed:
            try:
                hook(group_id, member_ids)
            except Exception:
                logger.exception("share group %s: a members-removed hook failed", group_id)

    def _cancel_timer(self, group_id: str) -> None:
        armed = self._timers.pop(group_id, None)
        if armed is not None:
            armed[1].cancel()

    def group_ids(self) -> Iterable[str]:
        return self.groups.keys()


def _copy(group: ShareGroup) -> ShareGroup:
    """A copy that later heartbeats do not change (the dicts are copied; their values are
    frozen or replaced, never changed in place)."""
    clone = copy.copy(group)
    clone.members = dict(group.members)
    clone.target_assignment = dict(group.target_assignment)
    clone.subscription_metadata = dict(group.subscription_metadata)
    clone._session_deadline_ms = dict(group._session_deadline_ms)  # the session deadlines too
    return clone


def _grow(known: Mapping[UUID, tuple[str, frozenset[int]]], group: ShareGroup) -> dict[UUID, tuple[str, frozenset[int]]]:
    """``known`` plus every partition of the topics the group subscribes to now."""
    grown = dict(known)
    for name, metadata in group.subscription_metadata.items():
        _, partitions = grown.get(metadata.topic_id, (name, frozenset()))
        grown[metadata.topic_id] = (name, partitions | frozenset(range(metadata.partition_count)))
    return grown
