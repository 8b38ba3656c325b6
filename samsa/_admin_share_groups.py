"""Admin operations on share groups (KIP-932) and their start offsets (a mixin of
``AsyncAdminClient``), as Kafka 4.3's admin client does them.

Routing: ListGroups (v5 with ``types_filter=["share"]``; older brokers: the listings whose
protocol type is "share") goes to every broker, the answers merged; ShareGroupDescribe v1,
DescribeShareGroupOffsets v0-v1, AlterShareGroupOffsets v0, DeleteShareGroupOffsets v0 and
DeleteGroups (``deleteShareGroups`` is DeleteGroups) go to the group's coordinator
(FindCoordinator, key type GROUP), retried after NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and
COORDINATOR_LOAD_IN_PROGRESS.

A share group's offsets are its share-partitions' *start offsets*: the first offset not yet
delivered-and-done (below it every record is acknowledged or archived). DescribeShareGroupOffsets
v1 also says the lag; a partition the group has not initialized yet has start offset -1 and is
left out. Altering and deleting start offsets needs the group to be empty (no members), as Kafka
checks (NON_EMPTY_GROUP otherwise).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping

from protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from protocol.messages.alter_share_group_offsets_response import AlterShareGroupOffsetsResponse
from protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from protocol.messages.delete_share_group_offsets_response import DeleteShareGroupOffsetsResponse
from protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
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
from samsa._admin_base import (
    COORDINATOR_RETRIES,
    Failure,
    failure,
    item_result,
    partition_label,
    raise_failures,
    topic_label,
)
from samsa._admin_groups import GroupAdmin, group_label
from samsa._admin_types import (
    GroupListing,
    ShareGroupDescription,
    ShareMemberDescription,
    SharePartitionOffset,
)
from samsa.share_partitions import SharePartitionState, describe_share_partitions
from samsa.types import TopicPartition

__all__ = ["SHARE_GROUP_TYPE", "ShareGroupAdmin"]

SHARE_GROUP_TYPE = "share"
TYPES_FILTER_VERSION = 5  # ListGroups v5 added types_filter (KIP-848)


def _description(group: DescribedGroup, coordinator_id: int) -> ShareGroupDescription:
    members = tuple(
        ShareMemberDescription(
            member_id=m.member_id, client_id=m.client_id, host=m.client_host,
            member_epoch=m.member_epoch, rack_id=m.rack_id,
            subscribed_topics=tuple(sorted(m.subscribed_topic_names)),
            assignment=frozenset(TopicPartition(t.topic_name, p)
                                 for t in m.assignment.topic_partitions for p in t.partitions))
        for m in group.members)
    return ShareGroupDescription(
        group_id=group.group_id, state=group.group_state, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=group.assignor_name,
        coordinator_id=coordinator_id, members=members)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        topics[tp.topic].append(tp.partition)
    return topics


class ShareGroupAdmin(GroupAdmin):
    """Share groups and their start offsets (see the module docstring)."""

    async def list_share_groups(self) -> list[GroupListing]:
        """Every share group of every broker (id, "share", state), sorted by id."""
        await self._bootstrap()

        def build(version: int) -> ListGroupsRequest:
            if version >= TYPES_FILTER_VERSION:
                return ListGroupsRequest(types_filter=[SHARE_GROUP_TYPE])
            return ListGroupsRequest()

        async def list_all() -> list[GroupListing]:
            await self.cluster.refresh_metadata([])
            replies: list[ListGroupsResponse] = await asyncio.gather(*(
                self._request(node_id, build, ListGroupsRequest)
                for node_id in sorted(self.cluster.brokers)))
            listings: dict[str, GroupListing] = {}
            for reply in replies:
                if reply.error_code:
                    raise failure("ListGroups", reply.error_code).error
                for group in reply.groups:
                    if SHARE_GROUP_TYPE not in (group.group_type, group.protocol_type):
                        continue
                    listings[group.group_id] = GroupListing(
                        group.group_id, group.protocol_type or SHARE_GROUP_TYPE, group.group_state)
            return [listings[group_id] for group_id in sorted(listings)]

        return await self.cluster.retrying(list_all, what="ListGroups")

    async def describe_share_groups(self, group_ids: str | Iterable[str]
                                    ) -> dict[str, ShareGroupDescription]:
        """State, epochs, assignor and members (client, host, epoch, subscription and
        assignment) of each share group; GROUP_ID_NOT_FOUND for one that does not exist or is
        not a share group."""
        await self._bootstrap()
        wanted = [group_ids] if isinstance(group_ids, str) else list(dict.fromkeys(group_ids))

        async def send(node_id: int, batch: list[str]) -> dict[str, object]:
            response: ShareGroupDescribeResponse = await self._request(
                node_id, lambda _: ShareGroupDescribeRequest(group_ids=batch),
                ShareGroupDescribeRequest)
            return {g.group_id: item_result(g.error_code, g.error_message,
                                            _description(g, node_id))
                    for g in response.groups}

        results, failures = await self._routed(
            wanted, self.cluster.coordinator, send, label=group_label,
            retry_codes=COORDINATOR_RETRIES, what="ShareGroupDescribe")
        raise_failures(failures)
        return {group_id: results[group_id] for group_id in wanted}

    async def describe_share_partitions(
            self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, SharePartitionState]:
        """Samsa's in-flight state of the group's share partitions (all it has a start offset
        for, or ``partitions``), from each partition's leader (``samsa.share_partitions``)."""
        await self._bootstrap()
        wanted = list(partitions) if partitions is not None else list(
            await self.describe_share_group_offsets(group_id))
        return await describe_share_partitions(self.cluster, group_id, wanted)

    async def describe_share_group_offsets(
            self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, SharePartitionOffset]:
        """The group's start offset (and lag, where the broker says it) of each partition (of
        ``partitions``, or every one it has); partitions without a start offset are left out."""
        await self._bootstrap()
        wanted = None if partitions is None else _by_topic(partitions)
        request = DescribeShareGroupOffsetsRequest(groups=[DescribeShareGroupOffsetsRequestGroup(
            group_id=group_id, topics=None if wanted is None else [
                DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=sorted(p))
                for t, p in wanted.items()])])
        partition_failures: list[Failure] = []

        async def send(node_id: int, _: list[str]) -> dict[str, object]:
            response: DescribeShareGroupOffsetsResponse = await self._request(
                node_id, lambda __: request, DescribeShareGroupOffsetsRequest)
            group = response.groups[0]
            partition_failures.clear()
            offsets: dict[TopicPartition, SharePartitionOffset] = {}
            for topic in group.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic_name, p.partition_index)
                    if p.error_code:
                        partition_failures.append(
                            failure(partition_label(tp), p.error_code, p.error_message))
                    elif p.start_offset >= 0:
                        offsets[tp] = SharePartitionOffset(
                            p.start_offset, p.leader_epoch if p.leader_epoch >= 0 else None,
                            p.lag if p.lag >= 0 else None)
            return {group_id: item_result(group.error_code, group.error_message, offsets)}

        results, failures = await self._routed(
            [group_id], self.cluster.coordinator, send, label=group_label,
            retry_codes=COORDINATOR_RETRIES, what="DescribeShareGroupOffsets")
        raise_failures(failures + partition_failures)
        return dict(sorted(results[group_id].items()))

    async def alter_share_group_offsets(self, group_id: str,
                                        offsets: Mapping[TopicPartition, int]) -> None:
        """Set the group's start offsets (the group must have no members)."""
        await self._bootstrap()
        wanted = {TopicPartition(*tp): int(offset) for tp, offset in offsets.items()}
        request = AlterShareGroupOffsetsRequest(group_id=group_id, topics=[
            AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
                AlterShareGroupOffsetsRequestPartition(
                    partition_index=p, start_offset=wanted[TopicPartition(topic, p)])
                for p in sorted(indexes)])
            for topic, indexes in _by_topic(wanted).items()])
        partition_failures: list[Failure] = []

        async def send(node_id: int, _: list[str]) -> dict[str, object]:
            response: AlterShareGroupOffsetsResponse = await self._request(
                node_id, lambda __: request, AlterShareGroupOffsetsRequest)
            partition_failures.clear()
            for topic in response.responses:
                for p in topic.partitions:
                    if p.error_code:
                        partition_failures.append(failure(
                            partition_label(TopicPartition(topic.topic_name, p.partition_index)),
                            p.error_code, p.error_message))
            return {group_id: item_result(response.error_code, response.error_message)}

        _, failures = await self._routed(
            [group_id], self.cluster.coordinator, send, label=group_label,
            retry_codes=COORDINATOR_RETRIES, what="AlterShareGroupOffsets")
        raise_failures(failures + partition_failures)

    async def delete_share_group_offsets(self, group_id: str, topics: str | Iterable[str]) -> None:
        """Forget the group's start offsets of whole ``topics`` (the group must be empty)."""
        await self._bootstrap()
        names = [topics] if isinstance(topics, str) else list(dict.fromkeys(topics))
        request = DeleteShareGroupOffsetsRequest(group_id=group_id, topics=[
            DeleteShareGroupOffsetsRequestTopic(topic_name=name) for name in names])
        topic_failures: list[Failure] = []

        async def send(node_id: int, _: list[str]) -> dict[str, object]:
            response: DeleteShareGroupOffsetsResponse = await self._request(
                node_id, lambda __: request, DeleteShareGroupOffsetsRequest)
            topic_failures.clear()
            topic_failures.extend(failure(topic_label(t.topic_name), t.error_code, t.error_message)
                                  for t in response.responses if t.error_code)
            return {group_id: item_result(response.error_code, response.error_message)}

        _, failures = await self._routed(
            [group_id], self.cluster.coordinator, send, label=group_label,
            retry_codes=COORDINATOR_RETRIES, what="DeleteShareGroupOffsets")
        raise_failures(failures + topic_failures)

    async def delete_share_groups(self, group_ids: str | Iterable[str]) -> None:
        """Delete empty share groups with their start offsets (DeleteGroups, as Kafka's)."""
        await self.delete_groups(group_ids)

