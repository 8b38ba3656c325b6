"""Apache Kafka's administration tools (4.3.1, through their main classes) against a real Samsa
broker: ``kafka-transactions`` (list, describe, describe-producers, find-hanging, abort),
``kafka-metadata-quorum``, ``kafka-get-offsets``, ``kafka-delete-records``, ``kafka-log-dirs``
and, on a broker with Kafka's StandardAuthorizer, ``kafka-acls``. Their printed answers are
checked against Samsa's state as confluent-kafka sees it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
)
from confluent_kafka.admin import (
    ResourceType as AclResourceType,
)

from tests.integration.conftest import BrokerProcess
from tests.integration.kafka.tools import create_topics, kafka, samsa_broker, table

pytestmark = pytest.mark.integration

TIMEOUT = 30
# Kafka's test clusters' authorizer; the tools connect as ANONYMOUS (PLAINTEXT), a super user.
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def samsa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with samsa_broker(tmp_path_factory.mktemp("samsa")) as broker:
        yield broker


def node_id(samsa: BrokerProcess) -> str:
    [broker] = AdminClient({"bootstrap.servers": samsa.bootstrap}).list_topics(timeout=TIMEOUT).brokers
    return str(broker)


def transactions(samsa: BrokerProcess, *args: str) -> list[dict[str, str]]:
    return table(kafka("kafka-transactions", "--bootstrap-server", samsa.bootstrap, *args))


def test_transactions_list_describe_producers_and_abort_a_hanging_one(samsa: BrokerProcess) -> None:
    create_topics(samsa.bootstrap, ("paid", 1))
    producer = Producer({"bootstrap.servers": samsa.bootstrap, "transactional.id": "tools-txn"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    for index in range(3):
        producer.produce("paid", value=b"%d" % index, partition=0)
    producer.commit_transaction(TIMEOUT)  # offsets 0-2, the marker at 3
    producer.begin_transaction()
    producer.produce("paid", value=b"open", partition=0)  # offset 4, left open
    assert producer.flush(TIMEOUT) == 0

    [listed] = [row for row in transactions(samsa, "list") if row["TransactionalId"] == "tools-txn"]
    assert (listed["Coordinator"], listed["TransactionState"]) == (node_id(samsa), "Ongoing")
    [described] = transactions(samsa, "describe", "--transactional-id", "tools-txn")
    assert (described["ProducerId"], described["TransactionState"], described["TopicPartitions"]) == (
        listed["ProducerId"], "Ongoing", "paid-0")
    assert described["TransactionTimeoutMs"] == "60000"

    partition = ("--topic", "paid", "--partition", "0")
    [active] = transactions(samsa, "describe-producers", *partition)
    assert (active["ProducerId"], active["ProducerEpoch"], active["LastSequence"],
            active["CurrentTransactionStartOffset"]) == (listed["ProducerId"], "0", "3", "4")
    assert active["LatestCoordinatorEpoch"] != "-1"  # the commit marker's

    # The hanging-transaction path: the tool writes the ABORT marker itself (WriteTxnMarkers).
    kafka("kafka-transactions", "--bootstrap-server", samsa.bootstrap, "abort", *partition,
          "--start-offset", "4")
    [active] = transactions(samsa, "describe-producers", *partition)
    assert active["CurrentTransactionStartOffset"] == "None"
    assert transactions(samsa, "find-hanging", "--broker-id", node_id(samsa)) == []
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": "paid-check",
                         "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition("paid", 0, 0)])
        values = [record.value() for record in consumer.consume(10, timeout=5)]
        assert values == [b"0", b"1", b"2"]  # the aborted "open" is not read
    finally:
        consumer.close()


def test_metadata_quorum_status_and_replication(samsa: BrokerProcess) -> None:
    server = ("--bootstrap-server", samsa.bootstrap)
    status = dict(re.findall(r"^(\w+):\s+(.*)$", kafka("kafka-metadata-quorum", *server,
                                                        "describe", "--status"), re.MULTILINE))
    node = node_id(samsa)
    assert (status["LeaderId"], status["MaxFollowerLag"], status["CurrentObservers"]) == (node, "0", "[]")
    assert [voter["id"] for voter in json.loads(status["CurrentVoters"])] == [int(node)]
    assert int(status["HighWatermark"]) > 0
    [replica] = table(kafka("kafka-metadata-quorum", *server, "describe", "--replication"))
    assert (replica["NodeId"], replica["Status"], replica["Lag"]) == (node, "Leader", "0")
    assert int(replica["LogEndOffset"]) >= int(status["HighWatermark"])


def get_offsets(samsa: BrokerProcess, topic: str, time: str) -> dict[int, int]:
    output = kafka("kafka-get-offsets", "--bootstrap-server", samsa.bootstrap, "--topic", topic,
                   "--time", time)
    return {int(partition): int(offset)
            for _, partition, offset in (line.split(":") for line in output.split())}


def test_get_offsets_delete_records_and_log_dirs(samsa: BrokerProcess, tmp_path: Path) -> None:
    create_topics(samsa.bootstrap, ("counted", 2))
    producer = Producer({"bootstrap.servers": samsa.bootstrap})
    for index in range(10):
        producer.produce("counted", value=b"x" * 100, partition=0 if index < 7 else 1)
    assert producer.flush(TIMEOUT) == 0
    assert get_offsets(samsa, "counted", "-1") == {0: 7, 1: 3}
    assert get_offsets(samsa, "counted", "-2") == {0: 0, 1: 0}

    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "counted", "partition": 0, "offset": 5}]}))
    deleted = kafka("kafka-delete-records", "--bootstrap-server", samsa.bootstrap,
                    "--offset-json-file", str(offsets))
    assert "partition: counted-0\tlow_watermark: 5" in deleted
    assert get_offsets(samsa, "counted", "-2") == {0: 5, 1: 0}
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": "counted-check"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("counted", 0), TIMEOUT) == (5, 7)
    finally:
        consumer.close()

    output = kafka("kafka-log-dirs", "--bootstrap-server", samsa.bootstrap, "--describe",
                   "--topic-list", "counted")
    [broker] = json.loads(output.splitlines()[-1])["brokers"]
    [log_dir] = broker["logDirs"]
    assert (broker["broker"], log_dir["logDir"], log_dir["error"]) == (
        int(node_id(samsa)), str(samsa.log_dir), None)
    sizes = {entry["partition"]: entry["size"] for entry in log_dir["partitions"]}
    on_disk = {name: sum(f.stat().st_size for f in (samsa.log_dir / name).glob("*.log"))
               for name in ("counted-0", "counted-1")}
    assert sizes == on_disk and min(sizes.values()) > 0


def acl_tool(samsa: BrokerProcess, *args: str) -> str:
    return kafka("kafka-acls", "--bootstrap-server", samsa.bootstrap, *args)


def samsa_acls(samsa: BrokerProcess) -> set[tuple[str, str, str, str, str, str]]:
    admin = AdminClient({"bootstrap.servers": samsa.bootstrap})
    every = AclBindingFilter(AclResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                             AclOperation.ANY, AclPermissionType.ANY)
    return {(b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.operation.name,
             b.permission_type.name) for b in admin.describe_acls(every).result(TIMEOUT)}


def test_acls_add_list_remove(tmp_path: Path) -> None:
    with samsa_broker(tmp_path, **AUTHORIZER) as samsa:
        added = acl_tool(samsa, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                         "--operation", "Write", "--topic", "ledger")
        assert ("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ledger, "
                "patternType=LITERAL)`:") in added
        acl_tool(samsa, "--add", "--deny-principal", "User:bob", "--operation", "All",
                 "--topic", "secret-", "--resource-pattern-type", "prefixed")
        acl_tool(samsa, "--add", "--allow-principal", "User:carol", "--consumer",
                 "--topic", "ledger", "--group", "readers")
        assert samsa_acls(samsa) == {
            ("TOPIC", "ledger", "LITERAL", "User:alice", "READ", "ALLOW"),
            ("TOPIC", "ledger", "LITERAL", "User:alice", "WRITE", "ALLOW"),
            ("TOPIC", "secret-", "PREFIXED", "User:bob", "ALL", "DENY"),
            ("TOPIC", "ledger", "LITERAL", "User:carol", "READ", "ALLOW"),
            ("TOPIC", "ledger", "LITERAL", "User:carol", "DESCRIBE", "ALLOW"),
            ("GROUP", "readers", "LITERAL", "User:carol", "READ", "ALLOW"),
        }
        matching = acl_tool(samsa, "--list", "--topic", "secret-plans",
                            "--resource-pattern-type", "match")
        assert "(principal=User:bob, host=*, operation=ALL, permissionType=DENY)" in matching
        assert "ledger" not in matching
        by_principal = acl_tool(samsa, "--list", "--principal", "User:carol")
        assert by_principal.count("principal=User:carol") == 3 and "alice" not in by_principal

        acl_tool(samsa, "--remove", "--allow-principal", "User:alice", "--operation", "Read",
                 "--operation", "Write", "--topic", "ledger", "--force")
        acl_tool(samsa, "--remove", "--topic", "secret-", "--resource-pattern-type", "prefixed",
                 "--force")
        assert samsa_acls(samsa) == {
            ("TOPIC", "ledger", "LITERAL", "User:carol", "READ", "ALLOW"),
            ("TOPIC", "ledger", "LITERAL", "User:carol", "DESCRIBE", "ALLOW"),
            ("GROUP", "readers", "LITERAL", "User:carol", "READ", "ALLOW"),
        }
        assert "alice" not in acl_tool(samsa, "--list")
