"""Fixtures for the tests that hold Samsa against Apache Kafka itself (``compat.apache_kafka``):
the jars are fetched from Maven Central on first use (``.cache/kafka/``); ``apache_kafka`` is one
real Kafka node (KRaft, combined mode) per test module, stopped cleanly at its end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compat.apache_kafka import ApacheKafka, kafka_home

# A module's Kafka node only needs a small heap; the benches use Kafka's shipped 1 GiB.
TEST_HEAP = ("-Xmx512m", "-Xms256m")


@pytest.fixture(scope="session", autouse=True)
def kafka_jars() -> None:
    """Fetch Kafka once for the session (a clear KafkaUnavailable if Java or Maven is missing)."""
    kafka_home()


@pytest.fixture(scope="module")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    node = ApacheKafka(tmp_path_factory.mktemp("apache-kafka"), heap=TEST_HEAP).start()
    yield node
    node.stop()
