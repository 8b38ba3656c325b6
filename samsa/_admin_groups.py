"""Admin operations on consumer groups and their committed offsets (a mixin of
``AsyncAdminClient``).

Routing, as Kafka's admin client: ListGroups goes to every broker (the answers merged);
DescribeGroups, DeleteGroups, OffsetFetch, OffsetCommit and OffsetDelete go to the group's
coordinator (FindCoordinator, cached), retried after NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE (the coordinator is looked up again) and
COORDINATOR_LOAD_IN_PROGRESS.

Offsets are altered as Kafka's ``alterConsumerGroupOffsets`` does: an OffsetCommit with
generation -1 and no member id, which a coordinator accepts only while the group has no
members. Members' assignments are decoded with Kafka's ConsumerProtocolAssignment schema
(the "consumer" protocol type); other protocol types get an empty assignment.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping

from protocol.codec import DecodeError
from protocol.errors import ErrorCode, UnsupportedVersionError
from protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from protocol.messages.delete_groups_request import DeleteGroupsRequest
from protocol.messages.delete_groups_response import DeleteGroupsResponse
from protocol.messages.describe_groups_request import DescribeGroupsRequest
from protocol.messages.describe_groups_response import DescribedGroup, DescribeGroupsResponse
from protocol.messages.list_groups_request import ListGroupsRequest
from protocol.messages.list_groups_response import ListGroupsResponse
from protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_commit_response import OffsetCommitResponse
from protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from protocol.messages.offset_delete_response import OffsetDeleteResponse
from protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from protocol.messages.offset_fetch_response import OffsetFetchResponse
from samsa._admin_base import (
    COORDINATOR_RETRIES,
    AdminCore,
    Failure,
    failure,
    item_result,
    partition_label,
    raise_failures,
)
from samsa._admin_types import GroupDescription, GroupListing, MemberDescription
from samsa.types import OffsetAndMetadata, TopicPartition

__all__ = ["GroupAdmin", "decode_assignment"]

BATCHED_OFFSET_FETCH_VERSION = 8
CONSUMER_PROTOCOL_TYPE = "consumer"
# Errors OffsetCommit/OffsetDelete give every partition when the group itself is the problem.
GROUP_LEVEL_ERRORS = frozenset({
    ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.NON_EMPTY_GROUP,
    ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.FENCED_INSTANCE_ID})


def group_label(group_id: str) -> str:
    return f"group {group_id!r}"


def decode_assignment(data: bytes) -> frozenset[TopicPartition]:
    """The partitions in a "consumer" protocol assignment (int16 version + the schema);
    empty when there are none or the bytes are not one."""
    if len(data) < 2:
        return frozenset()
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        return frozenset()
    version = min(version, ConsumerProtocolAssignment.MAX_VERSION)  # newer ones only add fields
    try:
        assignment, _ = ConsumerProtocolAssignment.decode_from(memoryview(data), 2, version)
    except (DecodeError, UnsupportedVersionError):
        return frozenset()
    return frozenset(TopicPartition(topic.topic, partition)
                     for topic in assignment.assigned_partitions
                     for partition in topic.partitions)


def _description(group: DescribedGroup) -> GroupDescription:
    consumer = group.protocol_type == CONSUMER_PROTOCOL_TYPE
    members = tuple(
        MemberDescription(member.member_id, member.group_instance_id, member.client_id,
                          member.client_host,
                          decode_assignment(member.member_assignment) if consumer else frozenset())
        for member in group.members)
    return GroupDescription(group.group_id, group.group_state, group.protocol_type,
                            group.protocol_data, members)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        topics[tp.topic].append(tp.partition)
    return topics


class GroupAdmin(AdminCore):
    """Consumer groups and committed offsets."""

    async def list_groups(self) -> list[GroupListing]:
        """Every group of every broker, sorted by id (state by Kafka's names)."""
        await self._bootstrap()

        async def list_all() -> list[GroupListing]:
            await self.cluster.refresh_metadata([])
            replies: list[ListGroupsResponse] = await asyncio.gather(*(
                self._request(node_id, lambda _: ListGroupsRequest(), ListGroupsRequest)
                for node_id in sorted(self.cluster.brokers)))
            listings: dict[str, GroupListing] = {}
            for reply in replies:
                if reply.error_code:
                    raise failure("ListGroups", reply.error_code).error
                for group in reply.groups:
                    listings[group.group_id] = GroupListing(
                        group.group_id, group.protocol_type, group.group_state)
            return [listings[group_id] for group_id in sorted(listings)]

        return await self.cluster.retrying(list_all, what="ListGroups")

    async def describe_groups(self, group_ids: str | Iterable[str]
                              ) -> dict[str, GroupDescription]:
        """State, protocol and members (with their assignments) of each group; a group that
        does not exist is described with state "Dead" and no members."""
        await self._bootstrap()
        wanted = [group_ids] if isinstance(group_ids, str) else list(dict.fromkeys(group_ids))

        async def send(node_id: int, batch: list[str]) -> dict[str, object]:
            response: DescribeGroupsResponse = await self._request(
                node_id, lambda _: DescribeGroupsRequest(groups=batch), DescribeGroupsRequest)
            return {g.group_id: item_result(g.error_code, None, _description(g))
                    for g in response.groups}

        results, failures = await self._routed(
            wanted, self.cluster.coordinator, send, label=group_label,
            retry_codes=COORDINATOR_RETRIES, what="DescribeGroups")
        raise_failures(failures)
        return {group_id: results[group_id] for group_id in wanted}

    async def delete_groups(self, group_ids: str | Iterable[str]) -> None:
        """Delete empty groups and their committed offsets."""
        await self._bootstrap()
        wanted = [group_ids] if isinstance(group_ids, str) else list(dict.fromkeys(group_ids))

        async def send(node_id: int, batch: list[str]) -> dict[str, object]:
            response: DeleteGroupsResponse = await self._request(
                node_id, lambda _: DeleteGroupsRequest(groups_names=batch), DeleteGroupsRequest)
            return {r.group_id: item_result(r.error_code) for r in response.results}

        _, failures = await self._routed(
            wanted, self.cluster.coordinator, send, label=group_label,
            retry_codes=COORDINATOR_RETRIES, what="DeleteGroups")
        raise_failures(failures)

    async def list_group_offsets(self, group_id: str,
                                 partitions: Iterable[TopicPartition] | None = None
                                 ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of ``partitions``, or all it has); partitions
        without a committed offset are left out."""
        await self._bootstrap()
        wanted = None if partitions is None else _by_topic(partitions)

        def build(version: int) -> OffsetFetchRequest:
            if version >= BATCHED_OFFSET_FETCH_VERSION:
                topics = None if wanted is None else [
                    OffsetFetchRequestTopics(name=t, partition_indexes=p) for t, p in wanted.items()]
                return OffsetFetchRequest(groups=[
                    OffsetFetchRequestGroup(group_id=group_id, topics=topics)])
            return OffsetFetchRequest(group_id=group_id, topics=None if wanted is None else [
                OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in wanted.items()])

        partition_failures: list[Failure] = []

        async def send(node_id: int, _: list[str]) -> dict[str, object]:
            response: OffsetFetchResponse = await self._request(node_id, build, OffsetFetchRequest)
            group = response.groups[0] if response.groups else response
            offsets: dict[TopicPartition, OffsetAndMetadata] = {}
            partition_failures.clear()
            for topic in group.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition_index)
                    if p.error_code:
                        partition_failures.append(failure(partition_label(tp), p.error_code))
                    elif p.committed_offset >= 0:
                        offsets[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                        p.committed_leader_epoch)
            return {group_id: item_result(group.error_code, None, offsets)}

        results, failures = await self._routed(
            [group_id], self.cluster.coordinator, send, label=group_label,
            retry_codes=COORDINATOR_RETRIES, what="OffsetFetch")
        raise_failures(failures + partition_failures)
        return dict(sorted(results[group_id].items()))

    async def alter_group_offsets(self, group_id: str,
                                  offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
                                  ) -> None:
        """Commit ``offsets`` for the group (it must have no members, as in Kafka)."""
        await self._bootstrap()
        committed = {tp: value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
                     for tp, value in offsets.items()}

        def build(batch: list[TopicPartition]) -> OffsetCommitRequest:
            return OffsetCommitRequest(
                group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                topics=[OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequestPartition(
                        partition_index=i, committed_offset=committed[TopicPartition(topic, i)].offset,
                        committed_leader_epoch=committed[TopicPartition(topic, i)].leader_epoch,
                        committed_metadata=committed[TopicPartition(topic, i)].metadata)
                    for i in indexes]) for topic, indexes in _by_topic(batch).items()])

        async def send(node_id: int, batch: list[TopicPartition]) -> dict[TopicPartition, object]:
            response: OffsetCommitResponse = await self._request(
                node_id, lambda _: build(batch), OffsetCommitRequest)
            return {TopicPartition(t.name, p.partition_index): item_result(p.error_code)
                    for t in response.topics for p in t.partitions}

        _, failures = await self._routed(
            committed, lambda _: self.cluster.coordinator(group_id), send,
            label=partition_label, retry_codes=COORDINATOR_RETRIES, what="OffsetCommit")
        failures = _group_level(group_id, failures)
        if failures and failures[0].error.code == ErrorCode.UNKNOWN_MEMBER_ID:
            # What a generation -1 commit to a group with members gets: say so plainly.
            failures[0] = failure(failures[0].label, ErrorCode.UNKNOWN_MEMBER_ID,
                                  "the group has members: its offsets can be altered only "
                                  "while it is empty (stop its consumers first)")
        raise_failures(failures)

    async def delete_group_offsets(self, group_id: str,
                                   partitions: Iterable[TopicPartition]) -> None:
        """Delete the group's committed offsets of ``partitions`` (Kafka: only for topics the
        group is not subscribed to, or when it has no members)."""
        await self._bootstrap()
        wanted = list(dict.fromkeys(partitions))

        def build(batch: list[TopicPartition]) -> OffsetDeleteRequest:
            return OffsetDeleteRequest(group_id=group_id, topics=[
                OffsetDeleteRequestTopic(name=topic, partitions=[
                    OffsetDeleteRequestPartition(partition_index=i) for i in indexes])
                for topic, indexes in _by_topic(batch).items()])

        async def send(node_id: int, batch: list[TopicPartition]) -> dict[TopicPartition, object]:
            response: OffsetDeleteResponse = await self._request(
                node_id, lambda _: build(batch), OffsetDeleteRequest)
            if response.error_code:
                return dict.fromkeys(batch, item_result(response.error_code))
            return {TopicPartition(t.name, p.partition_index): item_result(p.error_code)
                    for t in response.topics for p in t.partitions}

        _, failures = await self._routed(
            wanted, lambda _: self.cluster.coordinator(group_id), send,
            label=partition_label, retry_codes=COORDINATOR_RETRIES, what="OffsetDelete")
        raise_failures(_group_level(group_id, failures))


def _group_level(group_id: str, failures: list[Failure]) -> list[Failure]:
    """A group-level error repeated on every partition, reported once for the group."""
    grouped = [f for f in failures if f.error.code in GROUP_LEVEL_ERRORS]
    if grouped and len(grouped) == len(failures):
        first = grouped[0].error
        return [Failure(group_label(group_id), first)]
    return failures
