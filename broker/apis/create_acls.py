"""CreateAcls: v1–v3 (v0 removed in Kafka 4, KIP-896).

As Kafka's ``AclApis.handleCreateAcls`` with the KRaft ``AclControlManager``: the request
needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every creation); without an
authorizer every creation answers SECURITY_DISABLED. Each binding is checked on its own
(``broker.auth.acl.validate_new_acl``: unknown or ANY resource type / operation, a pattern
type other than LITERAL or PREFIXED, a permission other than ALLOW/DENY, an empty name, a
CLUSTER name other than "kafka-cluster", a principal not "Type:name" -> INVALID_REQUEST with
Kafka's message); the valid ones are written as AccessControlEntryRecords in one metadata
batch. Creating an ACL that exists already succeeds without writing it again.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import acl_api_refusal
from broker.auth.acl import AclOperation
from broker.auth.control import plan_create_acls
from protocol.errors import KafkaError
from protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from replication.metadata.acls import StandardAcl


def handle(context: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    refusal = acl_api_refusal(context, AclOperation.ALTER, "ALTER", "No Authorizer is configured.")
    if refusal is not None:
        return error_response(request, refusal)
    replica_manager = context.broker.replica_manager
    acls = [_binding(creation) for creation in request.creations]
    errors, records = plan_create_acls(replica_manager.image.acls, acls)
    if records:
        assert replica_manager.metadata_log is not None
        replica_manager.metadata_log.append(records)
    return CreateAclsResponse(results=[_result(error) for error in errors])


def _binding(creation: AclCreation) -> StandardAcl:
    return StandardAcl(
        resource_type=creation.resource_type,
        resource_name=creation.resource_name,
        pattern_type=creation.resource_pattern_type,
        principal=creation.principal,
        host=creation.host,
        operation=creation.operation,
        permission_type=creation.permission_type,
    )


def _result(error: KafkaError | None) -> AclCreationResult:
    if error is None:
        return AclCreationResult(error_code=0, error_message=None)
    return AclCreationResult(error_code=error.code, error_message=error.message or None)


def error_response(request: CreateAclsRequest, error: KafkaError) -> CreateAclsResponse:
    return CreateAclsResponse(results=[_result(error) for _ in request.creations])


SPEC = register(
    ApiSpec(
        api_key=CreateAclsRequest.API_KEY,
        min_version=1,
        max_version=CreateAclsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="CreateAcls",
    )
)
