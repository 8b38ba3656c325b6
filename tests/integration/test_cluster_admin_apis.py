"""ElectLeaders, AlterReplicaLogDirs and DescribeTopicPartitions through kafka-python's and
confluent-kafka's admin clients, against a real broker process."""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import ElectionNotNeededError, NoError
from kafka.structs import TopicPartitionReplica

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TIMEOUT = 15


@pytest.fixture
def kafka_admin(start_broker):  # type: ignore[no-untyped-def]
    broker = start_broker()
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    client.create_topics([NewTopic("alpha", 4, 1), NewTopic("beta", 3, 1)])
    yield broker, client
    client.close()


def test_describe_topic_partitions_lists_every_partition(kafka_admin) -> None:  # type: ignore[no-untyped-def]
    _, client = kafka_admin
    result = client.describe_topic_partitions(["beta", "alpha", "missing"])
    by_name = {topic["name"]: topic for topic in result["topics"]}
    assert [topic["name"] for topic in result["topics"]] == ["alpha", "beta", "missing"]
    assert [p["partition_index"] for p in by_name["alpha"]["partitions"]] == [0, 1, 2, 3]
    assert all(p["leader_id"] >= 0 and p["replica_nodes"] for p in by_name["alpha"]["partitions"])
    assert by_name["alpha"]["error_code"] == 0
    assert by_name["missing"]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert result["next_cursor"] is None


def test_describe_topic_partitions_pages_with_a_cursor(kafka_admin) -> None:  # type: ignore[no-untyped-def]
    _, client = kafka_admin
    seen = []
    cursor = None
    for _ in range(10):
        result = client.describe_topic_partitions(["alpha", "beta"], response_partition_limit=3,
                                                  cursor=cursor)
        seen += [(t["name"], p["partition_index"]) for t in result["topics"] for p in t["partitions"]]
        cursor = result["next_cursor"]
        if cursor is None:
            break
    assert seen == [("alpha", i) for i in range(4)] + [("beta", i) for i in range(3)]


def test_elect_leaders_is_not_needed_on_one_node(kafka_admin) -> None:  # type: ignore[no-untyped-def]
    broker, client = kafka_admin
    response = client.elect_leaders(0, {"alpha": [0, 1, 2, 3]})
    [(topic, partitions, *_)] = response.replica_election_results
    assert topic == "alpha"
    assert sorted(p[0] for p in partitions) == [0, 1, 2, 3]
    assert {p[1] for p in partitions} == {ElectionNotNeededError.errno}

    confluent = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 3})
    future = confluent.elect_leaders(ElectionType.PREFERRED, [ConfluentTopicPartition("beta", 0),
                                                              ConfluentTopicPartition("nope", 0)])
    results = future.result(TIMEOUT)
    errors = {(tp.topic, tp.partition): (tp.error.code() if tp.error else 0) for tp in results}
    assert errors == {("beta", 0): 84, ("nope", 0): 3}


def test_alter_replica_log_dirs_to_the_current_dir_is_a_no_op(kafka_admin) -> None:  # type: ignore[no-untyped-def]
    _, client = kafka_admin
    log_dirs = client.describe_log_dirs()
    target = log_dirs[0]["log_dirs"][0]["log_dir"]
    broker_id = log_dirs[0]["broker"]
    replica = TopicPartitionReplica("alpha", 0, broker_id)
    assert client.alter_replica_log_dirs({replica: target}) == {replica: NoError}
    missing = TopicPartitionReplica("alpha", 1, broker_id)
    result = client.alter_replica_log_dirs({missing: "/no/such/dir"})
    assert result[missing].errno == 57  # LOG_DIR_NOT_FOUND

