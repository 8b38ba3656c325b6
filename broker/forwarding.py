"""Forwarding: a broker sends the admin requests the controller owns to the active controller,
each wrapped in an Envelope (KIP-590), and answers the client with the unwrapped response
(Kafka's ``ForwardingManager`` over ``NodeToControllerChannelManager``).

Envelope layout (EnvelopeRequest/Response v0, on the controller's listener only):
- ``request_data``: the client's request header and body as they are framed on the wire,
  without the size prefix, re-encoded at the client's version and with its correlation id;
- ``request_principal``: the client's principal as ``int16 version`` + DefaultPrincipalData at
  that version (Kafka's ``DefaultKafkaPrincipalBuilder`` serde; only v0 exists);
- ``client_host_address``: the client's IP address, 4 or 16 bytes;
- ``response_data``: the inner response header and body at the inner request's version, no
  size prefix; the envelope's ``error_code`` is about the envelope itself.

Which APIs are forwarded: ``FORWARDABLE_API_KEYS``, Kafka's ``ApiKeys.forwardable`` (the JSON
schemas carry no such field).

``Forwarder.forward`` follows Kafka's retry rules: while no controller is known, it is
unreachable, the request gets no answer, or the envelope says NOT_CONTROLLER, the request is
sent again (after ``retry_backoff_ms``, re-asking ``controller_id`` each time) until
``retry_timeout_ms`` (Kafka's forwarding channel: 60 s) have passed since it arrived; then the
client gets REQUEST_TIMED_OUT for every part of its request. The envelope answering
UNSUPPORTED_VERSION (the controller cannot read the inner version) closes the client's
connection so that it asks ApiVersions again; any other envelope error, a controller that does
not serve Envelope, or an inner response that cannot be read, becomes UNKNOWN_SERVER_ERROR. The retry wait is a sleep: nothing signals
a controller change here.

State: a ``Forwarder`` holds no state of its own beyond its ``NodeClients``; it belongs to the
event loop.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import struct
from collections.abc import Callable

from broker.apis import CLOSE_CONNECTION, ApiSpec, Outcome, RequestContext, load_apis
from broker.node_client import NodeClientError, NodeClients
from broker.responses import failure_response
from protocol.codec import DecodeError, Message
from protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    PrincipalDeserializationFailureError,
    RequestTimedOutError,
    UnknownServerError,
    UnsupportedVersionError,
)
from protocol.frames import encode_request
from protocol.messages import RESPONSES, response_header_version
from protocol.messages.default_principal_data import DefaultPrincipalData
from protocol.messages.envelope_request import EnvelopeRequest
from protocol.messages.envelope_response import EnvelopeResponse
from protocol.messages.response_header import ResponseHeader

__all__ = [
    "FORWARDABLE_API_KEYS",
    "Forwarder",
    "decode_client_address",
    "decode_principal",
    "encode_client_address",
    "encode_principal",
    "envelope_request",
]

logger = logging.getLogger("samsa.broker.forwarding")

# Kafka's ApiKeys.forwardable: the APIs a broker forwards to the active controller.
FORWARDABLE_API_KEYS = frozenset({
    19,  # CreateTopics
    20,  # DeleteTopics
    30,  # CreateAcls
    31,  # DeleteAcls
    33,  # AlterConfigs
    37,  # CreatePartitions
    38,  # CreateDelegationToken
    39,  # RenewDelegationToken
    40,  # ExpireDelegationToken
    43,  # ElectLeaders
    44,  # IncrementalAlterConfigs
    45,  # AlterPartitionReassignments
    46,  # ListPartitionReassignments
    49,  # AlterClientQuotas
    51,  # AlterUserScramCredentials
    55,  # DescribeQuorum
    57,  # UpdateFeatures
    64,  # UnregisterBroker
    67,  # AllocateProducerIds
    80,  # AddRaftVoter
    81,  # RemoveRaftVoter
})

_VERSION = struct.Struct(">h")
UNKNOWN_ADDRESS = bytes(4)  # 0.0.0.0: a context with no client address (in-process callers)


# -- what crosses the wire in an envelope -------------------------------------------------------


def encode_principal(principal: str) -> bytes:
    """``"User:alice"`` as Kafka's principal serde writes it: int16 version, then
    DefaultPrincipalData (type, name, token_authenticated) at that version."""
    principal_type, _, name = principal.partition(":")
    data = DefaultPrincipalData(type=principal_type, name=name, token_authenticated=False)
    version = DefaultPrincipalData.MAX_VERSION
    return _VERSION.pack(version) + data.encode(version)


def decode_principal(data: bytes | None) -> str:
    """The ``"Type:name"`` principal in ``data``; PRINCIPAL_DESERIALIZATION_FAILURE if none."""
    if data is None or len(data) < _VERSION.size:
        raise PrincipalDeserializationFailureError("Failed to deserialize client principal from envelope")
    (version,) = _VERSION.unpack_from(data)
    if not DefaultPrincipalData.MIN_VERSION <= version <= DefaultPrincipalData.MAX_VERSION:
        raise PrincipalDeserializationFailureError(f"Invalid principal data version {version}")
    try:
        principal = DefaultPrincipalData.decode(memoryview(data)[_VERSION.size:], version)
    except DecodeError as error:
        raise PrincipalDeserializationFailureError(
            f"Failed to deserialize client principal from envelope: {error}") from None
    return f"{principal.type}:{principal.name}"


def encode_client_address(host: str) -> bytes:
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return UNKNOWN_ADDRESS


def decode_client_address(data: bytes) -> str:
    """The client's IP address as text; INVALID_REQUEST unless ``data`` is 4 or 16 bytes."""
    try:
        return str(ipaddress.ip_address(data))
    except ValueError:
        raise InvalidRequestError("Failed to parse client address from envelope") from None


def envelope_request(context: RequestContext, request: Message) -> EnvelopeRequest:
    """``request`` as its client sent it (header at the client's version), in an Envelope."""
    frame = encode_request(context.header, request)
    return EnvelopeRequest(request_data=frame[4:],
                           request_principal=encode_principal(context.principal),
                           client_host_address=encode_client_address(context.client_host))


def decode_inner_response(context: RequestContext, data: bytes) -> Message:
    """The response in an envelope's ``response_data``; DecodeError if it is not the answer
    to the request of ``context`` (its correlation id) or cannot be read whole."""
    view = memoryview(data)
    api_key, version = context.header.request_api_key, context.api_version
    header, offset = ResponseHeader.decode_from(view, 0, response_header_version(api_key, version))
    if header.correlation_id != context.header.correlation_id:
        raise DecodeError(f"correlation id {header.correlation_id}, "
                          f"expected {context.header.correlation_id}")
    return RESPONSES[api_key].decode(view[offset:], version)


# -- the forwarding broker's side ---------------------------------------------------------------


class Forwarder:
    """Sends forwardable requests to the active controller (``controller_id()``: its node id,
    None while unknown) through ``clients``; see the module docstring for the retry rules."""

    def __init__(self, clients: NodeClients, controller_id: Callable[[], int | None], *,
                 retry_timeout_ms: int = 60000, retry_backoff_ms: int = 100) -> None:
        self.clients = clients
        self.controller_id = controller_id
        self.retry_timeout = retry_timeout_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000

    async def forward(self, context: RequestContext, request: Message) -> Outcome:
        """The controller's answer to ``request``, or the error response the retry rules give;
        CLOSE_CONNECTION when the client must reconnect (a handler may return this as is)."""
        spec = load_apis()[context.header.request_api_key]
        envelope = envelope_request(context, request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_timeout
        while True:
            try:
                answer = await self._send_once(envelope)
            except UnsupportedVersionError as error:  # Kafka: a version mismatch
                logger.warning("cannot forward %s v%d: %s", spec.name, context.api_version, error)
                return self._error(context, request, spec, UnknownServerError())
            if answer is not None and answer.error_code != ErrorCode.NOT_CONTROLLER:
                return self._unwrap(context, request, spec, answer)
            if loop.time() + self.retry_backoff >= deadline:
                return self._error(context, request, spec, RequestTimedOutError(
                    f"no active controller answered within {self.retry_timeout * 1000:.0f} ms"))
            await asyncio.sleep(self.retry_backoff)

    async def _send_once(self, envelope: EnvelopeRequest) -> EnvelopeResponse | None:
        """The controller's envelope answer; None when there is none to be had this time."""
        controller = self.controller_id()
        if controller is None:
            return None
        try:
            response = await self.clients.send(controller, envelope)
        except NodeClientError as error:
            logger.debug("forwarding to controller %d: %s", controller, error)
            return None
        assert isinstance(response, EnvelopeResponse)
        return response

    def _unwrap(self, context: RequestContext, request: Message, spec: ApiSpec,
                answer: EnvelopeResponse) -> Outcome:
        if answer.error_code == ErrorCode.UNSUPPORTED_VERSION:
            logger.info("closing connection %s: the controller cannot read %s v%d",
                        context.connection_id, spec.name, context.api_version)
            return CLOSE_CONNECTION
        if answer.error_code or answer.response_data is None:
            logger.warning("forwarded %s v%d failed: envelope error code %d", spec.name,
                           context.api_version, answer.error_code)
            return self._error(context, request, spec, UnknownServerError())
        try:
            return decode_inner_response(context, answer.response_data)
        except (DecodeError, UnsupportedVersionError) as error:
            logger.error("cannot read the controller's %s v%d response: %s", spec.name,
                         context.api_version, error)
            return self._error(context, request, spec, UnknownServerError())

    @staticmethod
    def _error(context: RequestContext, request: Message, spec: ApiSpec,
               error: KafkaError) -> Message:
        return failure_response(spec, context, request, error)
