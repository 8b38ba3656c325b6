"""DeleteAcls: v1–v3 (v0 removed in Kafka 4, KIP-896).

As Kafka's ``AclApis.handleDeleteAcls`` with the KRaft ``AclControlManager``: needs ALTER on
the cluster (else CLUSTER_AUTHORIZATION_FAILED for every filter); without an authorizer every
filter answers SECURITY_DISABLED. Each filter is checked on its own (an UNKNOWN or undefined
code -> INVALID_REQUEST) and lists the ACLs it matched; every matched ACL is removed with one
RemoveAccessControlEntryRecord, all in one metadata batch.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import acl_api_refusal
from broker.auth.acl import AclBindingFilter, AclOperation
from broker.auth.control import DeleteResult, plan_delete_acls
from protocol.errors import KafkaError
from protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)


def handle(context: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    refusal = acl_api_refusal(context, AclOperation.ALTER, "ALTER", "No Authorizer is configured.")
    if refusal is not None:
        return error_response(request, refusal)
    replica_manager = context.broker.replica_manager
    filters = [_filter(item) for item in request.filters]
    results, records = plan_delete_acls(replica_manager.image.acls, filters)
    if records:
        assert replica_manager.metadata_log is not None
        replica_manager.metadata_log.append(records)
    return DeleteAclsResponse(filter_results=[_result(result) for result in results])


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
