"""The authorizer: Kafka 4's ``StandardAuthorizer`` decision, over the ACLs of the metadata image.

``authorize(principal, host, operation, resource_type, name)`` for a LITERAL resource, as
``StandardAuthorizerData.authorize`` decides:
1. a principal in ``super.users`` is always allowed;
2. the ACLs that apply are those of the resource's type whose pattern matches the name (LITERAL
   with the same name, LITERAL ``*``, PREFIXED that the name starts with), for the principal or
   ``User:*``, from the client's host or ``*``;
3. a matching DENY wins (a DENY matches only its own operation, or ALL); else a matching ALLOW
   (ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, ALLOW of ALTER_CONFIGS also
   allows DESCRIBE_CONFIGS, ALLOW of ALL allows everything);
4. with no matching entry: allowed only when the resource has no ACL at all (for any principal,
   host or operation) and ``allow.everyone.if.no.acl.found`` is true.

State: the ACLs live in the image (``replication.metadata.acls.AclImage``, read through
``acls()`` each time since a replay replaces the image). Derived here, keyed on the image's
identity and ``generation``: an index by (resource type, pattern type, name), and a cache of
decisions by (principal, host, operation, resource type, name), cleared when the ACLs change
or when it grows past ``CACHE_SIZE``. Owned by the broker's event loop; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.auth.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    operations_bitfield,
)
from broker.config import STANDARD_AUTHORIZER
from replication.metadata.acls import AclImage, StandardAcl

__all__ = ["CACHE_SIZE", "STANDARD_AUTHORIZER", "Authorizer", "parse_super_users"]

CACHE_SIZE = 100_000

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ';' (Kafka's StandardAuthorizer)."""
    return frozenset(part.strip() for part in text.split(";") if part.strip())


def entry_result(acl: StandardAcl, principal: str, host: str, operation: int) -> bool | None:
    """Kafka's ``findResult``: True (allow), False (deny) or None (does not apply), the
    resource name already known to match."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD_HOST and acl.host != host:
        return None
    allow = acl.permission_type == AclPermissionType.ALLOW
    if acl.operation != AclOperation.ALL and not _covers(acl.operation, operation, allow):
        return None
    return allow


def _covers(acl_operation: int, operation: int, allow: bool) -> bool:
    """Does an ACL for ``acl_operation`` speak to ``operation``? Implications hold for ALLOW
    only: a DENY of READ does not deny DESCRIBE."""
    if allow and operation == AclOperation.DESCRIBE:
        return acl_operation in _IMPLIES_DESCRIBE
    if allow and operation == AclOperation.DESCRIBE_CONFIGS:
        return acl_operation in _IMPLIES_DESCRIBE_CONFIGS
    return acl_operation == operation


@dataclass(slots=True)
class _Index:
    """The ACLs by resource type: literal ones by name, prefixed ones by prefix."""

    literal: dict[tuple[int, str], list[StandardAcl]] = field(default_factory=dict)
    prefixed: dict[int, dict[str, list[StandardAcl]]] = field(default_factory=dict)

    @classmethod
    def build(cls, acls: Iterable[StandardAcl]) -> _Index:
        index = cls()
        for acl in acls:
            if acl.pattern_type == PatternType.PREFIXED:
                by_prefix = index.prefixed.setdefault(acl.resource_type, {})
                by_prefix.setdefault(acl.resource_name, []).append(acl)
            else:
                index.literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
        return index

    def matching(self, resource_type: int, name: str) -> list[StandardAcl]:
        found = list(self.literal.get((resource_type, name), ()))
        if name != WILDCARD_RESOURCE:
            found += self.literal.get((resource_type, WILDCARD_RESOURCE), ())
        for prefix, acls in self.prefixed.get(resource_type, {}).items():
            if name.startswith(prefix):
                found += acls
        return found


class Authorizer:
    def __init__(
        self,
        acls: Callable[[], AclImage],
        *,
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self._acls = acls
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._index = _Index()
        self._index_key: tuple[int, int] = (0, -1)
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}

    def authorize(
        self, principal: str, host: str, operation: int, resource_type: int, name: str
    ) -> bool:
        """May ``principal`` from ``host`` do ``operation`` on the LITERAL resource?"""
        self._refresh()
        key = (principal, host, operation, resource_type, name)
        decision = self._cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._cache) >= CACHE_SIZE:
                self._cache.clear()
            self._cache[key] = decision
        return decision

    def authorized_operations(
        self, principal: str, host: str, resource_type: int, name: str
    ) -> int:
        """The bitfield of the resource type's supported operations that are allowed."""
        allowed = {
            int(operation) for operation in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(principal, host, operation, resource_type, name)
        }
        return operations_bitfield(allowed)

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: int, resource_type: int
    ) -> bool:
        """Kafka's ``Authorizer.authorizeByResourceType``: is ``operation`` allowed on at least
        one resource of the type (some ALLOW not dominated by a DENY)?"""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[StandardAcl] = []
        for acl in self._acls().by_id.values():
            if not self._applies_to(acl, principal, host, operation, resource_type):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD_RESOURCE:
                    return False
                target = deny_prefixed if acl.pattern_type == PatternType.PREFIXED else deny_literal
                target.add(acl.resource_name)
            elif acl.permission_type == AclPermissionType.ALLOW:
                allow.append(acl)
        return any(_undominated(acl, deny_literal, deny_prefixed) for acl in allow)

    @staticmethod
    def _applies_to(
        acl: StandardAcl, principal: str, host: str, operation: int, resource_type: int
    ) -> bool:
        return (
            acl.resource_type == resource_type
            and acl.host in (host, WILDCARD_HOST)
            and acl.principal in (principal, WILDCARD_PRINCIPAL)
            and acl.operation in (operation, AclOperation.ALL)
        )

    def _refresh(self) -> None:
        image = self._acls()
        key = (id(image), image.generation)
        if key != self._index_key:
            self._index = _Index.build(image.by_id.values())
            self._index_key = key
            self._cache.clear()

    def _decide(
        self, principal: str, host: str, operation: int, resource_type: int, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        acls = self._index.matching(resource_type, name)
        allowed = False
        for acl in acls:
            result = entry_result(acl, principal, host, operation)
            if result is False:
                return False
            allowed = allowed or result is True
        if allowed:
            return True
        return not acls and self.allow_everyone_if_no_acl_found


def _undominated(acl: StandardAcl, deny_literal: set[str], deny_prefixed: set[str]) -> bool:
    """An ALLOW with no DENY covering it: a LITERAL one not denied by name, and no DENY
    prefix that is a prefix of its name (Kafka's ``hasDominatedDeny``)."""
    name = acl.resource_name
    if acl.pattern_type == PatternType.LITERAL:
        if name == WILDCARD_RESOURCE:
            return True
        if name in deny_literal:
            return False
    return not any(name[:length] in deny_prefixed for length in range(1, len(name) + 1))
