"""GroupMetadata records: a classic group's membership in ``__consumer_offsets``, byte for byte
what Kafka's ``GroupCoordinatorRecordHelpers.newGroupMetadataRecord`` writes, and the group
rebuilt from one at load (Kafka's ``GroupMetadataManager.replay(GroupMetadataKey, ...)``).

    key    int16 2 (GroupMetadataKey version, also the record type) | GroupMetadataKey v2
           {group: string}
    value  int16 3 (``MetadataVersion.groupMetadataValueVersion``: the highest non-flexible
           version) | GroupMetadataValue v3 {protocol_type: string, generation: int32,
           protocol: nullable string, leader: nullable string, current_state_timestamp: int64,
           members: [member_id, group_instance_id, client_id, client_host, rebalance_timeout,
           session_timeout, subscription: bytes, assignment: bytes]}
    null value: a tombstone (the group was deleted)

A value with members is a Stable group (written when the leader's SyncGroup completed a
rebalance); one without is an Empty group (written when the last member left or expired).
A member's subscription is its metadata for the group's selected protocol, its only protocol
once loaded. Loaded members' sessions start at load time, as in Kafka. The current state
timestamp (wall clock: when the group last changed state; -1 unknown) comes back as the
group's ``current_state_timestamp_ms``; the offsets of an Empty group expire from it.
"""

from __future__ import annotations

import struct

from broker.group.classic import ClassicGroup
from broker.group.member import ClassicGroupMember
from broker.group.values import GroupConfig, Protocol
from protocol.messages.group_coordinator.group_metadata_key import GroupMetadataKey
from protocol.messages.group_coordinator.group_metadata_value import (
    GroupMetadataValue,
    MemberMetadata,
)

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "decode_group_metadata_record",
    "group_metadata_key",
    "group_metadata_value",
    "restore_group",
]

GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
_VERSION = struct.Struct(">h")


def group_metadata_key(group_id: str) -> bytes:
    key = GroupMetadataKey(group=group_id)
    return _VERSION.pack(GROUP_METADATA_KEY_VERSION) + key.encode(GROUP_METADATA_KEY_VERSION)


def group_metadata_value(group: ClassicGroup, *, current_state_timestamp_ms: int | None = None) -> bytes:
    """The group's record value; every member needs an assignment (the group is Stable) or
    there are none (Empty). The timestamp is the group's own unless given; -1 when unknown
    (Kafka's ``currentStateTimestampOrDefault``)."""
    protocol = group.protocol_name
    members = [_member_metadata(member, protocol) for member in group.members.values()]
    if current_state_timestamp_ms is None:
        current_state_timestamp_ms = group.current_state_timestamp_ms
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=protocol,
        leader=group.leader_id,
        current_state_timestamp=-1 if current_state_timestamp_ms is None else current_state_timestamp_ms,
        members=members,
    )
    return _VERSION.pack(GROUP_METADATA_VALUE_VERSION) + value.encode(GROUP_METADATA_VALUE_VERSION)


def _member_metadata(member: ClassicGroupMember, protocol: str | None) -> MemberMetadata:
    if protocol is None or member.assignment is None:
        raise ValueError(f"member {member.member_id}: no protocol or no assignment to store")
    return MemberMetadata(
        member_id=member.member_id,
        group_instance_id=member.group_instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout=member.rebalance_timeout_ms,
        session_timeout=member.session_timeout_ms,
        subscription=member.metadata(protocol),
        assignment=member.assignment,
    )


def decode_group_metadata_record(
    key: bytes, value: bytes | None
) -> tuple[str, GroupMetadataValue | None] | None:
    """(group id, value; None for a tombstone), or None for other record types."""
    if _VERSION.unpack_from(key)[0] != GROUP_METADATA_KEY_VERSION:
        return None
    group_id = GroupMetadataKey.decode(memoryview(key)[2:], GROUP_METADATA_KEY_VERSION).group
    if value is None:
        return group_id, None
    version = _VERSION.unpack_from(value)[0]
    return group_id, GroupMetadataValue.decode(memoryview(value)[2:], version)


def restore_group(
    group_id: str, value: GroupMetadataValue, *, config: GroupConfig, now_ms: int
) -> ClassicGroup:
    protocol = value.protocol or ""
    members = [
        ClassicGroupMember(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            protocol_type=value.protocol_type,
            protocols=(Protocol(protocol, member.subscription),),
            session_timeout_ms=member.session_timeout,
            # Values before v1 have no rebalance timeout (-1): Kafka uses the session timeout.
            rebalance_timeout_ms=(member.session_timeout if member.rebalance_timeout == -1
                                  else member.rebalance_timeout),
            session_deadline_ms=now_ms + member.session_timeout,
            assignment=member.assignment,
        )
        for member in value.members
    ]
    return ClassicGroup.restore(
        group_id, config=config, generation_id=value.generation,
        protocol_type=value.protocol_type or None, protocol_name=value.protocol,
        leader_id=value.leader, members=members,
        current_state_timestamp_ms=None if value.current_state_timestamp < 0 else value.current_state_timestamp,
    )
