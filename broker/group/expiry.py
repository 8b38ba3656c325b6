"""Offset expiry and the deletion of expired groups (KIP-211; Kafka's
GroupCoordinatorShard.cleanupGroupMetadata, OffsetMetadataManager.cleanupExpiredOffsets and
ClassicGroup.offsetExpirationCondition), run every ``offsets.retention.check.interval.ms``.

For each group this node serves (groups whose ``__consumer_offsets`` partition is loading or
failed to load are skipped), which offsets may expire, with ``R`` = ``offsets.retention.minutes``:

    group                                        its offsets expire
    protocol type set (group management), Empty  R after the group became Empty (its current
                                                 state timestamp, kept in its GroupMetadata
                                                 record); R after the commit if unknown
    "consumer" protocol, Stable, subscription    offsets of topics no member subscribes to
    known (KIP-496)                              (only): R after their commit
    protocol type set, with members otherwise    never
    no protocol type (standalone consumer,       R after each offset's commit
    manual assignment, the admin client)

An offset committed with a retention time (OffsetCommit v2-v4) expires at its expire timestamp
instead, under the same conditions. Expired offsets get tombstones. When a group's last
offset expires and the group is Empty (also when it has no offsets at all), the group is
deleted: its offset tombstones and a tombstone for its GroupMetadata record go in one batch,
and the coordinator forgets it (DescribeGroups then answers Dead), as Kafka's
``maybeDeleteGroup``.

Runs on the event loop, which owns the store and the coordinator; its appends are short,
like a commit's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.group.subscriptions import is_subscribed_to_topic, uses_consumer_protocol
from broker.group.values import GroupState
from protocol.errors import KafkaError

if TYPE_CHECKING:
    from broker.group.classic import ClassicGroup
    from broker.group.coordinator import GroupCoordinator
    from broker.group.offsets import OffsetAndMetadata, OffsetStore

__all__ = ["CleanupResult", "cleanup_group_metadata", "expiration_base", "is_offset_expired"]

logger = logging.getLogger("samsa.broker.group.expiry")

ExpirationBase = Callable[["OffsetAndMetadata"], int]


@dataclass(frozen=True, slots=True)
class CleanupResult:
    expired_offsets: int = 0
    deleted_groups: tuple[str, ...] = ()


def expiration_base(group: ClassicGroup | None) -> ExpirationBase | None:
    """Kafka's ``offsetExpirationCondition``: what each offset's retention counts from, or
    None when the group's offsets may not expire now."""
    if group is None or group.protocol_type is None:
        return _commit_timestamp
    if group.state is GroupState.STABLE and uses_consumer_protocol(group) and group.subscribed_topics is not None:
        return _commit_timestamp  # for the topics it does not subscribe to (``_cleanup_group``)
    if group.state is not GroupState.EMPTY:
        return None
    became_empty_ms = group.current_state_timestamp_ms
    if became_empty_ms is None:
        return _commit_timestamp
    return lambda offset: became_empty_ms


def _commit_timestamp(offset: OffsetAndMetadata) -> int:
    return offset.commit_timestamp_ms


def is_offset_expired(offset: OffsetAndMetadata, base_ms: int, now_ms: int, retention_ms: int) -> bool:
    """Kafka's ``OffsetExpirationConditionImpl.isOffsetExpired``."""
    if offset.expire_timestamp_ms is not None:
        return now_ms >= offset.expire_timestamp_ms
    return now_ms - base_ms >= retention_ms


def cleanup_group_metadata(store: OffsetStore, coordinator: GroupCoordinator | None, now_ms: int) -> CleanupResult:
    """Expire offsets and delete the groups left empty (see the module docstring)."""
    expired, deleted = 0, []
    group_ids = set(store.groups()) | set(coordinator.groups if coordinator is not None else ())
    for group_id in sorted(group_ids):
        if coordinator is not None and coordinator.partition_error(group_id) is not None:
            continue
        group = coordinator.get_group(group_id) if coordinator is not None else None
        try:
            count, delete = _cleanup_group(store, group_id, group, now_ms)
        except KafkaError as error:
            logger.warning("expiring offsets of group %s failed: %s", group_id, error)
            continue
        expired += count
        if delete:
            if coordinator is not None:
                coordinator.delete(group_id)
            deleted.append(group_id)
    if expired or deleted:
        logger.info("expired %d offset(s); deleted %d group(s) %s", expired, len(deleted), deleted)
    return CleanupResult(expired, tuple(deleted))


def _cleanup_group(
    store: OffsetStore, group_id: str, group: ClassicGroup | None, now_ms: int
) -> tuple[int, bool]:
    """Write the group's tombstones; (offsets expired, whether the group is deleted)."""
    base = expiration_base(group)
    if base is None:
        return 0, False
    offsets = store.group_offsets(group_id)
    retention_ms = store.config.retention_ms
    expired = [tp for tp, offset in offsets.items()
               if not (group is not None and is_subscribed_to_topic(group, tp[0]))
               and is_offset_expired(offset, base(offset), now_ms, retention_ms)]
    empty = group is None or group.state is GroupState.EMPTY
    if len(expired) == len(offsets) and empty:
        store.delete_group(group_id)  # the expired offsets' tombstones and the group's, one batch
        return len(expired), True
    store.delete_offsets(group_id, expired)
    return len(expired), False
