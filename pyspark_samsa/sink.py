"""The sink: ``df.write.format("samsa")`` and ``df.writeStream.format("samsa")``.

Spark's Kafka sink columns: ``value`` (string or binary, required), ``key`` (string or
binary), ``headers`` (array<struct<key string, value binary>>), ``topic`` (string; the
``topic`` option, when set, overrides it) and ``partition`` (int; null or absent: the
producer's partitioner). Other columns are ignored, as by Spark. A query whose columns do
not fit fails when it is planned, with Spark's message.

Each Spark task sends its rows with one ``samsa.Producer`` (``kafka.*`` options, Kafka's
names and defaults: acks=all, idempotent), flushes, and fails if any record failed; then
the task's commit message carries its row count. Delivery is at least once, as with Spark's
Kafka sink: a task retried after a failure sends its rows again.

State: one producer per ``write`` call, closed before it returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from pyspark_samsa.options import SinkOptions

__all__ = ["SamsaBatchWriter", "SamsaStreamWriter", "check_sink_schema", "write_rows"]

HEADERS = ArrayType(StructType([StructField("key", StringType()),
                                StructField("value", BinaryType())]))
_DESIRED: dict[str, tuple[DataType, ...]] = {
    "topic": (StringType(),),
    "key": (StringType(), BinaryType()),
    "value": (StringType(), BinaryType()),
    "headers": (HEADERS,),
    "partition": (IntegerType(),),
}


class SinkError(ValueError):
    """A DataFrame the sink cannot write (Spark's IllegalStateException)."""


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's KafkaWriter.validateQuery."""
    fields = {f.name: f.dataType for f in schema.fields}
    if options.topic is None and "topic" not in fields:
        raise SinkError("topic option required when no 'topic' attribute is present. Use the "
                        "topic option for setting a topic.")
    if "value" not in fields:
        raise SinkError("Required attribute 'value' not found")
    for name, desired in _DESIRED.items():
        if name == "topic" and options.topic is not None:
            continue
        actual = fields.get(name)
        if actual is not None and not _same_type(actual, desired):
            wanted = " or ".join(d.simpleString() for d in desired)
            raise SinkError(f"{name} attribute unsupported type {actual.simpleString()}. {name} "
                            f"must be a(n) {wanted}")


def _same_type(actual: DataType, desired: tuple[DataType, ...]) -> bool:
    if isinstance(actual, ArrayType) and isinstance(actual.elementType, StructType):
        return any(isinstance(d, ArrayType) and
                   [(f.name, f.dataType) for f in actual.elementType.fields] ==
                   [(f.name, f.dataType) for f in d.elementType.fields]  # type: ignore[attr-defined]
                   for d in desired)
    return any(type(actual) is type(d) for d in desired)


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    rows: int


def write_rows(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row of ``batches`` and wait for all of them; the number sent."""
    from samsa.producer import Producer  # on the executor only

    failures: list[BaseException] = []

    def on_delivery(_metadata: Any, error: BaseException | None) -> None:
        if error is not None and not failures:
            failures.append(error)

    producer = Producer(options.client_config())
    sent = 0
    try:
        for batch in batches:
            for topic, value, key, partition, headers in _rows(batch, options.topic):
                if topic is None:
                    raise SinkError("null topic present in the data. Use the topic option for "
                                    "setting a default topic.")
                producer.send(topic, value, key, partition=partition, headers=headers,
                              on_delivery=on_delivery)
                sent += 1
                if failures:
                    break
            if failures:
                break
        producer.flush()
    finally:
        producer.close()
    if failures:
        raise failures[0]
    return sent


def _rows(batch: pa.RecordBatch, topic: str | None) -> Iterator[tuple[Any, ...]]:
    names = batch.schema.names
    count = batch.num_rows

    def column(name: str) -> list[Any]:
        return batch.column(names.index(name)).to_pylist() if name in names else [None] * count

    topics = [topic] * count if topic is not None else column("topic")
    headers = [None if h is None else [(e["key"], e["value"]) for e in h]
               for h in column("headers")]
    return zip(topics, column("value"), column("key"), column("partition"), headers, strict=True)


class SamsaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("samsa").mode("append").save()``."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return SinkCommitMessage(write_rows(self.options, iterator))


class SamsaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("samsa")``: each micro-batch's rows, at least once."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return SinkCommitMessage(write_rows(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every row was acknowledged before its task ended."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: rows already sent stay (at least once, as Spark's Kafka sink)."""
