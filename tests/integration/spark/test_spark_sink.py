"""The sink: ``df.write.format("samsa")`` and ``writeStream.format("samsa")`` with Spark's Kafka
sink columns, read back through the source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.utils import AnalysisException

from tests.integration.spark.support import create_topic, read, stream

pytestmark = pytest.mark.integration

SCHEMA = ("value string, key binary, partition int, "
          "headers array<struct<key string, value binary>>, topic string")


def write(frame: Any, broker: Any, **options: str) -> None:
    writer = frame.write.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def test_the_sink_round_trips_a_dataframe(spark: Any, start_broker: Any, tmp_path: Path) -> None:
    broker = start_broker()
    create_topic(broker, "sunk", partitions=3)
    rows = [(f"value-{n}", b"key-%d" % n if n % 2 else None, n % 3,
             [("n", b"%d" % n), ("none", None)] if n % 4 == 0 else None, "sunk")
            for n in range(600)]
    write(spark.createDataFrame(rows, SCHEMA).repartition(3), broker)
    back = read(spark, broker, subscribe="sunk", includeHeaders="true").collect()
    assert len(back) == len(rows)
    assert {r.value.decode(): (r.key, r.partition, [(h.key, h.value) for h in r.headers])
            for r in back} == {value: (key, partition, headers or [])
                               for value, key, partition, headers, _ in rows}

    # the topic option overrides the topic column; without a partition the producer chooses
    create_topic(broker, "elsewhere", partitions=2)
    frame = spark.createDataFrame([(f"v{n}", "ignored") for n in range(50)],
                                  "value string, topic string")
    write(frame, broker, topic="elsewhere")
    assert sorted(r.value for r in read(spark, broker, subscribe="elsewhere").collect()) == \
        sorted(b"v%d" % n for n in range(50))

    # streaming: copy one topic into another, exactly the rows of the first
    create_topic(broker, "copied", partitions=2)
    copy = (stream(spark, broker, subscribe="sunk", startingOffsets="earliest")
            .select("key", "value", F.col("partition").alias("source_partition"))
            .writeStream.format("samsa")
            .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", "copied")
            .option("checkpointLocation", str(tmp_path / "copy")).trigger(availableNow=True)
            .start())
    try:
        assert copy.awaitTermination(120)
    finally:
        copy.stop()
    copied = read(spark, broker, subscribe="copied").collect()
    assert sorted((r.key or b"", r.value) for r in copied) == sorted(
        (key or b"", value.encode()) for value, key, *_ in rows)


def test_the_sink_checks_columns_as_sparks_kafka_sink(spark: Any, start_broker: Any) -> None:
    broker = start_broker()
    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises((PySparkException, AnalysisException),
                       match="Required attribute 'value' not found"):
        write(no_value, broker, topic="t")
    no_topic = spark.createDataFrame([("v",)], "value string")
    with pytest.raises((PySparkException, AnalysisException),
                       match="topic option required when no 'topic' attribute is present"):
        write(no_topic, broker)
    bad_partition = spark.createDataFrame([("v", "zero")], "value string, partition string")
    with pytest.raises((PySparkException, AnalysisException),
                       match="partition attribute unsupported type string"):
        write(bad_partition, broker, topic="t")
