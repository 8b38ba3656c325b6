"""The SASL authenticator state machine, fed request frames (no sockets), with a manual clock."""

from __future__ import annotations

import struct

import pytest

from broker.apis import load_apis
from broker.sasl.authenticator import SaslAuthenticator, SaslReply, SaslState
from broker.sasl.config import ListenerSecurity
from protocol.codec import Message
from protocol.frames import encode_request
from protocol.messages import response_header_version
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.metadata_request import MetadataRequest
from protocol.messages.request_header import RequestHeader
from protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from protocol.messages.sasl_handshake_response import SaslHandshakeResponse
from storage.clock import ManualClock
from tests.unit.broker.test_sasl_mechanisms import ScramClient, credential

SECURITY = ListenerSecurity(
    "SASL_PLAINTEXT", "SASL_PLAINTEXT", ("PLAIN", "SCRAM-SHA-256"),
    {"alice": "alice-secret", "bob": "bob-secret"}, {"PLAIN": 0, "SCRAM-SHA-256": 0},
)
SCRAM_USERS = {"carol": credential("SCRAM-SHA-256", "carol-secret", b"salt")}


def authenticator(reauth_ms: int = 0, clock: ManualClock | None = None) -> SaslAuthenticator:
    security = ListenerSecurity(
        SECURITY.listener_name, SECURITY.security_protocol, SECURITY.mechanisms,
        SECURITY.plain_users, {"PLAIN": reauth_ms, "SCRAM-SHA-256": reauth_ms})
    clock = clock or ManualClock()
    return SaslAuthenticator(
        security,
        scram_credential=lambda user, kind: SCRAM_USERS.get(user) if kind == 1 else None,
        monotonic_ms=clock.monotonic_ms,
        error_responses={key: spec.error_response for key, spec in load_apis().items()},
    )


def request(message: Message, version: int, correlation_id: int = 1) -> memoryview:
    header = RequestHeader(request_api_key=message.API_KEY, request_api_version=version,
                           correlation_id=correlation_id, client_id="test")
    return memoryview(encode_request(header, message))[4:]


def response(reply: SaslReply | None, cls: type[Message], version: int) -> Message:
    assert reply is not None and reply.response is not None
    frame = reply.response
    size, correlation_id = struct.unpack_from(">ii", frame, 0)
    assert correlation_id == 1
    assert size == len(frame) - 4
    offset = 8 + (1 if response_header_version(cls.API_KEY, version) == 1 else 0)  # tagged fields
    message, _ = cls.decode_from(memoryview(frame), offset, version)
    return message


def plain_login(auth: SaslAuthenticator, user: str = "alice", password: str = "alice-secret",
                version: int = 1) -> SaslAuthenticateResponse:
    handshake = response(auth.on_frame(request(SaslHandshakeRequest(mechanism="PLAIN"), 1)),
                         SaslHandshakeResponse, 1)
    assert isinstance(handshake, SaslHandshakeResponse) and handshake.error_code == 0
    token = f"\0{user}\0{password}".encode()
    reply = auth.on_frame(request(SaslAuthenticateRequest(auth_bytes=token), version))
    result = response(reply, SaslAuthenticateResponse, version)
    assert isinstance(result, SaslAuthenticateResponse)
    return result


def test_api_versions_then_plain_authentication() -> None:
    auth = authenticator()
    assert auth.on_frame(request(ApiVersionsRequest(), 3)) is None  # served by the handler
    result = plain_login(auth)
    assert result.error_code == 0 and result.session_lifetime_ms == 0
    assert auth.complete and auth.principal == "User:alice"
    assert auth.on_frame(request(MetadataRequest(), 12)) is None


def test_handshake_lists_the_enabled_mechanisms_and_refuses_others() -> None:
    auth = authenticator()
    reply = auth.on_frame(request(SaslHandshakeRequest(mechanism="GSSAPI"), 1))
    handshake = response(reply, SaslHandshakeResponse, 1)
    assert isinstance(handshake, SaslHandshakeResponse)
    assert handshake.error_code == 33 and handshake.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
    assert reply is not None and reply.close


def test_wrong_password_answers_sasl_authentication_failed_then_closes() -> None:
    auth = authenticator()
    result = plain_login(auth, password="nope")
    assert result.error_code == 58
    assert result.error_message == "Authentication failed: Invalid username or password"
    assert auth.state is SaslState.FAILED and auth.principal == "User:ANONYMOUS"


def test_scram_failure_gets_kafkas_generic_message() -> None:
    auth = authenticator()
    auth.on_frame(request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1))
    client = ScramClient("SCRAM-SHA-256", "carol", "wrong")
    first = response(auth.on_frame(request(SaslAuthenticateRequest(auth_bytes=client.first()), 2)),
                     SaslAuthenticateResponse, 2)
    assert isinstance(first, SaslAuthenticateResponse)
    final = auth.on_frame(request(SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)), 2))
    result = response(final, SaslAuthenticateResponse, 2)
    assert isinstance(result, SaslAuthenticateResponse) and result.error_code == 58
    assert result.error_message == ("Authentication failed during authentication due to invalid "
                                    "credentials with SASL mechanism SCRAM-SHA-256")
    assert final is not None and final.close


def test_scram_success_sets_the_principal() -> None:
    auth = authenticator()
    auth.on_frame(request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1))
    client = ScramClient("SCRAM-SHA-256", "carol", "carol-secret")
    first = response(auth.on_frame(request(SaslAuthenticateRequest(auth_bytes=client.first()), 1)),
                     SaslAuthenticateResponse, 1)
    assert isinstance(first, SaslAuthenticateResponse) and not auth.complete
    auth.on_frame(request(SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)), 1))
    assert auth.complete and auth.principal == "User:carol"


def test_a_request_before_the_handshake_closes_without_an_answer() -> None:
    reply = authenticator().on_frame(request(MetadataRequest(), 12))
    assert reply == SaslReply(None, True, "Unexpected Kafka request of type METADATA during SASL handshake.")


def test_a_second_api_versions_closes() -> None:
    auth = authenticator()
    auth.on_frame(request(ApiVersionsRequest(), 3))
    reply = auth.on_frame(request(ApiVersionsRequest(), 3))
    assert reply is not None and reply.close and reply.response is None


def test_a_request_after_the_handshake_gets_illegal_sasl_state_then_closes() -> None:
    auth = authenticator()
    auth.on_frame(request(SaslHandshakeRequest(mechanism="PLAIN"), 1))
    reply = auth.on_frame(request(MetadataRequest(topics=None), 12))
    assert reply is not None and reply.close and reply.response is not None


def test_garbage_first_frame_closes() -> None:
    reply = authenticator().on_frame(memoryview(b"\x60\x01garbage-gssapi-token"))
    assert reply is not None and reply.close and reply.response is None


def test_handshake_v0_switches_to_raw_tokens() -> None:
    auth = authenticator()
    auth.on_frame(request(SaslHandshakeRequest(mechanism="PLAIN"), 0))
    reply = auth.on_frame(memoryview(b"\0alice\0alice-secret"))
    assert reply == SaslReply(b"\0\0\0\0")
    assert auth.principal == "User:alice"


def test_raw_token_failure_closes_without_an_answer() -> None:
    auth = authenticator()
    auth.on_frame(request(SaslHandshakeRequest(mechanism="PLAIN"), 0))
    reply = auth.on_frame(memoryview(b"\0alice\0wrong"))
    assert reply is not None and reply.close and reply.response is None


def test_session_lifetime_and_expiry() -> None:
    clock = ManualClock()
    auth = authenticator(reauth_ms=5000, clock=clock)
    assert plain_login(auth, version=1).session_lifetime_ms == 5000
    clock.advance(4999)
    assert auth.on_frame(request(MetadataRequest(), 12)) is None
    clock.advance(1)
    reply = auth.on_frame(request(MetadataRequest(), 12))
    assert reply is not None and reply.close and "expired" in reply.reason


def test_reauthentication_renews_the_session() -> None:
    clock = ManualClock()
    auth = authenticator(reauth_ms=5000, clock=clock)
    plain_login(auth)
    clock.advance(4000)
    assert plain_login(auth).session_lifetime_ms == 5000
    assert auth.authentications == 2
    clock.advance(4000)  # 8 s after the first login, 4 s after the second
    assert auth.on_frame(request(MetadataRequest(), 12)) is None


def test_reauthentication_must_keep_the_principal() -> None:
    clock = ManualClock()
    auth = authenticator(reauth_ms=5000, clock=clock)
    plain_login(auth)
    clock.advance(2000)
    result = plain_login(auth, user="bob", password="bob-secret")
    assert result.error_code == 58
    assert result.error_message == ("Cannot change principals during re-authentication from "
                                    "User.alice: User.bob")
    assert auth.state is SaslState.FAILED


def test_reauthentication_must_keep_the_mechanism() -> None:
    clock = ManualClock()
    auth = authenticator(reauth_ms=5000, clock=clock)
    plain_login(auth)
    clock.advance(2000)
    handshake = auth.on_frame(request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1))
    assert handshake is not None and not handshake.close
    reply = auth.on_frame(request(SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=x"), 1))
    assert reply is not None and reply.close
    assert "not supported for re-authentication of mechanism 'PLAIN'" in reply.reason


@pytest.mark.parametrize("reauth_ms", [0, 5000])
def test_handshake_after_authentication_without_reauthentication_goes_to_the_handler(
    reauth_ms: int,
) -> None:
    clock = ManualClock()
    auth = authenticator(reauth_ms=reauth_ms, clock=clock)
    plain_login(auth)
    # No session expiry, or a second attempt within a second: not a re-authentication.
    if reauth_ms:
        clock.advance(1500)
        plain_login(auth)
        clock.advance(10)
    assert auth.on_frame(request(SaslHandshakeRequest(mechanism="PLAIN"), 1)) is None
