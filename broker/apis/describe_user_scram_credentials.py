"""DescribeUserScramCredentials: v0–v0.

The SCRAM credentials of the metadata image (``replication.metadata.scram``), as Kafka's
``ScramImage.describe``: each user's mechanisms and iterations — never salts or keys. No users
(null or empty) -> every user with a credential; a user named twice -> DUPLICATE_RESOURCE; a user
without one -> RESOURCE_NOT_FOUND (per user; the request itself succeeds). Served on every
listener, PLAINTEXT included.

Authorization (with an authorizer): DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from protocol.errors import ClusterAuthorizationFailedError, KafkaError
from protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from replication.metadata.scram import describe_credentials


def handle(
    context: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not authorize_cluster(context, AclOperation.DESCRIBE):
        return error_response(request, ClusterAuthorizationFailedError())
    users = None if request.users is None else [user.name for user in request.users]
    credentials = context.broker.replica_manager.image.scram
    response = DescribeUserScramCredentialsResponse(error_message=None)
    for result in describe_credentials(credentials, users):
        response.results.append(DescribeUserScramCredentialsResult(
            user=result.user,
            error_code=0 if result.error is None else result.error.code,
            error_message=None if result.error is None else result.error.message,
            credential_infos=[CredentialInfo(mechanism=mechanism, iterations=iterations)
                              for mechanism, iterations in result.credentials],
        ))
    return response


def error_response(
    request: DescribeUserScramCredentialsRequest, error: KafkaError
) -> DescribeUserScramCredentialsResponse:
    message = error.message or None
    return DescribeUserScramCredentialsResponse(
        error_code=error.code,
        error_message=message,
        results=[DescribeUserScramCredentialsResult(user=user.name, error_code=error.code,
                                                    error_message=message)
                 for user in request.users or ()],
    )


SPEC = register(
    ApiSpec(
        api_key=DescribeUserScramCredentialsRequest.API_KEY,
        min_version=0,
        max_version=DescribeUserScramCredentialsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeUserScramCredentials",
    )
)
