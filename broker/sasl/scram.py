"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side.

The exchange, as Kafka's ``ScramSaslServer`` runs it::

    client-first   n,[a=authzid],n=saslname,r=cnonce[,ext=value...]
    server-first   r=cnonce+snonce,s=base64(salt),i=iterations
    client-final   c=base64(gs2-header),r=cnonce+snonce[,ext...],p=base64(ClientProof)
    server-final   v=base64(ServerSignature)

AuthMessage = client-first-bare "," server-first "," client-final-without-proof (each as sent).
The proof is checked by recomputing StoredKey = H(ClientProof XOR HMAC(StoredKey, AuthMessage))
and comparing it with ``hmac.compare_digest``. Kafka's message grammar is enforced (saslname with
``=2C``/``=3D`` escapes, printable nonce, base64, ``ALPHA=value`` extensions, which are accepted
and ignored — Samsa has no delegation tokens, so ``tokenauth=true`` is refused).

Failures are ``SaslAuthenticationError``; all but the authorization-id mismatch are non-public,
so the client gets Kafka's generic message. An unknown user is not told apart from a wrong
password: the server answers with a salt derived from the user name and a per-process secret and
fails at the proof, as RFC 5802 section 9 suggests (Kafka fails at the first message instead; the
client sees the same error either way).

Sans-IO: one object per authentication attempt, stepped by ``evaluate``; ``lookup`` is called
once, with the user name, to fetch the stored credential.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from broker.sasl.errors import SaslAuthenticationError
from replication.metadata.scram import MIN_ITERATIONS, ScramCredential

__all__ = ["SCRAM_TYPES", "ScramServer", "sasl_name", "username"]

SCRAM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?"
    rf"n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})")
_EXTENSION = re.compile(rf",([A-Za-z]+)=({_VALUE})")

# Salts for users that do not exist: stable per user within this process, unguessable outside.
_UNKNOWN_USER_SECRET = secrets.token_bytes(32)


def sasl_name(name: str) -> str:
    """RFC 5802 saslname of a user name: "=" -> "=3D", "," -> "=2C"."""
    return name.replace("=", "=3D").replace(",", "=2C")


def username(name: str) -> str:
    """The user name of a saslname; a "=" not starting an escape is an error."""
    unescaped = name.replace("=2C", ",")
    if "=" in unescaped.replace("=3D", ""):
        raise SaslAuthenticationError(f"Invalid username: {name}", public=False)
    return unescaped.replace("=3D", "=")


def _fail(message: str) -> SaslAuthenticationError:
    return SaslAuthenticationError(message, public=False)


class ScramServer:
    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str, int], ScramCredential | None],
        *,
        server_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self.mechanism = mechanism
        self._server_nonce = server_nonce
        self._hash = _HASHES[mechanism]
        self._lookup = lookup
        self.complete = False
        self.authorization_id = ""
        self._failed = False
        self._credential: ScramCredential | None = None
        self._known_user = False
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def evaluate(self, token: bytes) -> bytes:
        if self._failed or self.complete:
            raise _fail(f"Unexpected challenge in Sasl server state "
                        f"{'FAILED' if self._failed else 'COMPLETE'}")
        try:
            if not self._server_first:
                return self._client_first(_text(token, "client first"))
            return self._client_final(_text(token, "client final"))
        except SaslAuthenticationError:
            self._failed = True
            self._credential = None
            raise

    def _client_first(self, message: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise _fail(f"Invalid SCRAM client first message format: {message}")
        extensions = dict(_EXTENSION.findall(match["extensions"]))
        if extensions.get("tokenauth", "").lower() == "true":
            raise _fail("Token Authentication failed: delegation tokens are not supported")
        user = username(match["saslname"])
        authorization_id = match["authzid"] or ""
        credential = self._lookup(user, SCRAM_TYPES[self.mechanism])
        self._known_user = credential is not None
        if authorization_id and authorization_id != user:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        if credential is not None and credential.iterations < MIN_ITERATIONS:
            raise _fail(f"Iterations {credential.iterations} is less than the minimum "
                        f"{MIN_ITERATIONS} for {self.mechanism}")
        self._credential = credential or self._unknown_user_credential(user)
        self.authorization_id = user
        self._gs2_header = match["gs2"]
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + self._server_nonce()
        salt = base64.b64encode(self._credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._credential.iterations}"
        return self._server_first.encode()

    def _unknown_user_credential(self, user: str) -> ScramCredential:
        salt = hmac.digest(_UNKNOWN_USER_SECRET, user.encode(), "sha256")[:16]
        return ScramCredential(salt, secrets.token_bytes(32), b"", MIN_ITERATIONS)

    def _client_final(self, message: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise _fail(f"Invalid SCRAM client final message format: {message}")
        if match["nonce"] != self._nonce:
            raise _fail("Invalid client nonce in the final client message.")
        if _b64(match["channel"]) != self._gs2_header.encode():
            raise _fail("Invalid channel binding in the final client message.")
        credential = self._credential
        assert credential is not None
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, match["without_proof"])).encode()
        client_signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        proof = _b64(match["proof"])
        if len(proof) != len(client_signature):
            raise _fail("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        computed = hashlib.new(self._hash, client_key).digest()
        if not (hmac.compare_digest(computed, credential.stored_key) and self._known_user):
            raise _fail("Invalid client credentials")
        signature = hmac.digest(credential.server_key, auth_message, self._hash)
        self._credential = None
        self.complete = True
        return b"v=" + base64.b64encode(signature)


def _text(token: bytes, what: str) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(f"Invalid SCRAM {what} message: not UTF-8") from None


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _fail("Invalid base64 in the final client message") from None
