"""SaslHandshake: v0–v1, outside authentication.

On a SASL listener the handshake is answered by the connection's ``broker.sasl`` authenticator
(before authentication, and to start a KIP-368 re-authentication). What reaches this handler is
a handshake that cannot be one — on a PLAINTEXT listener, or after authentication without a
session expiry — and it gets ILLEGAL_SASL_STATE, as Kafka's ``KafkaApis`` answers it.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from protocol.errors import IllegalSaslStateError, KafkaError
from protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from protocol.messages.sasl_handshake_response import SaslHandshakeResponse


def handle(context: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return error_response(request, IllegalSaslStateError())


def error_response(request: SaslHandshakeRequest, error: KafkaError) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=error.code, mechanisms=[])


SPEC = register(
    ApiSpec(
        api_key=SaslHandshakeRequest.API_KEY,
        min_version=0,
        max_version=SaslHandshakeRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="SaslHandshake",
    )
)
