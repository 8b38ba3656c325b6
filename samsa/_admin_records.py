"""Admin operations on partitions' offsets and records (a mixin of ``AsyncAdminClient``):
``list_offsets`` (ListOffsets) and ``delete_records`` (DeleteRecords).

Routing, as Kafka's admin client: the partitions are looked up in the metadata first (an
unknown topic or partition fails at once, not retried), then grouped by leader, one request
per leader; partitions answered with a leadership error (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, ...) are retried after a metadata refresh.

Offset specs: "earliest" (the log start offset), "latest" (the high watermark; with
``read_committed`` the last stable offset), "max-timestamp" (the record with the largest
timestamp, KIP-734) or a timestamp in ms (the first offset whose timestamp is at or after
it). When there is no such offset the answer is ``OffsetAndTimestamp(-1, -1)``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from protocol.messages.delete_records_response import DeleteRecordsResponse
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_offsets_response import ListOffsetsResponse
from samsa._admin_base import (
    LEADER_RETRIES,
    AdminCore,
    item_result,
    partition_label,
    raise_failures,
)
from samsa.types import OffsetAndTimestamp, TopicPartition

__all__ = ["OFFSET_SPECS", "RecordsAdmin", "offset_spec_timestamp"]

# Offset specs -> ListOffsets' special timestamps.
OFFSET_SPECS = {"earliest": -2, "latest": -1, "max-timestamp": -3}
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
CONSUMER_REPLICA_ID = -1


def offset_spec_timestamp(spec: int | str) -> int:
    """The ListOffsets timestamp for an offset spec (``ValueError`` for a bad one)."""
    if isinstance(spec, bool):
        raise ValueError(f"bad offset spec {spec!r}")
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError(f"a timestamp spec must be >= 0, got {spec}")
        return spec
    if spec in OFFSET_SPECS:
        return OFFSET_SPECS[spec]
    raise ValueError(f"offset spec must be 'earliest', 'latest', 'max-timestamp' or a "
                     f"timestamp in ms, not {spec!r}")


def _grouped(values: Mapping[TopicPartition, int]) -> dict[str, dict[int, int]]:
    topics: dict[str, dict[int, int]] = defaultdict(dict)
    for tp, value in values.items():
        topics[tp.topic][tp.partition] = value
    return topics


class RecordsAdmin(AdminCore):
    """Offsets of partitions, and deleting records."""

    async def _refresh_leaders(self, pending: list[TopicPartition]) -> None:
        if self._refresh_needed:
            self._refresh_needed = False
            await self.cluster.refresh_metadata({tp.topic for tp in pending})

    async def list_offsets(self, specs: Mapping[TopicPartition, int | str], *,
                           isolation_level: str = "read_uncommitted"
                           ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Each partition's offset for its spec (see the module docstring)."""
        timestamps = {tp: offset_spec_timestamp(spec) for tp, spec in specs.items()}
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be one of {', '.join(ISOLATION_LEVELS)}")
        await self._bootstrap()
        known, failures = await self._known_partitions(timestamps)

        def build(batch: list[TopicPartition]) -> ListOffsetsRequest:
            return ListOffsetsRequest(
                replica_id=CONSUMER_REPLICA_ID,
                isolation_level=ISOLATION_LEVELS[isolation_level],
                topics=[ListOffsetsTopic(name=topic, partitions=[
                    ListOffsetsPartition(partition_index=i, timestamp=timestamp)
                    for i, timestamp in partitions.items()])
                    for topic, partitions in _grouped({tp: timestamps[tp] for tp in batch}).items()])

        async def send(node_id: int, batch: list[TopicPartition]) -> dict[TopicPartition, object]:
            response: ListOffsetsResponse = await self._request(
                node_id, lambda _: build(batch), ListOffsetsRequest)
            return {
                TopicPartition(t.name, p.partition_index): item_result(
                    p.error_code, None, OffsetAndTimestamp(p.offset, p.timestamp, p.leader_epoch))
                for t in response.topics for p in t.partitions}

        results, more = await self._routed(
            known, self._leader, send, label=partition_label, retry_codes=LEADER_RETRIES,
            what="ListOffsets", before_round=self._refresh_leaders)
        raise_failures(failures + more)
        return {tp: results[tp] for tp in timestamps}

    async def delete_records(self, before: Mapping[TopicPartition, int], *,
                             timeout: float | None = None) -> dict[TopicPartition, int]:
        """Delete each partition's records below ``before[tp]`` (-1: the high watermark);
        the new low watermarks (log start offsets)."""
        await self._bootstrap()
        known, failures = await self._known_partitions(before)
        timeout_ms = (self.config["request.timeout.ms"] if timeout is None
                      else int(timeout * 1000))

        def build(batch: list[TopicPartition]) -> DeleteRecordsRequest:
            return DeleteRecordsRequest(timeout_ms=timeout_ms, topics=[
                DeleteRecordsTopic(name=topic, partitions=[
                    DeleteRecordsPartition(partition_index=i, offset=offset)
                    for i, offset in partitions.items()])
                for topic, partitions in _grouped({tp: before[tp] for tp in batch}).items()])

        async def send(node_id: int, batch: list[TopicPartition]) -> dict[TopicPartition, object]:
            response: DeleteRecordsResponse = await self._request(
                node_id, lambda _: build(batch), DeleteRecordsRequest)
            return {TopicPartition(t.name, p.partition_index):
                    item_result(p.error_code, None, p.low_watermark)
                    for t in response.topics for p in t.partitions}

        results, more = await self._routed(
            known, self._leader, send, label=partition_label, retry_codes=LEADER_RETRIES,
            what="DeleteRecords", before_round=self._refresh_leaders)
        raise_failures(failures + more)
        return {tp: results[tp] for tp in before}

