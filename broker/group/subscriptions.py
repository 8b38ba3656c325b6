"""The topics a classic group of the "consumer" protocol type is subscribed to (KIP-496),
read from its members' metadata, as Kafka's ``ClassicGroup.computeSubscribedTopics`` and
``isSubscribedToTopic``. Used by OffsetDelete (a live group refuses to drop the offsets of a
topic it consumes: GROUP_SUBSCRIBED_TO_TOPIC) and by offset expiry (a Stable group's offsets
of topics nobody subscribes to expire from their commit).

Each member's metadata for the selected protocol is a ConsumerProtocolSubscription: int16
version, then at least v0's ``topics: [string]`` and ``user_data: nullable bytes`` (every later
version extends v0, so v0 is read as a prefix whatever the version). Metadata that is not
well-formed makes the subscription unknown.

The group computes its subscription when a join phase ends and when it is loaded
(``ClassicGroup.subscribed_topics``); pure functions here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING

from protocol.codec import DecodeError
from protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription

if TYPE_CHECKING:
    from broker.group.classic import ClassicGroup
    from broker.group.member import ClassicGroupMember

__all__ = ["CONSUMER_PROTOCOL_TYPE", "compute_subscribed_topics", "is_subscribed_to_topic",
           "uses_consumer_protocol"]

CONSUMER_PROTOCOL_TYPE = "consumer"
_VERSION = struct.Struct(">h")


def compute_subscribed_topics(
    protocol_type: str | None, protocol_name: str | None, members: Iterable[ClassicGroupMember]
) -> frozenset[str] | None:
    """Every topic some member subscribes to; None when unknown (not the consumer protocol,
    no protocol selected yet, or metadata that does not parse). No members: no topics."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    members = list(members)
    if not members:
        return frozenset()
    if protocol_name is None:
        return None
    topics: set[str] = set()
    for member in members:
        metadata = memoryview(member.metadata(protocol_name))
        if len(metadata) < _VERSION.size:
            return None
        try:
            subscription, _ = ConsumerProtocolSubscription.decode_from(metadata, _VERSION.size, 0)
        except DecodeError:
            return None
        topics.update(subscription.topics)
    return frozenset(topics)


def uses_consumer_protocol(group: ClassicGroup) -> bool:
    return group.protocol_type == CONSUMER_PROTOCOL_TYPE


def is_subscribed_to_topic(group: ClassicGroup, topic: str) -> bool:
    """When the subscription is unknown, a consumer-protocol group counts as subscribed."""
    if group.subscribed_topics is None:
        return uses_consumer_protocol(group)
    return topic in group.subscribed_topics
