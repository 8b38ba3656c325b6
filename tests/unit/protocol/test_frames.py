"""The sans-IO connection core: framing, request headers, response frames. No sockets."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.codec import DecodeError
from protocol.frames import (
    FrameTooLargeError,
    RequestFramer,
    encode_request,
    encode_response,
    encode_response_message,
    parse_request_header,
)
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from protocol.messages.controlled_shutdown_request import ControlledShutdownRequest
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.metadata_response import MetadataResponse
from protocol.messages.request_header import RequestHeader

# kafka-python 3.0.12 reads its schemas with deprecated importlib.resources calls.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


BODIES = [b"first", b"", b"x" * 300, bytes(range(256))]
STREAM = b"".join(frame(body) for body in BODIES)


def frames_of(framer: RequestFramer) -> list[bytes]:
    return [bytes(item) for item in framer]


# ---------------------------------------------------------------- framing


def test_several_frames_in_one_feed() -> None:
    framer = RequestFramer(max_request_size=1000)
    framer.feed(STREAM)
    assert frames_of(framer) == BODIES
    assert framer.buffered_bytes == 0


def test_one_byte_at_a_time_gives_the_same_frames() -> None:
    framer = RequestFramer(max_request_size=1000)
    received = []
    for index in range(len(STREAM)):
        framer.feed(STREAM[index : index + 1])
        received += frames_of(framer)
    assert received == BODIES


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_gives_the_same_frames(cuts: list[int]) -> None:
    framer = RequestFramer(max_request_size=1000)
    bounds = [0, *sorted(cuts), len(STREAM)]
    received = []
    for start, end in itertools.pairwise(bounds):
        framer.feed(bytearray(STREAM[start:end]))  # bytearray: the framer must copy it
        received += frames_of(framer)
    assert received == BODIES


def test_a_frame_inside_one_bytes_chunk_is_not_copied() -> None:
    framer = RequestFramer(max_request_size=1000)
    framer.feed(STREAM)
    first = framer.next_frame()
    assert first is not None and first.obj is STREAM


def test_frames_fed_as_a_bytearray_are_copied() -> None:
    framer = RequestFramer(max_request_size=1000)
    data = bytearray(frame(b"abc"))
    framer.feed(data)
    data[4:7] = b"zzz"
    assert frames_of(framer) == [b"abc"]


def test_an_incomplete_frame_waits() -> None:
    framer = RequestFramer(max_request_size=1000)
    framer.feed(frame(b"hello")[:6])
    assert framer.next_frame() is None
    assert framer.buffered_bytes == 2
    framer.feed(b"llo")
    assert frames_of(framer) == [b"hello"]


def test_a_frame_of_exactly_the_maximum_size_is_accepted() -> None:
    framer = RequestFramer(max_request_size=10)
    framer.feed(frame(b"0123456789"))
    assert frames_of(framer) == [b"0123456789"]


@pytest.mark.parametrize("size", [11, 2**31 - 1, -1, -(2**31)])
def test_an_oversized_or_negative_frame_is_rejected_before_its_body_is_kept(size: int) -> None:
    framer = RequestFramer(max_request_size=10)
    framer.feed(frame(b"ok"))
    with pytest.raises(FrameTooLargeError) as raised:
        framer.feed(struct.pack(">i", size) + b"body bytes that must not be kept")
    assert raised.value.size == size and raised.value.max_request_size == 10
    assert framer.buffered_bytes == len(b"ok")  # only the earlier, complete frame
    assert frames_of(framer) == [b"ok"]
    with pytest.raises(FrameTooLargeError):
        framer.feed(frame(b"later"))  # the framer refuses all further input


def test_an_oversized_frame_is_rejected_from_its_size_alone() -> None:
    framer = RequestFramer(max_request_size=100)
    for byte in struct.pack(">i", 101)[:-1]:
        framer.feed(bytes([byte]))
    with pytest.raises(FrameTooLargeError):
        framer.feed(struct.pack(">i", 101)[-1:])


# ---------------------------------------------------------------- request headers


def test_a_request_round_trips_through_the_framer() -> None:
    header = RequestHeader(
        request_api_key=3, request_api_version=12, correlation_id=42, client_id="c"
    )
    request = MetadataRequest(topics=[MetadataRequestTopic(name="events")])
    framer = RequestFramer(max_request_size=1 << 20)
    framer.feed(encode_request(header, request))
    (received,) = list(framer)
    parsed, offset = parse_request_header(received)
    assert parsed == header
    assert MetadataRequest.decode(received[offset:], 12) == request


@pytest.mark.parametrize(
    ("api_key", "api_version", "header_bytes"),
    [
        (18, 3, struct.pack(">hhih", 18, 3, 9, 3) + b"cli" + b"\x00"),  # v2: tagged fields
        (18, 2, struct.pack(">hhih", 18, 2, 9, 3) + b"cli"),  # v1
        (3, 1, struct.pack(">hhih", 3, 1, 9, -1)),  # v1, null client id
        (7, 0, struct.pack(">hhi", 7, 0, 9)),  # ControlledShutdown v0: header v0
    ],
)
def test_the_header_version_follows_the_api_version(
    api_key: int, api_version: int, header_bytes: bytes
) -> None:
    header, offset = parse_request_header(header_bytes + b"body")
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (
        api_key,
        api_version,
        9,
    )
    assert offset == len(header_bytes)


def test_an_unknown_api_key_is_read_as_header_v1() -> None:
    header, offset = parse_request_header(struct.pack(">hhih", 999, 0, 5, 1) + b"c" + b"?")
    assert (header.request_api_key, header.correlation_id, header.client_id) == (999, 5, "c")
    assert offset == 11


@pytest.mark.parametrize("cut", range(14))
def test_a_truncated_header_raises_the_decode_error(cut: int) -> None:
    data = struct.pack(">hhih", 18, 3, 9, 3) + b"cli" + b"\x00"
    with pytest.raises(DecodeError):
        parse_request_header(data[:cut])


def test_controlled_shutdown_v0_has_no_client_id() -> None:
    header = RequestHeader(request_api_key=7, request_api_version=0, correlation_id=3)
    data = encode_request(header, ControlledShutdownRequest(broker_id=1))
    assert data == struct.pack(">ihhii", 12, 7, 0, 3, 1)


def test_request_frames_match_kafka_python() -> None:
    from kafka.protocol.metadata import ApiVersionsRequest as KafkaPythonApiVersions

    theirs = KafkaPythonApiVersions(
        client_software_name="kafka-python", client_software_version="3.0.12", version=3
    )
    theirs.with_header(correlation_id=77, client_id="kafka-python-client")
    header = RequestHeader(
        request_api_key=18,
        request_api_version=3,
        correlation_id=77,
        client_id="kafka-python-client",
    )
    ours = ApiVersionsRequest(client_software_name="kafka-python", client_software_version="3.0.12")
    assert encode_request(header, ours) == theirs.encode(header=True, framed=True)


# ---------------------------------------------------------------- responses


def test_response_frames() -> None:
    assert encode_response(5, 0, b"body") == struct.pack(">ii", 8, 5) + b"body"
    assert encode_response(5, 1, b"body") == struct.pack(">iiB", 9, 5, 0) + b"body"
    with pytest.raises(ValueError):
        encode_response(5, 2, b"")


def test_a_response_message_is_framed_in_one_buffer() -> None:
    response = ApiVersionsResponse(api_keys=[ApiVersion(api_key=18, max_version=3)])
    framed = encode_response_message(11, 0, response, 3)
    assert framed == encode_response(11, 0, response.encode(3))
    metadata = MetadataResponse(cluster_id="c")
    assert encode_response_message(1, 1, metadata, 12) == encode_response(1, 1, metadata.encode(12))


def test_response_frames_match_kafka_python() -> None:
    from kafka.protocol.metadata import ApiVersionsResponse as KafkaPythonApiVersions

    theirs = KafkaPythonApiVersions(
        error_code=0,
        api_keys=[KafkaPythonApiVersions.ApiVersion(api_key=18, min_version=0, max_version=3)],
        throttle_time_ms=0,
        version=3,
    )
    theirs.with_header(correlation_id=77)
    ours = ApiVersionsResponse(api_keys=[ApiVersion(api_key=18, max_version=3)])
    assert encode_response_message(77, 0, ours, 3) == theirs.encode(header=True, framed=True)
