"""A share group's records in ``__consumer_offsets``: byte for byte what Kafka's
``GroupCoordinatorRecordHelpers`` writes for the two a share group needs to survive a restart
or a coordinator move, and the state rebuilt from them at load.

    type 11  key    int16 11 | ShareGroupMetadataKey v0 {group_id: string}   (not flexible)
             value  int16 0 | ShareGroupMetadataValue v0 {epoch: int32, metadata_hash: int64}
                    (flexible: tagged fields at the end)
    type 15  key    int16 15 | ShareGroupStatePartitionMetadataKey v0 {group_id: string}
             value  int16 0 | ShareGroupStatePartitionMetadataValue v0 {initializing_topics: [],
                    initialized_topics: [topic_id, topic_name, partitions: [int32]],
                    deleting_topics: []}
    null value: a tombstone (the group was deleted)

Type 11 is written when the group epoch changes (Kafka's ``newShareGroupEpochRecord``); its
``metadata_hash`` is 0 (Samsa does not compute Kafka's topic hash: it refreshes the
subscription metadata at every heartbeat instead). Type 15 lists the share partitions the
group was ever assigned (``initialized_topics``), written when that set grows: those whose
state in ``__share_group_state`` DeleteGroups deletes and DescribeShareGroupOffsets lists
after a restart, when no member is left to say what the group subscribes to. Kafka writes it
once the share coordinator has initialized the partitions; Samsa's share-partition leader
initializes a partition's state on its first ShareFetch, so the set may name partitions with
no state yet, which the persister reads and deletes as absent.

Members, their assignments and the target assignment (Kafka's types 12-14) are not written:
after a restart the group is Empty at its last epoch, and a member's next heartbeat gets
UNKNOWN_MEMBER_ID, after which Kafka's client rejoins with epoch 0.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

from protocol.messages.group_coordinator.share_group_metadata_key import ShareGroupMetadataKey
from protocol.messages.group_coordinator.share_group_metadata_value import ShareGroupMetadataValue
from protocol.messages.group_coordinator.share_group_state_partition_metadata_key import (
    ShareGroupStatePartitionMetadataKey,
)
from protocol.messages.group_coordinator.share_group_state_partition_metadata_value import (
    ShareGroupStatePartitionMetadataValue,
    TopicPartitionsInfo,
)

__all__ = [
    "SHARE_GROUP_METADATA_TYPE",
    "SHARE_GROUP_STATE_PARTITION_METADATA_TYPE",
    "InitializedTopics",
    "ShareGroupRecord",
    "decode_share_group_record",
    "share_group_epoch_record",
    "share_group_partitions_record",
    "share_group_tombstones",
]

SHARE_GROUP_METADATA_TYPE = 11
SHARE_GROUP_STATE_PARTITION_METADATA_TYPE = 15
_VERSION = struct.Struct(">h")

# topic id -> (topic name, partitions)
InitializedTopics = Mapping[UUID, tuple[str, frozenset[int]]]


@dataclass(slots=True)
class ShareGroupRecord:
    """What a partition's log says of one share group, replayed in order."""

    epoch: int = 0
    initialized: dict[UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)


def _key(record_type: int, group_id: str) -> bytes:
    key_class = ShareGroupMetadataKey if record_type == SHARE_GROUP_METADATA_TYPE \
        else ShareGroupStatePartitionMetadataKey
    return _VERSION.pack(record_type) + key_class(group_id=group_id).encode(0)


def share_group_epoch_record(group_id: str, epoch: int) -> tuple[bytes, bytes]:
    value = ShareGroupMetadataValue(epoch=epoch, metadata_hash=0)
    return _key(SHARE_GROUP_METADATA_TYPE, group_id), _VERSION.pack(0) + value.encode(0)


def share_group_partitions_record(group_id: str, initialized: InitializedTopics) -> tuple[bytes, bytes]:
    value = ShareGroupStatePartitionMetadataValue(initialized_topics=[
        TopicPartitionsInfo(topic_id=topic_id, topic_name=name, partitions=sorted(partitions))
        for topic_id, (name, partitions) in sorted(initialized.items())
    ])
    return _key(SHARE_GROUP_STATE_PARTITION_METADATA_TYPE, group_id), _VERSION.pack(0) + value.encode(0)


def share_group_tombstones(group_id: str) -> list[tuple[bytes, None]]:
    """Kafka's ``ShareGroup.createGroupTombstoneRecords`` for the two records written here."""
    return [(_key(SHARE_GROUP_STATE_PARTITION_METADATA_TYPE, group_id), None),
            (_key(SHARE_GROUP_METADATA_TYPE, group_id), None)]


def decode_share_group_record(
    key: bytes, value: bytes | None, groups: dict[str, ShareGroupRecord]
) -> bool:
    """Replay one record into ``groups`` if it is a share group's type 11 or 15 (True);
    False for any other type. A type-11 tombstone removes the group."""
    record_type = _VERSION.unpack_from(key)[0]
    if record_type == SHARE_GROUP_METADATA_TYPE:
        group_id = ShareGroupMetadataKey.decode(memoryview(key)[2:], 0).group_id
        if value is None:
            groups.pop(group_id, None)
        else:
            decoded = ShareGroupMetadataValue.decode(memoryview(value)[2:], 0)
            groups.setdefault(group_id, ShareGroupRecord()).epoch = decoded.epoch
        return True
    if record_type == SHARE_GROUP_STATE_PARTITION_METADATA_TYPE:
        group_id = ShareGroupStatePartitionMetadataKey.decode(memoryview(key)[2:], 0).group_id
        if value is not None:
            partitions = ShareGroupStatePartitionMetadataValue.decode(memoryview(value)[2:], 0)
            groups.setdefault(group_id, ShareGroupRecord()).initialized = {
                topic.topic_id: (topic.topic_name, frozenset(topic.partitions))
                for topic in partitions.initialized_topics
            }
        elif group_id in groups:
            groups[group_id].initialized = {}
        return True
    return False
