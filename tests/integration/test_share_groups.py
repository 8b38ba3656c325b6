"""Share groups on a real broker, driven by raw ShareGroupHeartbeat / ShareGroupDescribe /
ListGroups / DeleteGroups requests (KIP-932; Kafka's wire format, one request per
connection): two members split a topic's partitions and one leaving gives the other all of
them; a member that stops heartbeating is expired after ``group.share.session.timeout.ms``
(set to 1.5 s here); the group is listed and described; a non-empty group cannot be deleted,
an empty one can; an Empty group's share-partition start offsets are described and deleted
(DeleteShareGroupOffsets), and reset (AlterShareGroupOffsets, which creates the group), refused
while the group has members (the state lives in the broker's ``share_persister``); and groups
survive a broker restart (its epoch, Empty, its members
rejoining with epoch 0 after UNKNOWN_MEMBER_ID), as Kafka's client does after a coordinator
move; a group's own ``share.heartbeat.interval.ms`` applies from its next heartbeat."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from protocol.errors import ErrorCode
from protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from protocol.messages.alter_share_group_offsets_response import AlterShareGroupOffsetsResponse
from protocol.messages.delete_groups_request import DeleteGroupsRequest
from protocol.messages.delete_groups_response import DeleteGroupsResponse
from protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from protocol.messages.delete_share_group_offsets_response import DeleteShareGroupOffsetsResponse
from protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
)
from protocol.messages.list_groups_request import ListGroupsRequest
from protocol.messages.list_groups_response import ListGroupsResponse
from protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from protocol.messages.share_group_describe_response import (
    DescribedGroup,
    ShareGroupDescribeResponse,
)
from protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from tests.integration.test_describe_log_segments import call

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TOPIC = "work"
PARTITIONS = 4
SESSION_MS = 1500
TIMEOUT_SECONDS = 20.0
RETRIABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
             ErrorCode.COORDINATOR_NOT_AVAILABLE)


def heartbeat(broker: Any, group_id: str, member_id: str, epoch: int, topics: list[str] | None = None,
              *, retry: bool = True) -> ShareGroupHeartbeatResponse:
    """One heartbeat; retried while the coordinator is loading or creating its partition."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        request = ShareGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=epoch,
                                             subscribed_topic_names=topics)
        response = call(broker, request, ShareGroupHeartbeatResponse, 1)
        if not retry or response.error_code not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def assigned(response: ShareGroupHeartbeatResponse, topic_id: uuid.UUID) -> set[int]:
    assert response.error_code == 0, response
    assert response.assignment is not None, response
    return {p for tp in response.assignment.topic_partitions if tp.topic_id == topic_id for p in tp.partitions}


def describe(broker: Any, group_id: str) -> DescribedGroup:
    response = call(broker, ShareGroupDescribeRequest(group_ids=[group_id]), ShareGroupDescribeResponse, 1)
    (group,) = response.groups
    return group


def listed(broker: Any, types: list[str]) -> dict[str, tuple[str, str, str]]:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        response = call(broker, ListGroupsRequest(types_filter=types), ListGroupsResponse, 5)
        if response.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert response.error_code == 0
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in response.groups}


def delete(broker: Any, group_id: str) -> int:
    response = call(broker, DeleteGroupsRequest(groups_names=[group_id]), DeleteGroupsResponse, 2)
    (result,) = response.results
    return int(result.error_code)


def alter(broker: Any, group_id: str, offsets: dict[str, dict[int, int]]) -> AlterShareGroupOffsetsResponse:
    request = AlterShareGroupOffsetsRequest(group_id=group_id, topics=[
        AlterShareGroupOffsetsRequestTopic(topic_name=name, partitions=[
            AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in by.items()])
        for name, by in offsets.items()])
    return call(broker, request, AlterShareGroupOffsetsResponse, 0)


def start_offsets(broker: Any, group_id: str) -> dict[int, int]:
    """DescribeShareGroupOffsets v1 of every share partition the group has (topics null)."""
    request = DescribeShareGroupOffsetsRequest(groups=[DescribeShareGroupOffsetsRequestGroup(group_id=group_id,
                                                                                            topics=None)])
    (group,) = call(broker, request, DescribeShareGroupOffsetsResponse, 1).groups
    assert group.error_code == 0, group
    return {p.partition_index: p.start_offset for t in group.topics if t.topic_name == TOPIC for p in t.partitions}


def delete_offsets(broker: Any, group_id: str, topics: list[str]) -> DeleteShareGroupOffsetsResponse:
    request = DeleteShareGroupOffsetsRequest(group_id=group_id, topics=[
        DeleteShareGroupOffsetsRequestTopic(topic_name=name) for name in topics])
    return call(broker, request, DeleteShareGroupOffsetsResponse, 0)


def create_topic(broker: Any) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(TIMEOUT_SECONDS)


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_members_split_leave_expire_list_describe_delete_and_survive_a_restart(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(group_share_session_timeout_ms=str(SESSION_MS),
                          group_share_heartbeat_interval_ms="500")
    create_topic(broker)

    a = heartbeat(broker, "queue", "member-a", 0, [TOPIC])
    assert a.assignment is not None and len(a.assignment.topic_partitions) == 1, a
    topic_id = a.assignment.topic_partitions[0].topic_id
    assert (a.member_epoch, a.heartbeat_interval_ms, assigned(a, topic_id)) == (1, 500, set(range(PARTITIONS)))
    b = heartbeat(broker, "queue", "member-b", 0, [TOPIC])
    assert b.member_epoch == 2 and len(assigned(b, topic_id)) == 2
    a = heartbeat(broker, "queue", "member-a", 1)
    assert a.member_epoch == 2 and assigned(a, topic_id) == set(range(PARTITIONS)) - assigned(b, topic_id)

    group = describe(broker, "queue")
    assert (group.error_code, group.group_state, group.group_epoch, group.assignor_name) == (0, "Stable", 2, "simple")
    assert {m.member_id: m.assignment.topic_partitions[0].topic_name for m in group.members} == \
        {"member-a": TOPIC, "member-b": TOPIC}
    assert listed(broker, ["Share"]) == {"queue": ("share", "Stable", "share")}
    assert "queue" not in listed(broker, ["classic"])
    assert delete(broker, "queue") == ErrorCode.NON_EMPTY_GROUP
    assert alter(broker, "queue", {TOPIC: {0: 5}}).error_code == ErrorCode.NON_EMPTY_GROUP
    assert delete_offsets(broker, "queue", [TOPIC]).error_code == ErrorCode.NON_EMPTY_GROUP

    left = heartbeat(broker, "queue", "member-b", -1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    a = heartbeat(broker, "queue", "member-a", 2)
    assert (a.member_epoch, assigned(a, topic_id)) == (3, set(range(PARTITIONS)))

    # member-a stops heartbeating: the group's timer expires it
    wait_for(lambda: describe(broker, "queue").group_state == "Empty", "the session to expire")
    assert describe(broker, "queue").group_epoch == 4
    assert heartbeat(broker, "queue", "member-a", 3).error_code == ErrorCode.UNKNOWN_MEMBER_ID

    # the offsets admin APIs on the Empty group: no state yet (nothing fetched)
    assert start_offsets(broker, "queue") == dict.fromkeys(range(PARTITIONS), -1)
    deleted = delete_offsets(broker, "queue", [TOPIC, "missing"])
    assert {t.topic_name: t.error_code for t in deleted.responses} == \
        {TOPIC: 0, "missing": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert start_offsets(broker, "queue") == {}  # the group forgot the topic
    assert delete_offsets(broker, "queue", [TOPIC]).responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert delete(broker, "queue") == ErrorCode.NONE
    gone = describe(broker, "queue")
    assert (gone.error_code, gone.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group queue not found.")
    assert "queue" not in listed(broker, [])

    # a reset creates the (Empty) group and the share partition's state at the new start offset
    altered = alter(broker, "reset", {TOPIC: {0: 5, 9: 1}, "missing": {0: 1}})
    assert altered.error_code == 0
    assert {(t.topic_name, p.partition_index): p.error_code for t in altered.responses for p in t.partitions} == \
        {(TOPIC, 0): 0, (TOPIC, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
         ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert start_offsets(broker, "reset") == {0: 5}
    assert listed(broker, ["share"])["reset"] == ("share", "Empty", "share")

    c = heartbeat(broker, "survivor", "member-c", 0, [TOPIC])
    assert c.member_epoch == 1
    broker.restart()
    assert listed(broker, ["share"]) == {"survivor": ("share", "Empty", "share"),
                                         "reset": ("share", "Empty", "share")}
    assert describe(broker, "survivor").group_epoch == 1
    stale = heartbeat(broker, "survivor", "member-c", 1)
    assert stale.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # the group's own config (IncrementalAlterConfigs on the GROUP resource) wins from the next heartbeat
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    group = ConfigResource(ResourceType.GROUP, "survivor")
    group.add_incremental_config(ConfigEntry("share.heartbeat.interval.ms", "6000",
                                             incremental_operation=AlterConfigOpType.SET))
    admin.incremental_alter_configs([group])[group].result(TIMEOUT_SECONDS)
    c = heartbeat(broker, "survivor", "member-c", 0, [TOPIC])
    assert (c.member_epoch, c.heartbeat_interval_ms, assigned(c, topic_id)) == (2, 6000, set(range(PARTITIONS)))
