"""Structured Streaming through ``spark.readStream.format("samsa")`` against a real broker:
admission control over several micro-batches, restarts from a checkpoint, new topics, and
data deleted by retention under ``failOnDataLoss``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from pyspark.errors import PySparkException
from pyspark.errors.exceptions.captured import StreamingQueryException
from pyspark.sql.utils import AnalysisException

from tests.integration.spark.support import (
    QUIET,
    TIMEOUT,
    create_topic,
    eventually,
    log_start_offset,
    produce,
    read,
    stream,
    values,
)

pytestmark = pytest.mark.integration

QUERY_TIMEOUT_SECONDS = 120


def run_available_now(frame: Any, checkpoint: Path) -> tuple[list[list[Any]], Any]:
    """Run ``frame`` with Trigger.AvailableNow to its end: the rows of each micro-batch."""
    batches: list[list[Any]] = []

    def collect(batch: Any, _batch_id: int) -> None:
        batches.append(batch.select("topic", "partition", "offset", "value").collect())

    query = (frame.writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", str(checkpoint)).start())
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_SECONDS), "the query did not finish"
    finally:
        query.stop()
    return batches, query


def keys(rows: list[Any]) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, r.offset) for r in rows)


def test_available_now_with_max_offsets_per_trigger_runs_several_micro_batches(
        spark: Any, start_broker: Any, tmp_path: Path) -> None:
    broker = start_broker()
    create_topic(broker, "admitted", partitions=2)
    records = values("admitted", 1000, partitions=2)
    produce(broker, "admitted", records)
    limit = 300
    frame = stream(spark, broker, subscribe="admitted", startingOffsets="earliest",
                   maxOffsetsPerTrigger=str(limit))
    batches, query = run_available_now(frame, tmp_path / "checkpoint")
    sizes = [len(rows) for rows in batches if rows]
    assert len(sizes) >= math.ceil(len(records) / limit), sizes
    assert max(sizes) <= limit + 2  # each partition's share is rounded up when below one
    everything = [row for rows in batches for row in rows]
    assert keys(everything) == sorted(("admitted", n % 2, n // 2) for n in range(1000))
    assert sorted(r.value for r in everything) == sorted(r["value"] for r in records)
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0][-1]
    latest = progress["sources"][0]["latestOffset"]
    latest = json.loads(latest) if isinstance(latest, str) else latest
    assert latest == {"admitted": {"0": 500, "1": 500}}


def test_a_restarted_query_reads_only_new_records_and_new_topics_from_earliest(
        spark: Any, start_broker: Any, tmp_path: Path) -> None:
    broker = start_broker()
    create_topic(broker, "orders-a")
    produce(broker, "orders-a", values("orders-a", 100))
    checkpoint = tmp_path / "checkpoint"

    def run() -> list[Any]:
        frame = stream(spark, broker, subscribePattern="orders-.*", startingOffsets="earliest")
        batches, _ = run_available_now(frame, checkpoint)
        return [row for rows in batches for row in rows]

    first = run()
    assert keys(first) == [("orders-a", 0, n) for n in range(100)]
    produce(broker, "orders-a", values("orders-a", 50, start=100))
    create_topic(broker, "orders-b")
    produce(broker, "orders-b", values("orders-b", 30))
    second = run()
    assert keys(second) == [("orders-a", 0, n) for n in range(100, 150)] + [
        ("orders-b", 0, n) for n in range(30)]
    assert run() == []


def test_fail_on_data_loss_after_retention_deleted_segments(
        spark: Any, start_broker: Any, tmp_path: Path) -> None:
    broker = start_broker(**{"log.retention.check.interval.ms": "100"})
    create_topic(broker, "retained")
    produce(broker, "retained", values("retained", 300))
    checkpoint = tmp_path / "checkpoint"
    batches, _ = run_available_now(stream(spark, broker, subscribe="retained",
                                          startingOffsets="earliest"), checkpoint)
    assert sum(len(rows) for rows in batches) == 300
    produce(broker, "retained", values("retained", 1500, start=300))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    resource = ConfigResource("topic", "retained", incremental_configs=[ConfigEntry(
        "retention.bytes", "20000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)

    eventually(lambda: log_start_offset(broker, "retained", 0) > 300)
    earliest = log_start_offset(broker, "retained", 0)

    with pytest.raises(StreamingQueryException, match="Cannot fetch offset 300"):
        run_available_now(stream(spark, broker, subscribe="retained",
                                 startingOffsets="earliest"), checkpoint)
    batches, _ = run_available_now(stream(spark, broker, subscribe="retained",
                                          failOnDataLoss="false"), checkpoint)
    assert keys([row for rows in batches for row in rows]) == [
        ("retained", 0, n) for n in range(earliest, 1800)]

    # batch reads too: a starting offset below the log start offset
    starting = json.dumps({"retained": {"0": 0}})
    with pytest.raises((PySparkException, AnalysisException), match="failOnDataLoss"):
        read(spark, broker, subscribe="retained", startingOffsets=starting).collect()
    rows = read(spark, broker, subscribe="retained", startingOffsets=starting,
                failOnDataLoss="false").collect()
    assert keys(rows) == [("retained", 0, n) for n in range(earliest, 1800)]
