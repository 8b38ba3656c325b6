"""Kafka's ACL model, as the Java AdminClient has it: what ``AdminClient.create_acls``,
``describe_acls`` and ``delete_acls`` take and return.

    from samsa.acl import (AclBinding, AccessControlEntry, AclOperation, AclPermissionType,
                           ResourcePattern, ResourceType)

    deny = AclBinding(ResourcePattern(ResourceType.TOPIC, "payments"),
                      AccessControlEntry("User:*", "*", AclOperation.WRITE, AclPermissionType.DENY))

- Enums with Kafka's wire codes: ``ResourceType``, ``PatternType``, ``AclOperation``,
  ``AclPermissionType``. ``parse(text)`` accepts Kafka's spellings ("IdempotentWrite",
  "IDEMPOTENT_WRITE", "idempotent-write"); ``kafka_name`` is the Pascal-case one Kafka's
  tools print.
- An ACL is an ``AclBinding``: a ``ResourcePattern`` (resource type, name, LITERAL or
  PREFIXED) and an ``AccessControlEntry`` (principal "Type:name", host, operation, ALLOW or
  DENY). Invariant: a binding holds no filter value (ANY, MATCH: ``ValueError`` on
  construction); UNKNOWN stands for a code from a newer broker (``is_unknown``), and such a
  binding cannot be created.
- Filters select ACLs: ``ResourcePatternFilter`` (ANY type, None name, ANY/MATCH pattern
  type match everything), ``AccessControlEntryFilter`` (None principal/host, ANY operation or
  permission), combined in ``AclBindingFilter``; ``AclBindingFilter.ANY`` matches every ACL.
  ``matches(binding)`` applies a filter as Kafka's authorizer does (MATCH: the patterns that
  would apply to a resource of that name: the literal name, the ``*`` wildcard, and prefixes).

Enum fields also take a wire code or a name (``ResourcePattern("topic", "orders")``) and
hold the member afterwards. All are frozen, hashable values; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, TypeVar

__all__ = [
    "WILDCARD",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
]

WILDCARD = "*"  # a resource name or host meaning "every one"; "User:*" is every user

E = TypeVar("E", bound="_KafkaEnum")


class _KafkaEnum(IntEnum):
    """An enum whose members are Kafka's names and wire codes."""

    @classmethod
    def parse(cls: type[E], text: str) -> E:
        """The member named ``text`` in any of Kafka's spellings (``ValueError`` if none)."""
        key = text.strip().replace("-", "").replace("_", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        names = ", ".join(m.kafka_name for m in cls if m.name not in ("UNKNOWN",))
        raise ValueError(f"unknown {cls.__name__} {text!r}; one of: {names}")

    @classmethod
    def from_code(cls: type[E], code: int) -> E:
        """The member with wire code ``code``; UNKNOWN for a code this client does not know."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @property
    def kafka_name(self) -> str:
        """Kafka's Pascal-case name ("IdempotentWrite"), as its tools print it."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    def __str__(self) -> str:
        return self.name


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, the name compared exactly
    MATCH = 2  # filters only: every pattern that applies to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
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


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _coerce(value: object, kind: type[E], owner: object, field_name: str) -> E:
    """``value`` as a ``kind`` member (from the member, its wire code or one of its names),
    stored on the frozen ``owner``."""
    member = kind.parse(value) if isinstance(value, str) else kind(value)  # type: ignore[arg-type]
    object.__setattr__(owner, field_name, member)
    return member


def _not_a_filter_value(value: _KafkaEnum, what: str) -> None:
    if value.name in ("ANY", "MATCH"):
        raise ValueError(f"{value.name} is a filter value; an ACL binding needs a concrete {what}")


def _shown(value: str | None) -> str:
    return "any" if value is None else repr(value)


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """What an ACL is about: ``ResourcePattern(ResourceType.TOPIC, "orders")``; PREFIXED
    matches every name starting with ``name``; LITERAL ``"*"`` matches every name."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        _not_a_filter_value(_coerce(self.resource_type, ResourceType, self, "resource_type"),
                            "resource type")
        _not_a_filter_value(_coerce(self.pattern_type, PatternType, self, "pattern_type"),
                            "pattern type")

    @property
    def is_unknown(self) -> bool:
        """A resource type or pattern type this client does not know (from a newer broker)."""
        return (self.resource_type == ResourceType.UNKNOWN
                or self.pattern_type == PatternType.UNKNOWN)

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    def __str__(self) -> str:
        return f"{self.resource_type.name} {self.name!r} ({self.pattern_type.name})"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who may (ALLOW) or may not (DENY) do ``operation`` from ``host`` (``"*"``: anywhere);
    ``principal`` is "Type:name", e.g. "User:alice", "User:*"."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        _not_a_filter_value(_coerce(self.operation, AclOperation, self, "operation"),
                            "operation")
        _not_a_filter_value(_coerce(self.permission_type, AclPermissionType, self,
                                    "permission_type"), "permission type")

    @property
    def is_unknown(self) -> bool:
        return (self.operation == AclOperation.UNKNOWN
                or self.permission_type == AclPermissionType.UNKNOWN)

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(self.principal, self.host, self.operation,
                                        self.permission_type)

    def __str__(self) -> str:
        return (f"{self.permission_type.name} {self.principal} from host {self.host} "
                f"to {self.operation.name}")


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown

    def to_filter(self) -> AclBindingFilter:
        """The filter matching exactly this ACL."""
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())

    def __str__(self) -> str:
        return f"ACL ({self.entry} on {self.pattern})"


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Selects resource patterns; the defaults select every one."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def __post_init__(self) -> None:
        _coerce(self.resource_type, ResourceType, self, "resource_type")
        _coerce(self.pattern_type, PatternType, self, "pattern_type")

    @property
    def is_unknown(self) -> bool:
        return (self.resource_type == ResourceType.UNKNOWN
                or self.pattern_type == PatternType.UNKNOWN)

    def matches(self, pattern: ResourcePattern) -> bool:
        """Whether ``pattern`` is selected (Kafka's ``ResourcePatternFilter.matches``)."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH,
                                     pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type != PatternType.MATCH:
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return pattern.name in (self.name, WILDCARD)

    def __str__(self) -> str:
        kind = "any resource" if self.resource_type == ResourceType.ANY \
            else self.resource_type.name
        return f"{kind} {_shown(self.name)} ({self.pattern_type.name})"


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Selects entries; None (principal, host) and ANY (operation, permission) match all."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def __post_init__(self) -> None:
        _coerce(self.operation, AclOperation, self, "operation")
        _coerce(self.permission_type, AclPermissionType, self, "permission_type")

    @property
    def is_unknown(self) -> bool:
        return (self.operation == AclOperation.UNKNOWN
                or self.permission_type == AclPermissionType.UNKNOWN)

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission_type in (AclPermissionType.ANY, entry.permission_type))

    def __str__(self) -> str:
        permission = "any permission" if self.permission_type == AclPermissionType.ANY \
            else self.permission_type.name
        operation = "any operation" if self.operation == AclOperation.ANY \
            else self.operation.name
        return (f"{permission} principal {_shown(self.principal)} host {_shown(self.host)} "
                f"{operation}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects ACLs: both halves must match. ``AclBindingFilter.ANY`` selects every ACL."""

    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    ANY: ClassVar[AclBindingFilter]

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and \
            self.entry_filter.matches(binding.entry)

    def __str__(self) -> str:
        return f"ACL filter ({self.entry_filter} on {self.pattern_filter})"


AclBindingFilter.ANY = AclBindingFilter()
