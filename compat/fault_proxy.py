"""A TCP proxy between the suites' clients and a Samsa broker that breaks one API from outside.

For the harness's own tests: ``compat.run --fault 22=53`` answers every InitProducerId request
with error 53 (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) instead of passing it on, so a broker
whose transactional API is broken can be shown to fail ``make compat`` — without a test-only
switch in the broker (franz-go kfake's fault hooks, done as a proxy). The broker advertises the
proxy's address (``advertised.listeners``), so every connection a client opens after
bootstrap, coordinators included, goes through it.

``FaultInjector`` is the sans-IO core, one per connection: bytes from the client in, bytes for
the broker and for the client out; bytes from the broker in, bytes for the client out. Frames
are Kafka's (``int32 size`` + header + body). A request of a faulted API gets the API's
response with its defaults and the top-level ``error_code`` set (an API without one cannot be
faulted); every other request is passed on unchanged.

Invariant: the client sees responses in the order it sent requests, as from a broker — an
injected response waits until the broker has answered every request sent before it.
Produce with ``acks=0`` gets no response and is not waited for.

``FaultProxy`` is the thin asyncio shell: it runs in a thread of its own, one listening socket
bound at construction (so the broker can be told its port before it starts).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from protocol.frames import RequestFramer, encode_response_message, parse_request_header
from protocol.messages import REQUESTS, RESPONSES, response_header_version

PRODUCE_KEY = 0
MAX_FRAME_BYTES = 1 << 30
_CORRELATION_ID = struct.Struct(">i")
_SIZE = struct.Struct(">i")
READ_BYTES = 65536


@dataclass(frozen=True)
class Fault:
    """Answer every request of ``api_key`` with ``error_code``."""

    api_key: int
    error_code: int

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``"API_KEY=ERROR_CODE"``, e.g. ``"22=53"``."""
        key, separator, code = text.partition("=")
        if not separator:
            raise ValueError(f"a fault is API_KEY=ERROR_CODE, not {text!r}")
        fault = cls(int(key), int(code))
        if fault.api_key not in RESPONSES or "error_code" not in RESPONSES[fault.api_key]().__slots__:
            raise ValueError(f"API {fault.api_key} has no top-level error_code to set")
        return fault


class FaultInjector:
    """One client connection's traffic, with the faulted APIs answered here (sans-IO)."""

    def __init__(self, faults: Mapping[int, int]) -> None:
        self._faults = dict(faults)  # api_key -> error_code
        self._requests = RequestFramer(MAX_FRAME_BYTES)
        self._responses = RequestFramer(MAX_FRAME_BYTES)
        # In request order: the correlation id of a request the broker will answer, or an
        # injected response frame waiting for those before it.
        self._pending: deque[int | bytes] = deque()
        self.injected = 0

    def from_client(self, data: bytes) -> tuple[bytes, bytes]:
        """``(bytes for the broker, bytes for the client)``."""
        self._requests.feed(data)
        upstream, downstream = bytearray(), bytearray()
        for frame in self._requests:
            header, body_offset = parse_request_header(frame)
            error_code = self._faults.get(header.request_api_key)
            if error_code is None:
                upstream += _SIZE.pack(len(frame)) + frame
                if _expects_response(header.request_api_key, header.request_api_version,
                                     frame, body_offset):
                    self._pending.append(header.correlation_id)
                continue
            self.injected += 1
            response = _error_response(header.request_api_key, header.request_api_version,
                                       header.correlation_id, error_code)
            if self._pending:
                self._pending.append(response)
            else:
                downstream += response
        return bytes(upstream), bytes(downstream)

    def from_broker(self, data: bytes) -> bytes:
        """Bytes for the client: the broker's responses, each followed by the injected ones
        that were waiting for it."""
        self._responses.feed(data)
        downstream = bytearray()
        for frame in self._responses:
            downstream += _SIZE.pack(len(frame)) + frame
            (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 0)
            while self._pending and self._pending[0] != correlation_id:
                self._pending.popleft()  # answered out of turn: never for a Kafka broker
            if self._pending:
                self._pending.popleft()
            while self._pending and isinstance(waiting := self._pending[0], bytes):
                downstream += waiting
                self._pending.popleft()
        return bytes(downstream)


def _expects_response(api_key: int, api_version: int, frame: memoryview, offset: int) -> bool:
    if api_key != PRODUCE_KEY:
        return True
    request, _ = REQUESTS[PRODUCE_KEY].decode_from(frame, offset, api_version)
    return getattr(request, "acks", -1) != 0


def _error_response(api_key: int, api_version: int, correlation_id: int,
                    error_code: int) -> bytes:
    message = RESPONSES[api_key]()
    message.error_code = error_code  # type: ignore[attr-defined]
    header_version = response_header_version(api_key, api_version)
    return bytes(encode_response_message(correlation_id, header_version, message, api_version))


class FaultProxy:
    """Listens on 127.0.0.1 (port chosen at construction); ``start(upstream)`` relays each
    connection to the broker through a ``FaultInjector``; ``stop()`` closes everything."""

    def __init__(self, faults: tuple[Fault, ...]) -> None:
        self.faults = {fault.api_key: fault.error_code for fault in faults}
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self.injected = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, upstream_host: str, upstream_port: int) -> FaultProxy:
        self._socket.listen()
        ready = threading.Event()

        async def serve() -> None:
            self._server = await asyncio.start_server(
                lambda reader, writer: self._relay(reader, writer, upstream_host, upstream_port),
                sock=self._socket)
            ready.set()

        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="compat-fault-proxy")
        self._thread.start()
        asyncio.run_coroutine_threadsafe(serve(), self._loop).result()
        ready.wait()
        return self

    def stop(self) -> None:
        if self._thread is None:
            self._socket.close()
            return

        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._thread = None

    async def _relay(self, client_reader: asyncio.StreamReader,
                     client_writer: asyncio.StreamWriter, host: str, port: int) -> None:
        injector = FaultInjector(self.faults)
        try:
            broker_reader, broker_writer = await asyncio.open_connection(host, port)
        except OSError:
            client_writer.close()
            return
        try:
            await asyncio.gather(self._upstream(injector, client_reader, broker_writer,
                                                client_writer),
                                 self._downstream(injector, broker_reader, client_writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.injected += injector.injected
            broker_writer.close()
            client_writer.close()

    @staticmethod
    async def _upstream(injector: FaultInjector, client: asyncio.StreamReader,
                        broker: asyncio.StreamWriter, client_writer: asyncio.StreamWriter) -> None:
        while data := await client.read(READ_BYTES):
            to_broker, to_client = injector.from_client(data)
            if to_broker:
                broker.write(to_broker)
                await broker.drain()
            if to_client:
                client_writer.write(to_client)
                await client_writer.drain()
        broker.close()

    @staticmethod
    async def _downstream(injector: FaultInjector, broker: asyncio.StreamReader,
                          client: asyncio.StreamWriter) -> None:
        while data := await broker.read(READ_BYTES):
            client.write(injector.from_broker(data))
            await client.drain()
        client.close()
