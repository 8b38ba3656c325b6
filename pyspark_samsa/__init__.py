"""``samsa``: a Spark data source for Samsa topics, a drop-in for Spark's ``kafka`` format.

    spark.read.format("samsa").option("kafka.bootstrap.servers", "localhost:9092")
        .option("subscribe", "events").load()

PySpark (4.x Python Data Source API) registers it by itself: it imports every top-level
module named ``pyspark_*`` that has a ``DefaultSource``, so ``format("samsa")`` works with no
``spark.dataSource.register`` call (which works too). Batch and Structured Streaming reads
(``reader``, ``stream``), batch and streaming writes (``sink``); options, schema and messages
are Spark's Kafka source's (``options``); work is planned by segments (``planning``).

Modules: options (parsing, validation), planning (ranges, splits, rate limits, offsets JSON),
metadata (the driver's cluster view), arrow + walk (record batches to Arrow), fetch (network
reads), files (segment file reads), loss (failOnDataLoss), reader, stream, sink.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pyspark_samsa.options import OptionError, parse_sink_options, parse_source_options

__all__ = ["DefaultSource", "SamsaDataSource", "kafka_schema"]


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (with ``headers`` when ``includeHeaders`` is true)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


class SamsaDataSource(DataSource):
    """The ``samsa`` format: options in ``self.options`` (case-insensitive)."""

    @classmethod
    def name(cls) -> str:
        return "samsa"

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return kafka_schema(include)

    # The readers and writers are imported when asked for: PySpark imports this module in
    # every session that uses any Python data source, so it stays light (no numpy, no client).
    def reader(self, schema: StructType) -> DataSourceReader:
        from pyspark_samsa.reader import SamsaBatchReader

        self._check_schema(schema)
        return SamsaBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from pyspark_samsa.stream import SamsaStreamReader

        self._check_schema(schema)
        return SamsaStreamReader(parse_source_options(self.options, streaming=True))

    def _check_schema(self, schema: StructType) -> None:
        if schema != self.schema():
            raise OptionError("Samsa source has a fixed schema and cannot be set with a custom "
                              "one (Spark's Kafka source: the same)")

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pyspark_samsa.sink import SamsaBatchWriter, check_sink_schema

        if overwrite:
            raise OptionError("Save mode Overwrite not allowed for Samsa. Allowed save modes are "
                              "Append (and ErrorIfExists in Spark's Kafka source; Python data "
                              "sources take Append only).")
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options)
        return SamsaBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pyspark_samsa.sink import SamsaStreamWriter, check_sink_schema

        options = parse_sink_options(self.options)
        check_sink_schema(schema, options)
        return SamsaStreamWriter(options)


# The name PySpark's lookup (pyspark.sql.worker.lookup_data_sources) looks for.
DefaultSource = SamsaDataSource
