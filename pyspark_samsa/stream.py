"""Structured Streaming reads: offsets ``{topic: {partition: offset}}``, admission control,
Trigger.AvailableNow, planning by segments per micro-batch.

Offsets are Spark's KafkaSourceOffset JSON: the next offset to read of every partition. The
latest offsets are the high watermarks (read_committed: the last stable offsets) of the
partitions the subscription names at that moment, so partitions and topics created later are picked up, from their
earliest offset. ``latestOffset(start, limit)``, Spark's admission control:

- ``ReadAllAvailable`` (Trigger.Once, or no limits): everything up to the high watermarks.
- ``maxOffsetsPerTrigger`` (``ReadMaxRows``): at most about that many records, shared among
  the partitions in proportion to their backlog (``planning.rate_limit``).
- ``minOffsetsPerTrigger`` (``ReadMinRows``) + ``maxTriggerDelay``: no batch (the start is
  returned) until that many records wait or the delay since the last batch has passed. Python
  data sources have no composite read limit, so with both options set Spark is told
  ``ReadMaxRows`` and the minimum is applied here from the options.

``prepareForTriggerAvailableNow`` records the high watermarks once; later calls read up to
them and no further (the minimum is then ignored: waiting for more would never end).
``partitions(start, end)`` plans one range per segment as batch reads do; what is gone is data
loss (``failOnDataLoss``): partitions that disappeared, a start below the log start offset,
an offset that went backwards. Exactly-once with a checkpoint is Spark's: a restarted query
plans from the committed end offsets.

State: the reader lives in Spark's streaming planner process (one thread); its
``ClusterView`` opens on first use and closes in ``stop()``. Executors get a pickled copy
without it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from pyspark_samsa.loss import report_data_loss
from pyspark_samsa.metadata import ClusterView, latest_offset, resolve_offsets
from pyspark_samsa.options import SourceOptions
from pyspark_samsa.planning import offsets_from_json, offsets_to_json, rate_limit
from pyspark_samsa.reader import RangePartition, plan_ranges, read_range
from samsa.segments import PartitionLayout
from samsa.types import TopicPartition

__all__ = ["Admission", "SamsaStreamReader"]

Offsets = dict[TopicPartition, int]


@dataclass
class Admission:
    """Spark's admission control for one query (see the module docstring); ``last_trigger_ms``
    is when the last batch was let through, for ``maxTriggerDelay``."""

    min_offsets_per_trigger: int | None
    max_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    last_trigger_ms: float

    def end_offsets(self, start: Offsets, latest: Offsets, earliest: Offsets, limit: ReadLimit,
                    *, now_ms: float, available_now: bool = False) -> Offsets | None:
        """The end of the next batch, or None to wait (no batch now)."""
        if isinstance(limit, ReadAllAvailable):
            return dict(latest)
        minimum = limit.min_rows if isinstance(limit, ReadMinRows) else \
            self.min_offsets_per_trigger
        maximum = limit.max_rows if isinstance(limit, ReadMaxRows) else \
            self.max_offsets_per_trigger
        if minimum is not None and not available_now and self._delay(minimum, latest, start,
                                                                     now_ms):
            return None
        if maximum is None:
            return dict(latest)
        new = {tp: offset for tp, offset in earliest.items() if tp not in start}
        return rate_limit(maximum, start, latest, new)

    def _delay(self, minimum: int, latest: Offsets, start: Offsets, now_ms: float) -> bool:
        """Spark's delayBatch: wait for ``minimum`` new records, at most ``maxTriggerDelay``."""
        if now_ms - self.last_trigger_ms >= self.max_trigger_delay_ms:
            self.last_trigger_ms = now_ms
            return False
        waiting = sum(offset - start.get(tp, 0) for tp, offset in latest.items())
        if waiting < minimum:
            return True
        self.last_trigger_ms = now_ms
        return False


class SamsaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("samsa")``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._view: ClusterView | None = None
        self._target: Offsets | None = None  # Trigger.AvailableNow's end
        self._latest: Offsets | None = None  # for reportLatestOffset
        self._admission = Admission(options.min_offsets_per_trigger,
                                    options.max_offsets_per_trigger,
                                    options.max_trigger_delay_ms, time.time() * 1000)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_view"] = None  # clients stay in the planner process
        return state

    def _cluster(self) -> ClusterView:
        if self._view is None:
            self._view = ClusterView(self.options)
        return self._view

    def _now(self) -> tuple[list[TopicPartition], dict[TopicPartition, PartitionLayout]]:
        view = self._cluster()
        partitions = view.topic_partitions()
        return partitions, view.layouts(partitions)

    def initialOffset(self) -> dict[str, Any]:
        partitions, layouts = self._now()
        starts = resolve_offsets(self.options.starting, partitions, layouts, self._cluster(),
                                 starting=True, timestamp_strategy=self.options.timestamp_strategy,
                                 read_committed=self.options.read_committed)
        return offsets_to_json(starts)

    def _latest_offsets(self) -> tuple[Offsets, Offsets]:
        """(latest offsets, log start offsets) of the partitions read now."""
        partitions, layouts = self._now()
        committed = self.options.read_committed
        return ({tp: latest_offset(layouts[tp], committed) for tp in partitions},
                {tp: layouts[tp].log_start_offset for tp in partitions})

    def prepareForTriggerAvailableNow(self) -> None:
        self._target, _ = self._latest_offsets()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        start_offsets = offsets_from_json(start)
        latest, earliest = self._latest_offsets()
        if self._target is not None:  # AvailableNow: never past the recorded end
            latest = {tp: min(offset, self._target[tp]) for tp, offset in latest.items()
                      if tp in self._target}
        self._latest = latest
        end = self._admission.end_offsets(start_offsets, latest, earliest, limit,
                                          now_ms=time.time() * 1000,
                                          available_now=self._target is not None)
        return start if end is None else offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        start_offsets, end_offsets = offsets_from_json(start), offsets_from_json(end)
        layouts = self._cluster().layouts(end_offsets)
        gone = sorted((set(start_offsets) - set(end_offsets)) | (set(end_offsets) - set(layouts)))
        if gone:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in gone)
            report_data_loss(f"{names} are gone.", fail_on_data_loss=self.options.fail_on_data_loss)
        end_offsets = {tp: offset for tp, offset in end_offsets.items() if tp in layouts}
        starts: Offsets = {}
        for tp, until in end_offsets.items():
            begin = start_offsets.get(tp)
            if begin is None:  # a new partition: from its earliest offset
                begin = layouts[tp].log_start_offset
                if begin != 0:
                    report_data_loss(f"Added partition {tp.topic}-{tp.partition} starts from "
                                     f"{begin} instead of 0. Some data may have been missed.",
                                     fail_on_data_loss=self.options.fail_on_data_loss)
            if until < begin:
                report_data_loss(f"Partition {tp.topic}-{tp.partition}'s offset was changed from "
                                 f"{begin} to {until}, some data may have been missed.",
                                 fail_on_data_loss=self.options.fail_on_data_loss)
                begin = until
            starts[tp] = begin
        return [RangePartition(r) for r in plan_ranges(starts, end_offsets, layouts, self.options)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_range(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets; the broker keeps no state."""

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None
