"""Envelope (KIP-590), in-process on a real ``Broker`` (real logs in a temp dir, no sockets):
the forwarding side's wrapping (``broker.forwarding``) run through the Envelope handler, with
and without an authorizer, and Kafka's errors for a malformed envelope."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.apis import RequestContext, create_acls, envelope
from broker.auth.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.forwarding import (
    decode_client_address,
    decode_inner_response,
    decode_principal,
    encode_client_address,
    encode_principal,
    envelope_request,
)
from broker.responses import failure_response
from protocol.codec import Message
from protocol.errors import ErrorCode, KafkaError
from protocol.frames import encode_request
from protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from protocol.messages.describe_quorum_response import DescribeQuorumResponse
from protocol.messages.envelope_request import EnvelopeRequest
from protocol.messages.envelope_response import EnvelopeResponse
from protocol.messages.metadata_request import MetadataRequest
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CREATE_TOPICS_VERSION = 7


def start(log_dir: Path, **overrides: str) -> Broker:
    properties = {"log.dirs": str(log_dir), "offsets.topic.num.partitions": "1"} | overrides
    broker = Broker.create(BrokerConfig.from_properties(properties), clock=ManualClock(1000))
    broker.startup()
    return broker


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Broker]:
    broker = start(tmp_path)
    yield broker
    broker.shutdown()


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Broker]:
    broker = start(tmp_path, **{"authorizer.class.name": AUTHORIZER, "super.users": "User:broker"})
    yield broker
    broker.shutdown()


def context(broker: Broker, api_key: int, version: int, *, principal: str = "User:ANONYMOUS",
            client_host: str = "127.0.0.1", correlation_id: int = 1) -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=correlation_id, client_id="client")
    return RequestContext(header=header, api_version=version, broker=broker, connection_id="c",
                          principal=principal, client_host=client_host, listener_name="CONTROLLER")


def send_envelope(broker: Broker, request: EnvelopeRequest, *,
                  principal: str = "User:broker") -> EnvelopeResponse:
    """The Envelope answer as the connection makes it (a raised error -> ``error_response``)."""
    envelope_context = context(broker, 58, 0, principal=principal)
    try:
        result: Any = envelope.handle(envelope_context, request)
        if isinstance(result, Awaitable):
            result = asyncio.run(_awaited(result))
    except KafkaError as error:
        result = failure_response(envelope.SPEC, envelope_context, request, error)
    assert isinstance(result, EnvelopeResponse)
    return result


async def _awaited(pending: Awaitable[Any]) -> Any:
    return await pending


def create_topics(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[
        CreatableTopic(name=name, num_partitions=1, replication_factor=1) for name in names])


def forward(broker: Broker, request: Message, *, principal: str = "User:ANONYMOUS",
            client_host: str = "10.0.0.7", envelope_principal: str = "User:broker") -> Message:
    """``request`` forwarded the way ``Forwarder`` wraps it, answered, and unwrapped."""
    client = context(broker, request.API_KEY, CREATE_TOPICS_VERSION, principal=principal,
                     client_host=client_host, correlation_id=42)
    answer = send_envelope(broker, envelope_request(client, request), principal=envelope_principal)
    assert answer.error_code == ErrorCode.NONE and answer.response_data is not None
    return decode_inner_response(client, answer.response_data)


def topic_errors(response: Message) -> dict[str, int]:
    assert isinstance(response, CreateTopicsResponse)
    return {topic.name: topic.error_code for topic in response.topics}


def test_a_forwarded_create_topics_creates_the_topic(controller: Broker) -> None:
    response = forward(controller, create_topics("forwarded"))
    assert topic_errors(response) == {"forwarded": ErrorCode.NONE}
    assert "forwarded" in controller.replica_manager.image.topics_by_name


def allow_create(broker: Broker, principal: str, host: str) -> None:
    creation = AclCreation(resource_type=ResourceType.TOPIC, resource_name="t",
                           resource_pattern_type=PatternType.PREFIXED, principal=principal,
                           host=host, operation=AclOperation.CREATE,
                           permission_type=AclPermissionType.ALLOW)
    result = create_acls.handle(context(broker, 30, 3, principal="User:broker"),
                                CreateAclsRequest(creations=[creation]))
    assert not isinstance(result, Awaitable)
    assert [r.error_code for r in result.results] == [ErrorCode.NONE]


def test_the_forwarded_principal_and_address_are_the_ones_authorized(secured: Broker) -> None:
    allow_create(secured, "User:alice", "10.0.0.7")
    refused = forward(secured, create_topics("t-bob"), principal="User:bob")
    elsewhere = forward(secured, create_topics("t-far"), principal="User:alice", client_host="10.0.0.8")
    allowed = forward(secured, create_topics("t-alice"), principal="User:alice")
    assert topic_errors(refused) == {"t-bob": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert topic_errors(elsewhere) == {"t-far": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert topic_errors(allowed) == {"t-alice": ErrorCode.NONE}
    assert set(secured.replica_manager.image.topics_by_name) >= {"t-alice"}
    assert not {"t-bob", "t-far"} & set(secured.replica_manager.image.topics_by_name)


def test_the_envelope_sender_needs_cluster_action(secured: Broker) -> None:
    client = context(secured, 19, CREATE_TOPICS_VERSION, principal="User:broker")
    answer = send_envelope(secured, envelope_request(client, create_topics("t-x")),
                           principal="User:mallory")
    assert answer == EnvelopeResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    assert "t-x" not in secured.replica_manager.image.topics_by_name


def inner(api_key: int = 19, version: int = CREATE_TOPICS_VERSION,
          body: Message | None = None) -> bytes:
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=5, client_id="c")
    return encode_request(header, body if body is not None else create_topics("t"))[4:]


GOOD_PRINCIPAL = encode_principal("User:alice")
MALFORMED = {
    "unreadable header": (EnvelopeRequest(b"\x00", GOOD_PRINCIPAL, bytes(4)),
                          ErrorCode.UNSUPPORTED_VERSION),
    "truncated body": (EnvelopeRequest(inner()[:-4], GOOD_PRINCIPAL, bytes(4)),
                       ErrorCode.UNSUPPORTED_VERSION),
    "version not served": (EnvelopeRequest(inner(version=1), GOOD_PRINCIPAL, bytes(4)),
                           ErrorCode.UNSUPPORTED_VERSION),
    "not forwardable": (EnvelopeRequest(inner(3, 12, MetadataRequest()), GOOD_PRINCIPAL, bytes(4)),
                        ErrorCode.INVALID_REQUEST),
    "unknown API key": (EnvelopeRequest(b"\x7f\x00\x00\x00" + inner()[4:], GOOD_PRINCIPAL, bytes(4)),
                        ErrorCode.INVALID_REQUEST),
    "no principal": (EnvelopeRequest(inner(), None, bytes(4)),
                     ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE),
    "principal version 1": (EnvelopeRequest(inner(), b"\x00\x01" + GOOD_PRINCIPAL[2:], bytes(4)),
                            ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE),
    "truncated principal": (EnvelopeRequest(inner(), GOOD_PRINCIPAL[:-2], bytes(4)),
                            ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE),
    "3-byte address": (EnvelopeRequest(inner(), GOOD_PRINCIPAL, b"\x0a\x00\x00"),
                       ErrorCode.INVALID_REQUEST),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_envelope_gets_kafkas_error(controller: Broker, case: str) -> None:
    request, error_code = MALFORMED[case]
    assert send_envelope(controller, request) == EnvelopeResponse(error_code=error_code)
    assert "t" not in controller.replica_manager.image.topics_by_name


def test_an_inner_not_controller_becomes_the_envelopes_error(controller: Broker) -> None:
    client = context(controller, 19, CREATE_TOPICS_VERSION)
    not_controller = CreateTopicsResponse(topics=[
        CreatableTopicResult(name="a"),
        CreatableTopicResult(name="b", error_code=ErrorCode.NOT_CONTROLLER)])
    fine = CreateTopicsResponse(topics=[CreatableTopicResult(name="a")])
    spec = envelope.load_apis()[19]
    assert envelope.wrap(spec, client, create_topics("a"), not_controller) == EnvelopeResponse(
        error_code=ErrorCode.NOT_CONTROLLER)
    assert envelope.wrap(spec, client, create_topics("a"), fine).error_code == ErrorCode.NONE
    leaderless = DescribeQuorumResponse(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert envelope._means_not_controller(55, leaderless)
    assert not envelope._means_not_controller(19, leaderless)


@settings(max_examples=50, deadline=None)
@given(principal_type=st.text(min_size=1).filter(lambda text: ":" not in text), name=st.text())
def test_a_principal_survives_the_serde(principal_type: str, name: str) -> None:
    principal = f"{principal_type}:{name}"
    data = encode_principal(principal)
    assert data[:2] == b"\x00\x00" and decode_principal(data) == principal


@settings(max_examples=50, deadline=None)
@given(address=st.ip_addresses())
def test_a_client_address_survives_the_envelope(address: Any) -> None:
    data = encode_client_address(str(address))
    assert len(data) in (4, 16) and decode_client_address(data) == str(address)
