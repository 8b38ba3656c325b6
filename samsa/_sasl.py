"""SASL authentication for ``security.protocol=SASL_PLAINTEXT``: PLAIN and SCRAM-SHA-256/512.

Credentials come from librdkafka's ``sasl.username`` / ``sasl.password`` or from Java's
``sasl.jaas.config`` (``PlainLoginModule`` / ``ScramLoginModule`` with ``username`` and
``password``); ``sasl_credentials(config)`` resolves them once, when the client is built.

On each new connection, right after ApiVersions: SaslHandshake v1 naming the mechanism, then
SaslAuthenticate requests carrying the tokens (Kafka's framing, KIP-152). PLAIN (RFC 4616) sends
one token. SCRAM (RFC 5802) sends client-first, answers the server-first with the proof, and
checks the server's signature, so a broker that does not know the password cannot pass for one
that does. A refusal raises ``SaslAuthenticationFailedError`` with the broker's message (or
UnsupportedSaslMechanismError with the broker's list).

Not implemented: re-authentication (KIP-368; the broker closes the connection when its session
ends, and the client reconnects), GSSAPI, OAUTHBEARER.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from protocol.jaas import JaasError, parse_jaas_config
from protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from samsa.errors import ConfigError

if TYPE_CHECKING:
    from samsa._connection import BrokerConnection

__all__ = ["SASL_MECHANISMS", "SaslCredentials", "authenticate", "sasl_credentials"]

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: str = ""

    def __repr__(self) -> str:  # never print the password
        return f"SaslCredentials({self.mechanism!r}, {self.username!r})"


def sasl_credentials(config: Mapping[str, Any]) -> SaslCredentials | None:
    """The credentials a SASL_PLAINTEXT client authenticates with; None for PLAINTEXT."""
    if config["security.protocol"] != "SASL_PLAINTEXT":
        return None
    mechanism = config["sasl.mechanism"]
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError("sasl.mechanism", mechanism,
                          f"must be one of {', '.join(SASL_MECHANISMS)} (GSSAPI and OAUTHBEARER "
                          "are not supported)")
    username, password = config["sasl.username"], config["sasl.password"]
    if config["sasl.jaas.config"] and not username:
        username, password = _from_jaas(config["sasl.jaas.config"])
    if not username:
        raise ConfigError("sasl.username", username,
                          "SASL_PLAINTEXT needs sasl.username and sasl.password (or sasl.jaas.config)")
    return SaslCredentials(mechanism, username, password or "")


def _from_jaas(text: str) -> tuple[str, str]:
    try:
        modules = parse_jaas_config(text)
    except JaasError as error:
        raise ConfigError("sasl.jaas.config", "[hidden]", str(error)) from None
    options = modules[0].options
    if "username" not in options:
        raise ConfigError("sasl.jaas.config", "[hidden]", "the login module has no username option")
    return options["username"], options.get("password", "")


async def authenticate(connection: BrokerConnection, credentials: SaslCredentials) -> None:
    """SaslHandshake then SaslAuthenticate on a freshly negotiated ``connection``."""
    handshake = await connection.request(SaslHandshakeRequest(mechanism=credentials.mechanism), 1)
    if handshake.error_code == UnsupportedSaslMechanismError.code:
        raise UnsupportedSaslMechanismError(
            f"{connection.address} does not offer {credentials.mechanism} "
            f"(enabled: {', '.join(handshake.mechanisms)})")
    if handshake.error_code:
        raise SaslAuthenticationFailedError(
            f"SaslHandshake to {connection.address} failed with error code {handshake.error_code}")
    version = connection.version_for(SaslAuthenticateRequest)
    if credentials.mechanism == "PLAIN":
        token = f"\0{credentials.username}\0{credentials.password}".encode()
        await _exchange(connection, token, version)
        return
    scram = _ScramClient(credentials)
    server_first = await _exchange(connection, scram.client_first(), version)
    server_final = await _exchange(connection, scram.client_final(server_first), version)
    scram.verify(server_final)


async def _exchange(connection: BrokerConnection, token: bytes, version: int) -> bytes:
    response = await connection.request(SaslAuthenticateRequest(auth_bytes=token), version)
    if response.error_code:
        raise SaslAuthenticationFailedError(response.error_message or "SASL authentication failed")
    return bytes(response.auth_bytes)


class _ScramClient:
    """RFC 5802 section 3, the client's side."""

    def __init__(self, credentials: SaslCredentials) -> None:
        self._hash = _HASHES[credentials.mechanism]
        self._password = credentials.password
        name = credentials.username.replace("=", "=3D").replace(",", "=2C")
        self._nonce = secrets.token_urlsafe(24)
        self._first_bare = f"n={name},r={self._nonce}"
        self._server_signature = b""

    def client_first(self) -> bytes:
        return ("n,," + self._first_bare).encode()

    def client_final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", errors="replace")
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), fields.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce) \
                or not iterations.isdigit():
            raise SaslAuthenticationFailedError(f"invalid SCRAM server first message: {text}")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode(),
                                     base64.b64decode(salt), int(iterations))
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(hashlib.new(self._hash, client_key).digest(), auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._server_signature = hmac.digest(server_key, auth_message, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not hmac.compare_digest(server_final, expected):
            raise SaslAuthenticationFailedError("the broker's SCRAM server signature is wrong")
