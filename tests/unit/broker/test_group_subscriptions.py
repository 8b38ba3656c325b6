"""KIP-496: the topics a "consumer" group subscribes to, read from its members' metadata; a
live group refuses OffsetDelete only for those topics, and a Stable group's offsets of other
topics expire from their commit. A real broker on a temporary directory, a ``ManualClock``."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import RequestContext, offset_delete
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.group import ClassicGroup, GroupConfig, JoinRequest, Protocol, SyncRequest
from broker.group.expiry import cleanup_group_metadata
from broker.group.member import ClassicGroupMember
from broker.group.offsets import OffsetAndMetadata
from broker.group.subscriptions import compute_subscribed_topics, is_subscribed_to_topic
from protocol.errors import ErrorCode
from protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic

RETENTION_MS = 10 * 60_000


def subscription(*topics: str, version: int = 3) -> bytes:
    return struct.pack(">h", version) + ConsumerProtocolSubscription(topics=list(topics)).encode(version)


def member(member_id: str, metadata: bytes) -> ClassicGroupMember:
    return ClassicGroupMember(member_id=member_id, group_instance_id=None, client_id="c", client_host="/h",
                              protocol_type="consumer", protocols=(Protocol("range", metadata),),
                              session_timeout_ms=10_000, rebalance_timeout_ms=10_000, session_deadline_ms=0)


def test_the_union_of_the_members_topics_read_as_v0_whatever_the_version() -> None:
    members = [member("a", subscription("t", "u", version=0)), member("b", subscription("u", "v", version=3))]
    assert compute_subscribed_topics("consumer", "range", members) == {"t", "u", "v"}


@pytest.mark.parametrize(("protocol_type", "protocol_name", "metadata", "expected"), [
    ("connect", "range", subscription("t"), None),  # not the consumer protocol
    ("consumer", None, subscription("t"), None),  # no protocol selected yet
    ("consumer", "range", b"\x00", None),  # too short for a version
    ("consumer", "range", b"\x00\x00\x00\x00\x00\x05t", None),  # truncated
])
def test_an_unknown_subscription(protocol_type: str, protocol_name: str | None, metadata: bytes,
                                 expected: None) -> None:
    assert compute_subscribed_topics(protocol_type, protocol_name, [member("a", metadata)]) is expected


def test_no_members_subscribe_to_nothing_and_unknown_means_subscribed() -> None:
    assert compute_subscribed_topics("consumer", None, []) == frozenset()
    group = ClassicGroup("g")
    group.protocol_type = "consumer"
    assert is_subscribed_to_topic(group, "t")  # unknown: a consumer group counts as subscribed
    group.subscribed_topics = frozenset({"u"})
    assert not is_subscribed_to_topic(group, "t") and is_subscribed_to_topic(group, "u")
    group.protocol_type = None
    group.subscribed_topics = None
    assert not is_subscribed_to_topic(group, "t")


# ---- on a broker ----------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    properties = {"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "3", "offsets.retention.minutes": "10",
                  "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "0"}
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=ManualClock())
    broker.startup()
    broker.offsets_loader.load_all()
    for topic in ("t", "old"):
        create_topic(broker, topic)
    yield broker
    broker.shutdown()


def stable_group(broker: Broker, protocol_type: str = "consumer") -> None:
    """Group "g": one member subscribed to "t", Stable; offsets of "t" and "old" committed."""
    async def test() -> None:
        coordinator = broker.group_coordinator
        joined = coordinator.join("g", JoinRequest(
            member_id="", client_id="c", protocol_type=protocol_type, protocols=(Protocol("range", subscription("t")),),
            session_timeout_ms=10_000, rebalance_timeout_ms=10_000, require_known_member_id=False))
        assert isinstance(joined, asyncio.Future)
        member_id = (await joined).member_id
        coordinator.sync("g", SyncRequest(member_id, 1, ((member_id, b""),)))
    asyncio.run(test())
    now_ms = broker.clock.milliseconds()
    broker.offset_store.commit("g", {(topic, 0): OffsetAndMetadata(3, commit_timestamp_ms=now_ms)
                                     for topic in ("t", "old")})


def delete(broker: Broker, *topics: str) -> tuple[int, dict[str, int]]:
    request = OffsetDeleteRequest(group_id="g", topics=[
        OffsetDeleteRequestTopic(name=topic, partitions=[OffsetDeleteRequestPartition(partition_index=0)])
        for topic in topics])
    header = RequestHeader(request_api_key=47, request_api_version=0, correlation_id=1)
    response = offset_delete.handle(RequestContext(header, 0, broker, "test"), request)
    return response.error_code, {t.name: t.partitions[0].error_code for t in response.topics}  # type: ignore[union-attr]


def test_offset_delete_refuses_only_the_topics_a_live_consumer_group_subscribes_to(broker: Broker) -> None:
    stable_group(broker)
    assert broker.group_coordinator.groups["g"].subscribed_topics == {"t"}
    assert delete(broker, "t", "old") == (0, {"t": ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, "old": 0})
    assert list(broker.offset_store.group_offsets("g")) == [("t", 0)]


def test_offset_delete_refuses_a_live_group_of_another_protocol(broker: Broker) -> None:
    stable_group(broker, protocol_type="connect")
    assert delete(broker, "old") == (ErrorCode.NON_EMPTY_GROUP, {})


def test_a_stable_groups_unsubscribed_offsets_expire_from_their_commit(broker: Broker) -> None:
    stable_group(broker)
    clock = broker.clock
    assert isinstance(clock, ManualClock)
    clock.advance(RETENTION_MS)
    result = cleanup_group_metadata(broker.offset_store, broker.group_coordinator, clock.milliseconds())
    assert (result.expired_offsets, result.deleted_groups) == (1, ())
    assert list(broker.offset_store.group_offsets("g")) == [("t", 0)]  # subscribed: kept


def test_a_restored_group_knows_its_subscription() -> None:
    restored = ClassicGroup.restore("g", config=GroupConfig(), generation_id=1, protocol_type="consumer",
                                    protocol_name="range", leader_id="a", members=[member("a", subscription("t"))])
    assert restored.subscribed_topics == {"t"}
