"""Envelope: v0–v0 (KIP-590), served on controller listeners only (its schema's listeners).

A broker forwards a client's admin request to the active controller inside an Envelope
(``broker.forwarding`` has the layout and the sender's side). Here, as Kafka's
``ControllerApis.handleEnvelopeRequest`` and ``EnvelopeUtils``, in this order:

- the envelope's own principal needs CLUSTER_ACTION on the cluster (with an authorizer), else
  CLUSTER_AUTHORIZATION_FAILED;
- the forwarded principal must deserialize (else PRINCIPAL_DESERIALIZATION_FAILURE) and the
  client address be 4 or 16 bytes (else INVALID_REQUEST);
- the inner header must be readable (else UNSUPPORTED_VERSION, which tells the forwarding
  broker to make its client reconnect), its API forwardable and served here (else
  INVALID_REQUEST), and its body readable at a version served here (else UNSUPPORTED_VERSION);
- the inner request then runs through the registry's handler for its API, with the forwarded
  principal and client address, this connection's id and listener; its response (header and
  body at the inner version, no size prefix) goes back in ``response_data`` with error NONE,
  unless it carries NOT_CONTROLLER anywhere (DescribeQuorum: NOT_LEADER_OR_FOLLOWER), which
  becomes the envelope's NOT_CONTROLLER with no data so that the broker finds the new
  controller and sends again. A handler that raises answers its own error response, wrapped.

Only controller listeners serve Envelope (``broker.apis.served_on``); elsewhere the connection
is closed, as Kafka closes one that sends an API its listener does not serve.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Iterator
from typing import Any

from broker.apis import (
    ApiSpec,
    HandlerResult,
    Outcome,
    RequestContext,
    ZeroCopyResponse,
    load_apis,
    register,
)
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from broker.forwarding import FORWARDABLE_API_KEYS, decode_client_address, decode_principal
from broker.responses import failure_response, response_parts
from protocol.codec import DecodeError, Message
from protocol.errors import (
    ClusterAuthorizationFailedError,
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    UnsupportedVersionError,
)
from protocol.frames import parse_request_header
from protocol.messages import REQUESTS
from protocol.messages.envelope_request import EnvelopeRequest
from protocol.messages.envelope_response import EnvelopeResponse

DESCRIBE_QUORUM_KEY = 55


def handle(context: RequestContext, request: EnvelopeRequest) -> HandlerResult:
    if not authorize_cluster(context, AclOperation.CLUSTER_ACTION):
        raise ClusterAuthorizationFailedError(
            f"Principal {context.principal} does not have required CLUSTER_ACTION for envelope")
    spec, inner_context, inner_request = unwrap(context, request)
    try:
        result = spec.handle(inner_context, inner_request)
    except Exception as error:
        result = failure_response(spec, inner_context, inner_request, error)
    if isinstance(result, Awaitable):
        return _wrap_later(spec, inner_context, inner_request, result)
    return wrap(spec, inner_context, inner_request, result)


def unwrap(context: RequestContext, request: EnvelopeRequest) -> tuple[ApiSpec, RequestContext, Message]:
    """The forwarded request's API, its context and the request; raises the envelope's error."""
    principal = decode_principal(request.request_principal)
    client_host = decode_client_address(request.client_host_address)
    data = memoryview(request.request_data)
    try:
        header, body_offset = parse_request_header(data)
    except InvalidRequestError as error:  # DecodeError included
        raise UnsupportedVersionError(f"Failed to parse request header from envelope: {error}") from None
    spec = load_apis().get(header.request_api_key)  # all handlers, loaded if need be
    if spec is None or spec.api_key not in FORWARDABLE_API_KEYS:
        raise InvalidRequestError(f"API key {header.request_api_key} is not enabled or is not "
                                  "eligible for forwarding")
    version = header.request_api_version
    try:
        if not spec.supports(version):
            raise UnsupportedVersionError(f"{spec.name} v{version} is not supported")
        inner_request, _ = REQUESTS[spec.api_key].decode_from(data, body_offset, version)
    except (DecodeError, UnsupportedVersionError) as error:
        raise UnsupportedVersionError(
            f"Failed to parse forwarded {spec.name} v{version} request: {error}") from None
    inner_context = dataclasses.replace(context, header=header, api_version=version,
                                        principal=principal, client_host=client_host)
    return spec, inner_context, inner_request


async def _wrap_later(spec: ApiSpec, context: RequestContext, request: Message,
                      pending: Awaitable[Outcome]) -> EnvelopeResponse:
    try:
        result = await pending
    except Exception as error:
        result = failure_response(spec, context, request, error)
    return wrap(spec, context, request, result)


def wrap(spec: ApiSpec, context: RequestContext, request: Message, result: Outcome) -> EnvelopeResponse:
    """The envelope answer carrying ``result``, the inner request's outcome."""
    if isinstance(result, ZeroCopyResponse) or not isinstance(result, Message):
        # NO_RESPONSE, CLOSE_CONNECTION or file slices: no forwardable API answers so.
        return EnvelopeResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
    if _means_not_controller(spec.api_key, result):
        return EnvelopeResponse(error_code=ErrorCode.NOT_CONTROLLER)
    frame = response_parts(spec, context, request, result)[0]
    return EnvelopeResponse(response_data=bytes(frame[4:]), error_code=ErrorCode.NONE)  # type: ignore[index]


def _means_not_controller(api_key: int, response: Message) -> bool:
    wanted = (ErrorCode.NOT_LEADER_OR_FOLLOWER if api_key == DESCRIBE_QUORUM_KEY
              else ErrorCode.NOT_CONTROLLER)
    return any(code == wanted for code in error_codes(response))


def error_codes(value: Any) -> Iterator[int]:
    """Every ``error_code`` in a response, at any depth (Kafka's ``errorCounts`` keys)."""
    if isinstance(value, list):
        for item in value:
            yield from error_codes(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if field.name == "error_code" and isinstance(item, int):
                yield item
            elif isinstance(item, list) or dataclasses.is_dataclass(item):
                yield from error_codes(item)


def error_response(request: EnvelopeRequest, error: KafkaError) -> EnvelopeResponse:
    return EnvelopeResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=EnvelopeRequest.API_KEY,
        min_version=0,
        max_version=EnvelopeRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="Envelope",
    )
)
