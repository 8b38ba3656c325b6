"""The sans-IO core of a Kafka connection: bytes in, frames out, and back (h11 style).

Wire layout: every request and response is a frame, ``int32 size`` (big-endian,
not counting itself) followed by ``size`` bytes. A request frame holds a
RequestHeader (v0-v2) and the request body; a response frame holds a
ResponseHeader (v0-v1) and the response body. Which header version applies is
Kafka's rule, ``request_header_version`` / ``response_header_version`` in
``protocol.messages``.

Invariants:

- ``RequestFramer`` checks a frame's size against ``max_request_size`` (Kafka's
  ``socket.request.max.bytes``) as soon as the 4 size bytes are in, before it
  keeps a single byte of the body; a negative or oversized size raises
  ``FrameTooLargeError`` and the framer refuses all further input (the
  connection is to be closed: the peer is at fault).
- Frames come out in order and are the same however the input is split,
  one byte at a time included. A frame lying wholly inside one immutable
  ``bytes`` chunk is returned as a zero-copy ``memoryview`` of it.

State: a framer belongs to the one connection (and task) that feeds it; it does
no I/O and holds no locks.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterator

from protocol.codec import DecodeError, Message, Records
from protocol.messages import REQUESTS, request_header_version
from protocol.messages.request_header import RequestHeader

__all__ = [
    "FrameError",
    "FrameTooLargeError",
    "RequestFramer",
    "encode_request",
    "encode_response",
    "encode_response_message",
    "parse_request_header",
]

_SIZE = struct.Struct(">i")
_API_KEY_AND_VERSION = struct.Struct(">hh")
_RESPONSE_HEADER_V0 = struct.Struct(">ii")  # size, correlation id
_RESPONSE_HEADER_V1 = struct.Struct(">iiB")  # size, correlation id, no tagged fields


class FrameError(Exception):
    """The peer broke the framing; the connection cannot continue."""


class FrameTooLargeError(FrameError):
    """A frame declared a negative size or one above ``max_request_size``."""

    def __init__(self, size: int, max_request_size: int) -> None:
        super().__init__(
            f"frame of {size} bytes is invalid or larger than the maximum of {max_request_size}"
        )
        self.size = size
        self.max_request_size = max_request_size


class RequestFramer:
    """Splits a byte stream into size-prefixed frames.

    ``feed(data)`` as bytes arrive, then iterate the framer for the frames now
    complete (each is taken out as it is yielded).
    """

    def __init__(self, max_request_size: int) -> None:
        if max_request_size < 0:
            raise ValueError("max_request_size must not be negative")
        self.max_request_size = max_request_size
        self._size_bytes = bytearray()  # the size prefix, while fewer than 4 bytes are in
        self._body: bytearray | None = None  # the body being gathered, once its size is known
        self._body_size = 0
        self._frames: deque[memoryview] = deque()
        self._error: FrameTooLargeError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for incomplete and not yet taken frames (for back-pressure)."""
        pending = sum(len(frame) for frame in self._frames)
        return pending + len(self._size_bytes) + (len(self._body) if self._body is not None else 0)

    def feed(self, data: Records) -> None:
        """Take in bytes received from the peer."""
        if self._error is not None:
            raise self._error
        view = memoryview(data)
        zero_copy = isinstance(data, bytes)  # a caller may reuse a bytearray: copy from those
        offset = 0
        while True:
            if self._body is None:
                offset = self._read_size(view, offset)
                if self._body is None:
                    return  # the size prefix is incomplete and the input used up
            missing = self._body_size - len(self._body)
            if zero_copy and not self._body and len(view) - offset >= missing:
                frame = view[offset : offset + missing]
                offset += missing
            else:
                take = min(missing, len(view) - offset)
                self._body += view[offset : offset + take]
                offset += take
                if len(self._body) < self._body_size:
                    return
                frame = memoryview(self._body)
            self._frames.append(frame)
            self._body = None
            if offset == len(view):
                return

    def _read_size(self, view: memoryview, offset: int) -> int:
        """Gather the size prefix; once it is complete, check it and start a body."""
        take = min(4 - len(self._size_bytes), len(view) - offset)
        self._size_bytes += view[offset : offset + take]
        if len(self._size_bytes) < 4:
            return offset + take
        size = _SIZE.unpack(self._size_bytes)[0]
        self._size_bytes.clear()
        if not 0 <= size <= self.max_request_size:
            self._error = FrameTooLargeError(size, self.max_request_size)
            raise self._error
        self._body_size = size
        self._body = bytearray()
        return offset + take

    def __iter__(self) -> Iterator[memoryview]:
        while self._frames:
            yield self._frames.popleft()

    def next_frame(self) -> memoryview | None:
        """The next complete frame, or None if there is none yet."""
        return self._frames.popleft() if self._frames else None


def parse_request_header(frame: Records) -> tuple[RequestHeader, int]:
    """Decode the request header at the start of ``frame``; return it and the body offset.

    The header version follows from the API key and version it starts with. An
    API key this codec does not know is read as header v1 (its fields sit where
    v2 has them), so that the caller can still log the correlation and client
    ids before it closes the connection, as Kafka does.
    """
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    if len(view) < _API_KEY_AND_VERSION.size:
        raise DecodeError(f"request header: a frame of {len(view)} bytes is too short")
    api_key, api_version = _API_KEY_AND_VERSION.unpack_from(view, 0)
    version = request_header_version(api_key, api_version) if api_key in REQUESTS else 1
    return RequestHeader.decode_from(view, 0, version)


def encode_response(correlation_id: int, header_version: int, body: Records) -> bytes:
    """A complete response frame: size prefix, ResponseHeader, ``body``."""
    if header_version == 0:
        head = _RESPONSE_HEADER_V0.pack(4 + len(body), correlation_id)
    elif header_version == 1:
        head = _RESPONSE_HEADER_V1.pack(5 + len(body), correlation_id, 0)
    else:
        raise ValueError(f"response header v{header_version} does not exist")
    return b"".join((head, body))


def encode_response_message(
    correlation_id: int, header_version: int, message: Message, api_version: int
) -> bytearray:
    """Like ``encode_response``, encoding ``message`` straight into the frame (one copy less)."""
    out = bytearray(encode_response(correlation_id, header_version, b""))
    message.encode_into(out, api_version)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return out


def encode_request(header: RequestHeader, message: Message) -> bytes:
    """A complete request frame for ``message`` at ``header.request_api_version``."""
    version = request_header_version(header.request_api_key, header.request_api_version)
    out = bytearray(4)
    header.encode_into(out, version)
    message.encode_into(out, header.request_api_version)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)
