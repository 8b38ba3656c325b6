"""The ACL model (samsa.acl) and the admin client's ACL requests and responses
(samsa._admin_acls): built, encoded and decoded with the real codec, no sockets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    SecurityDisabledError,
    UnsupportedVersionError,
)
from protocol.messages.create_acls_request import CreateAclsRequest
from protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from protocol.messages.delete_acls_request import DeleteAclsRequest
from protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from protocol.messages.describe_acls_request import DescribeAclsRequest
from protocol.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from samsa._admin_acls import (
    _check_known,
    create_acls_request,
    create_acls_results,
    delete_acls_request,
    delete_acls_results,
    describe_acls_bindings,
    describe_acls_request,
)
from samsa._admin_base import raise_failures
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

DENY_ALL = AclBinding(ResourcePattern(ResourceType.TOPIC, "payments"),
                      AccessControlEntry("User:*", "*", AclOperation.ALL, AclPermissionType.DENY))
ALLOW_READ = AclBinding(ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED),
                        AccessControlEntry("User:alice", "10.0.0.1", AclOperation.READ,
                                           AclPermissionType.ALLOW))
FLEXIBLE, OLDEST_KAFKA_4 = 3, 1

concrete_resource_types = st.sampled_from([t for t in ResourceType if t > ResourceType.ANY])
concrete_operations = st.sampled_from([o for o in AclOperation if o > AclOperation.ANY])
bindings = st.builds(
    AclBinding,
    st.builds(ResourcePattern, concrete_resource_types, st.text(min_size=1, max_size=20),
              st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED])),
    st.builds(AccessControlEntry, st.from_regex(r"User:[a-z*]{1,8}", fullmatch=True),
              st.sampled_from(["*", "127.0.0.1", "::1"]), concrete_operations,
              st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY])))


def round_trip(message: object, version: int) -> object:
    return type(message).decode(message.encode(version), version)  # type: ignore[attr-defined]


# --- the model -------------------------------------------------------------------------------

def test_enum_codes_are_kafkas() -> None:
    assert (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
            ResourceType.TRANSACTIONAL_ID, ResourceType.USER) == (2, 3, 4, 5, 7)
    assert (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED) == (
        1, 2, 3, 4)
    assert (AclOperation.ALL, AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
            AclOperation.IDEMPOTENT_WRITE, AclOperation.DESCRIBE_TOKENS) == (2, 3, 4, 8, 12, 14)
    assert (AclPermissionType.DENY, AclPermissionType.ALLOW) == (2, 3)


@pytest.mark.parametrize("text", ["IdempotentWrite", "IDEMPOTENT_WRITE", "idempotent-write",
                                  " idempotentwrite "])
def test_parse_takes_kafkas_spellings(text: str) -> None:
    assert AclOperation.parse(text) is AclOperation.IDEMPOTENT_WRITE


def test_parse_rejects_an_unknown_name_listing_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown AclOperation 'Fly'.*IdempotentWrite"):
        AclOperation.parse("Fly")


@given(st.sampled_from([*ResourceType, *PatternType, *AclOperation, *AclPermissionType]))
def test_kafka_name_parses_back(member: object) -> None:
    assert type(member).parse(member.kafka_name) is member  # type: ignore[attr-defined]


def test_an_unknown_wire_code_reads_as_unknown() -> None:
    assert AclOperation.from_code(15) is AclOperation.UNKNOWN
    assert ResourceType.from_code(3) is ResourceType.GROUP


@pytest.mark.parametrize("make", [
    lambda: ResourcePattern(ResourceType.ANY, "t"),
    lambda: ResourcePattern(ResourceType.TOPIC, "t", PatternType.MATCH),
    lambda: AccessControlEntry("User:a", "*", AclOperation.ANY, AclPermissionType.ALLOW),
    lambda: AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ANY),
])
def test_a_binding_holds_no_filter_value(make: object) -> None:
    with pytest.raises(ValueError, match="filter value"):
        make()  # type: ignore[operator]


@given(bindings)
def test_a_bindings_own_filter_and_the_any_filter_match_it(binding: AclBinding) -> None:
    assert binding.to_filter().matches(binding)
    assert AclBindingFilter.ANY.matches(binding)


def test_match_pattern_filters_select_what_applies_to_a_name() -> None:
    def pattern(name: str, kind: PatternType = PatternType.LITERAL) -> ResourcePattern:
        return ResourcePattern(ResourceType.TOPIC, name, kind)

    match = ResourcePatternFilter(ResourceType.TOPIC, "payments-eu", PatternType.MATCH)
    assert match.matches(pattern("payments-eu"))
    assert match.matches(pattern("*"))
    assert match.matches(pattern("pay", PatternType.PREFIXED))
    assert not match.matches(pattern("payments"))
    assert not match.matches(pattern("payments-eu-2", PatternType.PREFIXED))
    exact = ResourcePatternFilter(ResourceType.TOPIC, "payments-eu", PatternType.ANY)
    assert not exact.matches(pattern("*"))
    assert exact.matches(pattern("payments-eu", PatternType.PREFIXED))
    assert not ResourcePatternFilter(ResourceType.GROUP).matches(pattern("payments-eu"))


def test_entry_filters() -> None:
    entry = DENY_ALL.entry
    assert AccessControlEntryFilter(principal="User:*").matches(entry)
    assert not AccessControlEntryFilter(principal="User:bob").matches(entry)
    assert not AccessControlEntryFilter(permission_type=AclPermissionType.ALLOW).matches(entry)
    assert AccessControlEntryFilter(host="*", operation=AclOperation.ALL).matches(entry)


def test_unknown_bindings_and_filters_are_refused_before_sending() -> None:
    unknown = AclBinding(ResourcePattern(ResourceType.UNKNOWN, "t"), DENY_ALL.entry)
    with pytest.raises(InvalidRequestError, match=r"ACL \(DENY User:\* .* on UNKNOWN 't'.*UNKNOWN"):
        _check_known([DENY_ALL, unknown], "an ACL to create")
    _check_known([DENY_ALL, AclBindingFilter.ANY], "an ACL")


# --- requests --------------------------------------------------------------------------------

@given(st.lists(bindings, min_size=1, max_size=5), st.sampled_from([1, 2, 3]))
def test_create_request_carries_each_binding(created: list[AclBinding], version: int) -> None:
    decoded = round_trip(create_acls_request(created, version), version)
    assert isinstance(decoded, CreateAclsRequest)
    assert [AclBinding(ResourcePattern(ResourceType(c.resource_type), c.resource_name,
                                       PatternType(c.resource_pattern_type)),
                       AccessControlEntry(c.principal, c.host, AclOperation(c.operation),
                                          AclPermissionType(c.permission_type)))
            for c in decoded.creations] == created


def test_version_0_refuses_prefixed_patterns() -> None:
    with pytest.raises(UnsupportedVersionError, match="LITERAL"):
        create_acls_request([ALLOW_READ], 0)
    assert create_acls_request([DENY_ALL], 0).creations[0].resource_name == "payments"
    any_filter = AclBindingFilter(ResourcePatternFilter(pattern_type=PatternType.ANY))
    assert describe_acls_request(any_filter, 0).pattern_type_filter == PatternType.LITERAL
    with pytest.raises(UnsupportedVersionError):
        delete_acls_request([ALLOW_READ.to_filter()], 0)


def test_describe_request_from_a_filter() -> None:
    acl_filter = AclBindingFilter(
        ResourcePatternFilter(ResourceType.TOPIC, "payments", PatternType.MATCH),
        AccessControlEntryFilter(principal="User:*", permission_type=AclPermissionType.DENY))
    decoded = round_trip(describe_acls_request(acl_filter, FLEXIBLE), FLEXIBLE)
    assert decoded == DescribeAclsRequest(
        resource_type_filter=2, resource_name_filter="payments", pattern_type_filter=2,
        principal_filter="User:*", host_filter=None, operation=1, permission_type=2)


def test_describe_any_sends_nulls_and_any_codes() -> None:
    request = describe_acls_request(AclBindingFilter.ANY, OLDEST_KAFKA_4)
    assert (request.resource_type_filter, request.resource_name_filter,
            request.pattern_type_filter, request.principal_filter, request.host_filter,
            request.operation, request.permission_type) == (1, None, 1, None, None, 1, 1)


def test_delete_request_keeps_the_filters_order() -> None:
    filters = [DENY_ALL.to_filter(), AclBindingFilter.ANY, ALLOW_READ.to_filter()]
    decoded = round_trip(delete_acls_request(filters, FLEXIBLE), FLEXIBLE)
    assert isinstance(decoded, DeleteAclsRequest)
    assert [(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
             f.principal_filter, f.host_filter, f.operation, f.permission_type)
            for f in decoded.filters] == [
        (2, "payments", 3, "User:*", "*", 2, 2),
        (1, None, 1, None, None, 1, 1),
        (3, "app-", 4, "User:alice", "10.0.0.1", 3, 3)]


# --- responses -------------------------------------------------------------------------------

def test_create_results_name_each_failed_binding() -> None:
    response = round_trip(CreateAclsResponse(results=[
        AclCreationResult(error_code=0, error_message=None),
        AclCreationResult(error_code=ErrorCode.INVALID_REQUEST,
                          error_message="Invalid principal")]), FLEXIBLE)
    results = create_acls_results([DENY_ALL, ALLOW_READ], response)  # type: ignore[arg-type]
    assert results[DENY_ALL] is True
    error = results[ALLOW_READ]
    assert isinstance(error, InvalidRequestError) and "Invalid principal" in str(error)


def test_create_results_of_the_wrong_length_fail_every_binding() -> None:
    results = create_acls_results([DENY_ALL, ALLOW_READ], CreateAclsResponse(results=[]))
    assert all(isinstance(r, Exception) for r in results.values())


def test_describe_response_decodes_to_bindings() -> None:
    response = round_trip(DescribeAclsResponse(resources=[
        DescribeAclsResource(resource_type=2, resource_name="payments", pattern_type=3, acls=[
            AclDescription(principal="User:*", host="*", operation=2, permission_type=2)]),
        DescribeAclsResource(resource_type=3, resource_name="app-", pattern_type=4, acls=[
            AclDescription(principal="User:alice", host="10.0.0.1", operation=3,
                           permission_type=3)])]), FLEXIBLE)
    found = describe_acls_bindings(AclBindingFilter.ANY, response)  # type: ignore[arg-type]
    assert found == [DENY_ALL, ALLOW_READ]


def test_describe_error_is_the_brokers() -> None:
    found = describe_acls_bindings(AclBindingFilter.ANY, DescribeAclsResponse(
        error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured."))
    assert isinstance(found, SecurityDisabledError)
    assert "No Authorizer" in str(found)


def test_describe_skips_bindings_with_filter_values() -> None:
    response = DescribeAclsResponse(resources=[DescribeAclsResource(
        resource_type=1, resource_name="x", pattern_type=3,
        acls=[AclDescription(principal="User:*", host="*", operation=2, permission_type=2)])])
    assert describe_acls_bindings(AclBindingFilter.ANY, response) == []


def test_delete_results_per_filter_with_failed_bindings_named() -> None:
    first, second, third = DENY_ALL.to_filter(), ALLOW_READ.to_filter(), AclBindingFilter.ANY
    response = round_trip(DeleteAclsResponse(filter_results=[
        DeleteAclsFilterResult(matching_acls=[DeleteAclsMatchingAcl(
            resource_type=2, resource_name="payments", pattern_type=3, principal="User:*",
            host="*", operation=2, permission_type=2)]),
        DeleteAclsFilterResult(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                               error_message="not allowed"),
        DeleteAclsFilterResult(matching_acls=[DeleteAclsMatchingAcl(
            error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message="disk", resource_type=3,
            resource_name="app-", pattern_type=4, principal="User:alice", host="10.0.0.1",
            operation=3, permission_type=3)])]), FLEXIBLE)
    results = delete_acls_results([first, second, third], response)  # type: ignore[arg-type]
    assert results[first] == ([DENY_ALL], [])
    assert isinstance(results[second], Exception)
    third_result = results[third]
    assert isinstance(third_result, tuple)
    deleted, failures = third_result
    assert deleted == []
    with pytest.raises(Exception, match=r"ACL \(ALLOW User:alice from host 10.0.0.1 to READ"):
        raise_failures(failures)


def test_enum_fields_take_codes_and_names() -> None:
    assert ResourcePattern("topic", "payments") == DENY_ALL.pattern
    assert AccessControlEntry("User:*", "*", 2, "deny") == DENY_ALL.entry
    assert ResourcePatternFilter("Group", "app-", 4) == ALLOW_READ.pattern.to_filter()
    with pytest.raises(ValueError, match="unknown ResourceType 'queue'"):
        ResourcePattern("queue", "q")
