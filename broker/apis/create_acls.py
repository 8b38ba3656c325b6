"""CreateAcls: v1–v3 (v0 removed in Kafka 4, KIP-896).

As Kafka's ``AclApis.handleCreateAcls`` with the KRaft ``AclControlManager``: the request
needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every creation); without an
authorizer every creation answers SECURITY_DISABLED. Each binding is checked on its own
(``broker.auth.acl.validate_new_acl``: unknown or ANY resource type / operation, a pattern
type other than LITERAL or PREFIXED, a permission other than ALLOW/DENY, an empty name, a
CLUSTER name other than "kafka-cluster", a principal not "Type:name" -> INVALID_REQUEST with
Kafka's message); the valid ones are written as AccessControlEntryRecords in one metadata
batch. Creating an ACL that exists already succeeds without writing it again.

The changes are proposed to the controller (``replication.controller``); the response is sent once
they are committed (at once on a single node).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import acl_api_refusal
from broker.auth.acl import AclOperation
from broker.commits import refusal, when_committed
from protocol.errors import KafkaError
from protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from replication.controller.proposal import Proposal
from replication.metadata.acls import StandardAcl


def handle(
    context: RequestContext, request: CreateAclsRequest
) -> CreateAclsResponse | Awaitable[CreateAclsResponse]:
    denied = acl_api_refusal(context, AclOperation.ALTER, "ALTER", "No Authorizer is configured.")
    if denied is not None:
        return error_response(request, denied)
    proposal = context.broker.controller.create_acls(
        [_binding(creation) for creation in request.creations])
    return when_committed([proposal], lambda: _response(request, proposal))


def _response(
    request: CreateAclsRequest, proposal: Proposal[list[KafkaError | None]]
) -> CreateAclsResponse:
    error = refusal(proposal, "creating ACLs")
    if error is not None:
        return error_response(request, error)
    return CreateAclsResponse(results=[_result(error) for error in proposal.result()])


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
