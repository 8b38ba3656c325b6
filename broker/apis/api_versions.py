"""ApiVersions: v0–v4.

The list is computed from the API registry (``broker.apis``): every API a handler module
registered for the listener type the request came in on (a controller listener lists only the
controller APIs, as Kafka's controller does), with its version range (Produce is listed from v0 and served from v3, as Kafka 4
lists it: KAFKA-18659, ``ApiSpec.advertised_min_version``). Not implemented: supported/finalized features (KIP-584),
which clients only read for KRaft and transaction versions.

An ApiVersions request of a version above v4 is answered by the connection (not here) with
UNSUPPORTED_VERSION and the ApiVersions entry in the v0 layout, as Kafka does (KIP-511).
"""

from __future__ import annotations

from broker.apis import (
    BROKER_LISTENER,
    ApiSpec,
    RequestContext,
    listener_type,
    register,
    registry,
    served_on,
)
from protocol.errors import KafkaError, UnsupportedVersionError
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse


def supported_versions(listener: str = BROKER_LISTENER) -> list[ApiVersion]:
    """What a listener of type ``listener`` serves, as ApiVersions lists it."""
    return [
        ApiVersion(api_key=spec.api_key, min_version=low, max_version=high)
        for spec in served_on(registry(), listener).values()
        for low, high in [spec.advertised_range]
    ]


def handle(context: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    listener = listener_type(context.broker.config, context.listener_name)
    return ApiVersionsResponse(error_code=0, api_keys=supported_versions(listener))


def error_response(request: ApiVersionsRequest, error: KafkaError) -> ApiVersionsResponse:
    response = ApiVersionsResponse(error_code=error.code)
    if isinstance(error, UnsupportedVersionError):
        response.api_keys = [
            ApiVersion(api_key=SPEC.api_key, min_version=SPEC.min_version, max_version=SPEC.max_version)
        ]
    return response


def unsupported_version_frame(correlation_id: int) -> bytes:
    """The reply to an ApiVersions request of a version we do not know: response header v0,
    body v0 with UNSUPPORTED_VERSION and our ApiVersions range (Kafka's
    ``ApiVersionsRequest.getErrorResponse``), so the client retries with a version we serve."""
    from protocol.frames import encode_response_message

    body = error_response(ApiVersionsRequest(), UnsupportedVersionError())
    return bytes(encode_response_message(correlation_id, 0, body, 0))


SPEC = register(
    ApiSpec(
        api_key=ApiVersionsRequest.API_KEY,
        min_version=0,
        max_version=ApiVersionsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="ApiVersions",
    )
)
