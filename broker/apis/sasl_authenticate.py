"""SaslAuthenticate: v0–v2, outside authentication.

On a SASL listener the tokens are taken by the connection's ``broker.sasl`` authenticator.
What reaches this handler — on a PLAINTEXT listener, or after authentication — gets
ILLEGAL_SASL_STATE "SaslAuthenticate request received after successful authentication", as
Kafka's ``KafkaApis`` answers it.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from protocol.errors import IllegalSaslStateError, KafkaError
from protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse


def handle(context: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return error_response(request, IllegalSaslStateError(
        "SaslAuthenticate request received after successful authentication"))


def error_response(request: SaslAuthenticateRequest, error: KafkaError) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=error.code, error_message=error.message or None)


SPEC = register(
    ApiSpec(
        api_key=SaslAuthenticateRequest.API_KEY,
        min_version=0,
        max_version=SaslAuthenticateRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="SaslAuthenticate",
    )
)
