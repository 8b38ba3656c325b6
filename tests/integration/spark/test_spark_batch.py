"""Batch reads through ``spark.read.format("samsa")`` against a real broker: every record once,
one Spark partition per segment in range, offsets, timestamps, headers, file mode."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.utils import AnalysisException

from pyspark_samsa import SamsaDataSource
from tests.integration.spark.support import (
    create_topic,
    produce,
    read,
    segment_base_offsets,
    segments_in_range,
    values,
)

pytestmark = pytest.mark.integration

COLUMNS = ["topic", "partition", "offset", "key", "value", "timestampType"]


def offsets_by_partition(rows: list[Any]) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for row in rows:
        found.setdefault(row.partition, []).append(row.offset)
    return {partition: sorted(offsets) for partition, offsets in found.items()}


def planned(frame: Any) -> tuple[int, list[Any]]:
    """The number of Spark partitions and the rows, from one planning of the read."""
    rdd = frame.select(*COLUMNS).rdd
    return rdd.getNumPartitions(), rdd.collect()


def by_offset(rows: list[Any]) -> dict[tuple[int, int], tuple[Any, ...]]:
    keyed = {(r.partition, r.offset): tuple(r) for r in rows}
    assert len(keyed) == len(rows)
    return keyed


def test_a_multi_segment_topic_reads_once_with_one_spark_partition_per_segment(
        spark: Any, start_broker: Any) -> None:
    broker = start_broker()
    create_topic(broker, "multi", partitions=2)
    records = values("multi", 1600, partitions=2)
    produce(broker, "multi", records)
    end = {0: 800, 1: 800}  # the records, round robin over the two partitions
    bases = {p: segment_base_offsets(broker, "multi", p) for p in end}
    segments = {p: segments_in_range(bases[p], end[p], 0, end[p]) for p in end}
    assert min(segments.values()) >= 5  # the point of the test: many segments

    spark_partitions, rows = planned(read(spark, broker, subscribe="multi"))
    assert spark_partitions == sum(segments.values())
    assert len(rows) == len(records)
    assert {r.value: r.key for r in rows} == {r["value"]: r["key"] for r in records}
    assert offsets_by_partition(rows) == {p: list(range(end[p])) for p in end}
    assert {(r.topic, r.timestampType) for r in rows} == {("multi", 0)}

    # a range inside the log: clipped to it, still one Spark partition per segment it touches
    starting = json.dumps({"multi": {"0": 100, "1": -2}})
    ending = json.dumps({"multi": {"0": 700, "1": -1}})
    spark_partitions, clipped = planned(read(spark, broker, subscribe="multi",
                                             startingOffsets=starting, endingOffsets=ending))
    assert spark_partitions == segments_in_range(bases[0], end[0], 100, 700) + segments[1]
    assert offsets_by_partition(clipped) == {0: list(range(100, 700)), 1: list(range(end[1]))}

    # minPartitions splits segments further; the rows stay the same
    # (Spark's split gives each range round(its share * minPartitions) parts, at least one)
    spark_partitions, split = planned(read(spark, broker, subscribe="multi",
                                           minPartitions=str(2 * sum(segments.values()))))
    assert spark_partitions > sum(segments.values())
    assert sorted(map(tuple, split), key=repr) == sorted(map(tuple, rows), key=repr)


def test_file_mode_gives_the_same_rows_as_the_network(spark: Any, start_broker: Any) -> None:
    broker = start_broker()
    create_topic(broker, "files", partitions=2)
    records = values("files", 2000, partitions=2)
    for n, record in enumerate(records):
        if n % 7 == 0:
            record["headers"] = [("n", b"%d" % n), ("empty", None)]
    produce(broker, "files", records)
    options = {"subscribe": "files", "includeHeaders": "true"}
    network = read(spark, broker, **options).collect()
    files = read(spark, broker, **options, **{"samsa.logDirs": str(broker.log_dir)}).collect()
    assert len(network) == len(records)
    assert by_offset(files) == by_offset(network)
    # a range starting and ending inside segments, read through the segment indexes
    ranged = {"startingOffsets": json.dumps({"files": {"0": 333, "1": 5}}),
              "endingOffsets": json.dumps({"files": {"0": 777, "1": 950}})}
    network = read(spark, broker, **options, **ranged).collect()
    files = read(spark, broker, **options, **ranged,
                 **{"samsa.logDirs": str(broker.log_dir)}).collect()
    assert len(network) == (777 - 333) + (950 - 5)
    assert by_offset(files) == by_offset(network)


def test_starting_and_ending_timestamps(spark: Any, start_broker: Any) -> None:
    broker = start_broker()
    create_topic(broker, "times", partitions=2)
    base = int(time.time() * 1000) - 3_600_000
    records = values("times", 1000, partitions=2)
    for n, record in enumerate(records):
        record["timestamp"] = base + n * 10
    produce(broker, "times", records)

    def read_times(**options: str) -> list[tuple[int, int, int]]:
        frame = read(spark, broker, subscribe="times", **options)
        rows = frame.select("partition", "offset", F.expr("unix_millis(timestamp)").alias("ms"),
                            "timestampType").collect()
        assert {r.timestampType for r in rows} <= {0}
        return sorted((r.partition, r.offset, r.ms) for r in rows)

    everything = [(n % 2, n // 2, base + n * 10) for n in range(1000)]

    def between(low: int, high: int = 1 << 62) -> list[tuple[int, int, int]]:
        return sorted(row for row in everything if low <= row[2] < high)

    assert read_times() == sorted(everything)
    assert read_times(startingTimestamp=str(base + 500 * 10)) == between(base + 500 * 10)
    assert read_times(startingTimestamp=str(base + 500 * 10),
                      endingTimestamp=str(base + 800 * 10)) == between(base + 500 * 10,
                                                                       base + 800 * 10)
    by_partition = json.dumps({"times": {"0": base + 100 * 10, "1": base + 901 * 10}})
    assert read_times(startingOffsetsByTimestamp=by_partition) == sorted(
        row for row in everything if row[2] >= (base + 100 * 10 if row[0] == 0 else base + 901 * 10))
    # no record at or after the timestamp: Spark's default strategy fails, "latest" reads nothing
    future = str(base + 10_000_000)
    with pytest.raises((PySparkException, AnalysisException), match="No offset matched"):
        read_times(startingTimestamp=future)
    assert read_times(startingTimestamp=future, startingOffsetsByTimestampStrategy="latest") == []


def test_headers_only_with_include_headers(spark: Any, start_broker: Any) -> None:
    broker = start_broker()
    create_topic(broker, "headers")
    records = values("headers", 300)
    for n, record in enumerate(records):
        if n % 3 == 0:
            record["headers"] = [("trace", b"t-%d" % n), ("nothing", None), ("trace", b"again")]
    produce(broker, "headers", records)

    plain = read(spark, broker, subscribe="headers")
    assert plain.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                             "timestampType"]
    with_headers = read(spark, broker, subscribe="headers", includeHeaders="true")
    assert with_headers.columns[-1] == "headers"
    assert with_headers.schema["headers"].dataType.simpleString() == \
        "array<struct<key:string,value:binary>>"
    got = {r.offset: [(h.key, h.value) for h in r.headers]
           for r in with_headers.select("offset", "headers").collect()}
    assert got == {n: [("trace", b"t-%d" % n), ("nothing", None), ("trace", b"again")]
                   if n % 3 == 0 else [] for n in range(300)}


def test_invalid_options_fail_at_planning_with_sparks_messages(spark: Any,
                                                               start_broker: Any) -> None:
    broker = start_broker()
    with pytest.raises((PySparkException, AnalysisException),
                       match="One of the following options must be specified"):
        read(spark, broker).collect()
    with pytest.raises((PySparkException, AnalysisException),
                       match="starting offset can't be latest for batch queries"):
        read(spark, broker, subscribe="t", startingOffsets="latest").collect()
    with pytest.raises((PySparkException, AnalysisException),
                       match=r"Kafka option 'auto\.offset\.reset' is not supported"):
        read(spark, broker, subscribe="t", **{"kafka.auto.offset.reset": "earliest"}).collect()


def test_explicit_registration_works_too(spark: Any, start_broker: Any) -> None:
    broker = start_broker()
    create_topic(broker, "registered")
    produce(broker, "registered", values("registered", 10))
    spark.dataSource.register(SamsaDataSource)
    assert read(spark, broker, subscribe="registered").count() == 10
