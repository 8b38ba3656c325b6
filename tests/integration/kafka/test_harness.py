"""The yardstick harness itself: Kafka's jars fetched, a tool run through its main class, a real
Kafka node that takes a produce and serves it back."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer

from compat.apache_kafka import KAFKA_VERSION, TOOLS, ApacheKafka, kafka_home, run_tool


def test_every_tool_class_is_in_the_fetched_jars() -> None:
    import zipfile

    classes: set[str] = set()
    for jar in (kafka_home() / "libs").glob("*.jar"):
        with zipfile.ZipFile(jar) as archive:
            classes.update(name[:-6].replace("/", ".") for name in archive.namelist()
                           if name.endswith(".class"))
    assert {tool: main for tool, main in TOOLS.items() if main not in classes} == {}


def test_a_tool_runs_and_reports_the_fetched_version() -> None:
    result = run_tool("kafka-topics", "--version", check=True)
    assert result.stdout.split()[0] == KAFKA_VERSION


def test_apache_kafka_takes_a_produce_and_serves_it(apache_kafka: ApacheKafka) -> None:
    producer = Producer({"bootstrap.servers": apache_kafka.bootstrap})
    producer.produce("harness", key=b"k", value=b"from the yardstick")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": apache_kafka.bootstrap, "group.id": "harness",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["harness"])
    try:
        message = None
        for _ in range(30):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.value() == b"from the yardstick"
    finally:
        consumer.close()
    assert (apache_kafka.data / "harness-0" / "00000000000000000000.log").stat().st_size > 0
