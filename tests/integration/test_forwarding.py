"""The Forwarder end to end over real sockets: requests wrapped in Envelopes to a controller
listener, answered by the Envelope handler and unwrapped; Kafka's answers when no controller is
known or reachable, when the controller cannot read the inner version, and when the node asked
does not serve Envelope.

The controller is served in this process by ``broker.daemon.serve`` (the broker process's own
code path) with its PLAINTEXT listener named in ``controller.listener.names``: that key is not
in this branch's config, so no broker process can be given a controller listener yet
(``tests.unit.broker.helpers.with_controller_listeners``). The misconfigured case uses a real
broker process."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import CLOSE_CONNECTION, RequestContext
from broker.config import BrokerConfig, Listener
from broker.daemon import serve
from broker.forwarding import Forwarder
from broker.node_client import NodeClients
from protocol.codec import Message
from protocol.errors import ErrorCode
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.create_topics_response import CreateTopicsResponse
from protocol.messages.request_header import RequestHeader
from tests.integration.conftest import BrokerProcess
from tests.unit.broker.helpers import with_controller_listeners

pytestmark = pytest.mark.integration

CONTROLLER_ID = 3000


@contextlib.asynccontextmanager
async def controller(log_dir: Path, **overrides: str) -> AsyncIterator[Listener]:
    """A node whose only listener is a controller listener, served until the block ends."""
    properties = {"log.dirs": str(log_dir), "listeners": "PLAINTEXT://127.0.0.1:0",
                  "offsets.topic.num.partitions": "1"} | overrides
    config = with_controller_listeners(BrokerConfig.from_properties(properties), "PLAINTEXT")
    loop = asyncio.get_running_loop()
    stop, started = asyncio.Event(), loop.create_future()
    task = loop.create_task(serve(config, stop=stop, on_started=started.set_result))
    await asyncio.wait({task, started}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    try:
        yield started.result()[0]
    finally:
        stop.set()
        await task


def client_context(version: int = 7, principal: str = "User:ANONYMOUS") -> RequestContext:
    """The context of a client's request on the forwarding broker."""
    header = RequestHeader(request_api_key=19, request_api_version=version, correlation_id=77,
                           client_id="admin")
    return RequestContext(header=header, api_version=version, broker=None,  # type: ignore[arg-type]
                          connection_id="client", principal=principal, client_host="10.1.2.3",
                          listener_name="PLAINTEXT")


def create_topics(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(timeout_ms=10000, topics=[
        CreatableTopic(name=name, num_partitions=1, replication_factor=1) for name in names])


def topic_errors(response: Any) -> dict[str, int]:
    assert isinstance(response, CreateTopicsResponse)
    return {topic.name: topic.error_code for topic in response.topics}


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def sequence(*values: int | None) -> Iterator[int | None]:
    yield from values
    while True:
        yield values[-1]


async def forward(endpoints: dict[int, tuple[str, int]], controller_ids: Iterator[int | None],
                  request: Message, context: RequestContext | None = None, **options: Any) -> Any:
    clients = NodeClients(endpoints.get, client_id="broker-1", request_timeout_ms=5000,
                          reconnect_backoff_ms=10, reconnect_backoff_max_ms=50)
    forwarder = Forwarder(clients, lambda: next(controller_ids), **options)
    try:
        return await forwarder.forward(context or client_context(), request)
    finally:
        await clients.close()


def test_a_forwarded_create_topics_is_created_by_the_controller(tmp_path: Path) -> None:
    async def scenario() -> tuple[Any, Any]:
        async with controller(tmp_path) as listener:
            endpoints = {CONTROLLER_ID: (listener.host, listener.port)}
            first = await forward(endpoints, sequence(CONTROLLER_ID), create_topics("a", "b"))
            again = await forward(endpoints, sequence(CONTROLLER_ID), create_topics("a"))
            return first, again

    first, again = asyncio.run(scenario())
    assert topic_errors(first) == {"a": ErrorCode.NONE, "b": ErrorCode.NONE}
    assert topic_errors(again) == {"a": ErrorCode.TOPIC_ALREADY_EXISTS}


def test_the_client_principal_travels_in_the_envelope(tmp_path: Path) -> None:
    secured = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "super.users": "User:ANONYMOUS"}  # the forwarding broker's own principal

    async def scenario() -> tuple[Any, Any]:
        async with controller(tmp_path, **secured) as listener:
            endpoints = {CONTROLLER_ID: (listener.host, listener.port)}
            mallory = await forward(endpoints, sequence(CONTROLLER_ID), create_topics("m"),
                                    context=client_context(principal="User:mallory"))
            anonymous = await forward(endpoints, sequence(CONTROLLER_ID), create_topics("n"))
            return mallory, anonymous

    mallory, anonymous = asyncio.run(scenario())
    assert topic_errors(mallory) == {"m": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert topic_errors(anonymous) == {"n": ErrorCode.NONE}


def test_a_controller_found_after_failures_gets_the_request(tmp_path: Path) -> None:
    async def scenario() -> Any:
        async with controller(tmp_path) as listener:
            endpoints = {CONTROLLER_ID: (listener.host, listener.port),
                         9: ("127.0.0.1", closed_port())}
            # unknown, then a node that refuses connections, then the controller
            ids = sequence(None, 9, 9, CONTROLLER_ID)
            return await forward(endpoints, ids, create_topics("late"), retry_backoff_ms=20)

    assert topic_errors(asyncio.run(scenario())) == {"late": ErrorCode.NONE}


def test_no_controller_within_the_retry_timeout_is_request_timed_out() -> None:
    async def scenario() -> tuple[Any, Any, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        unknown = await forward({}, sequence(None), create_topics("x", "y"),
                                retry_timeout_ms=300, retry_backoff_ms=50)
        unreachable = await forward({9: ("127.0.0.1", closed_port())}, sequence(9),
                                    create_topics("z"), retry_timeout_ms=300, retry_backoff_ms=50)
        return unknown, unreachable, loop.time() - started

    unknown, unreachable, elapsed = asyncio.run(scenario())
    assert topic_errors(unknown) == {"x": ErrorCode.REQUEST_TIMED_OUT, "y": ErrorCode.REQUEST_TIMED_OUT}
    assert topic_errors(unreachable) == {"z": ErrorCode.REQUEST_TIMED_OUT}
    assert 0.5 <= elapsed < 5


def test_a_version_the_controller_cannot_read_closes_the_client_connection(tmp_path: Path) -> None:
    async def scenario() -> Any:
        async with controller(tmp_path) as listener:
            endpoints = {CONTROLLER_ID: (listener.host, listener.port)}
            # CreateTopics v1: the codec reads it, the controller serves v2+.
            return await forward(endpoints, sequence(CONTROLLER_ID), create_topics("old"),
                                 context=client_context(version=1))

    assert asyncio.run(scenario()) is CLOSE_CONNECTION


def test_a_node_without_a_controller_listener_answers_unknown_server_error(
    broker: BrokerProcess,
) -> None:
    endpoints = {1: (broker.host, broker.port)}  # a broker listener: Envelope is not served
    response = asyncio.run(forward(endpoints, sequence(1), create_topics("w")))
    assert topic_errors(response) == {"w": ErrorCode.UNKNOWN_SERVER_ERROR}
