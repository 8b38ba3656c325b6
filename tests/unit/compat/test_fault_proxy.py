"""The fault proxy's sans-IO core (compat/fault_proxy.py): a faulted API is answered with its
error, everything else passes through unchanged, and responses keep the order of requests."""

from __future__ import annotations

import struct

import pytest

from compat.fault_proxy import Fault, FaultInjector
from protocol.frames import encode_request
from protocol.messages import RESPONSES, response_header_version
from protocol.messages.init_producer_id_request import InitProducerIdRequest
from protocol.messages.metadata_request import MetadataRequest
from protocol.messages.produce_request import ProduceRequest
from protocol.messages.request_header import RequestHeader

INIT_PRODUCER_ID, METADATA, PRODUCE = 22, 3, 0
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def request(api_key: int, version: int, correlation_id: int) -> bytes:
    message = {INIT_PRODUCER_ID: InitProducerIdRequest(transactional_id="t"),
               METADATA: MetadataRequest(), PRODUCE: ProduceRequest(acks=-1)}[api_key]
    return encode_request(RequestHeader(api_key, version, correlation_id, "client"), message)


def broker_response(correlation_id: int) -> bytes:
    return struct.pack(">ii", 8, correlation_id) + b"body"


def correlation_ids(frames: bytes, *, requests: bool = False) -> list[int]:
    """Of response frames (size, correlation id, ...) or request frames (size, api key,
    api version, correlation id, ...)."""
    ids, offset = [], 0
    position = 8 if requests else 4
    while offset < len(frames):
        (size,) = struct.unpack_from(">i", frames, offset)
        ids.append(struct.unpack_from(">i", frames, offset + position)[0])
        offset += 4 + size
    return ids


def test_a_faulted_request_is_answered_with_its_error_and_not_passed_on() -> None:
    injector = FaultInjector({INIT_PRODUCER_ID: TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    upstream, downstream = injector.from_client(request(INIT_PRODUCER_ID, 4, 7))
    assert upstream == b""
    header_size = 4 + 4 + (1 if response_header_version(INIT_PRODUCER_ID, 4) else 0)
    assert correlation_ids(downstream) == [7]
    response = RESPONSES[INIT_PRODUCER_ID].decode(downstream[header_size:], 4)
    assert response.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED  # type: ignore[attr-defined]
    assert injector.injected == 1


def test_other_requests_pass_through_unchanged_fed_one_byte_at_a_time() -> None:
    injector = FaultInjector({INIT_PRODUCER_ID: TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    sent = request(METADATA, 12, 1) + request(PRODUCE, 9, 2)
    upstream = b"".join(injector.from_client(sent[i:i + 1])[0] for i in range(len(sent)))
    assert upstream == sent
    answered = broker_response(1) + broker_response(2)
    assert b"".join(injector.from_broker(answered[i:i + 1]) for i in range(len(answered))) \
        == answered


def test_an_injected_response_waits_for_the_responses_to_earlier_requests() -> None:
    injector = FaultInjector({INIT_PRODUCER_ID: TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    upstream, downstream = injector.from_client(request(METADATA, 12, 1)
                                                + request(INIT_PRODUCER_ID, 4, 2))
    assert correlation_ids(upstream, requests=True) == [1] and downstream == b""
    upstream, downstream = injector.from_client(request(METADATA, 12, 3))
    assert correlation_ids(upstream, requests=True) == [3] and downstream == b""
    assert correlation_ids(injector.from_broker(broker_response(1))) == [1, 2]
    assert correlation_ids(injector.from_broker(broker_response(3))) == [3]


def test_produce_with_acks_0_is_not_waited_for() -> None:
    injector = FaultInjector({INIT_PRODUCER_ID: TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    fire_and_forget = encode_request(RequestHeader(PRODUCE, 9, 1, "client"), ProduceRequest(acks=0))
    _, downstream = injector.from_client(fire_and_forget + request(INIT_PRODUCER_ID, 4, 2))
    assert correlation_ids(downstream) == [2]


@pytest.mark.parametrize("text", ["22", "x=1", "3=1"])
def test_a_fault_names_an_api_with_an_error_code(text: str) -> None:
    with pytest.raises(ValueError):
        Fault.parse(text)
    assert Fault.parse("22=53") == Fault(INIT_PRODUCER_ID, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
