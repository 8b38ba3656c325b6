"""ACLs end to end against a real broker with Kafka's authorizer settings: Samsa's
``AdminClient`` (create, describe with filters, delete), the ``samsa acls`` executable and the
peer suites' ``kafka-acls.sh`` (Apache Kafka's own tool), and a DENY taking effect on Samsa's and confluent-kafka's producers
as TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import Producer as ConfluentProducer

from compat.kafka_home import kafka_home
from samsa.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from samsa.admin import AdminClient, NewTopic
from samsa.errors import SecurityDisabledError, TopicAuthorizationFailedError
from samsa.producer import Producer

pytestmark = pytest.mark.integration

SAMSA = str(Path(sys.executable).with_name("samsa"))
AUTHORIZER = {"authorizer_class_name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow_everyone_if_no_acl_found": "true"}
TIMEOUT = 15
DENY, ALLOW = AclPermissionType.DENY, AclPermissionType.ALLOW


def acl(name: str, operation: AclOperation, permission: AclPermissionType, *,
        principal: str = "User:*", kind: ResourceType = ResourceType.TOPIC,
        pattern_type: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(kind, name, pattern_type),
                      AccessControlEntry(principal, "*", operation, permission))


def samsa(broker: Any, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([SAMSA, "acls", *args, "--bootstrap-server", broker.bootstrap],
                          capture_output=True, text=True, timeout=60, check=False, input=stdin)


def samsa_json(broker: Any, *args: str) -> Any:
    result = samsa(broker, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def secured(start_broker):  # type: ignore[no-untyped-def]
    return start_broker(**AUTHORIZER)


def test_admin_client_creates_describes_and_deletes(secured: Any) -> None:
    deny_write = acl("payments", AclOperation.WRITE, DENY)
    allow_prefixed = acl("pay", AclOperation.READ, ALLOW, principal="User:alice",
                         pattern_type=PatternType.PREFIXED)
    allow_group = acl("billing", AclOperation.READ, ALLOW, kind=ResourceType.GROUP)
    with AdminClient(bootstrap_servers=secured.bootstrap) as admin:
        assert admin.describe_acls() == []
        admin.create_acls([deny_write, allow_prefixed, allow_group])
        admin.create_acls([deny_write])  # again: nothing changes
        assert sorted(admin.describe_acls(), key=str) == sorted(
            [deny_write, allow_prefixed, allow_group], key=str)
        applies = AclBindingFilter(ResourcePatternFilter(
            ResourceType.TOPIC, "payments", PatternType.MATCH))
        assert sorted(admin.describe_acls(applies), key=str) == sorted(
            [deny_write, allow_prefixed], key=str)
        alice = AclBindingFilter(entry_filter=AccessControlEntryFilter(principal="User:alice"))
        assert admin.describe_acls(alice) == [allow_prefixed]
        deleted = admin.delete_acls([applies, deny_write.to_filter()])
        assert sorted(deleted[applies], key=str) == sorted([deny_write, allow_prefixed], key=str)
        assert admin.describe_acls() == [allow_group]


def test_acl_calls_without_an_authorizer_are_security_disabled(broker: Any) -> None:
    with AdminClient(bootstrap_servers=broker.bootstrap) as admin, \
            pytest.raises(SecurityDisabledError):
        admin.describe_acls()


def test_cli_add_list_remove(secured: Any) -> None:
    added = samsa_json(secured, "--add", "--allow-principal", "User:alice", "--operation",
                       "Read", "--operation", "Describe", "--topic", "orders", "--group", "app")
    assert len(added["added"]) == 4
    samsa_json(secured, "--add", "--deny-principal", "User:bob", "--topic", "orders")
    listed = samsa_json(secured, "--list", "--topic", "orders")["acls"]
    assert {(r["principal"], r["operation"], r["permission_type"]) for r in listed} == {
        ("User:alice", "READ", "ALLOW"), ("User:alice", "DESCRIBE", "ALLOW"),
        ("User:bob", "ALL", "DENY")}
    only_bob = samsa_json(secured, "--list", "--principal", "User:bob")["acls"]
    assert [(r["resource_type"], r["name"]) for r in only_bob] == [("TOPIC", "orders")]
    table = samsa(secured, "--list", "--group", "app")
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split() == [
        "RESOURCE-TYPE", "NAME", "PATTERN-TYPE", "PRINCIPAL", "HOST", "OPERATION",
        "PERMISSION-TYPE"]
    assert "GROUP" in table.stdout and "User:alice" in table.stdout

    refused = samsa(secured, "--remove", "--topic", "orders")  # stdin is not a terminal
    assert refused.returncode == 2 and "--force" in refused.stderr
    removed = samsa_json(secured, "--remove", "--force", "--topic", "orders")["removed"]
    assert len(removed) == 3
    assert [r["resource_type"] for r in samsa_json(secured, "--list")["acls"]] == ["GROUP"] * 2


def test_cli_errors_are_one_line_exit_1(broker: Any) -> None:
    result = samsa(broker, "--list")  # this broker has no authorizer
    assert result.returncode == 1
    assert result.stderr.startswith("samsa: error: ") and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_a_deny_fails_samsa_and_confluent_producers(secured: Any) -> None:
    topic = "guarded"
    with AdminClient(bootstrap_servers=secured.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1)])
    with Producer({"bootstrap.servers": secured.bootstrap}) as producer:
        producer.send(topic, b"before").result(TIMEOUT)
        denied = samsa(secured, "--add", "--deny-principal", "User:*", "--operation", "Write",
                       "--topic", topic)
        assert denied.returncode == 0, denied.stderr
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(topic, b"denied").result(TIMEOUT)

    outcomes: list[Any] = []
    confluent = ConfluentProducer({"bootstrap.servers": secured.bootstrap, "log_level": 3})
    confluent.produce(topic, b"denied", on_delivery=lambda error, _: outcomes.append(error))
    assert confluent.flush(TIMEOUT) == 0
    assert outcomes[0] is not None
    assert outcomes[0].code() == ConfluentError.TOPIC_AUTHORIZATION_FAILED

    assert samsa(secured, "--remove", "--force", "--topic", topic).returncode == 0
    with Producer({"bootstrap.servers": secured.bootstrap}) as producer:
        assert producer.send(topic, b"after").result(TIMEOUT).offset == 1


def test_kafka_acls_sh_of_the_peer_suites_takes_librdkafkas_arguments(
        secured: Any, tmp_path: Path) -> None:
    """``kafka-home/bin/kafka-acls.sh`` (Apache Kafka's own AclCommand, ``compat.kafka_home``)
    with the arguments librdkafka's tests 0109, 0115 and 0119 pass it."""
    script = kafka_home(tmp_path) / "bin" / "kafka-acls.sh"

    def kafka_acls(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(script), "--bootstrap-server", secured.bootstrap, *args],
                              capture_output=True, text=True, timeout=120, check=False)

    added = kafka_acls("--add", "--deny-principal", "User:*", "--operation", "All",
                       "--deny-host", "*", "--topic", "t0119")
    assert added.returncode == 0, added.stderr
    assert "(principal=User:*, host=*, operation=ALL, permissionType=DENY)" in added.stdout
    with AdminClient(bootstrap_servers=secured.bootstrap) as admin:
        assert admin.describe_acls() == [acl("t0119", AclOperation.ALL, DENY)]
        removed = kafka_acls("--remove", "--force", "--deny-principal", "User:*", "--operation",
                             "All", "--deny-host", "*", "--topic", "t0119")
        assert removed.returncode == 0, removed.stderr
        assert admin.describe_acls() == []
