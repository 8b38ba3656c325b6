"""DeleteAcls: v1–v3 (v0 removed in Kafka 4, KIP-896).

As Kafka's ``AclApis.handleDeleteAcls`` with the KRaft ``AclControlManager``: needs ALTER on
the cluster (else CLUSTER_AUTHORIZATION_FAILED for every filter); without an authorizer every
filter answers SECURITY_DISABLED. Each filter is checked on its own (an UNKNOWN or undefined
code -> INVALID_REQUEST) and lists the ACLs it matched; every matched ACL is removed with one
RemoveAccessControlEntryRecord, all in one metadata batch.

The changes are proposed to the controller (``replication.controller``); the response is sent once
they are committed (at once on a single node).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import acl_api_refusal
from broker.auth.acl import AclBindingFilter, AclOperation
from broker.commits import refusal, when_committed
from protocol.errors import KafkaError
from protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from replication.controller.proposal import Proposal
from replication.metadata.acl_control import DeleteResult


def handle(
    context: RequestContext, request: DeleteAclsRequest
) -> DeleteAclsResponse | Awaitable[DeleteAclsResponse]:
    denied = acl_api_refusal(context, AclOperation.ALTER, "ALTER", "No Authorizer is configured.")
    if denied is not None:
        return error_response(request, denied)
    proposal = context.broker.controller.delete_acls([_filter(item) for item in request.filters])
    return when_committed([proposal], lambda: _response(request, proposal))


def _response(request: DeleteAclsRequest, proposal: Proposal[list[DeleteResult]]) -> DeleteAclsResponse:
    error = refusal(proposal, "deleting ACLs")
    if error is not None:
        return error_response(request, error)
    return DeleteAclsResponse(filter_results=[_result(result) for result in proposal.result()])


def _filter(item: DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=item.resource_type_filter,
        resource_name=item.resource_name_filter,
        pattern_type=item.pattern_type_filter,
        principal=item.principal_filter,
        host=item.host_filter,
        operation=item.operation,
        permission_type=item.permission_type,
    )


def _result(result: DeleteResult) -> DeleteAclsFilterResult:
    if result.error is not None:
        return _failed(result.error)
    return DeleteAclsFilterResult(
        error_code=0, error_message=None,
        matching_acls=[
            DeleteAclsMatchingAcl(
                error_code=0, error_message=None, resource_type=acl.resource_type,
                resource_name=acl.resource_name, pattern_type=acl.pattern_type,
                principal=acl.principal, host=acl.host, operation=acl.operation,
                permission_type=acl.permission_type,
            )
            for acl in result.matched
        ],
    )


def _failed(error: KafkaError) -> DeleteAclsFilterResult:
    return DeleteAclsFilterResult(error_code=error.code, error_message=error.message or None)


def error_response(request: DeleteAclsRequest, error: KafkaError) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=[_failed(error) for _ in request.filters])


SPEC = register(
    ApiSpec(
        api_key=DeleteAclsRequest.API_KEY,
        min_version=1,
        max_version=DeleteAclsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DeleteAcls",
    )
)
