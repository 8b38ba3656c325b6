"""Admin operations on ACLs (a mixin of ``AsyncAdminClient``): ``create_acls`` (CreateAcls),
``describe_acls`` (DescribeAcls) and ``delete_acls`` (DeleteAcls), with the model of
``samsa.acl``.

Routing, as Kafka's admin client: any broker (the least loaded), which forwards ACL changes
to the controller; the calls are retried only for a lost connection. Checks made before
sending, as Kafka's client makes them (``InvalidRequestError``): no binding to create and no
filter may hold UNKNOWN. Version 0 of these APIs knows only LITERAL patterns: another
pattern type there is ``UnsupportedVersionError`` (Kafka 4 brokers start at v1).

Results: ``create_acls`` returns nothing; each binding that failed is named in the error
raised. ``describe_acls`` returns the matching bindings. ``delete_acls`` returns, per filter,
the bindings it deleted; a filter that failed, or a matching binding that could not be
deleted, is named in the error raised (after every filter was tried). A broker without an
authorizer answers SECURITY_DISABLED, raised as ``SecurityDisabledError``.

The request builders and response decoders are module functions, tested without sockets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protocol.errors import ErrorCode, KafkaError, error_for_code
from protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.messages.create_acls_response import CreateAclsResponse
from protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from protocol.messages.delete_acls_response import DeleteAclsMatchingAcl, DeleteAclsResponse
from protocol.messages.describe_acls_request import DescribeAclsRequest
from protocol.messages.describe_acls_response import DescribeAclsResponse
from samsa._admin_base import ANY_BROKER, AdminCore, Failure, failure, item_result, raise_failures
from samsa.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = [
    "AclAdmin",
    "create_acls_request",
    "create_acls_results",
    "delete_acls_request",
    "delete_acls_results",
    "describe_acls_bindings",
    "describe_acls_request",
]

NO_RETRIES: frozenset[int] = frozenset()


def _check_version_0(version: int, pattern_type: PatternType, what: object) -> None:
    if version == 0 and pattern_type not in (PatternType.LITERAL, PatternType.ANY):
        raise error_for_code(ErrorCode.UNSUPPORTED_VERSION)(
            f"the broker's ACL APIs are v0, which know only LITERAL patterns, not {what}")


def _v0_pattern_filter(version: int, pattern_type: PatternType) -> int:
    """v0 has no pattern type field; its filters mean LITERAL (ANY is sent as LITERAL)."""
    return PatternType.LITERAL if version == 0 else pattern_type


def create_acls_request(bindings: Sequence[AclBinding], version: int) -> CreateAclsRequest:
    for binding in bindings:
        _check_version_0(version, binding.pattern.pattern_type, binding)
    return CreateAclsRequest(creations=[AclCreation(
        resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
        resource_pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
        host=b.entry.host, operation=b.entry.operation,
        permission_type=b.entry.permission_type) for b in bindings])


def create_acls_results(bindings: Sequence[AclBinding], response: CreateAclsResponse
                        ) -> dict[AclBinding, object]:
    """Each binding's result (True) or ``KafkaError``; the results come in request order."""
    if len(response.results) != len(bindings):
        return dict.fromkeys(bindings, error_for_code(ErrorCode.UNKNOWN_SERVER_ERROR)(
            f"CreateAcls: {len(response.results)} results for {len(bindings)} ACLs"))
    return {binding: item_result(result.error_code, result.error_message)
            for binding, result in zip(bindings, response.results, strict=True)}


def describe_acls_request(acl_filter: AclBindingFilter, version: int) -> DescribeAclsRequest:
    patterns, entries = acl_filter.pattern_filter, acl_filter.entry_filter
    _check_version_0(version, patterns.pattern_type, acl_filter)
    return DescribeAclsRequest(
        resource_type_filter=patterns.resource_type, resource_name_filter=patterns.name,
        pattern_type_filter=_v0_pattern_filter(version, patterns.pattern_type),
        principal_filter=entries.principal, host_filter=entries.host,
        operation=entries.operation, permission_type=entries.permission_type)


def _binding(resource_type: int, name: str, pattern_type: int, principal: str, host: str,
             operation: int, permission_type: int) -> AclBinding | None:
    """A binding from wire codes; None if the broker sent a filter value (ANY, MATCH)."""
    try:
        return AclBinding(
            ResourcePattern(ResourceType.from_code(resource_type), name,
                            PatternType.from_code(pattern_type)),
            AccessControlEntry(principal, host, AclOperation.from_code(operation),
                               AclPermissionType.from_code(permission_type)))
    except ValueError:
        return None


def describe_acls_bindings(acl_filter: AclBindingFilter, response: DescribeAclsResponse
                           ) -> list[AclBinding] | KafkaError:
    """The bindings the broker described, in its order, or its error (which the caller
    labels with ``acl_filter``)."""
    if response.error_code:
        return item_result(response.error_code, response.error_message)
    found = (_binding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host,
                      a.operation, a.permission_type)
             for r in response.resources for a in r.acls)
    return [binding for binding in found if binding is not None]


def delete_acls_request(filters: Sequence[AclBindingFilter], version: int) -> DeleteAclsRequest:
    for acl_filter in filters:
        _check_version_0(version, acl_filter.pattern_filter.pattern_type, acl_filter)
    return DeleteAclsRequest(filters=[DeleteAclsFilter(
        resource_type_filter=f.pattern_filter.resource_type,
        resource_name_filter=f.pattern_filter.name,
        pattern_type_filter=_v0_pattern_filter(version, f.pattern_filter.pattern_type),
        principal_filter=f.entry_filter.principal, host_filter=f.entry_filter.host,
        operation=f.entry_filter.operation, permission_type=f.entry_filter.permission_type)
        for f in filters])


def _matching(acl: DeleteAclsMatchingAcl) -> AclBinding | None:
    return _binding(acl.resource_type, acl.resource_name, acl.pattern_type, acl.principal,
                    acl.host, acl.operation, acl.permission_type)


def delete_acls_results(filters: Sequence[AclBindingFilter], response: DeleteAclsResponse
                        ) -> dict[AclBindingFilter, object]:
    """Per filter: ``(deleted bindings, failures of single bindings)`` or the filter's
    ``KafkaError``; the results come in request order."""
    if len(response.filter_results) != len(filters):
        return dict.fromkeys(filters, error_for_code(ErrorCode.UNKNOWN_SERVER_ERROR)(
            f"DeleteAcls: {len(response.filter_results)} results for {len(filters)} filters"))
    results: dict[AclBindingFilter, object] = {}
    for acl_filter, result in zip(filters, response.filter_results, strict=True):
        if result.error_code:
            results[acl_filter] = item_result(result.error_code, result.error_message)
            continue
        deleted: list[AclBinding] = []
        failures: list[Failure] = []
        for acl in result.matching_acls:
            binding = _matching(acl)
            if acl.error_code:
                failures.append(failure(str(binding or acl_filter), acl.error_code,
                                        acl.error_message))
            elif binding is not None:
                deleted.append(binding)
        results[acl_filter] = (deleted, failures)
    return results


def _check_known(items: Iterable[AclBinding | AclBindingFilter], what: str) -> None:
    raise_failures(failure(str(item), ErrorCode.INVALID_REQUEST,
                           f"{what} must not contain UNKNOWN elements")
                   for item in items if item.is_unknown)


class AclAdmin(AdminCore):
    """ACLs: create, describe, delete."""

    async def _any_broker(self, _: object) -> int:
        return ANY_BROKER

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Create ``bindings`` (ACLs that exist already are left as they are)."""
        wanted = list(dict.fromkeys(bindings))
        _check_known(wanted, "an ACL to create")
        await self._bootstrap()

        async def send(node_id: int, batch: list[AclBinding]) -> dict[AclBinding, object]:
            response: CreateAclsResponse = await self._request(
                node_id, lambda version: create_acls_request(batch, version), CreateAclsRequest)
            return create_acls_results(batch, response)

        _, failures = await self._routed(wanted, self._any_broker, send, label=str,
                                         retry_codes=NO_RETRIES, what="CreateAcls")
        raise_failures(failures)

    async def describe_acls(self, acl_filter: AclBindingFilter = AclBindingFilter.ANY
                            ) -> list[AclBinding]:
        """The ACLs ``acl_filter`` matches (every ACL by default)."""
        _check_known([acl_filter], "an ACL filter")
        await self._bootstrap()

        async def send(node_id: int, batch: list[AclBindingFilter]
                       ) -> dict[AclBindingFilter, object]:
            response: DescribeAclsResponse = await self._request(
                node_id, lambda version: describe_acls_request(acl_filter, version),
                DescribeAclsRequest)
            return {acl_filter: describe_acls_bindings(acl_filter, response)}

        results, failures = await self._routed([acl_filter], self._any_broker, send, label=str,
                                               retry_codes=NO_RETRIES, what="DescribeAcls")
        raise_failures(failures)
        described: list[AclBinding] = results[acl_filter]
        return described

    async def delete_acls(self, filters: Iterable[AclBindingFilter]
                          ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete every ACL each filter matches; the deleted bindings, per filter."""
        wanted = list(dict.fromkeys(filters))
        _check_known(wanted, "an ACL filter")
        await self._bootstrap()

        async def send(node_id: int, batch: list[AclBindingFilter]
                       ) -> dict[AclBindingFilter, object]:
            response: DeleteAclsResponse = await self._request(
                node_id, lambda version: delete_acls_request(batch, version), DeleteAclsRequest)
            return delete_acls_results(batch, response)

        results, failures = await self._routed(wanted, self._any_broker, send, label=str,
                                               retry_codes=NO_RETRIES, what="DeleteAcls")
        deleted: dict[AclBindingFilter, list[AclBinding]] = {}
        for acl_filter in wanted:
            if acl_filter in results:
                deleted[acl_filter], more = results[acl_filter]
                failures.extend(more)
        raise_failures(failures)
        return deleted
