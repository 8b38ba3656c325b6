"""A listener (``NAME://host:port``) and the endpoint Metadata answers with.

A value type shared by ``broker.config`` (which parses ``listeners`` / ``advertised.listeners``)
and ``broker.kraft_config`` (which picks the controller listeners out of them).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Listener", "endpoint_for"]


@dataclass(frozen=True, slots=True)
class Listener:
    """``PLAINTEXT://host:port``; port 0 asks the OS for an ephemeral port."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"  # from listener.security.protocol.map

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def endpoint_for(advertised: tuple[Listener, ...], listener_name: str) -> tuple[Listener, ...]:
    """The advertised endpoint on ``listener_name`` — the listener a client came in on, as Kafka
    answers Metadata — or the first advertised one when there is none of that name."""
    for listener in advertised:
        if listener.name == listener_name:
            return (listener,)
    return advertised[:1]
