"""ACLs end to end: a broker started with Kafka's StandardAuthorizer, driven by confluent-kafka's
and kafka-python's admin clients, producers and consumers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

pytestmark = pytest.mark.integration

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SECURED = {"authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}


def admin(broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def binding(name: str, operation: AclOperation, permission: AclPermissionType = AclPermissionType.ALLOW,
            *, pattern: ResourcePatternType = ResourcePatternType.LITERAL,
            principal: str = "User:*") -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", operation, permission)


def any_filter(**fields: Any) -> AclBindingFilter:
    values = {"restype": ResourceType.ANY, "name": None, "resource_pattern_type": ResourcePatternType.ANY,
              "principal": None, "host": None, "operation": AclOperation.ANY,
              "permission_type": AclPermissionType.ANY} | fields
    return AclBindingFilter(**values)


def create_acls(client: AdminClient, *bindings: AclBinding) -> None:
    for future in client.create_acls(list(bindings), request_timeout=10).values():
        future.result()


def create_topic(client: AdminClient, name: str, partitions: int = 1) -> None:
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=10)


def wait_for(condition: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_confluent_admin_creates_describes_and_deletes_acls(start_broker: Any) -> None:
    broker = start_broker(**SECURED)
    client = admin(broker)
    create_acls(
        client,
        binding("orders", AclOperation.READ, principal="User:alice"),
        binding("orders", AclOperation.WRITE, principal="User:bob"),
        binding("ord", AclOperation.DESCRIBE, pattern=ResourcePatternType.PREFIXED),
        binding("other", AclOperation.READ, AclPermissionType.DENY),
    )
    everything = client.describe_acls(any_filter(), request_timeout=10).result()
    assert len(everything) == 4
    matching = client.describe_acls(any_filter(
        restype=ResourceType.TOPIC, name="orders", resource_pattern_type=ResourcePatternType.MATCH,
    ), request_timeout=10).result()
    assert sorted((b.name, b.resource_pattern_type, b.principal) for b in matching) == [
        ("ord", ResourcePatternType.PREFIXED, "User:*"),
        ("orders", ResourcePatternType.LITERAL, "User:alice"),
        ("orders", ResourcePatternType.LITERAL, "User:bob"),
    ]
    prefixed = client.describe_acls(any_filter(resource_pattern_type=ResourcePatternType.PREFIXED),
                                    request_timeout=10).result()
    assert [b.name for b in prefixed] == ["ord"]

    deleted = client.delete_acls([any_filter(principal="User:bob"), any_filter(name="orders")],
                                 request_timeout=10)
    results = [future.result() for future in deleted.values()]
    assert sorted(len(r) for r in results) == [1, 2]
    remaining = client.describe_acls(any_filter(), request_timeout=10).result()
    assert sorted(b.name for b in remaining) == ["ord", "other"]


def test_a_deny_makes_produce_and_fetch_fail_with_topic_authorization_failed(start_broker: Any) -> None:
    broker = start_broker(**SECURED)
    client = admin(broker)
    topic = f"secret-{uuid.uuid4().hex[:8]}"
    create_topic(client, topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, b"before")
    assert producer.flush(10) == 0

    create_acls(client, binding(topic, AclOperation.WRITE, AclPermissionType.DENY),
                binding(topic, AclOperation.READ, AclPermissionType.DENY),
                binding(topic, AclOperation.DESCRIBE))
    errors: list[KafkaError] = []
    producer.produce(topic, b"after", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])

        def auth_error() -> bool:
            message = consumer.poll(0.5)
            assert message is None or message.error() is not None, "no record may be read"
            return message is not None and (
                message.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED)

        wait_for(auth_error, timeout=30)
    finally:
        consumer.close()
    # DESCRIBE is allowed: the topic is still visible in metadata.
    assert topic in client.list_topics(timeout=10).topics


def test_kafka_python_admin_creates_describes_and_deletes_acls(start_broker: Any) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePattern,
    )
    from kafka.admin import ResourceType as KResourceType
    from kafka.errors import NoError

    broker = start_broker(**SECURED)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    pattern = ResourcePattern(KResourceType.TOPIC, "kp-topic")

    def acl_filter(principal: str | None = None, operation: Any = ACLOperation.ANY,
                   permission: Any = ACLPermissionType.ANY) -> Any:
        return ACLFilter(principal=principal, host="*", operation=operation,
                         permission_type=permission, resource_pattern=pattern)

    try:
        assert client.describe_acls(acl_filter()) == ([], NoError)
        acl = ACL(principal="User:alice", host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW, resource_pattern=pattern)
        created = client.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        found, error = client.describe_acls(acl_filter())
        assert error is NoError
        assert [(a.principal, a.operation) for a in found] == [("User:alice", ACLOperation.READ)]
        deleted = client.delete_acls([acl_filter("User:alice", ACLOperation.READ,
                                                 ACLPermissionType.ALLOW)])
        assert len(deleted) == 1 and len(deleted[0][1]) == 1
        assert client.describe_acls(acl_filter()) == ([], NoError)
    finally:
        client.close()


def test_acls_are_kept_across_a_restart(start_broker: Any) -> None:
    broker = start_broker(**SECURED)
    create_acls(admin(broker), binding("kept", AclOperation.READ, principal="User:alice"))
    broker.restart()
    client = admin(broker)  # kept referenced while its futures are pending
    found = client.describe_acls(any_filter(), request_timeout=10).result()
    assert [(b.name, b.principal, b.operation) for b in found] == [
        ("kept", "User:alice", AclOperation.READ)]


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker: Any) -> None:
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType
    from kafka.errors import SecurityDisabledError

    client = admin(broker)
    futures = [
        *client.create_acls([binding("t", AclOperation.READ)], request_timeout=10).values(),
        *client.delete_acls([any_filter()], request_timeout=10).values(),
    ]
    for future in futures:
        with pytest.raises(KafkaException) as caught:
            future.result()
        assert caught.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # librdkafka drops DescribeAcls' top-level error; kafka-python reports it.
    legacy = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        with pytest.raises(SecurityDisabledError, match="No Authorizer is configured"):
            legacy.describe_acls(ACLFilter(
                principal=None, host=None, operation=ACLOperation.ANY,
                permission_type=ACLPermissionType.ANY,
                resource_pattern=ResourcePatternFilter(KResourceType.ANY, None,
                                                       ACLResourcePatternType.ANY)))
    finally:
        legacy.close()
