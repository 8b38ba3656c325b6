"""The ACL model (re-exported by ``broker.auth.acl``): Kafka's resource types, pattern types, operations and permission types (with
their wire codes, ``org.apache.kafka.common.resource`` / ``org.apache.kafka.common.acl``),
binding filters, and the validation the controller applies to a new ACL.

Pure values and functions; no state. An ACL binding is ``StandardAcl`` (kept by the metadata
image, ``replication.metadata.acls``), re-exported here.

Filter semantics (Kafka's ``ResourcePatternFilter`` / ``AccessControlEntryFilter.matches``):
- resource type ANY matches every type; a null name matches every name;
- pattern type ANY matches any pattern type with an exactly equal name; a concrete pattern type
  matches that type with an equal name; MATCH matches every ACL that would apply to a resource
  of that (literal) name: LITERAL with the same name or ``*``, and PREFIXED that the name starts
  with;
- a null principal / host matches any; operation / permission ANY matches any.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from protocol.errors import InvalidRequestError
from replication.metadata.acls import StandardAcl

__all__ = [
    "CLUSTER_NAME",
    "SUPPORTED_OPERATIONS",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "StandardAcl",
    "operations_bitfield",
    "validate_filter",
    "validate_new_acl",
]

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # Kafka's Resource.CLUSTER_NAME


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation
# Kafka's AclEntry.supportedOperations: what an authorized-operations bitfield can hold.
SUPPORTED_OPERATIONS: dict[int, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                         _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                           _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}


def operations_bitfield(operations: set[int] | frozenset[int]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``code`` set for each operation."""
    field = 0
    for code in operations:
        field |= 1 << code
    return field


def _known(enum: type[IntEnum], code: int) -> bool:
    return code in enum._value2member_map_ and code != 0


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A filter over ACL bindings (codes as ints; ``None`` name/principal/host = any)."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, acl: StandardAcl) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: StandardAcl) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return name == acl.resource_name
        if acl.pattern_type == PatternType.LITERAL:  # MATCH against a LITERAL ACL
            return name == acl.resource_name or acl.resource_name == WILDCARD_RESOURCE
        return name.startswith(acl.resource_name)  # MATCH against a PREFIXED ACL

    def _matches_entry(self, acl: StandardAcl) -> bool:
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation not in (AclOperation.ANY, acl.operation):
            return False
        return self.permission_type in (AclPermissionType.ANY, acl.permission_type)


def validate_filter(acl_filter: AclBindingFilter) -> None:
    """A filter with an UNKNOWN (or undefined) code anywhere is INVALID_REQUEST, as Kafka's
    request parsing and ``AclControlManager.validateFilter`` reject it."""
    checks = (
        (ResourceType, acl_filter.resource_type, "resource type"),
        (PatternType, acl_filter.pattern_type, "pattern type"),
        (AclOperation, acl_filter.operation, "operation"),
        (AclPermissionType, acl_filter.permission_type, "permission type"),
    )
    for enum, code, what in checks:
        if not _known(enum, code):
            raise InvalidRequestError(f"Filter contains an unknown {what} ({code}).")


def validate_new_acl(acl: StandardAcl) -> None:
    """Kafka's checks of a binding to create (``AclApis.handleCreateAcls`` then
    ``AclControlManager.validateNewAcl``); raises INVALID_REQUEST with Kafka's message."""
    if not _known(ResourceType, acl.resource_type) or acl.resource_type == ResourceType.ANY:
        raise InvalidRequestError(f"Invalid resourceType {_name(ResourceType, acl.resource_type)}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidRequestError(f"Invalid patternType {_name(PatternType, acl.pattern_type)}")
    if not _known(AclOperation, acl.operation) or acl.operation == AclOperation.ANY:
        raise InvalidRequestError(f"Invalid operation {_name(AclOperation, acl.operation)}")
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidRequestError(
            f"Invalid permissionType {_name(AclPermissionType, acl.permission_type)}"
        )
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise InvalidRequestError(
            f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        )
    if not acl.resource_name:
        raise InvalidRequestError("Invalid empty resource name")
    _validate_principal(acl.principal)


def _validate_principal(principal: str) -> None:
    """Kafka's ``SecurityUtils.parseKafkaPrincipal``: "Type:name", both non-empty."""
    kind, separator, name = principal.partition(":")
    if not separator or not kind or not name:
        raise InvalidRequestError(
            f"Invalid principal {principal!r}: expected the form 'principalType:principalName'"
        )


def _name(enum: type[IntEnum], code: int) -> str:
    member = enum._value2member_map_.get(code)
    return member.name if member is not None else "UNKNOWN"
