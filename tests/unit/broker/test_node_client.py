"""The node client's sans-IO core, without sockets: request frames out, responses matched in
order however the bytes are split, version choice, and the reconnect backoff (its socket side
is tested against a real broker in tests/integration/test_node_client.py)."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.node_client import InFlightRequests, ReconnectBackoff, version_for
from protocol.codec import DecodeError
from protocol.errors import UnsupportedVersionError
from protocol.frames import RequestFramer, encode_response_message, parse_request_header
from protocol.messages import REQUESTS, response_header_version
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from protocol.messages.create_topics_request import CreateTopicsRequest
from protocol.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from protocol.messages.metadata_request import MetadataRequest
from protocol.messages.metadata_response import MetadataResponse, MetadataResponseBroker


def answer(correlation_id: int, api_key: int, version: int, response: object) -> bytes:
    header_version = response_header_version(api_key, version)
    return bytes(encode_response_message(correlation_id, header_version, response, version))  # type: ignore[arg-type]


def test_a_request_frame_carries_the_header_for_its_version() -> None:
    requests = InFlightRequests("node-1")
    first, frame_v9 = requests.send(MetadataRequest(topics=None), 9)  # flexible: header v2
    second, frame_v4 = requests.send(MetadataRequest(topics=None), 4)  # header v1
    for sent, frame in ((first, frame_v9), (second, frame_v4)):
        header, offset = parse_request_header(memoryview(frame)[4:])
        assert (header.request_api_key, header.request_api_version, header.correlation_id,
                header.client_id) == (3, sent.api_version, sent.correlation_id, "node-1")
        body = REQUESTS[3].decode(memoryview(frame)[4 + offset:], sent.api_version)
        assert body == MetadataRequest(topics=None)
    assert (first.correlation_id, second.correlation_id) == (1, 2) and len(requests) == 2


RESPONSES = [
    (3, 12, MetadataResponse(brokers=[MetadataResponseBroker(node_id=1, host="h", port=9092)])),
    (3, 4, MetadataResponse(cluster_id="c")),
    (19, 7, CreateTopicsResponse(topics=[CreatableTopicResult(name="t", error_code=36)])),
    (18, 3, ApiVersionsResponse(api_keys=[ApiVersion(api_key=3, min_version=0, max_version=12)])),
]


@settings(max_examples=50, deadline=None)
@given(order=st.permutations(range(len(RESPONSES))), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_responses_are_matched_in_order_however_the_bytes_are_split(
    order: list[int], cuts: list[int],
) -> None:
    requests = InFlightRequests("n")
    sent = []
    for index in order:
        api_key, version, _ = RESPONSES[index]
        request_class = REQUESTS[api_key]
        sent.append(requests.send(request_class(), version)[0])
    stream = b"".join(answer(request.correlation_id, *RESPONSES[index])
                      for request, index in zip(sent, order, strict=True))
    received = []
    positions = sorted({min(cut, len(stream)) for cut in cuts} | {0, len(stream)})
    for start, end in itertools.pairwise(positions):
        received += requests.receive(stream[start:end])
    assert [request for request, _ in received] == sent
    assert [response for _, response in received] == [RESPONSES[index][2] for index in order]
    assert len(requests) == 0


def test_one_byte_at_a_time() -> None:
    requests = InFlightRequests("n")
    request, _ = requests.send(MetadataRequest(), 12)
    received = []
    for byte in answer(request.correlation_id, *RESPONSES[0]):
        received += requests.receive(bytes([byte]))
    assert received == [(request, RESPONSES[0][2])]


def test_a_response_out_of_order_puts_the_stream_out_of_step() -> None:
    requests = InFlightRequests("n")
    first, _ = requests.send(MetadataRequest(), 12)
    with pytest.raises(DecodeError, match="correlation id 2, expected 1"):
        requests.receive(answer(first.correlation_id + 1, *RESPONSES[0]))
    with pytest.raises(DecodeError, match="no request in flight"):
        InFlightRequests("n").receive(answer(1, *RESPONSES[0]))


def test_an_unreadable_body_fails_only_its_request() -> None:
    requests = InFlightRequests("n")
    first, _ = requests.send(MetadataRequest(), 12)
    second, _ = requests.send(MetadataRequest(), 12)
    good = answer(second.correlation_id, *RESPONSES[0])
    truncated = answer(first.correlation_id, *RESPONSES[0])[:-3]
    bad = len(truncated[4:]).to_bytes(4, "big") + truncated[4:]
    [(failed, error), (answered, response)] = requests.receive(bad + good)
    assert failed == first and isinstance(error, DecodeError)
    assert answered == second and response == RESPONSES[0][2]


def test_an_api_versions_refusal_in_the_v0_layout_is_read() -> None:
    requests = InFlightRequests("n")
    request, _ = requests.send(ApiVersionsRequest(), 4)
    refusal = ApiVersionsResponse(error_code=35, api_keys=[ApiVersion(api_key=18, max_version=3)])
    [(_, response)] = requests.receive(answer(request.correlation_id, 18, 0, refusal))
    assert response == refusal


def test_a_request_sent_without_expecting_an_answer_is_not_in_flight() -> None:
    requests = InFlightRequests("n")
    _, frame = requests.send(CreateTopicsRequest(), 7, expect_response=False)
    framer = RequestFramer(1 << 20)
    framer.feed(frame)
    assert len(requests) == 0 and len(list(framer)) == 1


NODE = {3: (0, 12), 19: (2, 7)}


def test_the_version_is_the_highest_both_sides_serve_or_the_one_asked_for() -> None:
    assert version_for(NODE, MetadataRequest) == 12
    assert version_for({3: (0, 5)}, MetadataRequest) == 5
    assert version_for(NODE, MetadataRequest, 4) == 4
    with pytest.raises(UnsupportedVersionError, match="does not serve ApiVersionsRequest"):
        version_for(NODE, ApiVersionsRequest)
    with pytest.raises(UnsupportedVersionError, match="v1: the node serves v2-v7"):
        version_for(NODE, CreateTopicsRequest, 1)
    with pytest.raises(UnsupportedVersionError, match="this codec"):
        version_for({3: (40, 50)}, MetadataRequest)


@settings(max_examples=50, deadline=None)
@given(initial=st.integers(0, 200), maximum=st.integers(0, 5000),
       outcomes=st.lists(st.booleans(), max_size=20), seed=st.integers(0, 2**32))
def test_the_reconnect_backoff_doubles_per_failure_up_to_its_maximum(
    initial: int, maximum: int, outcomes: list[bool], seed: int,
) -> None:
    backoff = ReconnectBackoff(initial, maximum, rng=random.Random(seed))
    failures, now = 0, 100.0
    assert backoff.remaining(now) == 0  # the first attempt is immediate
    for failed in outcomes:
        if failed:
            backoff.failed(now)
            failures += 1
            expected = min(initial * 2 ** (failures - 1), max(maximum, initial)) / 1000
            assert expected * 0.8 - 1e-9 <= backoff.remaining(now) <= expected * 1.2 + 1e-9
            assert backoff.remaining(now + expected * 1.2 + 1e-6) == 0
        else:
            backoff.succeeded()
            failures = 0
            assert backoff.remaining(now) == 0
        now += 0.5
