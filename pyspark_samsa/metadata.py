"""The driver's view of the cluster: which partitions a query reads, their layouts, and the
offsets its options name.

``ClusterView`` owns one ``Cluster`` on one ``LoopThread`` (opened on first use) and answers,
blocking: the partitions of the subscription (``subscribe``: the topics that exist;
``subscribePattern``: every non-internal topic whose whole name matches; ``assign``: the
given partitions, which must exist), each partition's segment layout (``samsa.segments``,
from its leader: log start offset, high watermark, segments), and offsets for timestamps
(ListOffsets, from each leader).

``resolve_offsets`` turns an ``OffsetSpec`` into one offset per partition, with Spark's
rules: earliest is the log start offset, latest the high watermark (read_committed: the last
stable offset, as Kafka's consumer's end offsets; ``latest_offset``), -2/-1 in JSON mean the
same, a timestamp is the first offset whose timestamp is at or after it (none: latest, or an
error for a starting
timestamp when ``startingOffsetsByTimestampStrategy`` is ``error``), and JSON offsets must
name exactly the partitions read.

State: the view belongs to the thread that made it (planning runs on one thread).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from protocol.errors import KafkaError, error_for_code
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_offsets_response import ListOffsetsResponse
from pyspark_samsa.options import EARLIEST, LATEST, OffsetSpec, OptionError, SourceOptions
from samsa._cluster import Cluster
from samsa._loop import LoopThread
from samsa.segments import PartitionLayout, describe_log_segments, replica_high_watermarks
from samsa.types import TopicPartition

__all__ = ["ClusterView", "latest_offset", "resolve_offsets"]


def _capped(layout: PartitionLayout, lowest: tuple[int, int] | None) -> PartitionLayout:
    """File mode: the leader's layout with its high watermark and last stable offset capped at
    the smallest any replica reports, so a task reading a lagging follower's files never
    plans past what they hold."""
    if lowest is None:
        return layout
    return replace(layout, high_watermark=min(layout.high_watermark, lowest[0]),
                   last_stable_offset=min(layout.last_stable_offset, lowest[1]))


def latest_offset(layout: PartitionLayout, read_committed: bool) -> int:
    """Where "latest" is: the high watermark, or for read_committed the last stable offset."""
    return layout.last_stable_offset if read_committed else layout.high_watermark


class ClusterView:
    """Blocking metadata calls for planning (see the module docstring)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._config = options.client_config()
        self._loop: LoopThread | None = None
        self._cluster: Cluster | None = None

    def _run(self, make: Callable[[Cluster], Any]) -> Any:
        if self._loop is None:
            self._loop = LoopThread("pyspark-samsa-planner")
            self._cluster = Cluster(self._config)
        assert self._cluster is not None
        limit = (self._config["default.api.timeout.ms"] + self._config["request.timeout.ms"]) / 1000
        return self._loop.run(make(self._cluster), timeout=limit)

    def close(self) -> None:
        if self._loop is not None and self._cluster is not None:
            try:
                self._loop.run(self._cluster.close(), timeout=10)
            finally:
                self._loop.close()
        self._loop = self._cluster = None

    def topic_partitions(self) -> list[TopicPartition]:
        """The partitions the subscription names, now."""
        options = self.options
        if options.strategy == "subscribe":
            topics = list(options.topics)
        elif options.strategy == "subscribepattern":
            topics = None
        else:
            topics = sorted({tp.topic for tp in options.assigned})
        self._run(lambda cluster: cluster.refresh_metadata(topics))
        known = self._cluster.topics if self._cluster is not None else {}
        if options.strategy == "assign":
            missing = [tp for tp in options.assigned
                       if tp.topic not in known or tp.partition not in known[tp.topic].partitions]
            if missing:
                names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
                raise OptionError(f"Option 'assign' names partitions that do not exist: {names}")
            return sorted(options.assigned)
        if options.strategy == "subscribepattern":
            pattern = re.compile(options.pattern)
            topics = [name for name, info in known.items()
                      if not info.is_internal and pattern.fullmatch(name)]
        return sorted(TopicPartition(name, index) for name in topics or () if name in known
                      for index in known[name].partitions)

    def layouts(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionLayout]:
        """The layout of each of ``partitions`` that exists (a deleted one is left out)."""
        wanted = list(partitions)
        if not wanted:
            return {}
        self._run(lambda cluster: cluster.refresh_metadata(sorted({tp.topic for tp in wanted})))
        known = self._cluster.topics if self._cluster is not None else {}
        existing = [tp for tp in wanted
                    if tp.topic in known and tp.partition in known[tp.topic].partitions]
        result: dict[TopicPartition, PartitionLayout] = self._run(
            lambda cluster: describe_log_segments(cluster, existing))
        if self.options.log_dirs:  # file mode: any replica's files may be read
            lowest = self._run(lambda cluster: replica_high_watermarks(cluster, existing))
            result = {tp: _capped(layout, lowest.get(tp)) for tp, layout in result.items()}
        return result

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The first offset at or after each timestamp; -1 where there is none."""
        if not timestamps:
            return {}
        result: dict[TopicPartition, int] = self._run(
            lambda cluster: _offsets_for_times(cluster, dict(timestamps),
                                               int(self.options.read_committed)))
        return result


async def _offsets_for_times(cluster: Cluster, timestamps: dict[TopicPartition, int],
                             isolation_level: int) -> dict[TopicPartition, int]:
    async def attempt() -> dict[TopicPartition, int]:
        if cluster.metadata_is_stale:  # e.g. after NOT_LEADER_OR_FOLLOWER: find the leaders
            await cluster.refresh_metadata(sorted({tp.topic for tp in timestamps}))
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in timestamps:
            by_leader.setdefault(await cluster.leader_for(tp), []).append(tp)
        answers = await asyncio.gather(*(_list_offsets(cluster, node, tps, timestamps,
                                                       isolation_level)
                                         for node, tps in by_leader.items()))
        return {tp: offset for answer in answers for tp, offset in answer.items()}

    return await cluster.retrying(attempt, what="looking up offsets for timestamps")


async def _list_offsets(cluster: Cluster, node_id: int, partitions: list[TopicPartition],
                        timestamps: Mapping[TopicPartition, int],
                        isolation_level: int) -> dict[TopicPartition, int]:
    topics: dict[str, list[ListOffsetsPartition]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(
            ListOffsetsPartition(partition_index=tp.partition, timestamp=timestamps[tp]))
    request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
        ListOffsetsTopic(name=name, partitions=entries) for name, entries in topics.items()])
    connection = await cluster.connection(node_id)
    response: ListOffsetsResponse = await connection.request(request)
    result: dict[TopicPartition, int] = {}
    error: KafkaError | None = None
    for topic in response.topics:
        for answer in topic.partitions:
            if answer.error_code:
                error = error_for_code(answer.error_code)(
                    f"ListOffsets for {topic.name}-{answer.partition_index}")
                continue
            result[TopicPartition(topic.name, answer.partition_index)] = answer.offset
    if error is not None:
        raise error
    return result


def resolve_offsets(spec: OffsetSpec, partitions: list[TopicPartition],
                    layouts: Mapping[TopicPartition, PartitionLayout], view: ClusterView, *,
                    starting: bool, timestamp_strategy: str = "error",
                    read_committed: bool = False) -> dict[TopicPartition, int]:
    """One offset per partition for ``spec`` (see the module docstring)."""
    if spec.kind == "earliest":
        return {tp: layouts[tp].log_start_offset for tp in partitions}
    committed = read_committed
    if spec.kind == "latest":
        return {tp: latest_offset(layouts[tp], committed) for tp in partitions}
    if spec.kind == "offsets":
        _check_same_partitions(spec, partitions)
        return {tp: _special(spec.offsets[tp], layouts[tp], committed) for tp in partitions}
    if spec.kind == "timestamp":
        timestamps = dict.fromkeys(partitions, spec.timestamp)
    else:
        _check_same_partitions(spec, partitions)
        timestamps = {tp: spec.offsets[tp] for tp in partitions}
    found = view.offsets_for_times(timestamps)
    result = {}
    for tp in partitions:
        offset = found.get(tp, -1)
        if offset < 0:
            if starting and timestamp_strategy == "error":
                raise OptionError(f"No offset matched from request of topic-partition "
                                  f"{tp.topic}-{tp.partition} and timestamp {timestamps[tp]}.")
            offset = latest_offset(layouts[tp], committed)
        result[tp] = offset
    return result


def _special(offset: int, layout: PartitionLayout, read_committed: bool) -> int:
    if offset == EARLIEST:
        return layout.log_start_offset
    if offset == LATEST:
        return latest_offset(layout, read_committed)
    return offset


def _check_same_partitions(spec: OffsetSpec, partitions: list[TopicPartition]) -> None:
    if set(spec.offsets) != set(partitions):
        specified = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(spec.offsets))
        assigned = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions))
        raise OptionError(
            f"If {spec.option} contains specific offsets, you must specify all "
            f"TopicPartitions.\nUse -1 for latest, -2 for earliest.\n"
            f"Specified: {{{specified}}} Assigned: {{{assigned}}}")
