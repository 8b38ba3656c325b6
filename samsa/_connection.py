"""One TCP connection to one broker: pipelined requests, responses matched in order.

Wire layout: requests go out as ``int32 size + RequestHeader + body`` (header v1, or
v2 for flexible versions), responses come back as ``int32 size + ResponseHeader +
body``. Kafka answers a connection's requests in the order they were sent, so
pending requests sit in a FIFO and every response must carry the correlation id at
its head; a mismatch (or any decode failure) means the stream is out of step and
the connection is failed, failing every pending request.

On connect the client sends ApiVersions (v3, then v0 if the broker answers
UNSUPPORTED_VERSION, as librdkafka does) and thereafter picks, for each API, the
highest version both sides know (``version_for``); with SASL credentials it then
authenticates (``samsa._sasl``) before the connection is handed out.

State: a connection belongs to the event loop that opened it. ``request()`` may be
called concurrently by many tasks; requests are written in call order.
Back-pressure: when the transport's buffer is full, ``request()`` waits for it to
drain before writing.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any, TypeVar

from protocol.codec import DecodeError, Message
from protocol.errors import UnsupportedVersionError
from protocol.frames import FrameError, RequestFramer
from protocol.messages import RESPONSES, request_header_version, response_header_version
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersionsResponse
from protocol.messages.request_header import RequestHeader
from samsa._sasl import SaslCredentials, authenticate
from samsa.errors import BrokerUnreachableError, KafkaTimeoutError

__all__ = ["BrokerConnection", "connect"]

log = logging.getLogger("samsa.connection")

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
_CLIENT_SOFTWARE_NAME = "samsa-python"
_CLIENT_SOFTWARE_VERSION = "0.1.0"

M = TypeVar("M", bound=Message)


@dataclass(slots=True)
class _Pending:
    correlation_id: int
    api_key: int
    api_version: int
    future: asyncio.Future[Any]
    timeout: asyncio.TimerHandle | None


class BrokerConnection(asyncio.Protocol):
    """A connection to ``host:port`` (broker ``node_id``, -1 while bootstrapping)."""

    def __init__(self, host: str, port: int, *, node_id: int, client_id: str,
                 request_timeout_ms: int, max_response_bytes: int) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._framer = RequestFramer(max_response_bytes)
        self._transport: asyncio.Transport | None = None
        self._pending: deque[_Pending] = deque()
        self._correlation_ids = itertools.count(1)
        self._writable = asyncio.Event()
        self._writable.set()
        self._error: Exception | None = None
        self._closed = asyncio.get_running_loop().create_future()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._transport is not None and self._error is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def writable(self) -> bool:
        """False while the transport's buffer is above its high-water mark (pause_writing)."""
        return self._writable.is_set()

    # --- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        try:
            self._framer.feed(data)
            for frame in self._framer:
                self._complete(frame)
        except (FrameError, DecodeError, ValueError) as exc:
            self._fail(BrokerUnreachableError(self.address, f"bad response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        reason = str(exc) if exc else "connection closed by the broker"
        self._fail(BrokerUnreachableError(self.address, reason))
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # --- requests --------------------------------------------------------------------------

    def version_for(self, message_type: type[Message], *, max_version: int | None = None) -> int:
        """The highest version of ``message_type`` both sides support."""
        ours_high = message_type.MAX_VERSION if max_version is None else max_version
        if message_type.LATEST_VERSION_UNSTABLE and max_version is None:
            ours_high -= 1
        theirs = self.api_versions.get(message_type.API_KEY)
        if theirs is None:
            raise UnsupportedVersionError(
                f"broker {self.address} does not support {message_type.__name__}")
        low, high = max(theirs[0], message_type.MIN_VERSION), min(theirs[1], ours_high)
        if low > high:
            raise UnsupportedVersionError(
                f"broker {self.address} supports {message_type.__name__} v{theirs[0]}-"
                f"v{theirs[1]}, this client v{message_type.MIN_VERSION}-v{ours_high}")
        return high

    async def request(self, message: Message, version: int | None = None, *,
                      expect_response: bool = True, timeout: float | None = None) -> Any:
        """Send ``message`` (at ``version``, default the highest both sides support) and
        return the decoded response; ``None`` when ``expect_response`` is false (Produce
        with acks=0)."""
        future = self.send(message, version, expect_response=expect_response, timeout=timeout)
        if not self._writable.is_set():
            await self._writable.wait()
        return await future

    def send(self, message: Message, version: int | None = None, *,
             expect_response: bool = True, timeout: float | None = None) -> asyncio.Future[Any]:
        """Write the request now and return the future of its response (no waiting)."""
        if self._error is not None:
            raise self._error
        assert self._transport is not None
        api_key = message.API_KEY
        if version is None:
            version = self.version_for(type(message))
        correlation_id = next(self._correlation_ids)
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=correlation_id, client_id=self.client_id)
        out = bytearray(4)
        header.encode_into(out, request_header_version(api_key, version))
        message.encode_into(out, version)
        _SIZE.pack_into(out, 0, len(out) - 4)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._transport.write(out)
        if not expect_response:
            future.set_result(None)
            return future
        limit = self.request_timeout if timeout is None else timeout
        pending = _Pending(correlation_id, api_key, version, future, None)
        pending.timeout = loop.call_later(limit, self._timed_out, pending, limit)
        self._pending.append(pending)
        return future

    def _complete(self, frame: memoryview) -> None:
        if not self._pending:
            raise ValueError("a response arrived with no request pending")
        pending = self._pending.popleft()
        if pending.timeout is not None:
            pending.timeout.cancel()
        correlation_id = _CORRELATION.unpack_from(frame, 0)[0]
        if correlation_id != pending.correlation_id:
            raise ValueError(f"correlation id {correlation_id}, expected {pending.correlation_id}")
        offset = 4 if response_header_version(pending.api_key, pending.api_version) == 0 else 5
        if offset == 5 and frame[4] != 0:  # tagged fields in the header: skip them properly
            from protocol.messages.response_header import ResponseHeader
            _, offset = ResponseHeader.decode_from(frame, 0, 1)
        response_type = RESPONSES[pending.api_key]
        try:
            response = response_type.decode(frame[offset:], pending.api_version)
        except DecodeError as exc:
            if pending.api_key == ApiVersionsRequest.API_KEY:
                # A broker that does not know our ApiVersions version answers in v0's layout.
                response = response_type.decode(frame[offset:], 0)
            elif not pending.future.done():
                pending.future.set_exception(exc)
                return
        except Exception as exc:
            if not pending.future.done():
                pending.future.set_exception(exc)
            return
        if not pending.future.done():
            pending.future.set_result(response)

    def _timed_out(self, pending: _Pending, limit: float) -> None:
        # A response that never comes leaves the stream out of step: fail the connection.
        self._fail(KafkaTimeoutError(
            f"request (api key {pending.api_key}) to {self.address} timed out after {limit:.1f} s"))

    def _fail(self, error: Exception) -> None:
        if self._error is None:
            self._error = error
        while self._pending:
            pending = self._pending.popleft()
            if pending.timeout is not None:
                pending.timeout.cancel()
            if not pending.future.done():
                pending.future.set_exception(error)
        self._writable.set()
        if self._transport is not None:
            self._transport.close()

    def close_soon(self) -> None:
        """Close without waiting (pending requests fail)."""
        self._fail(BrokerUnreachableError(self.address, "connection closed by the client"))

    async def close(self) -> None:
        """Close the connection; pending requests fail with ``BrokerUnreachableError``."""
        self._fail(BrokerUnreachableError(self.address, "connection closed by the client"))
        await self._closed

    # --- set-up ------------------------------------------------------------------------------

    async def negotiate(self) -> None:
        """ApiVersions v3 (falling back to v0 as Kafka's clients do); fills ``api_versions``."""
        request = ApiVersionsRequest(client_software_name=_CLIENT_SOFTWARE_NAME,
                                     client_software_version=_CLIENT_SOFTWARE_VERSION)
        response: ApiVersionsResponse = await self.request(request, 3)
        if response.error_code == UnsupportedVersionError.code:
            response = await self.request(ApiVersionsRequest(), 0)
        if response.error_code:
            raise BrokerUnreachableError(
                self.address, f"ApiVersions failed with error code {response.error_code}")
        self.api_versions = {entry.api_key: (entry.min_version, entry.max_version)
                             for entry in response.api_keys}


async def connect(host: str, port: int, *, node_id: int, client_id: str,
                  request_timeout_ms: int, setup_timeout_ms: int,
                  max_response_bytes: int, sasl: SaslCredentials | None = None) -> BrokerConnection:
    """Open a connection to ``host:port``, negotiate API versions and, with ``sasl``,
    authenticate (``samsa._sasl``); a failed authentication closes it and raises."""
    loop = asyncio.get_running_loop()
    address = f"{host}:{port}"
    try:
        async with asyncio.timeout(setup_timeout_ms / 1000):
            _, connection = await loop.create_connection(
                lambda: BrokerConnection(host, port, node_id=node_id, client_id=client_id,
                                         request_timeout_ms=request_timeout_ms,
                                         max_response_bytes=max_response_bytes),
                host, port)
            await connection.negotiate()
            if sasl is not None:
                await _authenticate(connection, sasl)
    except TimeoutError:
        raise BrokerUnreachableError(
            address, f"no connection within {setup_timeout_ms} ms") from None
    except OSError as exc:
        raise BrokerUnreachableError(address, exc.strerror or str(exc)) from None
    log.debug("connected to %s (node %d)", address, node_id)
    return connection


async def _authenticate(connection: BrokerConnection, sasl: SaslCredentials) -> None:
    try:
        await authenticate(connection, sasl)
    except BaseException:
        connection.close_soon()
        raise
