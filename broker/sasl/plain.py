"""SASL/PLAIN (RFC 4616), server side, as Kafka's ``PlainSaslServer`` does it.

One client message, ``[authzid] NUL authcid NUL passwd`` in UTF-8; the server answers with an
empty token and the exchange is complete. The password is checked against the listener's
``user_<name>`` JAAS options with a constant-time comparison; an unknown user and a wrong
password fail alike. Errors carry Kafka's messages, which PLAIN sends to the client as they are.

Sans-IO: a plain object stepped by ``evaluate``; one per authentication attempt.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from broker.sasl.errors import SaslAuthenticationError

__all__ = ["PlainServer"]


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: the exchange is already complete")
        authorization_id, username, password = _tokens(token)
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare against something even for an unknown user: the same work either way.
        matches = hmac.compare_digest(
            (expected if expected is not None else "\0" + password).encode(), password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


def _tokens(token: bytes) -> tuple[str, str, str]:
    text = token.decode("utf-8", errors="replace")
    parts = text.split("\0", 3)
    if len(parts) != 3:
        raise SaslAuthenticationError(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
    return parts[0], parts[1], parts[2]
