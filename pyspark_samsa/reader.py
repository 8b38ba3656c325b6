"""Batch reads: planning by segments on the driver, one Spark task per offset range.

``SamsaBatchReader.partitions()`` (the driver's planning process) resolves the subscription,
asks each partition's leader for its segment layout, resolves ``startingOffsets`` /
``endingOffsets`` (or the timestamp options) and makes one ``RangePartition`` per segment's
piece of [start, end) (``planning.segment_ranges``), split further for ``minPartitions``.
``read(partition)`` runs on an executor: the range is fetched from the leader, or read from
the segment files with ``samsa.logDirs`` (``read_range``).

Readers are pickled to the executors, so they hold only options: the driver's client is
opened and closed inside ``partitions()``; tasks use their worker process's pooled client
(``fetch.pooled_reader``) or open segment files.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from pyspark_samsa.fetch import NetworkReader, pooled_reader
from pyspark_samsa.files import FileReader
from pyspark_samsa.loss import report_data_loss
from pyspark_samsa.metadata import ClusterView, resolve_offsets
from pyspark_samsa.options import SourceOptions
from pyspark_samsa.planning import OffsetRange, segment_ranges, split_for_min_partitions
from samsa.segments import PartitionLayout
from samsa.types import TopicPartition

__all__ = ["RangePartition", "SamsaBatchReader", "plan_ranges", "read_range"]


class RangePartition(InputPartition):
    """One Spark input partition: offsets [start, end) of one topic partition."""

    def __init__(self, offsets: OffsetRange) -> None:
        super().__init__(offsets)
        self.offsets = offsets

    def __repr__(self) -> str:
        r = self.offsets
        return f"RangePartition({r.topic}-{r.partition} [{r.start}, {r.end}))"


def read_range(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The rows of ``partition`` as Arrow record batches (none for Spark's empty partition)."""
    if not isinstance(partition, RangePartition):
        return
    reader: NetworkReader | FileReader
    if options.log_dirs:
        reader = FileReader(options.log_dirs, read_committed=options.read_committed)
    else:
        reader = pooled_reader(options.client_config())
    yield from reader.read(partition.offsets, include_headers=options.include_headers,
                           fail_on_data_loss=options.fail_on_data_loss)


def plan_ranges(starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
                layouts: Mapping[TopicPartition, PartitionLayout],
                options: SourceOptions) -> list[OffsetRange]:
    """Every partition's [start, end) cut by segments, then split for ``minPartitions``.

    A start below the log start offset is data loss (those records were deleted); a start
    after the end is an error in batch queries (Spark's message)."""
    ranges: list[OffsetRange] = []
    for tp in sorted(ends):
        start, end = starts[tp], ends[tp]
        layout = layouts[tp]
        if start < layout.log_start_offset and start < end:
            report_data_loss(
                f"Cannot fetch offset {start} (TopicPartition: {tp.topic}-{tp.partition}): the "
                f"earliest available offset is {layout.log_start_offset}.",
                fail_on_data_loss=options.fail_on_data_loss)
            start = min(layout.log_start_offset, end)
        if start > end:
            raise ValueError(
                f"Beginning offset {start} is after the ending offset {end} for topic "
                f"{tp.topic} partition {tp.partition}. You either provided an invalid "
                "fromOffset, or the Kafka topic has been damaged")
        ranges.extend(segment_ranges(tp, layout.segments, start, end))
    return split_for_min_partitions(ranges, options.min_partitions)


class SamsaBatchReader(DataSourceReader):
    """``spark.read.format("samsa")``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        view = ClusterView(self.options)
        try:
            partitions = view.topic_partitions()
            layouts = view.layouts(partitions)
            committed = self.options.read_committed
            starts = resolve_offsets(self.options.starting, partitions, layouts, view,
                                     starting=True, read_committed=committed,
                                     timestamp_strategy=self.options.timestamp_strategy)
            ends = resolve_offsets(self.options.ending, partitions, layouts, view, starting=False,
                                   read_committed=committed)
        finally:
            view.close()
        return [RangePartition(r) for r in plan_ranges(starts, ends, layouts, self.options)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_range(self.options, partition)
