"""The one error of SASL authentication: what the client is told, and what the log says.

``SaslAuthenticationError(message)`` is sent to the client as is (Kafka's
``SaslAuthenticationException``). With ``public=False`` (Kafka's ``SaslException``) the client
gets only Kafka's generic "Authentication failed during authentication due to invalid
credentials with SASL mechanism X", so that nothing about users leaks; ``message`` is logged.
"""

from __future__ import annotations

__all__ = ["SaslAuthenticationError"]


class SaslAuthenticationError(Exception):
    def __init__(self, message: str, *, public: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.public = public
