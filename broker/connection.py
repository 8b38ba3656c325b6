"""One client connection: frames in, handlers called, responses out in request order.

Layers (h11/uvicorn style):
- ``ResponseQueue`` (sans-IO): a slot per request, reserved when the request arrives, filled
  when its handler finishes — in any order — and taken out strictly in request order. That is
  how pipelined requests get their responses in order while a long-poll fetch waits.
- ``RequestGate`` (sans-IO): Kafka's ``queued.max.requests``, the number of requests received
  and not yet handled, broker-wide. A connection that cannot get a place keeps its frames and
  pauses reading until a place frees. A request whose handler waits (a long-poll Fetch, an
  acks=all Produce waiting for the ISR, a coordinator answer waiting for replication, a
  forwarded admin request) gives its place back while it waits — in Kafka it has left the
  request queue for a purgatory — so waiting clients can never starve the followers' fetches
  that would let them finish. Instead each connection keeps at most ``MAX_PARKED`` such waiting
  requests and reads no more until one is answered (Kafka mutes a connection until its one
  request in process is answered; a few in flight keep librdkafka's pipelining).
- ``KafkaConnection`` (the ``asyncio.Protocol``): moves bytes; ``RequestFramer`` does the
  framing, checking ``socket.request.max.bytes`` before buffering a body.

Writing: byte responses go to ``transport.write``. On a TLS connection (SSL, SASL_SSL) every
file slice is read and written through the transport, which encrypts it (Kafka copies through
its SSL engine too): ``sendfile`` would put plaintext on the wire. A fetch response made of bytes and file
slices is sent by a writer task that owns the socket until it is done: bytes through the
transport, then — only once the transport's buffer is empty, or the bytes would overtake
what it still holds — each slice with ``os.sendfile`` on a duplicate of the socket's fd (uvloop
implements no ``loop.sendfile``, and its transports refuse ``add_writer`` on their own fd); on
EAGAIN the task waits for writability with ``loop.add_writer`` on that duplicate. Write limits
(high 0, low 0) make the transport report every transition to and from "buffer empty".

Faults: an oversized or negative frame size, an undecodable header or body, an unknown API
key or one the listener does not serve (``Server.apis_for``: a broker listener serves no
controller-only API, a controller listener only controller APIs) are logged and the connection
is closed (the peer is at fault; the broker carries on). An
unsupported version of a known API is answered with UNSUPPORTED_VERSION where the codec can
read the request (an unknown ApiVersions version gets Kafka's v0 reply), else closed. A
request that was read is always answered at its version, whatever its handler or the encoder
does: a handler that raises, or a response that cannot be encoded, becomes the API's error
response (UNKNOWN_SERVER_ERROR, logged with its traceback) or, failing that, the response
class's defaults with that error code (``broker.responses``); the connection stays open.

SSL listeners: the principal comes from the client certificate (``broker.tls.listener``).
SASL listeners (SASL_PLAINTEXT, SASL_SSL): the connection owns a ``broker.sasl.SaslAuthenticator`` that sees every frame
first (PLAINTEXT connections have none: one attribute check). Until authentication completes it
answers SaslHandshake / SaslAuthenticate itself, lets ApiVersions through, and closes the
connection on anything else or on a failure (after sending its error answer, if any); then it
sets ``principal`` (``User:<name>``, which ``RequestContext`` carries to the authorizer) and,
with ``connections.max.reauth.ms``, handles re-authentication and closes expired sessions.
Frames are capped at ``sasl.server.max.receive.size`` until authentication completes.

State is owned by the event loop; nothing here is thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from broker.apis import (
    CLOSE_CONNECTION,
    NO_RESPONSE,
    ApiSpec,
    HandlerResult,
    RequestContext,
    ResponsePart,
)
from broker.apis.api_versions import unsupported_version_frame
from broker.config import Listener
from broker.responses import failure_response, response_parts
from broker.sasl.authenticator import SaslAuthenticator
from broker.tls.listener import session_principal
from protocol.codec import DecodeError, Message
from protocol.errors import InvalidRequestError, UnsupportedVersionError
from protocol.frames import FrameTooLargeError, RequestFramer, parse_request_header
from protocol.messages import REQUESTS
from protocol.messages.request_header import RequestHeader
from storage.segment import FetchSlice

if TYPE_CHECKING:
    from broker.server import Server

__all__ = ["KafkaConnection", "RequestGate", "ResponseQueue", "Slot"]

logger = logging.getLogger("samsa.broker.connection")

API_VERSIONS_KEY = 18
# Above this many unsent response bytes the connection stops reading requests (back-pressure).
WRITE_BUFFER_HIGH = 4 * 1024 * 1024
MAX_PARKED = 5  # waiting requests per connection (see the module docstring)


class Slot:
    """The place of one request's response in the connection's response order."""

    __slots__ = ("close_after", "filled", "parked", "parts", "started")

    def __init__(self) -> None:
        self.filled = False
        self.parked = False  # its handler is waiting (a delayed operation): no gate place held
        self.parts: list[ResponsePart] | None = None
        self.close_after = False
        self.started = 0.0  # perf_counter() when taken up; set only when metrics are on


class ResponseQueue:
    """Slots in request order; filled in any order; taken from the head once filled."""

    def __init__(self) -> None:
        self._slots: deque[Slot] = deque()

    def __len__(self) -> int:
        return len(self._slots)

    def reserve(self) -> Slot:
        slot = Slot()
        self._slots.append(slot)
        return slot

    @staticmethod
    def fill(slot: Slot, parts: list[ResponsePart] | None, *, close_after: bool = False) -> None:
        slot.parts, slot.close_after, slot.filled = parts, close_after, True

    def pop_ready(self) -> Slot | None:
        if self._slots and self._slots[0].filled:
            return self._slots.popleft()
        return None

    def clear(self) -> int:
        count = len(self._slots)
        self._slots.clear()
        return count


class RequestGate:
    """``queued.max.requests``: requests received and not yet answered, across connections."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use = 0
        self._waiting: deque[Callable[[], None]] = deque()

    def try_acquire(self) -> bool:
        if self.in_use >= self.capacity:
            return False
        self.in_use += 1
        return True

    def release(self, count: int = 1) -> list[Callable[[], None]]:
        """Give places back; returns the waiting callbacks to call now that there is room
        (the caller schedules them, so that no connection re-enters another's write loop)."""
        self.in_use -= count
        woken: list[Callable[[], None]] = []
        while self._waiting and len(woken) < self.capacity - self.in_use:
            woken.append(self._waiting.popleft())
        return woken

    def wait(self, callback: Callable[[], None]) -> None:
        if callback not in self._waiting:
            self._waiting.append(callback)

    def forget(self, callback: Callable[[], None]) -> None:
        if callback in self._waiting:
            self._waiting.remove(callback)


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: Server, listener: Listener | None = None) -> None:
        self.server = server
        self.broker = server.broker
        self.gate: RequestGate = server.gate
        self.framer = RequestFramer(self.broker.config.socket_request_max_bytes)
        self.listener_name = listener.name if listener is not None else ""
        self.apis: dict[int, ApiSpec] = server.apis_for(self.listener_name)
        # None on PLAINTEXT listeners: the hot path's only SASL cost is this attribute check.
        self.authenticator: SaslAuthenticator | None = self._authenticator(listener)
        self.responses = ResponseQueue()
        self.transport: asyncio.Transport | None = None
        self.metrics = self.broker.metrics  # None when metrics.port is 0
        self.connection_id = "?"
        self.client_host = ""
        self.principal = "User:ANONYMOUS"
        self.last_active = 0.0
        self._loop = asyncio.get_event_loop()
        self._frames: deque[memoryview] = deque()
        self._held = 0  # gate places held by this connection
        self._parked = 0  # requests whose handlers wait (no gate place held)
        self._paused_for_gate = False
        self._paused_for_parked = False
        self._paused_for_writes = False
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._sender: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._socket_fd = -1
        self._sendfile_fd = -1
        self._zero_copy = True  # False on TLS transports: fetch slices are read, not sendfile'd
        self._closing = False
        self._refused = False  # a protocol violation: answer what came before, read no more

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.connection_id = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = peer[0] if peer else ""
        ssl_object = transport.get_extra_info("ssl_object")
        self._zero_copy = ssl_object is None
        if ssl_object is not None and self.authenticator is None:  # SSL: the certificate's
            principal = session_principal(ssl_object, self.broker.config, self.listener_name,
                                          self.connection_id)
            if principal is None:
                self._abort()
                return
            self.principal = principal
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._socket_fd = sock.fileno()
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport.set_write_buffer_limits(high=0, low=0)
        self.last_active = self._loop.time()
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.last_active = self._loop.time()
        if self._closing or self._refused:
            return
        if self.metrics is not None:
            self.metrics.bytes_in += len(data)
        try:
            self.framer.feed(data)
        except FrameTooLargeError as error:
            logger.warning("closing connection %s: %s", self.connection_id, error)
            self._abort()
            return
        self._frames.extend(self.framer)
        self._process_frames()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self._paused_for_writes:
            self._paused_for_writes = False
            self._maybe_resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self.server.connections.discard(self)
        self.gate.forget(self._process_frames)
        if self._sender is not None:
            self._sender.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self.responses.clear()
        self._frames.clear()
        share_partitions = getattr(self.broker, "share_partitions", None)
        if share_partitions is not None:  # Kafka closes the connection's share sessions
            share_partitions.connection_closed(self.connection_id)
        if self._held:
            held, self._held = self._held, 0
            self._wake(self.gate.release(held))
            self.server.on_place_released()
        if self._sendfile_fd >= 0:
            os.close(self._sendfile_fd)
            self._sendfile_fd = -1

    # -- reading and dispatching --------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self.responses)

    @property
    def parked(self) -> int:
        """Requests whose handlers are waiting (they hold no gate place)."""
        return self._parked

    def _process_frames(self) -> None:
        while self._frames and not self._closing and not self._refused:
            if self._parked >= MAX_PARKED:  # resumed when one of them is answered
                self._pause_reading()
                self._paused_for_parked = True
                return
            if not self.gate.try_acquire():
                self._pause_reading()
                self._paused_for_gate = True
                self.gate.wait(self._process_frames)
                return
            self._held += 1
            self._handle_frame(self._frames.popleft())
        if (self._paused_for_gate or self._paused_for_parked) and not self._frames:
            self._paused_for_gate = self._paused_for_parked = False
            self._maybe_resume_reading()

    def _pause_reading(self) -> None:
        if self.transport is not None and self.transport.is_reading():
            self.transport.pause_reading()

    def _maybe_resume_reading(self) -> None:
        if self._closing or self._paused_for_gate or self._paused_for_writes:
            return
        if self.transport is not None and not self.transport.is_reading():
            self.transport.resume_reading()

    def _handle_frame(self, frame: memoryview) -> None:
        slot = self.responses.reserve()
        if self.metrics is not None:
            slot.started = time.perf_counter()
        if self.authenticator is not None and self._sasl_frame(slot, frame):
            return
        try:
            header, body_offset = parse_request_header(frame)
        except (DecodeError, InvalidRequestError) as error:
            self._refuse(slot, f"unreadable request header: {error}")
            return
        spec = self.apis.get(header.request_api_key)
        if spec is None:
            self._refuse(slot, self._not_served(header))
            return
        version = header.request_api_version
        if not spec.supports(version):
            self._unsupported(slot, spec, header, frame[body_offset:])
            return
        try:
            request = _decode_body(spec.api_key, frame, body_offset, version)
        except DecodeError as error:
            self._refuse(slot, f"unreadable {spec.name} v{version} request: {error}")
            return
        self._dispatch(slot, spec, self._context(header, version), request)

    def _not_served(self, header: RequestHeader) -> str:
        """Why a request for an API this listener does not serve is refused (Kafka closes the
        connection for an API not enabled on the listener as for an unknown one)."""
        known = self.server.apis.get(header.request_api_key)
        what = (f"unknown API key {header.request_api_key}" if known is None else
                f"{known.name} (API key {known.api_key}) is not enabled on listener "
                f"{self.listener_name or '?'}")
        return f"{what} (correlation id {header.correlation_id}, client {header.client_id!r})"

    def _context(self, header: RequestHeader, version: int) -> RequestContext:
        return RequestContext(header, version, self.broker, self.connection_id, self.principal,
                              self.client_host, self.listener_name)

    # -- SASL listeners -----------------------------------------------------------------------

    def _authenticator(self, listener: Listener | None) -> SaslAuthenticator | None:
        security = None if listener is None else self.broker.config.listener_security.get(listener.name)
        if security is None or not security.is_sasl:
            return None
        replica_manager = self.broker.replica_manager
        # Before authentication frames are capped at sasl.server.max.receive.size, as in Kafka.
        self.framer.max_request_size = min(self.framer.max_request_size, security.max_receive_size)
        return SaslAuthenticator(
            security,
            scram_credential=lambda user, mechanism: replica_manager.image.scram.get(user, mechanism),
            monotonic_ms=self.broker.clock.monotonic_ms,
            error_responses={key: spec.error_response for key, spec in self.apis.items()},
        )

    def _sasl_frame(self, slot: Slot, frame: memoryview) -> bool:
        """Let the authenticator take ``frame``; True when it did (answered and/or closing)."""
        authenticator = self.authenticator
        assert authenticator is not None
        authentications = authenticator.authentications
        reply = authenticator.on_frame(frame)
        if authenticator.authentications != authentications:
            self.principal = authenticator.principal
            self.framer.max_request_size = self.broker.config.socket_request_max_bytes
            if authentications:
                logger.info("connection %s re-authenticated as %s", self.connection_id,
                            self.principal)
        if reply is None:
            return False
        if reply.close:
            logger.info("closing connection %s on listener %s: %s", self.connection_id,
                        self.listener_name, reply.reason)
            self._refused = True
            self._frames.clear()
        self.responses.fill(slot, [reply.response] if reply.response is not None else None,
                            close_after=reply.close)
        self._flush_ready()
        return True

    def _dispatch(self, slot: Slot, spec: ApiSpec, context: RequestContext, request: Message) -> None:
        forwarder = context.broker.forwarder_for(spec.api_key, self.listener_name)
        try:
            if forwarder is not None:  # KRaft: an admin request for the active controller
                result: HandlerResult = forwarder.forward(context, request)
            else:
                result = spec.handle(context, request)
        except Exception as error:
            result = failure_response(spec, context, request, error)
        if isinstance(result, Awaitable):
            slot.parked = True
            self._parked += 1
            self._release_place()
            task = self._loop.create_task(self._finish(slot, spec, context, request, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        self._complete(slot, spec, context, request, result)

    async def _finish(
        self, slot: Slot, spec: ApiSpec, context: RequestContext, request: Message,
        pending: Awaitable[Any],
    ) -> None:
        try:
            result = await pending
        except asyncio.CancelledError:
            raise
        except Exception as error:
            result = failure_response(spec, context, request, error)
        self._complete(slot, spec, context, request, result)

    def _complete(
        self, slot: Slot, spec: ApiSpec, context: RequestContext, request: Message, result: Any
    ) -> None:
        if self._closing:
            return
        if slot.parked:
            self._parked -= 1
            if self._paused_for_parked:
                self._loop.call_soon(self._process_frames)
            self.server.on_place_released()
        if self.metrics is not None:
            self.metrics.observe(spec.name, context.api_version, time.perf_counter() - slot.started)
        if result is NO_RESPONSE:
            self.responses.fill(slot, None)
        elif result is CLOSE_CONNECTION:
            # a failed acks=0 Produce, or a forwarded request the controller cannot read
            logger.info("closing connection %s after a failed %s", self.connection_id, spec.name)
            self.responses.fill(slot, None, close_after=True)
        else:
            # Never raises for a handler's or an encoder's bug: the connection stays open.
            self.responses.fill(slot, response_parts(spec, context, request, result))
        self._flush_ready()

    def _unsupported(self, slot: Slot, spec: ApiSpec, header: RequestHeader, body: memoryview) -> None:
        version = header.request_api_version
        logger.info("%s v%d from %s (client %r) is not supported (v%d-v%d)", spec.name, version,
                    self.connection_id, header.client_id, spec.min_version, spec.max_version)
        if spec.api_key == API_VERSIONS_KEY:
            self.responses.fill(slot, [unsupported_version_frame(header.correlation_id)])
            self._flush_ready()
            return
        message_class = REQUESTS[spec.api_key]
        if not message_class.MIN_VERSION <= version <= message_class.MAX_VERSION:
            self._refuse(slot, f"{spec.name} v{version} cannot even be read")
            return
        try:
            request = _decode_body(spec.api_key, body, 0, version)
        except DecodeError as error:
            self._refuse(slot, f"unreadable {spec.name} v{version} request: {error}")
            return
        context = self._context(header, version)
        refusal = UnsupportedVersionError(f"{spec.name} v{version} is not supported")
        self._complete(slot, spec, context, request,
                       failure_response(spec, context, request, refusal))

    def _refuse(self, slot: Slot, reason: str) -> None:
        """The peer broke the protocol: log it, answer what came before, then close."""
        logger.warning("closing connection %s: %s", self.connection_id, reason)
        self._refused = True
        self._frames.clear()
        self.responses.fill(slot, None, close_after=True)
        self._flush_ready()

    # -- writing ------------------------------------------------------------------------------

    def _flush_ready(self) -> None:
        """Write every response at the head of the queue that is ready (in order)."""
        transport = self.transport
        if self._sender is not None or transport is None or self._closing:
            return
        while (slot := self.responses.pop_ready()) is not None:
            if not slot.parked:  # a parked request gave its place back when it parked
                self._release_place()
            if slot.close_after:
                for part in slot.parts or ():  # a last answer (SASL failures), then close
                    transport.write(part)  # type: ignore[arg-type]
                self._closing = True
                transport.close()  # sends what the transport still holds, then closes
                return
            if slot.parts is None:
                continue
            if self.metrics is not None:
                self.metrics.sent(slot.parts)
            if not self._zero_copy:
                for part in slot.parts:
                    transport.write(part.read() if isinstance(part, FetchSlice) else part)
                continue
            if all(not isinstance(part, FetchSlice) for part in slot.parts):
                for part in slot.parts:
                    transport.write(part)  # type: ignore[arg-type]
                continue
            self._sender = self._loop.create_task(self._send_parts(slot.parts))
            return
        self.last_active = self._loop.time()
        if transport.get_write_buffer_size() > WRITE_BUFFER_HIGH and not self._paused_for_writes:
            self._paused_for_writes = True
            self._pause_reading()

    def _release_place(self) -> None:
        if self._held:
            self._held -= 1
            self._wake(self.gate.release())
            self.server.on_place_released()

    def _wake(self, callbacks: list[Callable[[], None]]) -> None:
        for callback in callbacks:
            self._loop.call_soon(callback)

    async def _send_parts(self, parts: list[ResponsePart]) -> None:
        try:
            for part in parts:
                if isinstance(part, FetchSlice):
                    await self._sendfile(part)
                elif self.transport is not None:
                    self.transport.write(part)
        except (OSError, ConnectionError) as error:
            logger.info("closing connection %s: sending a fetch response failed: %s",
                        self.connection_id, error)
            self._abort()
            return
        finally:
            self._sender = None
        self._flush_ready()

    async def _sendfile(self, piece: FetchSlice) -> None:
        await self._wait_drained()  # the transport's bytes go first: order on the wire
        fd = self._duplicate_fd()
        position, remaining = piece.position, piece.length
        while remaining > 0:
            if self._closing:
                raise ConnectionError("connection closed")
            try:
                sent = os.sendfile(fd, piece.fd, position, remaining)
            except BlockingIOError:
                await self._writable(fd)
                continue
            if sent == 0:
                raise ConnectionError(f"{piece.path} ended before position {position + remaining}")
            position += sent
            remaining -= sent

    async def _wait_drained(self) -> None:
        while self.transport is not None and self.transport.get_write_buffer_size() > 0:
            if self._closing:
                raise ConnectionError("connection closed")
            self._drained = self._loop.create_future()
            await self._drained

    def _duplicate_fd(self) -> int:
        if self._sendfile_fd < 0:
            if self._socket_fd < 0:
                raise ConnectionError("the transport has no socket")
            self._sendfile_fd = os.dup(self._socket_fd)
            os.set_blocking(self._sendfile_fd, False)
        return self._sendfile_fd

    async def _writable(self, fd: int) -> None:
        ready = self._loop.create_future()

        def on_writable() -> None:
            if not ready.done():
                ready.set_result(None)

        self._loop.add_writer(fd, on_writable)
        try:
            await ready
        finally:
            self._loop.remove_writer(fd)

    # -- closing ------------------------------------------------------------------------------

    def _abort(self) -> None:
        self._closing = True
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Close now (shutdown, idle timeout); pending responses are dropped."""
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    def is_idle(self, now: float, idle_seconds: float) -> bool:
        return not self.responses and self._sender is None and now - self.last_active > idle_seconds


def _decode_body(api_key: int, frame: memoryview, offset: int, version: int) -> Message:
    """Decode a request body. Bytes after it are ignored, as Kafka's parser ignores them
    (librdkafka's Metadata v12 requests carry three)."""
    request, _ = REQUESTS[api_key].decode_from(frame, offset, version)
    return request
