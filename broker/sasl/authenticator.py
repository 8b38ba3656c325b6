"""One SASL connection's authentication state, as Kafka's ``SaslServerAuthenticator`` keeps it.

States (Kafka's ``SaslState``)::

    HANDSHAKE_OR_VERSIONS --ApiVersions--> HANDSHAKE --SaslHandshake v1--> AUTHENTICATE
          |                                     \\--SaslHandshake v0--> AUTHENTICATE_RAW
          \\--SaslHandshake--> AUTHENTICATE / AUTHENTICATE_RAW
    AUTHENTICATE --SaslAuthenticate...(complete)--> COMPLETE --SaslHandshake (KIP-368)--> AUTHENTICATE
    any failure --> FAILED (the connection closes)

Before COMPLETE only ApiVersions (once, first), SaslHandshake and SaslAuthenticate are served:
- another request before the handshake: the connection is closed without an answer (Kafka's
  ``IllegalSaslStateException`` "Unexpected Kafka request of type X during SASL handshake");
- another request after the handshake: answered with ILLEGAL_SASL_STATE, then closed;
- an unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed;
- a failed SaslAuthenticate: SASL_AUTHENTICATION_FAILED with Kafka's message, then closed;
- SaslHandshake v0 makes the next frames raw SASL tokens (size-prefixed, no Kafka header),
  answered the same way; a failure there closes the connection without an answer.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 the session lasts that long
(SaslAuthenticate v1+ tells the client ``session_lifetime_ms``). A SaslHandshake on a complete
connection whose session has an expiry starts re-authentication (at most once a second; the same
mechanism and principal are required); any other request after the expiry closes the connection.
Without an expiry a SaslHandshake / SaslAuthenticate after authentication goes to the ordinary
handlers, which answer ILLEGAL_SASL_STATE as Kafka's ``KafkaApis`` does.

Sans-IO: ``on_frame`` takes a request frame and returns ``None`` (serve it as usual) or a
``SaslReply`` (this response frame, and/or close). Time comes from the ``monotonic_ms`` callable.
Owned by one connection.
"""

from __future__ import annotations

import enum
import logging
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from broker.sasl.config import PLAIN, ListenerSecurity
from broker.sasl.errors import SaslAuthenticationError
from broker.sasl.plain import PlainServer
from broker.sasl.scram import ScramServer
from protocol.codec import DecodeError, Message
from protocol.errors import IllegalSaslStateError, InvalidRequestError, KafkaError
from protocol.frames import encode_response_message, parse_request_header
from protocol.messages import REQUESTS, response_header_version
from protocol.messages.request_header import RequestHeader
from protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from protocol.messages.sasl_handshake_response import SaslHandshakeResponse
from replication.metadata.scram import ScramCredential

__all__ = ["ANONYMOUS", "SaslAuthenticator", "SaslReply", "SaslState"]

logger = logging.getLogger("samsa.broker.sasl")

ANONYMOUS = "User:ANONYMOUS"
API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
UNSUPPORTED_SASL_MECHANISM = 33
SASL_AUTHENTICATION_FAILED = 58
MIN_REAUTH_INTERVAL_MS = 1000  # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
_API_KEY = struct.Struct(">h")
_SIZE = struct.Struct(">i")


class SaslState(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS"
    HANDSHAKE = "HANDSHAKE"
    AUTHENTICATE = "AUTHENTICATE"
    AUTHENTICATE_RAW = "AUTHENTICATE_RAW"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class SaslReply:
    """What to do with a frame the authenticator took: send ``response`` (a complete frame) if
    any, then close the connection if ``close`` (``reason`` is logged)."""

    response: bytes | None = None
    close: bool = False
    reason: str = ""


class MechanismServer(Protocol):
    complete: bool
    authorization_id: str

    def evaluate(self, token: bytes) -> bytes: ...


ErrorResponse = Callable[[Any, KafkaError], Message]


class SaslAuthenticator:
    def __init__(
        self,
        security: ListenerSecurity,
        *,
        scram_credential: Callable[[str, int], ScramCredential | None],
        monotonic_ms: Callable[[], int],
        error_responses: Mapping[int, ErrorResponse] | None = None,
    ) -> None:
        self.security = security
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self.principal = ANONYMOUS
        self.authentications = 0  # completed authentications (1 + re-authentications)
        self.expires_at_ms: int | None = None  # session expiry (monotonic), None: never
        self._scram_credential = scram_credential
        self._monotonic_ms = monotonic_ms
        self._error_responses = error_responses or {}
        self._server: MechanismServer | None = None
        self._mechanism = ""
        self._reauthenticating = False
        self._bad_mechanism_message = ""
        self._last_reauth_start_ms: int | None = None

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    # -- the entry point ----------------------------------------------------------------------

    def on_frame(self, frame: memoryview) -> SaslReply | None:
        state = self.state
        if state is SaslState.COMPLETE:
            return None if self.expires_at_ms is None else self._on_session_frame(frame)
        if state is SaslState.AUTHENTICATE_RAW:
            return self._raw_token(bytes(frame))
        if state is SaslState.REAUTH_BAD_MECHANISM:
            return self._fail_closed(self._bad_mechanism_message)
        if state is SaslState.FAILED:
            return SaslReply(close=True, reason="authentication already failed")
        try:
            header, offset = parse_request_header(frame)
        except (DecodeError, InvalidRequestError) as error:
            return self._fail_closed(f"not a Kafka request during SASL authentication "
                                     f"(GSSAPI is not supported): {error}")
        if state is SaslState.AUTHENTICATE:
            return self._authenticate_request(header, frame, offset)
        return self._handshake_phase(header, frame, offset)

    # -- after authentication: expiry and re-authentication ---------------------------------

    def _on_session_frame(self, frame: memoryview) -> SaslReply | None:
        now = self._monotonic_ms()
        api_key = _API_KEY.unpack_from(frame, 0)[0] if len(frame) >= 2 else -1
        if api_key == SASL_HANDSHAKE_KEY and self._may_reauthenticate(now):
            self._last_reauth_start_ms = now
            self._reauthenticating = True
            self.state = SaslState.HANDSHAKE
            try:
                header, offset = parse_request_header(frame)
            except (DecodeError, InvalidRequestError) as error:
                return self._fail_closed(f"unreadable SaslHandshake: {error}")
            return self._handshake_phase(header, frame, offset)
        assert self.expires_at_ms is not None
        if now >= self.expires_at_ms:
            self.state = SaslState.FAILED
            return SaslReply(close=True, reason=f"the SASL session of {self.principal} expired")
        return None

    def _may_reauthenticate(self, now: int) -> bool:
        last = self._last_reauth_start_ms
        return last is None or now - last >= MIN_REAUTH_INTERVAL_MS

    # -- the handshake ------------------------------------------------------------------------

    def _handshake_phase(self, header: RequestHeader, frame: memoryview, offset: int) -> SaslReply | None:
        api_key = header.request_api_key
        if api_key == API_VERSIONS_KEY and self.state is SaslState.HANDSHAKE_OR_VERSIONS:
            self.state = SaslState.HANDSHAKE
            return None  # answered by the ApiVersions handler
        if api_key != SASL_HANDSHAKE_KEY:
            return self._fail_closed(f"Unexpected Kafka request of type {_name(api_key)} "
                                     "during SASL handshake.")
        request = self._decode(header, frame, offset)
        if not isinstance(request, SaslHandshakeRequest):
            return self._fail_closed(f"unreadable SaslHandshake v{header.request_api_version}")
        return self._handshake(header, request.mechanism)

    def _handshake(self, header: RequestHeader, mechanism: str) -> SaslReply:
        enabled = list(self.security.mechanisms)
        if mechanism not in enabled:
            self.state = SaslState.FAILED
            response = SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
            return SaslReply(_encode(header, response), close=True,
                             reason=f"Unsupported SASL mechanism {mechanism}")
        reply = SaslReply(_encode(header, SaslHandshakeResponse(mechanisms=enabled)))
        if self._reauthenticating and mechanism != self._mechanism:
            self._bad_mechanism_message = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self._mechanism}'")
            self.state = SaslState.REAUTH_BAD_MECHANISM
            return reply
        self._mechanism = mechanism
        self._server = self._new_server(mechanism)
        raw = header.request_api_version == 0
        self.state = SaslState.AUTHENTICATE_RAW if raw else SaslState.AUTHENTICATE
        return reply

    def _new_server(self, mechanism: str) -> MechanismServer:
        if mechanism == PLAIN:
            return PlainServer(self.security.plain_users)
        return ScramServer(mechanism, self._scram_credential)

    # -- the tokens ---------------------------------------------------------------------------

    def _authenticate_request(self, header: RequestHeader, frame: memoryview, offset: int) -> SaslReply:
        api_key = header.request_api_key
        request = self._decode(header, frame, offset)
        if request is None:
            return self._fail_closed(f"unreadable {_name(api_key)} v{header.request_api_version} "
                                     "during SASL authentication")
        if api_key != SASL_AUTHENTICATE_KEY:
            return self._illegal_request(header, request)
        assert isinstance(request, SaslAuthenticateRequest)
        try:
            token = self._evaluate(request.auth_bytes)
        except SaslAuthenticationError as error:
            message = self._client_message(error)
            self.state = SaslState.FAILED
            response = SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED,
                                                error_message=message)
            return SaslReply(_encode(header, response), close=True, reason=error.message)
        lifetime = self._session_lifetime_ms() if self.complete else 0
        response = SaslAuthenticateResponse(error_message=None, auth_bytes=token,
                                            session_lifetime_ms=lifetime)
        return SaslReply(_encode(header, response))

    def _raw_token(self, token: bytes) -> SaslReply:
        try:
            response = self._evaluate(token)
        except SaslAuthenticationError as error:
            return self._fail_closed(error.message)
        if self.complete:
            self._session_lifetime_ms()
        return SaslReply(_SIZE.pack(len(response)) + response)

    def _evaluate(self, token: bytes) -> bytes:
        """Step the mechanism; on completion check the principal and enter COMPLETE."""
        server = self._server
        assert server is not None
        response = server.evaluate(bytes(token))
        if server.complete:
            principal = f"User:{server.authorization_id}"
            if self._reauthenticating and principal != self.principal:
                old, new = self.principal.split(":", 1), principal.split(":", 1)
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from "
                    f"{old[0]}.{old[1]}: {new[0]}.{new[1]}")
            self.principal = principal
            self.state = SaslState.COMPLETE
            self.authentications += 1
            self._server = None
            logger.debug("%s as %s with %s", self._text(), principal, self._mechanism)
        return response

    def _session_lifetime_ms(self) -> int:
        """Kafka's ``calcCompletionTimesAndReturnSessionLifetimeMs`` (no expiring credentials)."""
        lifetime = self.security.reauth_ms.get(self._mechanism, 0)
        self.expires_at_ms = self._monotonic_ms() + lifetime if lifetime > 0 else None
        self._reauthenticating = False
        return lifetime

    # -- failures -----------------------------------------------------------------------------

    def _illegal_request(self, header: RequestHeader, request: Message) -> SaslReply:
        reason = f"Unexpected Kafka request of type {_name(header.request_api_key)} during SASL authentication."
        self.state = SaslState.FAILED
        build = self._error_responses.get(header.request_api_key)
        if build is None:
            return SaslReply(close=True, reason=reason)
        return SaslReply(_encode(header, build(request, IllegalSaslStateError(reason))),
                         close=True, reason=reason)

    def _fail_closed(self, reason: str) -> SaslReply:
        self.state = SaslState.FAILED
        return SaslReply(close=True, reason=reason)

    def _client_message(self, error: SaslAuthenticationError) -> str:
        if error.public:
            return error.message
        return (f"Authentication failed during {self._text()} due to invalid credentials with "
                f"SASL mechanism {self._mechanism}")

    def _text(self) -> str:
        return "re-authentication" if self._reauthenticating else "authentication"

    @staticmethod
    def _decode(header: RequestHeader, frame: memoryview, offset: int) -> Message | None:
        message_class = REQUESTS.get(header.request_api_key)
        version = header.request_api_version
        if message_class is None or not message_class.MIN_VERSION <= version <= message_class.MAX_VERSION:
            return None
        try:
            request, _ = message_class.decode_from(frame, offset, version)
        except DecodeError:
            return None
        return request


def _name(api_key: int) -> str:
    """Kafka's ``ApiKeys`` name (METADATA, SASL_HANDSHAKE, ...), as its messages print it."""
    message_class = REQUESTS.get(api_key)
    if message_class is None:
        return str(api_key)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", message_class.__name__.removesuffix("Request")).upper()


def _encode(header: RequestHeader, response: Message) -> bytes:
    version = header.request_api_version
    header_version = response_header_version(header.request_api_key, version)
    return bytes(encode_response_message(header.correlation_id, header_version, response, version))
