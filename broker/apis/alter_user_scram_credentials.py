"""AlterUserScramCredentials: v0–v0.

Upserts and deletes SCRAM credentials as one atomic batch of metadata records
(UserScramCredentialRecord / RemoveUserScramCredentialRecord), with the rules and errors of
Kafka's ``ScramControlManager`` (``replication.metadata.scram.plan_alter_credentials``): a user
named twice -> DUPLICATE_RESOURCE; empty name, or iterations outside 4096..16384 ->
UNACCEPTABLE_CREDENTIAL; a mechanism other than SCRAM-SHA-256 (1) / SCRAM-SHA-512 (2) ->
UNSUPPORTED_SASL_MECHANISM; deleting a credential that does not exist -> RESOURCE_NOT_FOUND.
The client sends the salted password; only the stored and server keys derived from it are
kept. A credential takes effect for the next authentication; connections already
authenticated keep their session. Served on every listener, PLAINTEXT included.

Authorization (with an authorizer): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.

The changes are proposed to the controller (``replication.controller``); the response is sent once
they are committed (at once on a single node).
"""

from __future__ import annotations

from collections.abc import Awaitable

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from broker.commits import refusal, when_committed
from protocol.errors import ClusterAuthorizationFailedError, KafkaError
from protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from replication.controller.proposal import Proposal
from replication.metadata.scram import AlterResult, Deletion, Upsertion


def handle(
    context: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse | Awaitable[AlterUserScramCredentialsResponse]:
    if not authorize_cluster(context, AclOperation.ALTER):
        return error_response(request, ClusterAuthorizationFailedError())
    proposal = context.broker.controller.alter_scram(
        [Deletion(d.name, d.mechanism) for d in request.deletions],
        [Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
         for u in request.upsertions],
    )
    return when_committed([proposal], lambda: _response(request, proposal))


def _response(
    request: AlterUserScramCredentialsRequest, proposal: Proposal[list[AlterResult]]
) -> AlterUserScramCredentialsResponse:
    error = refusal(proposal, "altering SCRAM credentials")
    if error is not None:
        return error_response(request, error)
    return AlterUserScramCredentialsResponse(results=[
        AlterUserScramCredentialsResult(
            user=result.user,
            error_code=0 if result.error is None else result.error.code,
            error_message=None if result.error is None else result.error.message,
        )
        for result in proposal.result()
    ])


def error_response(
    request: AlterUserScramCredentialsRequest, error: KafkaError
) -> AlterUserScramCredentialsResponse:
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return AlterUserScramCredentialsResponse(results=[
        AlterUserScramCredentialsResult(user=user, error_code=error.code,
                                        error_message=error.message or None)
        for user in users
    ])


SPEC = register(
    ApiSpec(
        api_key=AlterUserScramCredentialsRequest.API_KEY,
        min_version=0,
        max_version=AlterUserScramCredentialsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="AlterUserScramCredentials",
    )
)
