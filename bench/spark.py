"""Spark benchmark: a batch read of ``format("samsa")`` against Spark's native ``spark.range``
and against Spark's built-in Kafka source reading Samsa and Apache Kafka.

One run, this machine, a local[2] SparkSession, a Samsa broker and an Apache Kafka 4.3.1
broker (``bench.peers.start_kafka``: one KRaft node, Kafka's shipped defaults, 1 GiB heap):

1. confluent-kafka writes ``--count`` (1,000,000) records with 100-byte values to a topic of
   2 partitions with ``segment.bytes`` 16 MiB (so the read is planned as several segments,
   one Spark task each), on Samsa and, the same records, on Kafka.
2. Six ways to produce the same rows and columns (key binary, value binary, topic,
   partition, offset, timestamp, timestampType), in ``--rounds`` (5) interleaved rounds, the
   order of the sources rotated each round (``bench.rounds``):
   - network: ``spark.read.format("samsa")``, tasks fetching from the broker;
   - file: the same with ``samsa.logDirs`` (tasks read the segment files);
   - kafka on samsa: Spark's own ``format("kafka")`` (``spark-sql-kafka-0-10`` for the
     installed PySpark, from Maven Central: ``compat.apache_kafka.spark_kafka_jars``; one task
     per topic partition, its defaults) reading the Samsa topic — the path a team migrating
     from Kafka keeps;
   - kafka on kafka: the same source reading the same records from Apache Kafka;
   - native: ``spark.range(count)`` with the same columns computed by Spark itself;
   - floor: a Python data source that only yields ready-made Arrow batches of the same rows
     (same number of tasks, 9,000 rows per batch as a 1 MiB fetch gives): no I/O and no
     decoding, so what any Python data source pays Spark to move its rows.
   Each is read two ways: ``toArrow()`` (every row delivered to the driver as Arrow: the
   issue's measure, the one the goal is about) and a write to Spark's ``noop`` sink (every row
   materialised inside the JVM, nothing stored or returned: the engine alone, where the
   native plan, generated code with no data to move, is an order of magnitude ahead of
   any Python data source, since Spark takes every Python batch through Arrow).
   Reported: seconds and rows/s, median (min–max) over the rounds, and rows/s ÷ native rows/s,
   ÷ floor rows/s and ÷ the Kafka source on Apache Kafka as the median (min–max) of the paired
   per-round ratios (goal >= 0.7x native for ``toArrow``).

Without Java, Maven or Kafka's jars the two ``format("kafka")`` sources are left out, with why.

``--quick`` reads 100,000 records. Prints a table (rich) and writes ``bench/results/spark.json``
with every round's figures, the date, the machine and the load before and after.
Needs Java 17 (``java`` on the PATH) and the ``spark`` extra (pyspark, pyarrow).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench import peers, rounds
from compat.apache_kafka import KafkaUnavailable, spark_kafka_jars

RESULTS = Path(__file__).parent / "results"
TOPIC = "bench-spark"
PARTITIONS = 2
SEGMENT_BYTES = 16 * 1024 * 1024
VALUE = b"x" * 100
GOAL = 0.7


def fill_topic(bootstrap: str, count: int, progress: Progress) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1,
                                  config={"segment.bytes": str(SEGMENT_BYTES)})])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1,
                         "batch.size": 256 * 1024, "queue.buffering.max.messages": 1_000_000})
    errors: list[Any] = []

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    task = progress.add_task("producing", total=count)
    for number in range(count):
        while True:
            try:
                producer.produce(TOPIC, VALUE, partition=number % PARTITIONS,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if number % 10_000 == 0:
            producer.poll(0)
            progress.update(task, completed=number)
    if producer.flush(120) != 0 or errors:
        raise RuntimeError(f"producing failed: {errors[:3]}")
    progress.update(task, completed=count)


def spark_session(jars: list[Path]) -> Any:
    if shutil.which("java") is None:
        raise SystemExit("the Spark benchmark needs Java 17: `java` is not on the PATH")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("samsa-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "2g"))
    if jars:
        builder = builder.config("spark.jars", ",".join(str(jar) for jar in jars))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def floor_source() -> Any:
    """The ``floor`` data source (see the module docstring), defined when Spark is there."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from pyspark_samsa import kafka_schema
    from pyspark_samsa.arrow import SCHEMA

    class Slice(InputPartition):
        def __init__(self, rows: int) -> None:
            super().__init__(rows)
            self.rows = rows

    class Reader(DataSourceReader):
        def __init__(self, count: int, tasks: int) -> None:
            self.count, self.tasks = count, tasks

        def partitions(self) -> list[InputPartition]:
            share = self.count // self.tasks
            return [Slice(share + (1 if i < self.count % self.tasks else 0))
                    for i in range(self.tasks)]

        def read(self, partition: Any) -> Any:
            rows = 9000
            batch = pa.RecordBatch.from_arrays([
                pa.nulls(rows, pa.binary()), pa.array([VALUE] * rows, pa.binary()),
                pa.array([TOPIC] * rows), pa.array([0] * rows, pa.int32()),
                pa.array(range(rows), pa.int64()),
                pa.array([1_700_000_000_000_000] * rows, pa.timestamp("us", tz="UTC")),
                pa.array([0] * rows, pa.int32())], schema=SCHEMA)
            for start in range(0, partition.rows, rows):
                yield batch.slice(0, min(rows, partition.rows - start))

    class Floor(DataSource):
        @classmethod
        def name(cls) -> str:
            return "samsa_bench_floor"

        def schema(self) -> Any:
            return kafka_schema()

        def reader(self, schema: Any) -> Any:
            return Reader(int(self.options["count"]), int(self.options["tasks"]))

    return Floor


def frames(spark: Any, bootstrap: str, log_dir: Path, count: int, tasks: int,
           kafka_bootstrap: str | None) -> dict[str, Callable[[], Any]]:
    from pyspark.sql import functions as F

    spark.dataSource.register(floor_source())

    def samsa(**options: str) -> Any:
        reader = (spark.read.format("samsa").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", TOPIC))
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    def native() -> Any:
        return spark.range(count).select(
            F.lit(None).cast("binary").alias("key"),
            F.expr(f"cast(repeat('x', {len(VALUE)}) as binary)").alias("value"),
            F.lit(TOPIC).alias("topic"),
            (F.col("id") % PARTITIONS).cast("int").alias("partition"),
            (F.col("id") / PARTITIONS).cast("long").alias("offset"),
            F.expr("timestamp_millis(1700000000000 + id)").alias("timestamp"),
            F.lit(0).alias("timestampType"))

    def floor() -> Any:
        return (spark.read.format("samsa_bench_floor").option("count", count)
                .option("tasks", tasks).load())

    def kafka_format(servers: str) -> Any:
        return (spark.read.format("kafka").option("kafka.bootstrap.servers", servers)
                .option("subscribe", TOPIC).load())

    made = {"network": samsa, "file": lambda: samsa(**{"samsa.logDirs": str(log_dir)}),
            "native": native, "floor": floor}
    if kafka_bootstrap is not None:
        made["kafka_on_samsa"] = lambda: kafka_format(bootstrap)
        made["kafka_on_kafka"] = lambda: kafka_format(kafka_bootstrap)
    return made


def timed(action: str, frame: Any) -> float:
    start = time.perf_counter()
    if action == "toArrow":
        table = frame.toArrow()
        del table
    else:
        frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


ACTIONS = ("toArrow", "noop")


def measure(spark: Any, bootstrap: str, log_dir: Path, count: int, rounds_count: int,
            progress: Progress, kafka_bootstrap: str | None = None) -> dict[str, Any]:
    tasks = (spark.read.format("samsa").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", TOPIC).load().rdd.getNumPartitions())
    makers = frames(spark, bootstrap, log_dir, count, tasks, kafka_bootstrap)
    partitions = {}
    for name, make in makers.items():  # warm-up (Python workers, JIT) and a row count check
        frame = make()
        partitions[name] = frame.rdd.getNumPartitions()
        rows = frame.count()
        if rows != count:
            raise RuntimeError(f"{name} read {rows} rows, expected {count}")

    def read(name: str, round_index: int) -> dict[str, float]:
        return {action: timed(action, makers[name]()) for action in ACTIONS}

    done = rounds.run_rounds(list(makers), rounds_count, read, progress=progress,
                             label="reading: ")
    result: dict[str, Any] = {"count": count, "value_bytes": len(VALUE), "rounds": rounds_count,
                              "spark_partitions": partitions, "goal_ratio": GOAL,
                              "by_round": rounds.rounds_json(done, lambda seconds: {
                                  action: round(value, 3) for action, value in seconds.items()})}
    for action in ACTIONS:
        def seconds(measured: dict[str, float], action: str = action) -> float:
            return measured[action]

        def rows_per_s(measured: dict[str, float], action: str = action) -> float:
            return count / measured[action]

        result[action] = {name: {
            "seconds": rounds.spread_json(done.spread(name, seconds)),
            "rows_per_s": rounds.spread_json(done.spread(name, rows_per_s), 0),
            "ratio_to_native": rounds.spread_json(done.ratio(name, "native", rows_per_s)),
            "ratio_to_floor": rounds.spread_json(done.ratio(name, "floor", rows_per_s)),
            "ratio_to_kafka": (rounds.spread_json(done.ratio(name, "kafka_on_kafka", rows_per_s))
                               if "kafka_on_kafka" in makers else None)}
            for name in makers}
    return result


def start_kafka(work: Path, console: Console) -> tuple[peers.BrokerProcess | None, list[Path],
                                                     str | None]:
    """Apache Kafka and the jars of Spark's Kafka source; (None, [], why) without them."""
    try:
        jars = spark_kafka_jars()
        return peers.start_kafka(work), jars, None
    except (KafkaUnavailable, peers.Unavailable) as error:
        console.print(f"[yellow]format(\"kafka\") left out: {error}[/]")
        return None, [], str(error)


def run(work: Path, *, count: int, rounds_count: int, console: Console) -> dict[str, Any]:
    log_dir = work / "samsa-spark"
    broker = peers.start_samsa(log_dir)
    kafka, jars, why = start_kafka(work, console)
    try:
        with Progress(console=console, transient=True) as progress:
            fill_topic(broker.bootstrap, count, progress)
            if kafka is not None:
                fill_topic(kafka.bootstrap, count, progress)
            spark = spark_session(jars)
            try:
                return {**measure(spark, broker.bootstrap, log_dir, count, rounds_count, progress,
                                  None if kafka is None else kafka.bootstrap),
                        "kafka": None if kafka is None else kafka.version, "kafka_unavailable": why}
            finally:
                spark.stop()
    finally:
        broker.stop()
        if kafka is not None:
            kafka.stop()


def print_table(result: dict[str, Any], console: Console) -> None:
    table = Table(title=f"Spark batch read, {result['count']:,} × {result['value_bytes']}-byte "
                        f"records, local[2]: median (min–max) of {result['rounds']} interleaved "
                        "rounds", caption=rounds.caption(result["environment"]))
    for column in ("read", "source", "tasks", "seconds", "rows/s", "÷ native (paired)",
                   "÷ floor (paired)", "÷ kafka on Kafka (paired)"):
        table.add_column(column, justify="left" if column in ("read", "source") else "right")
    labels = {"network": "samsa, network", "file": "samsa, segment files",
              "native": "spark.range (native)", "floor": "Python source floor",
              "kafka_on_samsa": 'format("kafka") on Samsa',
              "kafka_on_kafka": f'format("kafka") on {result.get("kafka") or "Apache Kafka"}'}
    for action in ACTIONS:
        for name, mode in result[action].items():
            table.add_row(f"{action}()" if action == "toArrow" else "noop sink", labels[name],
                          str(result["spark_partitions"][name]),
                          rounds.cell(mode["seconds"], ".2f"), rounds.cell(mode["rows_per_s"]),
                          rounds.ratio_cell(mode["ratio_to_native"]),
                          rounds.ratio_cell(mode["ratio_to_floor"]),
                          rounds.ratio_cell(mode.get("ratio_to_kafka")))
    console.print(table)
    console.print(f"goal: >= {result['goal_ratio']}x native with toArrow()")


def main(*, quick: bool = False, json_path: Path | None = None,
         rounds_count: int = rounds.DEFAULT_ROUNDS) -> dict[str, Any]:
    console = rounds.console()
    environment = rounds.environment()
    with tempfile.TemporaryDirectory(prefix="samsa-bench-spark-") as temp:
        result = run(Path(temp), count=100_000 if quick else 1_000_000,
                     rounds_count=rounds_count, console=console)
    result = {"bench": "spark", "environment": rounds.finish(environment), **result}
    print_table(result, console)
    rounds.write_results(result, json_path or RESULTS / "spark.json", console)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS)
    arguments = parser.parse_args()
    main(quick=arguments.quick, rounds_count=arguments.rounds)
