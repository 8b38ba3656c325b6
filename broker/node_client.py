"""Requests from this node to another: Raft RPCs, forwarding to the active controller, and later
the follower fetchers (Kafka's ``NetworkClient`` as ``NodeToControllerChannelManager`` and
``InterBrokerSendThread`` use it, minimal).

PLAINTEXT or SSL (given an ``ssl.SSLContext``: ``BrokerConfig.node_ssl_contexts``, built from
the listener's ``ssl.*`` keys); no SASL, so a node-to-node listener must not be a SASL one.

Wire layout: a request goes out as ``int32 size + RequestHeader + body`` (header v2 for the
API's flexible versions, else v1: ``protocol.messages.request_header_version``); a response
comes back as ``int32 size + ResponseHeader + body`` (v1 for flexible versions, else v0;
ApiVersions always v0).

Per connection, before anything else: ApiVersions at the highest version this codec knows; a
node that does not know it answers UNSUPPORTED_VERSION in v0's layout listing its own
ApiVersions range, and the request is sent again at the highest version of that range (Kafka's
``NetworkClient`` rule). Every request then goes at the highest version both sides support
(an unstable latest version of ours excluded) unless the caller names one the node serves.

Invariants (``InFlightRequests``, sans-IO): requests are written in call order, each with the
next correlation id; a node answers a connection's requests in order, so every response must
carry the correlation id at the head of the in-flight queue, else the stream is out of step and
the connection is failed. A response body that cannot be decoded fails only its request.

Failures: a refused or dropped connection, a stream out of step, or a request that gets no
answer within ``request_timeout_ms`` (after which Kafka's ``NetworkClient`` disconnects too)
closes the connection and fails every request in flight with ``NodeDisconnectedError`` (the
timed-out one with ``NodeRequestTimeoutError``). The next ``send`` reconnects, no sooner than
the reconnect backoff allows: ``reconnect_backoff_ms`` doubled per consecutive failure up to
``reconnect_backoff_max_ms``, ±20 % jitter (Kafka's ``reconnect.backoff.ms`` /
``reconnect.backoff.max.ms``), reset by a connection that completes its ApiVersions exchange.

No write back-pressure: node-to-node requests are small (the large frames, fetch responses,
come the other way).

State: every object here belongs to the event loop that uses it; nothing is thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import ssl
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from protocol.codec import DecodeError, Message
from protocol.errors import UnsupportedVersionError
from protocol.frames import FrameError, RequestFramer, encode_request
from protocol.messages import RESPONSES, response_header_version
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersionsResponse
from protocol.messages.request_header import RequestHeader
from protocol.messages.response_header import ResponseHeader

__all__ = [
    "InFlightRequest",
    "InFlightRequests",
    "NodeClient",
    "NodeClientError",
    "NodeClients",
    "NodeDisconnectedError",
    "NodeNotAvailableError",
    "NodeRequestTimeoutError",
    "ReconnectBackoff",
    "version_for",
]

logger = logging.getLogger("samsa.broker.node_client")

API_VERSIONS_KEY = ApiVersionsRequest.API_KEY
SOFTWARE_NAME = "samsa-node"
SOFTWARE_VERSION = "0.1.0"
MAX_RESPONSE_BYTES = 0x7FFF_FFFF  # the framer never allocates ahead, so int32's limit will do
Endpoint = tuple[str, int]


class NodeClientError(Exception):
    """A request to another node got no answer."""


class NodeDisconnectedError(NodeClientError):
    """The connection could not be made, or was lost before the answer came."""


class NodeRequestTimeoutError(NodeClientError):
    """No answer within ``request_timeout_ms`` (the connection is closed, as Kafka does)."""


class NodeNotAvailableError(NodeClientError):
    """The endpoint resolver knows no address for the node."""


# -- the sans-IO core ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InFlightRequest:
    correlation_id: int
    api_key: int
    api_version: int


class InFlightRequests:
    """Request frames out, responses matched to their requests in order; no I/O."""

    def __init__(self, client_id: str, *, max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.client_id = client_id
        self._framer = RequestFramer(max_response_bytes)
        self._queue: deque[InFlightRequest] = deque()
        self._correlation_ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._queue)

    def send(self, message: Message, version: int, *, expect_response: bool = True
             ) -> tuple[InFlightRequest, bytes]:
        """The frame for ``message`` at ``version``; its answer is expected unless told not."""
        request = InFlightRequest(next(self._correlation_ids), message.API_KEY, version)
        header = RequestHeader(request_api_key=request.api_key, request_api_version=version,
                               correlation_id=request.correlation_id, client_id=self.client_id)
        frame = encode_request(header, message)
        if expect_response:
            self._queue.append(request)
        return request, frame

    def receive(self, data: bytes) -> list[tuple[InFlightRequest, Message | Exception]]:
        """The requests ``data`` completes, each with its response or why it cannot be read.
        Raises ``FrameError`` / ``DecodeError`` when the stream is out of step."""
        self._framer.feed(data)
        return [self._complete(frame) for frame in self._framer]

    def take_all(self) -> list[InFlightRequest]:
        """Every request still waiting (the connection failed)."""
        taken = list(self._queue)
        self._queue.clear()
        return taken

    def _complete(self, frame: memoryview) -> tuple[InFlightRequest, Message | Exception]:
        if not self._queue:
            raise DecodeError("a response arrived with no request in flight")
        request = self._queue[0]
        header_version = response_header_version(request.api_key, request.api_version)
        header, offset = ResponseHeader.decode_from(frame, 0, header_version)
        if header.correlation_id != request.correlation_id:
            raise DecodeError(f"response correlation id {header.correlation_id}, "
                              f"expected {request.correlation_id}")
        self._queue.popleft()
        return request, _decode_response(request, frame[offset:])


def _decode_response(request: InFlightRequest, body: memoryview) -> Message | Exception:
    response_class = RESPONSES[request.api_key]
    try:
        return response_class.decode(body, request.api_version)
    except DecodeError as error:
        if request.api_key != API_VERSIONS_KEY:
            return error
    try:  # a node that does not know our ApiVersions version answers in v0's layout (KIP-511)
        return response_class.decode(body, 0)
    except DecodeError as error:
        return error


def version_for(api_versions: dict[int, tuple[int, int]], message_type: type[Message],
                requested: int | None = None) -> int:
    """The version to send ``message_type`` at: ``requested`` if both sides serve it, else the
    highest both sides support; ``UnsupportedVersionError`` when there is none."""
    name = message_type.__name__
    theirs = api_versions.get(message_type.API_KEY)
    if theirs is None:
        raise UnsupportedVersionError(f"the node does not serve {name}")
    if requested is not None:
        if not (theirs[0] <= requested <= theirs[1]
                and message_type.MIN_VERSION <= requested <= message_type.MAX_VERSION):
            raise UnsupportedVersionError(f"{name} v{requested}: the node serves "
                                          f"v{theirs[0]}-v{theirs[1]}")
        return requested
    ours_high = message_type.MAX_VERSION - (1 if message_type.LATEST_VERSION_UNSTABLE else 0)
    low, high = max(theirs[0], message_type.MIN_VERSION), min(theirs[1], ours_high)
    if low > high:
        raise UnsupportedVersionError(f"{name}: the node serves v{theirs[0]}-v{theirs[1]}, "
                                      f"this codec v{message_type.MIN_VERSION}-v{ours_high}")
    return high


class ReconnectBackoff:
    """Kafka's exponential reconnect backoff: ``initial_ms * 2**(failures - 1)`` capped at
    ``max_ms``, ±20 % jitter, counted from the last failure; no wait before the first attempt
    or after a success. Times are the caller's monotonic clock, in seconds."""

    JITTER = 0.2

    def __init__(self, initial_ms: int, max_ms: int, *, rng: random.Random | None = None) -> None:
        self.initial_ms = max(initial_ms, 0)
        self.max_ms = max(max_ms, self.initial_ms)
        self.failures = 0
        self._rng = rng or random.Random()
        self._ready_at = 0.0

    def failed(self, now: float) -> None:
        self.failures += 1
        delay_ms = min(self.initial_ms * 2 ** min(self.failures - 1, 32), self.max_ms)
        jitter = 1 + self._rng.uniform(-self.JITTER, self.JITTER)
        self._ready_at = now + delay_ms * jitter / 1000

    def succeeded(self) -> None:
        self.failures = 0
        self._ready_at = 0.0

    def remaining(self, now: float) -> float:
        """Seconds to wait before the next connection attempt."""
        return max(self._ready_at - now, 0.0)


# -- the asyncio shell --------------------------------------------------------------------------


class _NodeConnection(asyncio.Protocol):
    """One TCP connection: writes frames, resolves each request's future with its response."""

    def __init__(self, address: str, client_id: str, *, max_response_bytes: int,
                 on_failed: Callable[[_NodeConnection], None]) -> None:
        self.address = address
        self.on_failed = on_failed
        self.requests = InFlightRequests(client_id, max_response_bytes=max_response_bytes)
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.error: NodeClientError | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._futures: dict[int, asyncio.Future[Message]] = {}
        self._transport: asyncio.Transport | None = None

    @property
    def usable(self) -> bool:
        return self.error is None and self._transport is not None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        try:
            completed = self.requests.receive(data)
        except (FrameError, DecodeError) as error:
            self.fail(NodeDisconnectedError(f"{self.address}: unreadable response: {error}"))
            return
        for request, outcome in completed:
            future = self._futures.pop(request.correlation_id, None)
            if future is None or future.done():
                continue  # its sender gave up (cancelled)
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc else ""
        self.fail(NodeDisconnectedError(f"{self.address}: connection lost{reason}"))
        if not self.lost.done():
            self.lost.set_result(None)

    def send(self, message: Message, version: int) -> asyncio.Future[Message]:
        if self.error is not None:
            raise self.error
        assert self._transport is not None
        request, frame = self.requests.send(message, version)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._futures[request.correlation_id] = future
        self._transport.write(frame)
        return future

    def fail(self, error: NodeClientError) -> None:
        """Close the connection; every request in flight fails with ``error``."""
        first = self.error is None
        if first:
            self.error = error
        self.requests.take_all()
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(error)
        if self._transport is not None:
            self._transport.close()
        if first:
            self.on_failed(self)


class NodeClient:
    """Requests to one node at ``host:port``: one connection at a time, made on demand."""

    def __init__(self, host: str, port: int, *, client_id: str, request_timeout_ms: int = 30000,
                 reconnect_backoff_ms: int = 50, reconnect_backoff_max_ms: int = 1000,
                 connect_timeout_ms: int = 10000,
                 max_response_bytes: int = MAX_RESPONSE_BYTES,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.host, self.port = host, port
        self.ssl_context = ssl_context
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.connect_timeout = connect_timeout_ms / 1000
        self.max_response_bytes = max_response_bytes
        self.backoff = ReconnectBackoff(reconnect_backoff_ms, reconnect_backoff_max_ms)
        self._connection: _NodeConnection | None = None
        self._connecting: asyncio.Task[_NodeConnection] | None = None
        self._closed = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._connection is not None and self._connection.usable

    @property
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The node's ApiVersions answer on the current connection (empty when none)."""
        return dict(self._connection.api_versions) if self.connected else {}  # type: ignore[union-attr]

    async def send(self, request: Message, *, version: int | None = None) -> Message:
        """Send ``request`` (at ``version``, default the highest both sides support) and return
        the node's response. Raises ``NodeDisconnectedError``, ``NodeRequestTimeoutError``,
        ``UnsupportedVersionError`` when the node does not serve the API or that version, and
        ``DecodeError`` for a response that cannot be read (the connection carries on)."""
        connection = await self._ready_connection()
        chosen = version_for(connection.api_versions, type(request), version)
        return await self._exchange(connection, request, chosen)

    async def _exchange(self, connection: _NodeConnection, request: Message, version: int) -> Message:
        future = connection.send(request, version)
        try:
            return await asyncio.wait_for(future, self.request_timeout)
        except TimeoutError:
            connection.fail(NodeDisconnectedError(
                f"{self.address}: disconnected after a request timed out"))
            raise NodeRequestTimeoutError(
                f"{self.address}: {type(request).__name__} v{version} got no answer within "
                f"{self.request_timeout * 1000:.0f} ms") from None

    async def _ready_connection(self) -> _NodeConnection:
        if self._closed:
            raise NodeDisconnectedError(f"{self.address}: the client is closed")
        if self._connection is not None and self._connection.usable:
            return self._connection
        if self._connecting is None:
            self._connecting = asyncio.get_running_loop().create_task(self._connect())
            self._connecting.add_done_callback(self._connect_done)
        connecting = self._connecting
        try:
            # Shielded: a sender that gives up does not cancel the attempt the others wait on.
            return await asyncio.shield(connecting)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if connecting.cancelled() and current is not None and not current.cancelling():
                raise NodeDisconnectedError(f"{self.address}: the client is closed") from None
            raise

    def _connect_done(self, task: asyncio.Task[_NodeConnection]) -> None:
        self._connecting = None
        # exception() also marks a failure as retrieved when every waiter has given up.
        if task.cancelled() or task.exception() is not None:
            return
        self._connection = task.result()
        if self._closed:  # closed while the connection was being set up
            self._connection.fail(NodeDisconnectedError(f"{self.address}: the client is closed"))

    async def _connect(self) -> _NodeConnection:
        loop = asyncio.get_running_loop()
        delay = self.backoff.remaining(loop.time())
        if delay > 0:
            await asyncio.sleep(delay)  # the reconnect backoff: a wait, not a condition
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, connection = await loop.create_connection(
                    lambda: _NodeConnection(self.address, self.client_id,
                                            max_response_bytes=self.max_response_bytes,
                                            on_failed=self._failed),
                    self.host, self.port, ssl=self.ssl_context,
                    server_hostname=self.host if self.ssl_context is not None else None)
        except (OSError, TimeoutError) as error:
            self.backoff.failed(loop.time())
            reason = "timed out" if isinstance(error, TimeoutError) else str(error)
            raise NodeDisconnectedError(f"{self.address}: cannot connect: {reason}") from None
        try:
            await self._negotiate(connection)
        except BaseException as error:
            connection.fail(NodeDisconnectedError(f"{self.address}: ApiVersions failed"))
            self.backoff.failed(loop.time())
            if isinstance(error, Exception) and not isinstance(error, NodeClientError):
                raise NodeDisconnectedError(f"{self.address}: ApiVersions failed: {error}") from error
            raise
        self.backoff.succeeded()
        logger.debug("connected to %s", self.address)
        return connection

    def _failed(self, connection: _NodeConnection) -> None:
        """A connection failed (called once, synchronously): the next send reconnects after
        the backoff. One that failed while being set up is counted by ``_connect``."""
        if self._connection is not connection:
            return
        self._connection = None
        if not self._closed:
            self.backoff.failed(asyncio.get_running_loop().time())
            logger.info("connection to %s failed: %s", self.address, connection.error)

    async def _negotiate(self, connection: _NodeConnection) -> None:
        request = ApiVersionsRequest(client_software_name=SOFTWARE_NAME,
                                     client_software_version=SOFTWARE_VERSION)
        version = ApiVersionsRequest.MAX_VERSION
        response: Any = await self._exchange(connection, request, version)
        if response.error_code == UnsupportedVersionError.code:
            theirs = {entry.api_key: entry.max_version for entry in response.api_keys}
            version = min(theirs.get(API_VERSIONS_KEY, 0), version)
            response = await self._exchange(connection, request, version)
        if not isinstance(response, ApiVersionsResponse) or response.error_code:
            raise NodeDisconnectedError(
                f"{self.address}: ApiVersions v{version} failed with error code "
                f"{getattr(response, 'error_code', '?')}")
        connection.api_versions = {entry.api_key: (entry.min_version, entry.max_version)
                                   for entry in response.api_keys}

    def close_soon(self) -> None:
        """Close without waiting; requests in flight fail with ``NodeDisconnectedError``."""
        self._closed = True
        if self._connecting is not None:
            self._connecting.cancel()
        if self._connection is not None:
            self._connection.fail(NodeDisconnectedError(f"{self.address}: the client is closed"))

    async def close(self) -> None:
        connection = self._connection
        self.close_soon()
        if connection is not None:
            await connection.lost


class NodeClients:
    """A ``NodeClient`` per node id, addressed through ``resolver`` (node id -> host and port,
    or None for a node it does not know). A node whose address changes gets a new client."""

    def __init__(self, resolver: Callable[[int], Endpoint | None], *, client_id: str,
                 request_timeout_ms: int = 30000, reconnect_backoff_ms: int = 50,
                 reconnect_backoff_max_ms: int = 1000, connect_timeout_ms: int = 10000,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.resolver = resolver
        self.client_id = client_id
        self._new_client = partial(
            NodeClient, client_id=client_id, request_timeout_ms=request_timeout_ms,
            reconnect_backoff_ms=reconnect_backoff_ms,
            reconnect_backoff_max_ms=reconnect_backoff_max_ms,
            connect_timeout_ms=connect_timeout_ms, ssl_context=ssl_context)
        self._clients: dict[int, NodeClient] = {}

    def client(self, node_id: int) -> NodeClient:
        endpoint = self.resolver(node_id)
        if endpoint is None:
            raise NodeNotAvailableError(f"node {node_id} has no known endpoint")
        client = self._clients.get(node_id)
        if client is not None and (client.host, client.port) == endpoint:
            return client
        if client is not None:
            client.close_soon()
        client = self._new_client(*endpoint)
        self._clients[node_id] = client
        return client

    async def send(self, node_id: int, request: Message, *, version: int | None = None) -> Message:
        return await self.client(node_id).send(request, version=version)

    async def send_or_none(self, node_id: int, request: Message, *,
                           version: int | None = None) -> Message | None:
        """Like ``send``, but None when no answer came (unknown node, disconnected, timed out):
        for callers that retry on their own timer (the Raft shell)."""
        try:
            return await self.send(node_id, request, version=version)
        except NodeClientError as error:
            logger.debug("node %d: %s", node_id, error)
            return None

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            with contextlib.suppress(Exception):
                await client.close()
