"""partition.metadata through real broker processes: every partition directory gets Kafka's file
with the topic's id, and a directory of an earlier topic of the same name (deleted and re-created
while the directory was elsewhere) is set aside as ``-stray``, never served as the new topic."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path
from uuid import UUID

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from storage.partition_metadata import (
    METADATA_TOPIC_ID,
    read_partition_metadata,
    topic_id_to_string,
)

pytestmark = pytest.mark.integration

TIMEOUT = 30


def create_topic(bootstrap: str, name: str) -> str:
    """Create ``name`` with one partition; its topic id as Kafka prints it (librdkafka's own
    ``str()`` uses standard base64, Java's ``Uuid.toString()`` the URL-safe alphabet)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)
    described = admin.describe_topics(TopicCollection([name]))[name].result(TIMEOUT)
    most = described.topic_id.get_most_significant_bits()
    least = described.topic_id.get_least_significant_bits()
    return topic_id_to_string(UUID(bytes=struct.pack(">qq", most, least)))


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(TIMEOUT) == 0


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
    finally:
        consumer.close()


def stored_topic_id(directory: Path) -> str:
    metadata = read_partition_metadata(directory)
    assert metadata is not None, f"no partition.metadata in {directory}"
    return topic_id_to_string(metadata.topic_id)


def test_every_partition_directory_gets_its_topic_id(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    topic_id = create_topic(broker.bootstrap, "orders")
    produce(broker.bootstrap, "orders", [b"one"])
    assert stored_topic_id(broker.log_dir / "orders-0") == topic_id
    text = (broker.log_dir / "orders-0" / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {topic_id}"
    metadata = read_partition_metadata(broker.log_dir / "__cluster_metadata-0")
    assert metadata is not None and metadata.topic_id == METADATA_TOPIC_ID
    # A directory from before the file existed gets it at the next start.
    assert broker.stop() == 0
    (broker.log_dir / "orders-0" / "partition.metadata").unlink()
    broker.start()
    assert stored_topic_id(broker.log_dir / "orders-0") == topic_id
    assert watermarks(broker.bootstrap, "orders") == (0, 1)


def test_a_log_of_an_earlier_topic_of_the_same_name_is_set_aside_not_served(  # type: ignore[no-untyped-def]
    start_broker,
) -> None:
    earlier = start_broker()
    old_id = create_topic(earlier.bootstrap, "orders")
    produce(earlier.bootstrap, "orders", [b"old-%d" % n for n in range(5)])
    assert earlier.stop() == 0

    broker = start_broker()
    new_id = create_topic(broker.bootstrap, "orders")
    assert new_id != old_id
    assert broker.stop() == 0
    # The earlier topic's directory comes back in place of the new one's.
    directory = broker.log_dir / "orders-0"
    shutil.rmtree(directory)
    shutil.copytree(earlier.log_dir / "orders-0", directory)
    broker.start()

    [stray] = [p for p in broker.log_dir.iterdir() if p.name.endswith("-stray")]
    assert re.fullmatch(r"orders-0\.[0-9a-f]{32}-stray", stray.name)
    assert stored_topic_id(stray) == old_id
    assert (stray / "00000000000000000000.log").stat().st_size > 0  # kept, not deleted
    assert stored_topic_id(directory) == new_id
    log = broker.log()
    assert f"log {directory} has topic id {old_id} but topic orders has topic id {new_id}" in log
    assert f"renamed to {stray}" in log

    assert watermarks(broker.bootstrap, "orders") == (0, 0)  # none of the old records
    produce(broker.bootstrap, "orders", [b"new"])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition("orders", 0, 0)])
        message = consumer.poll(TIMEOUT)
        assert message is not None and message.error() is None and message.value() == b"new"
    finally:
        consumer.close()
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        [directory_info] = client.describe_log_dirs()[0]["log_dirs"]
        partitions = [p for t in directory_info["topics"] if t["name"] == "orders"
                      for p in t["partitions"]]
        assert [p["partition_index"] for p in partitions] == [0]  # the stray is not listed
    finally:
        client.close()

    broker.restart()  # the stray directory stays aside: neither loaded nor deleted
    assert stray.is_dir() and watermarks(broker.bootstrap, "orders") == (0, 1)
    assert f"not loading stray partition directory {stray}" in broker.log()


def test_a_corrupt_file_sets_its_log_aside_and_is_named(start_broker) -> None:  # type: ignore[no-untyped-def]
    """Which topic a log with an unreadable file belonged to is unknown: it is kept aside as
    ``-stray`` (the ERROR names the file) and the partition starts a new log (Samsa: Kafka
    takes the log directory offline). A replica would refetch from its leader."""
    broker = start_broker()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("pair", 2, 1)])["pair"].result(TIMEOUT)
    assert broker.stop() == 0
    path = broker.log_dir / "pair-0" / "partition.metadata"
    path.write_text("version: 0\ntopic_id: ???")
    broker.start()
    assert f"corrupt partition metadata file {path}" in broker.log()
    assert "the log of pair-0 is not served: renamed to" in broker.log()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce("pair", b"fine", partition=1)
    producer.produce("pair", b"fine too", partition=0)
    assert producer.flush(TIMEOUT) == 0
    strays = [p for p in broker.log_dir.iterdir() if p.name.endswith("-stray")]
    assert len(strays) == 1 and strays[0].name.startswith("pair-0.")
    assert (strays[0] / "partition.metadata").read_text() == "version: 0\ntopic_id: ???"
