"""The listeners: accept connections, hand them to ``KafkaConnection``, stop cleanly.

Start: one ``loop.create_server`` per listener (each connection knows its listener: SASL
listeners authenticate, Metadata answers with the same listener's endpoint, a controller
listener serves only the controller APIs: ``apis_for``); a port of 0 binds an
ephemeral port, and the advertised listener of the same name then carries the bound port (so
Metadata tells clients where to connect). Idle connections (``connections.max.idle.ms`` without traffic and nothing in
flight) are closed by one periodic check, not a timer per connection.

Serving clients waits, on a cluster node, until the node has caught up with the metadata
(``start(defer_clients=True)``, then ``serve_clients()``): every listener is bound at start (so
its port is taken and advertised), the controller listener serves at once (the Raft quorum
needs it to elect and to replicate the metadata log), and the others accept nothing until the
controller says this broker's metadata caught up — Kafka's ``BrokerServer`` enables request
processing only after its ``initialCatchUpFuture``. Meanwhile the other listeners' sockets are
bound but not listening: a connection is refused and the client tries another broker. A node answering before that would describe the cluster from a stale or empty
image: just restarted, it answered Metadata with no brokers and FindCoordinator with
"__consumer_offsets is being created", and librdkafka (2.16), told there are no brokers,
decommissioned every broker it knew, its group consumer left with no connection to find its
coordinator by — a synchronous commit then waited forever (issue 13's mixed smoke run).

Stop: close the listening sockets, give in-flight requests until ``grace_seconds`` to be
answered (each connection's response queue empties; woken by the connections, no polling
loops beyond the idle check), then close every connection.

Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from broker.apis import LISTENER_TYPES, ApiSpec, listener_type, load_apis, served_on
from broker.broker import Broker
from broker.config import Listener
from broker.connection import KafkaConnection, RequestGate
from broker.tls.listener import TlsListener

__all__ = ["Server"]

logger = logging.getLogger("samsa.broker.server")

IDLE_CHECK_MAX_SECONDS = 10.0


class Server:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.apis: dict[int, ApiSpec] = load_apis()  # every API, whatever the listener
        self._listener_apis = {kind: served_on(self.apis, kind) for kind in LISTENER_TYPES}
        self.gate = RequestGate(broker.config.queued_max_requests)
        self.connections: set[KafkaConnection] = set()
        self.bound: list[Listener] = []
        self._servers: list[asyncio.Server] = []
        self._idle_task: asyncio.Task[None] | None = None
        self._quiet: asyncio.Future[None] | None = None
        self._tls_listeners: list[TlsListener] = []
        self._deferred: list[asyncio.Server | TlsListener] = []  # listening, not yet serving

    def apis_for(self, listener_name: str) -> dict[int, ApiSpec]:
        """The APIs a connection on ``listener_name`` is served (controller listeners: only
        the controller APIs)."""
        return self._listener_apis[listener_type(self.broker.config, listener_name)]

    async def start(self, *, defer_clients: bool = False) -> list[Listener]:
        """Bind every listener; ``defer_clients``: only the controller listeners serve until
        ``serve_clients()``."""
        loop = asyncio.get_running_loop()
        advertised = list(self.broker.advertised)
        for listener in self.broker.config.listeners:
            serve_now = not defer_clients or self.broker.config.kraft.is_controller_listener(
                listener.name)
            server = await self._listen(listener, start_serving=serve_now)
            if not serve_now:
                self._deferred.append(server)
            host, port = server.sockets[0].getsockname()[:2]
            self.bound.append(Listener(listener.name, listener.host or host, port,
                                       listener.security_protocol))
            for index, endpoint in enumerate(advertised):
                if endpoint.name == listener.name and endpoint.port == 0:
                    advertised[index] = Listener(endpoint.name, endpoint.host, port,
                                                 endpoint.security_protocol)
        self.broker.advertised = tuple(advertised)
        self._idle_task = loop.create_task(self._close_idle_connections())
        return self.bound

    def serve_clients(self) -> None:
        """Start serving the listeners ``start(defer_clients=True)`` held back."""
        for server in self._deferred:
            if isinstance(server, TlsListener):
                server.start_serving()
            else:
                # asyncio.Server.start_serving is a coroutine that only starts accepting and
                # returns; Server.stop closes these servers either way
                asyncio.get_running_loop().create_task(server.start_serving())
        self._deferred.clear()

    async def _listen(self, listener: Listener, *,
                      start_serving: bool = True) -> asyncio.Server | TlsListener:
        """PLAINTEXT / SASL_PLAINTEXT: an asyncio server of ``KafkaConnection``; SSL /
        SASL_SSL: a ``TlsListener`` that handshakes first and logs failed handshakes."""
        new_connection = partial(KafkaConnection, self, listener)
        security = self.broker.config.listener_security.get(listener.name)
        if security is not None and security.ssl_context is not None:
            tls = TlsListener(name=listener.name, context=security.ssl_context,
                              new_connection=new_connection)
            await tls.start(listener.host or None, listener.port, start_serving=start_serving)
            self._tls_listeners.append(tls)
            return tls
        server = await asyncio.get_running_loop().create_server(
            new_connection, host=listener.host or None, port=listener.port,
            reuse_address=True, backlog=511, start_serving=start_serving)
        self._servers.append(server)
        return server

    async def _close_idle_connections(self) -> None:
        idle_ms = self.broker.config.connections_max_idle_ms
        if idle_ms < 0:
            return
        loop = asyncio.get_running_loop()
        interval = min(IDLE_CHECK_MAX_SECONDS, max(idle_ms / 1000 / 4, 0.05))
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for connection in list(self.connections):
                if connection.is_idle(now, idle_ms / 1000):
                    logger.info("closing idle connection %s", connection.connection_id)
                    connection.close()

    def on_place_released(self) -> None:
        """A connection answered a request; at shutdown, the last answer ends the wait."""
        if self._quiet is not None and not self._quiet.done() and self.in_flight == 0:
            self._quiet.set_result(None)

    @property
    def in_flight(self) -> int:
        """Requests received and not yet answered: waiting for a handler or parked."""
        return self.gate.in_use + sum(connection.parked for connection in self.connections)

    async def stop(self, *, grace_seconds: float = 10.0) -> None:
        for server in self._servers:
            server.close()
        for tls in self._tls_listeners:
            tls.close()
        if self._idle_task is not None:
            self._idle_task.cancel()
        self.broker.stopping = True
        self.broker.fetch_reaper.purgatory.force_complete_all()  # long polls answer now
        self.broker.fetch_reaper.stop()
        self.broker.produce_reaper.purgatory.force_complete_all()  # acks=all: REQUEST_TIMED_OUT
        self.broker.produce_reaper.stop()
        if self.in_flight:
            self._quiet = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(self._quiet, grace_seconds)
            except TimeoutError:
                logger.warning("%d request(s) still in flight at shutdown", self.in_flight)
        for connection in list(self.connections):
            connection.close()
        for server in self._servers:
            await server.wait_closed()
        for tls in self._tls_listeners:
            await tls.wait_closed()
        await asyncio.sleep(0)  # let connection_lost callbacks run
