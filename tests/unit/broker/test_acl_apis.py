"""CreateAcls / DescribeAcls / DeleteAcls and the checks in other handlers, driven in-process on
a real ``Broker`` (real logs in a temp dir, no sockets), with and without an authorizer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import RequestContext, create_acls, delete_acls, describe_acls, metadata, produce
from broker.auth.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from broker.broker import Broker
from broker.config import BrokerConfig, ConfigError
from protocol.errors import ErrorCode
from protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from protocol.messages.describe_acls_request import DescribeAclsRequest
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.request_header import RequestHeader
from protocol.records import Record, encode_batch
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def start(log_dir: Path, **overrides: str) -> Broker:
    properties = {"log.dirs": str(log_dir), "offsets.topic.num.partitions": "1"} | overrides
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=ManualClock(1000))
    broker.startup()
    return broker


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Broker]:
    broker = start(tmp_path, **{"authorizer.class.name": AUTHORIZER,
                                "allow.everyone.if.no.acl.found": "true"})
    create_topic(broker, "t", num_partitions=2)
    yield broker
    broker.shutdown()


def context(broker: Broker, api_key: int, version: int, principal: str = "User:ANONYMOUS") -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, client_id="c")
    return RequestContext(header=header, api_version=version, broker=broker, connection_id="c",
                          principal=principal, client_host="127.0.0.1")


def creation(name: str, operation: int = AclOperation.READ, permission: int = ALLOW, *,
             pattern: int = LITERAL, resource_type: int = TOPIC, principal: str = "User:alice",
             host: str = "*") -> AclCreation:
    return AclCreation(resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
                       principal=principal, host=host, operation=operation, permission_type=permission)


def create(broker: Broker, *creations: AclCreation, principal: str = "User:ANONYMOUS") -> list[int]:
    response = create_acls.handle(context(broker, 30, 3, principal),
                                  CreateAclsRequest(creations=list(creations)))
    return [result.error_code for result in response.results]


def describe(broker: Broker, **fields: Any) -> Any:
    request = DescribeAclsRequest(**({
        "resource_type_filter": ResourceType.ANY, "resource_name_filter": None,
        "pattern_type_filter": PatternType.ANY, "principal_filter": None, "host_filter": None,
        "operation": AclOperation.ANY, "permission_type": AclPermissionType.ANY,
    } | fields))
    return describe_acls.handle(context(broker, 29, 3), request)


def delete_filter(**fields: Any) -> DeleteAclsFilter:
    return DeleteAclsFilter(**({
        "resource_type_filter": ResourceType.ANY, "resource_name_filter": None,
        "pattern_type_filter": PatternType.ANY, "principal_filter": None, "host_filter": None,
        "operation": AclOperation.ANY, "permission_type": AclPermissionType.ANY,
    } | fields))


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(tmp_path: Path) -> None:
    broker = start(tmp_path)
    try:
        assert create(broker, creation("t")) == [ErrorCode.SECURITY_DISABLED]
        assert describe(broker).error_code == ErrorCode.SECURITY_DISABLED
        response = delete_acls.handle(context(broker, 31, 3),
                                      DeleteAclsRequest(filters=[delete_filter()]))
        assert [r.error_code for r in response.filter_results] == [ErrorCode.SECURITY_DISABLED]
    finally:
        broker.shutdown()


def test_create_checks_each_binding_and_writes_only_new_ones(secured: Broker) -> None:
    codes = create(
        secured,
        creation("t"),
        creation("t"),  # the same ACL twice: one record
        creation("p-", AclOperation.WRITE, pattern=PREFIXED),
        creation("", AclOperation.READ),
        creation("t", AclOperation.ANY),
        creation("t", pattern=PatternType.MATCH),
        creation("wrong", AclOperation.ALTER, resource_type=CLUSTER),
        creation("t", resource_type=0),
    )
    invalid = ErrorCode.INVALID_REQUEST
    assert codes == [0, 0, 0, invalid, invalid, invalid, invalid, invalid]
    assert len(secured.replica_manager.image.acls) == 2
    assert create(secured, creation("t")) == [0]
    assert len(secured.replica_manager.image.acls) == 2


def test_describe_filters_and_groups_by_resource(secured: Broker) -> None:
    create(secured, creation("t"), creation("t", AclOperation.WRITE, principal="User:bob"),
           creation("t", pattern=PREFIXED), creation("*"), creation("g", resource_type=GROUP))
    everything = describe(secured)
    assert everything.error_code == 0
    assert sum(len(r.acls) for r in everything.resources) == 5
    assert len(everything.resources) == 4  # (t, LITERAL) holds two ACLs
    matching = describe(secured, resource_type_filter=TOPIC, resource_name_filter="t",
                        pattern_type_filter=PatternType.MATCH)
    assert sorted((r.resource_name, r.pattern_type) for r in matching.resources) == [
        ("*", LITERAL), ("t", LITERAL), ("t", PREFIXED)]
    bob = describe(secured, principal_filter="User:bob")
    assert [(r.resource_name, [a.operation for a in r.acls]) for r in bob.resources] == [
        ("t", [AclOperation.WRITE])]
    assert describe(secured, operation=AclOperation.UNKNOWN).error_code == ErrorCode.INVALID_REQUEST


def test_delete_lists_what_each_filter_matched_and_removes_it_once(secured: Broker) -> None:
    create(secured, creation("t"), creation("t", AclOperation.WRITE), creation("u"))
    request = DeleteAclsRequest(filters=[
        delete_filter(resource_name_filter="t", pattern_type_filter=LITERAL),
        delete_filter(operation=AclOperation.WRITE),
        delete_filter(pattern_type_filter=PatternType.UNKNOWN),
    ])
    response = delete_acls.handle(context(secured, 31, 3), request)
    first, second, bad = response.filter_results
    assert (first.error_code, len(first.matching_acls)) == (0, 2)
    assert (second.error_code, len(second.matching_acls)) == (0, 1)
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    remaining = secured.replica_manager.image.acls.by_id.values()
    assert [acl.resource_name for acl in remaining] == ["u"]


def test_acl_apis_need_cluster_permissions(secured: Broker) -> None:
    create(secured, creation("kafka-cluster", AclOperation.DESCRIBE, resource_type=CLUSTER,
                             principal="User:admin"))
    # Now the cluster has an ACL: only User:admin may DESCRIBE it, nobody may ALTER it.
    assert create(secured, creation("t"), principal="User:eve") == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    denied = describe_acls.handle(context(secured, 29, 3, "User:eve"), DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY, pattern_type_filter=PatternType.ANY,
        operation=AclOperation.ANY, permission_type=AclPermissionType.ANY))
    assert denied.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_acls_survive_a_restart(tmp_path: Path) -> None:
    overrides = {"authorizer.class.name": AUTHORIZER}
    broker = start(tmp_path, **overrides | {"super.users": "User:root"})
    try:
        # No ACL on the cluster and allow.everyone.if.no.acl.found false: only super users.
        assert create(broker, creation("t"), principal="User:eve") == [
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        assert create(broker, creation("t", AclOperation.READ), principal="User:root") == [0]
    finally:
        broker.shutdown()
    broker = start(tmp_path, **overrides)
    try:
        acls = list(broker.replica_manager.image.acls.by_id.values())
        assert [(a.resource_name, a.operation) for a in acls] == [("t", AclOperation.READ)]
        assert broker.authorizer is not None
        assert broker.authorizer.authorize("User:alice", "h", AclOperation.READ, TOPIC, "t")
    finally:
        broker.shutdown()


def batch() -> bytes:
    return encode_batch([Record(offset=0, timestamp=1000, key=None, value=b"v")])


def test_produce_to_a_denied_topic_fails_with_topic_authorization_failed(secured: Broker) -> None:
    create_topic(secured, "open")
    create(secured, creation("t", AclOperation.WRITE, DENY, principal="User:*"))
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        TopicProduceData(name=name, partition_data=[PartitionProduceData(index=0, records=batch())])
        for name in ("t", "open")
    ])
    response = produce.handle(context(secured, 0, 9), request)
    codes = {t.name: t.partition_responses[0].error_code for t in response.responses}  # type: ignore[union-attr]
    assert codes == {"t": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "open": 0}


def test_metadata_hides_denied_topics_and_reports_named_ones(secured: Broker) -> None:
    create_topic(secured, "open")
    create(secured, creation("t", AclOperation.ALL, DENY, principal="User:*"))
    everything = metadata.handle(context(secured, 3, 12), MetadataRequest(topics=None))
    assert "t" not in {topic.name for topic in everything.topics}
    named = metadata.handle(context(secured, 3, 12), MetadataRequest(
        topics=[MetadataRequestTopic(name="t"), MetadataRequestTopic(name="open")],
        include_topic_authorized_operations=True))
    by_name = {topic.name: topic for topic in named.topics}
    assert by_name["t"].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert by_name["t"].topic_authorized_operations == -2147483648
    assert by_name["open"].topic_authorized_operations == sum(
        1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def test_auto_creation_needs_create(secured: Broker) -> None:
    assert create(
        secured,
        creation("new-", AclOperation.DESCRIBE, pattern=PREFIXED, principal="User:*"),
        creation("new-", AclOperation.CREATE, DENY, pattern=PREFIXED, principal="User:*"),
        creation("kafka-cluster", AclOperation.CREATE, DENY, resource_type=CLUSTER,
                 principal="User:*"),
    ) == [0, 0, 0]
    response = metadata.handle(context(secured, 3, 12), MetadataRequest(
        topics=[MetadataRequestTopic(name="new-topic"), MetadataRequestTopic(name="other")]))
    codes = {topic.name: topic.error_code for topic in response.topics}
    assert codes == {"new-topic": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "other": 0}


def test_authorizer_class_name_is_checked_at_start_up() -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    assert caught.value.key == "authorizer.class.name"
    assert "StandardAuthorizer" in caught.value.reason
    config = BrokerConfig.from_properties({"authorizer.class.name": AUTHORIZER,
                                           "super.users": "User:a;User:b"})
    assert (config.authorizer_class_name, config.super_users) == (AUTHORIZER, "User:a;User:b")
    assert BrokerConfig.from_properties({}).allow_everyone_if_no_acl_found is False
