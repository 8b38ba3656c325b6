"""One local[2] SparkSession for every Spark test (starting one takes ~10 s).

PySpark finds the ``samsa`` format by itself (``pyspark_samsa.DefaultSource``): nothing here
registers it. Spark's built-in ``kafka`` format (``spark-sql-kafka-0-10``, fetched from Maven
Central on first use by ``compat.apache_kafka.spark_kafka_jars``) is on ``spark.jars``. Spark needs Java 17; without ``java`` on the PATH every Spark test fails with a
message saying so.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None:
        pytest.fail("the Spark tests need Java 17, and `java` is not on the PATH "
                    "(Debian: apt-get install openjdk-17-jre-headless)", pytrace=False)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from compat.apache_kafka import spark_kafka_jars

    session = (SparkSession.builder.master("local[2]").appName("samsa-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "1g")
               .config("spark.jars", ",".join(str(jar) for jar in spark_kafka_jars()))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
