"""The accepting side of a TLS listener (SSL, SASL_SSL), and the principal of a TLS session.

Why not ``loop.create_server(ssl=...)``: there a handshake that fails (an untrusted client
certificate, a client that does not speak TLS, a protocol or cipher mismatch) is dropped without
a word. Here the listener owns its socket and an accept task; each accepted socket is handed
to ``loop.connect_accepted_socket(..., ssl=context)`` in a task of its own, which returns once
the handshake is done (the ``KafkaConnection`` gets ``connection_made`` with the TLS transport
only then, so no request can come before the handshake) or raises: the failure is logged as
Kafka logs it ("Failed authentication with <address> (SSL handshake failed)") and the listener
carries on; the TLS alert that tells the client why is sent first (``_AlertingTlsProtocol``:
asyncio's protocol would drop it), as Kafka flushes it. Handshakes in flight are bounded by ``HANDSHAKE_TIMEOUT_SECONDS``.

The principal on an SSL listener (``principal_of``, Kafka's ``DefaultKafkaPrincipalBuilder``):
with a client certificate ``User:`` + its subject's RFC 2253 name mapped by
``ssl.principal.mapping.rules``; without one ``User:ANONYMOUS``. A name no rule maps fails the
connection, as in Kafka. On SASL_SSL listeners SASL sets the principal.

Owned by the event loop: ``close`` stops accepting and cancels the handshakes in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from asyncio import sslproto
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from broker.tls.principal import PrincipalMapper
from broker.tls.x500 import subject_distinguished_name

if TYPE_CHECKING:
    from broker.config import BrokerConfig

__all__ = ["ANONYMOUS", "TlsListener", "principal_of", "session_principal"]

logger = logging.getLogger("samsa.broker.tls")

ANONYMOUS = "User:ANONYMOUS"
HANDSHAKE_TIMEOUT_SECONDS = 10.0


def principal_of(ssl_object: ssl.SSLObject | None, mapper: PrincipalMapper) -> str:
    """The session's principal; ``MappingRuleError`` when no rule maps the certificate's
    name, ``CertificateError`` when its subject cannot be read."""
    der = None if ssl_object is None else ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    return "User:" + mapper.name(subject_distinguished_name(der))


def session_principal(ssl_object: ssl.SSLObject, config: BrokerConfig, listener_name: str,
                      connection_id: str) -> str | None:
    """The principal of a new connection on the SSL listener ``listener_name``; None (logged)
    when its certificate's name cannot be mapped: the connection is to be closed."""
    security = config.listener_security.get(listener_name)
    if security is None or security.tls is None:
        return ANONYMOUS
    try:
        return principal_of(ssl_object, security.tls.principal_mapper)
    except ValueError as error:  # MappingRuleError, CertificateError
        logger.info("Failed authentication with %s on listener %s: %s", connection_id,
                    listener_name, error)
        return None


class TlsListener:
    """One TLS listening socket: accepts, handshakes, hands over to ``new_connection()``."""

    def __init__(self, *, name: str, context: ssl.SSLContext,
                 new_connection: Callable[[], asyncio.Protocol]) -> None:
        self.name = name
        self.context = context
        self.new_connection = new_connection
        self.sockets: list[socket.socket] = []
        self._accepting: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Task[None]] = set()
        self._backlog = 0

    async def start(self, host: str | None, port: int, *, backlog: int = 511,
                    start_serving: bool = True) -> None:
        """Bind; listen and accept at once, or from ``start_serving()`` (connections are
        refused meanwhile)."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        listening = socket.socket(family, kind, proto)
        try:
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listening.bind(address)
            listening.setblocking(False)
        except OSError:
            listening.close()
            raise
        self.sockets = [listening]
        self._backlog = backlog
        if start_serving:
            self.start_serving()

    def start_serving(self) -> None:
        if self._accepting is None:
            self.sockets[0].listen(self._backlog)
            self._accepting = asyncio.get_running_loop().create_task(
                self._accept(self.sockets[0]), name=f"accept-{self.name}")

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                accepted, address = await loop.sock_accept(listening)
            except OSError as error:  # EMFILE and friends: Kafka logs and keeps accepting
                logger.warning("listener %s: accept failed: %s", self.name, error)
                await asyncio.sleep(0.1)  # a wait for descriptors to free, not a condition
                continue
            task = loop.create_task(self._handshake(accepted, address))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, accepted: socket.socket, address: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        tls = _AlertingTlsProtocol(loop, self.new_connection(), self.context, waiter,
                                   server_side=True,
                                   ssl_handshake_timeout=int(HANDSHAKE_TIMEOUT_SECONDS))
        try:
            await loop.connect_accepted_socket(lambda: tls, accepted)
            await waiter  # the handshake; connection_made reaches the Kafka protocol after it
        except asyncio.CancelledError:
            accepted.close()
            raise
        except (OSError, ConnectionError, TimeoutError) as error:
            logger.info("Failed authentication with %s:%s on listener %s (SSL handshake "
                        "failed): %s", address[0], address[1], self.name, _reason(error))
            with contextlib.suppress(OSError):
                accepted.close()

    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self._handshakes):
            task.cancel()
        for listening in self.sockets:
            listening.close()

    async def wait_closed(self) -> None:
        tasks = [t for t in (self._accepting, *self._handshakes) if t is not None]
        await asyncio.gather(*tasks, return_exceptions=True)


class _AlertingTlsProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol, except that a failed handshake sends the TLS alert OpenSSL wrote
    for it before the connection is closed. asyncio aborts the transport with the alert still
    in its outgoing buffer, so the client saw the connection end ("unexpected eof", librdkafka:
    "Broker transport failure") instead of the reason ("certificate required", "unknown ca");
    Kafka's SslTransportLayer flushes the alert before closing too."""

    def _on_handshake_complete(self, handshake_exc: BaseException | None) -> None:
        transport = cast("asyncio.WriteTransport | None", self._transport)
        if handshake_exc is not None and transport is not None:
            with contextlib.suppress(Exception):  # best effort: the connection is failing
                outgoing: ssl.MemoryBIO = self._outgoing  # type: ignore[attr-defined]  # not in typeshed
                alert = outgoing.read()
                if alert:
                    transport.write(alert)
        super()._on_handshake_complete(handshake_exc)


def _reason(error: BaseException) -> str:
    if isinstance(error, ssl.SSLError):
        return str(error.reason or error)
    return str(error) or type(error).__name__
