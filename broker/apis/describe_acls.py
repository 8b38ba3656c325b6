"""DescribeAcls: v1–v3 (v0 removed in Kafka 4, KIP-896).

As Kafka's ``AclApis.handleDescribeAcls``: needs DESCRIBE on the cluster (else
CLUSTER_AUTHORIZATION_FAILED); without an authorizer the answer is SECURITY_DISABLED ("No
Authorizer is configured on the broker"). A filter with an UNKNOWN or undefined code is
INVALID_REQUEST. The matching ACLs (``broker.auth.acl.AclBindingFilter``: ANY, MATCH, LITERAL,
PREFIXED) are grouped by resource pattern, as Kafka's ``DescribeAclsResponse.aclsResources``.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import acl_api_refusal
from broker.auth.acl import AclBindingFilter, AclOperation, validate_filter
from protocol.errors import KafkaError
from protocol.messages.describe_acls_request import DescribeAclsRequest
from protocol.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from replication.metadata.acls import StandardAcl


def handle(context: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    refusal = acl_api_refusal(context, AclOperation.DESCRIBE, "DESCRIBE", "No Authorizer is configured on the broker")
    if refusal is not None:
        return error_response(request, refusal)
    acl_filter = AclBindingFilter(
        resource_type=request.resource_type_filter,
        resource_name=request.resource_name_filter,
        pattern_type=request.pattern_type_filter,
        principal=request.principal_filter,
        host=request.host_filter,
        operation=request.operation,
        permission_type=request.permission_type,
    )
    try:
        validate_filter(acl_filter)
    except KafkaError as error:
        return error_response(request, error)
    acls = context.broker.replica_manager.image.acls.by_id.values()
    return DescribeAclsResponse(
        error_code=0, error_message=None,
        resources=resources([acl for acl in acls if acl_filter.matches(acl)]),
    )


def resources(acls: list[StandardAcl]) -> list[DescribeAclsResource]:
    """The ACLs grouped by (resource type, name, pattern type), in first-seen order."""
    grouped: dict[tuple[int, str, int], list[AclDescription]] = {}
    for acl in acls:
        key = (acl.resource_type, acl.resource_name, acl.pattern_type)
        grouped.setdefault(key, []).append(AclDescription(
            principal=acl.principal, host=acl.host, operation=acl.operation,
            permission_type=acl.permission_type,
        ))
    return [
        DescribeAclsResource(resource_type=resource_type, resource_name=name,
                             pattern_type=pattern_type, acls=descriptions)
        for (resource_type, name, pattern_type), descriptions in grouped.items()
    ]


def error_response(request: DescribeAclsRequest, error: KafkaError) -> DescribeAclsResponse:
    return DescribeAclsResponse(error_code=error.code, error_message=error.message or None)


SPEC = register(
    ApiSpec(
        api_key=DescribeAclsRequest.API_KEY,
        min_version=1,
        max_version=DescribeAclsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeAcls",
    )
)
