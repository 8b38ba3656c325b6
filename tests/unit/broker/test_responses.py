"""A request that was read is always answered at its version (``broker.responses``), and the
connection stays open: a handler that raises, a response the version cannot carry, an error
response that cannot be encoded either. Broken handlers are stand-ins built here (fault
injection, as franz-go's kfake hooks): the real handlers' bugs of this kind are fixed, and
tests/unit/broker/test_handlers_at_old_versions.py keeps them fixed."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import RequestContext, list_offsets, load_apis, metadata
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.connection import KafkaConnection
from broker.responses import failure_response, last_resort_response, response_parts
from broker.server import Server
from protocol.errors import ErrorCode, NotCoordinatorError
from protocol.frames import encode_request
from protocol.messages import RESPONSES, response_header_version
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersionsResponse
from protocol.messages.find_coordinator_request import FindCoordinatorRequest
from protocol.messages.find_coordinator_response import FindCoordinatorResponse
from protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.metadata_response import MetadataResponse, MetadataResponseTopic
from protocol.messages.request_header import RequestHeader
from protocol.messages.response_header import ResponseHeader
from storage.clock import ManualClock
from tests.message_strategies import spec_for
from tests.unit.broker.test_connection import FakeTransport

UNKNOWN_SERVER_ERROR = ErrorCode.UNKNOWN_SERVER_ERROR
SPECS = load_apis()


def context(api_key: int, version: int, correlation_id: int = 7) -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=correlation_id)
    # Nothing in broker.responses touches the broker.
    return RequestContext(header=header, api_version=version, broker=None,  # type: ignore[arg-type]
                          connection_id="test")


def decode_frame(frame: bytes | bytearray, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, response) of one response frame, decoded whole at ``version``."""
    view = memoryview(bytes(frame))
    (size,) = struct.unpack_from(">i", view)
    assert size == len(view) - 4
    header, offset = ResponseHeader.decode_from(view, 4, response_header_version(api_key, version))
    return header.correlation_id, RESPONSES[api_key].decode(view[offset:], version)


def list_offsets_request() -> ListOffsetsRequest:
    return ListOffsetsRequest(topics=[ListOffsetsTopic(
        name="t", partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])])


def answer_with_leader_epoch(context: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    """The ListOffsets v1-v3 bug: a leader epoch in a response version that lacks the field."""
    return ListOffsetsResponse(topics=[ListOffsetsTopicResponse(name="t", partitions=[
        ListOffsetsPartitionResponse(partition_index=0, offset=3, leader_epoch=5)])])


def tracebacks(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for record in caplog.records
               if record.levelno >= logging.ERROR and record.exc_info is not None)


@pytest.mark.parametrize(("api_key", "version"), [
    (spec.api_key, version) for spec in SPECS.values()
    for version in range(spec.min_version, spec.max_version + 1)
])
def test_the_last_resort_encodes_at_every_advertised_version(api_key: int, version: int) -> None:
    response = last_resort_response(api_key, version, UNKNOWN_SERVER_ERROR)
    decoded = type(response).decode(response.encode(version), version)
    top_level = {field.attr: field for field in spec_for(api_key, "response").struct.fields}
    if "error_code" in top_level and version in top_level["error_code"].versions:
        assert decoded.error_code == UNKNOWN_SERVER_ERROR  # type: ignore[attr-defined]
    else:
        assert decoded == type(response)()  # the defaults: nothing a client could misread


def test_the_last_resort_carries_the_error_where_the_version_has_a_top_level_error_code() -> None:
    assert last_resort_response(10, 1, UNKNOWN_SERVER_ERROR).error_code == UNKNOWN_SERVER_ERROR  # type: ignore[attr-defined]
    # FindCoordinator v4+ has its error codes per coordinator only.
    assert last_resort_response(10, 4, UNKNOWN_SERVER_ERROR) == FindCoordinatorResponse()


def test_a_response_the_version_cannot_carry_becomes_the_error_response(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = list_offsets.SPEC
    parts = response_parts(spec, context(spec.api_key, 2), list_offsets_request(),
                           answer_with_leader_epoch(context(spec.api_key, 2), list_offsets_request()))
    correlation_id, response = decode_frame(parts[0], spec.api_key, 2)  # type: ignore[arg-type]
    assert correlation_id == 7
    assert response.topics[0].partitions[0].error_code == UNKNOWN_SERVER_ERROR
    assert tracebacks(caplog) == 1


def test_an_error_response_that_cannot_be_encoded_falls_back_to_the_defaults(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = dataclasses.replace(metadata.SPEC, error_response=lambda request, error: MetadataResponse(
        topics=[MetadataResponseTopic(error_code=error.code, name=None)]))  # null before v12
    request = MetadataRequest(topics=[MetadataRequestTopic(name="t")])
    unencodable = MetadataResponse(topics=[MetadataResponseTopic(name=None)])
    parts = response_parts(broken, context(3, 10), request, unencodable)
    _, response = decode_frame(parts[0], 3, 10)  # type: ignore[arg-type]
    assert response == MetadataResponse()  # v10 has no top-level error code
    assert tracebacks(caplog) == 2


def test_a_handler_that_raises_gets_unknown_server_error_and_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    response = failure_response(list_offsets.SPEC, context(2, 5), list_offsets_request(),
                                RuntimeError("a bug"))
    assert response.topics[0].partitions[0].error_code == UNKNOWN_SERVER_ERROR  # type: ignore[attr-defined]
    assert tracebacks(caplog) == 1


def test_a_kafka_error_keeps_its_code_and_logs_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    response = failure_response(list_offsets.SPEC, context(2, 5), list_offsets_request(),
                                NotCoordinatorError())
    assert response.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR  # type: ignore[attr-defined]
    assert tracebacks(caplog) == 0


def test_an_error_response_builder_that_raises_falls_back_to_the_defaults(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def raising(request: Any, error: Any) -> Any:
        raise KeyError("a bug in error_response")

    broken = dataclasses.replace(SPECS[10], error_response=raising)
    response = failure_response(broken, context(10, 2), FindCoordinatorRequest(key="g"),
                                RuntimeError("a bug"))
    assert response == FindCoordinatorResponse(error_code=UNKNOWN_SERVER_ERROR)
    assert tracebacks(caplog) == 2


# ---- through a connection ------------------------------------------------------------------


def split_frames(data: bytes | bytearray) -> list[bytes]:
    """The size-prefixed frames in ``data``."""
    frames, position = [], 0
    while position < len(data):
        end = position + 4 + struct.unpack_from(">i", data, position)[0]
        frames.append(bytes(data[position:end]))
        position = end
    return frames


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker.create(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}),
                           clock=ManualClock())
    broker.startup()
    yield broker
    broker.shutdown()


def request_frame(api_key: int, version: int, correlation_id: int, request: Any) -> bytes:
    return encode_request(RequestHeader(request_api_key=api_key, request_api_version=version,
                                        correlation_id=correlation_id, client_id="test"), request)


@pytest.mark.parametrize("handler", ["returns_unencodable", "raises", "awaits_then_raises"])
def test_the_connection_answers_a_failed_handler_and_stays_open(
    broker: Broker, handler: str, caplog: pytest.LogCaptureFixture,
) -> None:
    async def awaits_then_raises(context: RequestContext, request: Any) -> Any:
        await asyncio.sleep(0)
        raise RuntimeError("a bug after an await")

    def raises(context: RequestContext, request: Any) -> Any:
        raise RuntimeError("a bug")

    handlers = {"returns_unencodable": answer_with_leader_epoch, "raises": raises,
                "awaits_then_raises": awaits_then_raises}

    async def scenario() -> FakeTransport:
        connection = KafkaConnection(Server(broker))
        connection.apis = {**connection.apis,
                           2: dataclasses.replace(list_offsets.SPEC, handle=handlers[handler])}
        transport = FakeTransport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        connection.data_received(request_frame(2, 2, 1, list_offsets_request())
                                 + request_frame(18, 0, 2, ApiVersionsRequest()))
        # The awaiting handler answers from its task: wait for every task but this one.
        await asyncio.gather(*(task for task in asyncio.all_tasks()
                               if task is not asyncio.current_task()))
        connection.connection_lost(None)
        return transport

    transport = asyncio.run(scenario())
    assert not transport.closed
    first, second = split_frames(transport.written)
    correlation_id, response = decode_frame(first, 2, 2)
    assert correlation_id == 1
    assert response.topics[0].partitions[0].error_code == UNKNOWN_SERVER_ERROR
    correlation_id, versions = decode_frame(second, 18, 0)
    assert correlation_id == 2 and isinstance(versions, ApiVersionsResponse)
    assert tracebacks(caplog) == 1
