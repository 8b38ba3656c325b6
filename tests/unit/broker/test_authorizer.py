"""The authorizer's decision against a brute-force model of Kafka's StandardAuthorizer rules,
plus the ACL model's filters and validation, table-driven where Kafka's tests are."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.auth.acl import (
    SUPPORTED_OPERATIONS,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_filter,
    validate_new_acl,
)
from broker.auth.authorizer import Authorizer, parse_super_users
from protocol.errors import InvalidRequestError
from replication.metadata.acls import AclImage, StandardAcl

OPS = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
CONCRETE_OPS = [op for op in AclOperation if op not in (OPS.UNKNOWN, OPS.ANY)]
# The operations whose interplay (ALL, implications) the property test should hit often.
KEY_OPS = [OPS.ALL, OPS.READ, OPS.WRITE, OPS.CREATE, OPS.DELETE, OPS.ALTER, OPS.DESCRIBE,
           OPS.DESCRIBE_CONFIGS, OPS.ALTER_CONFIGS]


def image_of(*acls: StandardAcl) -> AclImage:
    image = AclImage()
    for acl in acls:
        image.apply(acl.to_record(uuid.uuid4()))
    return image


def acl(name: str, operation: int, permission: int = ALLOW, *, pattern: int = LITERAL,
        principal: str = "User:alice", host: str = "*", resource_type: int = TOPIC) -> StandardAcl:
    return StandardAcl(resource_type, name, pattern, principal, host, operation, permission)


def authorizer(image: AclImage, *, allow_everyone: bool = False, supers: str = "") -> Authorizer:
    return Authorizer(lambda: image, super_users=parse_super_users(supers),
                      allow_everyone_if_no_acl_found=allow_everyone)


# -- the model: Kafka's rules written as plainly as possible -------------------------------------

def model_resource_matches(rule: StandardAcl, resource_type: int, name: str) -> bool:
    if rule.resource_type != resource_type:
        return False
    if rule.pattern_type == LITERAL:
        return rule.resource_name in (name, "*")
    return name.startswith(rule.resource_name)


def model_operation_matches(rule: StandardAcl, operation: int) -> bool:
    if rule.operation == OPS.ALL or rule.operation == operation:
        return True
    if rule.permission_type != ALLOW:
        return False
    if operation == OPS.DESCRIBE:
        return rule.operation in (OPS.READ, OPS.WRITE, OPS.DELETE, OPS.ALTER)
    if operation == OPS.DESCRIBE_CONFIGS:
        return rule.operation == OPS.ALTER_CONFIGS
    return False


def model(acls: list[StandardAcl], principal: str, host: str, operation: int,
          resource_type: int, name: str, *, allow_everyone: bool, supers: set[str]) -> bool:
    if principal in supers:
        return True
    on_resource = [r for r in acls if model_resource_matches(r, resource_type, name)]
    applying = [
        r for r in on_resource
        if r.principal in (principal, "User:*") and r.host in (host, "*")
        and model_operation_matches(r, operation)
    ]
    if any(r.permission_type == DENY for r in applying):
        return False
    if any(r.permission_type == ALLOW for r in applying):
        return True
    return not on_resource and allow_everyone


names = st.sampled_from(["", "f", "fo", "foo", "foobar", "bar", "*"])
resource_names = st.sampled_from(["f", "fo", "foo", "foobar", "bar", "baz"])
principals = st.sampled_from(["User:alice", "User:bob", "User:*"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
rules = st.builds(
    StandardAcl,
    resource_type=st.sampled_from([TOPIC, GROUP]),
    resource_name=names.filter(bool),
    pattern_type=st.sampled_from([LITERAL, PREFIXED]),
    principal=principals,
    host=hosts,
    operation=st.sampled_from(KEY_OPS),
    permission_type=st.sampled_from([ALLOW, DENY]),
)


@settings(max_examples=1000, deadline=None)
@given(
    acls=st.lists(rules, max_size=8),
    principal=st.sampled_from(["User:alice", "User:bob"]),
    host=st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    operation=st.sampled_from(KEY_OPS[1:]),
    resource_type=st.sampled_from([TOPIC, GROUP]),
    name=resource_names,
    allow_everyone=st.booleans(),
    supers=st.sampled_from(["", "User:bob", "User:alice; User:carol"]),
)
def test_decision_matches_the_model(
    acls: list[StandardAcl], principal: str, host: str, operation: int, resource_type: int,
    name: str, allow_everyone: bool, supers: str,
) -> None:
    auth = authorizer(image_of(*acls), allow_everyone=allow_everyone, supers=supers)
    expected = model(acls, principal, host, operation, resource_type, name,
                     allow_everyone=allow_everyone, supers=set(parse_super_users(supers)))
    assert auth.authorize(principal, host, operation, resource_type, name) == expected
    # asked again (now from the cache), the answer is the same
    assert auth.authorize(principal, host, operation, resource_type, name) == expected


@settings(max_examples=200, deadline=None)
@given(acls=st.lists(rules, max_size=6), removed=st.integers(0, 5), name=resource_names)
def test_cache_follows_acl_changes(acls: list[StandardAcl], removed: int, name: str) -> None:
    image = image_of(*acls)
    auth = authorizer(image)
    before = auth.authorize("User:alice", "10.0.0.1", OPS.READ, TOPIC, name)
    assert before == model(acls, "User:alice", "10.0.0.1", OPS.READ, TOPIC, name,
                           allow_everyone=False, supers=set())
    ids = list(image.by_id)
    if ids:
        from protocol.messages.metadata.remove_access_control_entry_record import (
            RemoveAccessControlEntryRecord,
        )
        gone = ids[removed % len(ids)]
        remaining = [a for i, a in image.by_id.items() if i != gone]
        image.apply(RemoveAccessControlEntryRecord(id=gone))
        after = model(remaining, "User:alice", "10.0.0.1", OPS.READ, TOPIC, name,
                      allow_everyone=False, supers=set())
        assert auth.authorize("User:alice", "10.0.0.1", OPS.READ, TOPIC, name) == after


def test_deny_beats_allow_and_implications_are_for_allow_only() -> None:
    image = image_of(acl("t", OPS.WRITE), acl("t", OPS.READ, DENY))
    auth = authorizer(image)
    assert auth.authorize("User:alice", "h", OPS.WRITE, TOPIC, "t")
    assert auth.authorize("User:alice", "h", OPS.DESCRIBE, TOPIC, "t")  # implied by WRITE
    assert not auth.authorize("User:alice", "h", OPS.READ, TOPIC, "t")  # denied
    assert not auth.authorize("User:alice", "h", OPS.ALTER, TOPIC, "t")  # nothing allows it
    assert not auth.authorize("User:bob", "h", OPS.WRITE, TOPIC, "t")  # resource has ACLs


def test_deny_all_on_a_topic_denies_describe_while_an_allow_all_elsewhere_does_not_matter() -> None:
    image = image_of(acl("t", OPS.ALL, DENY, principal="User:*"))
    auth = authorizer(image, allow_everyone=True)
    assert not auth.authorize("User:ANONYMOUS", "h", OPS.DESCRIBE, TOPIC, "t")
    assert auth.authorize("User:ANONYMOUS", "h", OPS.DESCRIBE, TOPIC, "u")  # no ACLs on u


def test_allow_everyone_only_when_the_resource_has_no_acl() -> None:
    image = image_of(acl("secret", OPS.READ, principal="User:bob"), acl("pre", OPS.READ, pattern=PREFIXED))
    auth = authorizer(image, allow_everyone=True)
    assert auth.authorize("User:ANONYMOUS", "h", OPS.READ, TOPIC, "open")
    assert not auth.authorize("User:ANONYMOUS", "h", OPS.READ, TOPIC, "secret")
    assert not auth.authorize("User:ANONYMOUS", "h", OPS.READ, TOPIC, "prefix-topic")
    assert authorizer(image).authorize("User:ANONYMOUS", "h", OPS.READ, TOPIC, "open") is False


def test_super_users_are_always_allowed() -> None:
    auth = authorizer(image_of(acl("t", OPS.ALL, DENY, principal="User:*")),
                      supers="User:admin;User:root")
    assert auth.authorize("User:root", "h", OPS.READ, TOPIC, "t")
    assert not auth.authorize("User:other", "h", OPS.READ, TOPIC, "t")


def test_host_must_match_or_be_the_wildcard() -> None:
    auth = authorizer(image_of(acl("t", OPS.READ, host="10.0.0.1")))
    assert auth.authorize("User:alice", "10.0.0.1", OPS.READ, TOPIC, "t")
    assert not auth.authorize("User:alice", "10.0.0.2", OPS.READ, TOPIC, "t")


def test_authorized_operations_bitfield() -> None:
    auth = authorizer(image_of(acl("t", OPS.READ), acl("t", OPS.ALTER_CONFIGS)))
    field = auth.authorized_operations("User:alice", "h", TOPIC, "t")
    expected = {OPS.READ, OPS.DESCRIBE, OPS.ALTER_CONFIGS, OPS.DESCRIBE_CONFIGS}
    assert field == sum(1 << op for op in expected)
    everyone = authorizer(AclImage(), allow_everyone=True)
    assert everyone.authorized_operations("User:x", "h", GROUP, "g") == sum(
        1 << op for op in SUPPORTED_OPERATIONS[GROUP])


@pytest.mark.parametrize(("acls", "expected"), [
    ([], False),
    ([acl("t", OPS.WRITE)], True),
    ([acl("t", OPS.WRITE), acl("t", OPS.WRITE, DENY)], False),
    ([acl("t", OPS.WRITE), acl("t", OPS.ALL, DENY, pattern=PREFIXED)], False),
    ([acl("tx", OPS.WRITE), acl("t", OPS.WRITE, DENY)], True),  # a literal deny on t only
    ([acl("*", OPS.WRITE)], True),
    ([acl("*", OPS.WRITE), acl("*", OPS.WRITE, DENY)], False),
    ([acl("t", OPS.READ)], False),
    ([acl("t", OPS.WRITE, principal="User:bob")], False),
])
def test_authorize_by_resource_type(acls: list[StandardAcl], expected: bool) -> None:
    auth = authorizer(image_of(*acls))
    assert auth.authorize_by_resource_type("User:alice", "h", OPS.WRITE, TOPIC) is expected


def test_authorize_by_resource_type_with_no_acls_follows_allow_everyone() -> None:
    assert authorizer(AclImage(), allow_everyone=True).authorize_by_resource_type(
        "User:a", "h", OPS.WRITE, TOPIC)


# -- filters ---------------------------------------------------------------------------------

def flt(resource_type: int = ResourceType.ANY, name: str | None = None,
        pattern: int = PatternType.ANY, principal: str | None = None, host: str | None = None,
        operation: int = OPS.ANY, permission: int = AclPermissionType.ANY) -> AclBindingFilter:
    return AclBindingFilter(resource_type, name, pattern, principal, host, operation, permission)


@pytest.mark.parametrize(("acl_filter", "rule", "expected"), [
    (flt(), acl("t", OPS.READ), True),
    (flt(TOPIC, "t"), acl("t", OPS.READ), True),
    (flt(GROUP), acl("t", OPS.READ), False),
    (flt(name="t", pattern=LITERAL), acl("t", OPS.READ, pattern=PREFIXED), False),
    (flt(name="t", pattern=PREFIXED), acl("t", OPS.READ, pattern=PREFIXED), True),
    (flt(name="tx", pattern=PREFIXED), acl("t", OPS.READ, pattern=PREFIXED), False),
    (flt(name="tx", pattern=PatternType.MATCH), acl("t", OPS.READ, pattern=PREFIXED), True),
    (flt(name="tx", pattern=PatternType.MATCH), acl("*", OPS.READ), True),
    (flt(name="tx", pattern=PatternType.MATCH), acl("t", OPS.READ), False),
    (flt(name="*", pattern=PatternType.ANY), acl("t", OPS.READ), False),
    (flt(principal="User:bob"), acl("t", OPS.READ), False),
    (flt(host="*"), acl("t", OPS.READ), True),
    (flt(operation=OPS.WRITE), acl("t", OPS.READ), False),
    (flt(permission=DENY), acl("t", OPS.READ), False),
])
def test_filter_matches_as_kafka(acl_filter: AclBindingFilter, rule: StandardAcl, expected: bool) -> None:
    assert acl_filter.matches(rule) is expected


@pytest.mark.parametrize("acl_filter", [
    flt(resource_type=ResourceType.UNKNOWN), flt(pattern=PatternType.UNKNOWN),
    flt(operation=OPS.UNKNOWN), flt(permission=AclPermissionType.UNKNOWN), flt(resource_type=99),
])
def test_unknown_codes_in_a_filter_are_invalid_requests(acl_filter: AclBindingFilter) -> None:
    with pytest.raises(InvalidRequestError):
        validate_filter(acl_filter)


@pytest.mark.parametrize(("rule", "message"), [
    (acl("t", OPS.READ, resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
    (acl("t", OPS.READ, pattern=PatternType.MATCH), "Invalid patternType MATCH"),
    (acl("t", OPS.ANY), "Invalid operation ANY"),
    (acl("t", OPS.READ, AclPermissionType.ANY), "Invalid permissionType ANY"),
    (acl("", OPS.READ), "Invalid empty resource name"),
    (acl("c", OPS.ALTER, resource_type=CLUSTER), "The only valid name for the CLUSTER resource"),
    (acl("t", OPS.READ, principal="alice"), "Invalid principal"),
])
def test_new_acl_validation(rule: StandardAcl, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        validate_new_acl(rule)
