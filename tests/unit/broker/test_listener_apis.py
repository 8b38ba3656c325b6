"""Listener-scoped APIs: each API is served on the listener types its schema names; a controller
listener serves and lists only controller APIs; a request for an API the listener does not
serve closes the connection with a log line (a whole connection driven through a fake
transport, no socket)."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import (
    BROKER_LISTENER,
    CONTROLLER_LISTENER,
    ApiSpec,
    listener_type,
    load_apis,
    served_on,
)
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.connection import KafkaConnection
from broker.server import Server
from protocol.messages import API_LISTENERS
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersionsResponse
from protocol.messages.envelope_request import EnvelopeRequest
from protocol.messages.metadata_request import MetadataRequest
from storage.clock import ManualClock
from tests.unit.broker.helpers import with_controller_listeners
from tests.unit.broker.test_connection import FakeTransport, frame

ENVELOPE = 58
CONTROLLER_ONLY = {ENVELOPE, 52, 53, 54, 59, 62, 63, 67, 56}  # Raft, registration, AlterPartition


def test_each_api_is_served_on_the_listener_types_its_schema_names() -> None:
    for key, spec in load_apis().items():
        assert spec.listener_types == frozenset(API_LISTENERS[key]) - {"zkBroker"}, spec.name


def test_a_broker_listener_serves_every_api_but_the_controller_only_ones() -> None:
    apis = load_apis()
    assert set(served_on(apis, BROKER_LISTENER)) == set(apis) - CONTROLLER_ONLY


def test_a_controller_listener_serves_only_the_controller_apis() -> None:
    apis = load_apis()
    served = set(served_on(apis, CONTROLLER_LISTENER))
    assert served == {key for key in apis if "controller" in API_LISTENERS[key]}
    assert {18, 19, 20, ENVELOPE} <= served  # ApiVersions, CreateTopics, DeleteTopics
    assert not {0, 2, 3, 8, 10} & served  # Produce, ListOffsets, Metadata, OffsetCommit, ...


def test_a_spec_may_name_its_listeners_over_the_schema() -> None:
    spec = ApiSpec(api_key=3, min_version=0, max_version=12, handle=lambda c, r: r,
                   error_response=lambda r, e: r, listeners=("controller", "zkBroker"))
    assert spec.listener_types == {"controller"}


def test_the_listener_type_comes_from_controller_listener_names(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path)})
    assert listener_type(config, "PLAINTEXT") == BROKER_LISTENER  # no such key: all broker
    kraft = with_controller_listeners(config, "CONTROLLER")
    assert listener_type(kraft, "CONTROLLER") == CONTROLLER_LISTENER
    assert listener_type(kraft, "PLAINTEXT") == BROKER_LISTENER


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Broker]:
    base = BrokerConfig.from_properties({"log.dirs": str(tmp_path)})
    broker = Broker.create(with_controller_listeners(base, "PLAINTEXT"), clock=ManualClock())
    broker.startup()
    yield broker
    broker.shutdown()


def responses(data: bytes) -> list[tuple[int, bytes]]:
    """(correlation id, body with the v0 response header removed) of each whole frame."""
    found, position = [], 0
    while position + 8 <= len(data):
        size, correlation_id = struct.unpack_from(">ii", data, position)
        found.append((correlation_id, data[position + 8 : position + 4 + size]))
        position += 4 + size
    return found


def drive(broker: Broker, stream: bytes) -> tuple[FakeTransport, KafkaConnection]:
    async def scenario() -> tuple[FakeTransport, KafkaConnection]:
        connection = KafkaConnection(Server(broker), broker.config.listeners[0])
        transport = FakeTransport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        connection.data_received(stream)
        await transport.written_once(lambda data: transport.closed or bool(responses(data)))
        return transport, connection

    return asyncio.run(scenario())


def test_api_versions_on_a_controller_listener_lists_only_controller_apis(controller: Broker) -> None:
    transport, _ = drive(controller, frame(18, 3, 1, ApiVersionsRequest(
        client_software_name="t", client_software_version="1")))
    [(correlation_id, body)] = responses(bytes(transport.written))
    listed = {entry.api_key for entry in ApiVersionsResponse.decode(body, 3).api_keys}
    assert correlation_id == 1
    assert listed == set(served_on(load_apis(), CONTROLLER_LISTENER))


def test_a_broker_api_on_a_controller_listener_closes_the_connection(
    controller: Broker, caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="samsa.broker.connection"):
        transport, _ = drive(controller, frame(3, 12, 7, MetadataRequest(topics=None)))
    assert transport.closed and responses(bytes(transport.written)) == []
    assert "Metadata (API key 3) is not enabled on listener PLAINTEXT (correlation id 7" in caplog.text


def test_an_envelope_on_a_broker_listener_closes_the_connection(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    broker = Broker.create(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}),
                           clock=ManualClock())
    broker.startup()
    try:
        with caplog.at_level(logging.WARNING, logger="samsa.broker.connection"):
            transport, _ = drive(broker, frame(58, 0, 9, EnvelopeRequest(request_data=b"x")))
    finally:
        broker.shutdown()
    assert transport.closed
    assert "Envelope (API key 58) is not enabled on listener PLAINTEXT" in caplog.text
