"""The node client against a real broker process: ApiVersions negotiation, Metadata, pipelined
requests, a dropped connection failing the requests in flight and the next send reconnecting,
request timeouts, a broker that dies and comes back on the same port, and the pool's
non-raising ``send_or_none``."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Awaitable
from typing import Any

import pytest

from broker.node_client import (
    NodeClient,
    NodeClients,
    NodeDisconnectedError,
    NodeNotAvailableError,
    NodeRequestTimeoutError,
)
from protocol.errors import UnsupportedVersionError
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersionsResponse
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.create_topics_response import CreateTopicsResponse
from protocol.messages.describe_cluster_request import DescribeClusterRequest
from protocol.messages.describe_cluster_response import DescribeClusterResponse
from protocol.messages.envelope_request import EnvelopeRequest
from protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.metadata_response import MetadataResponse
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

FETCH_VERSION = 12  # topics by name


def run(scenario: Awaitable[Any]) -> Any:
    return asyncio.run(scenario)  # type: ignore[arg-type]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def long_poll(topic: str, max_wait_ms: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                        topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])


async def create_topic(client: NodeClient, name: str) -> None:
    response = await client.send(CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=1, replication_factor=1)], timeout_ms=10000))
    assert isinstance(response, CreateTopicsResponse)
    assert [topic.error_code for topic in response.topics] == [0]


def test_api_versions_then_metadata_at_the_highest_common_version(broker: BrokerProcess) -> None:
    async def scenario() -> tuple[Any, ...]:
        client = NodeClient(broker.host, broker.port, client_id="node-test")
        try:
            latest = await client.send(MetadataRequest(topics=None))
            versions = client.api_versions
            old = await client.send(MetadataRequest(topics=None), version=1)
            with pytest.raises(UnsupportedVersionError, match="does not serve EnvelopeRequest"):
                await client.send(EnvelopeRequest())  # controller listeners only
            with pytest.raises(UnsupportedVersionError, match="v99"):
                await client.send(MetadataRequest(), version=99)
            return latest, old, versions, client.connected
        finally:
            await client.close()

    latest, old, versions, connected = run(scenario())
    assert isinstance(latest, MetadataResponse) and isinstance(old, MetadataResponse)
    assert [(b.host, b.port) for b in latest.brokers] == [(broker.host, broker.port)]
    assert [(b.host, b.port) for b in old.brokers] == [(broker.host, broker.port)]
    assert versions[3] == (0, MetadataRequest.MAX_VERSION) and 58 not in versions
    assert connected  # refusing a version is the caller's error, not the connection's


def test_pipelined_requests_are_answered_in_order(broker: BrokerProcess) -> None:
    kinds = [MetadataRequest(topics=None), DescribeClusterRequest(), ApiVersionsRequest()]
    expected = [MetadataResponse, DescribeClusterResponse, ApiVersionsResponse]

    async def scenario() -> list[Any]:
        client = NodeClient(broker.host, broker.port, client_id="node-test")
        try:
            return await asyncio.gather(*(client.send(kinds[i % 3]) for i in range(90)))
        finally:
            await client.close()

    answers = run(scenario())
    assert [type(answer) for answer in answers] == [expected[i % 3] for i in range(90)]


def test_a_dropped_connection_fails_the_requests_in_flight_and_the_next_send_reconnects(
    start_broker: Any,
) -> None:
    broker = start_broker(socket_request_max_bytes="100000")

    async def scenario() -> tuple[Any, ...]:
        client = NodeClient(broker.host, broker.port, client_id="node-test")
        try:
            await create_topic(client, "t")
            waiting = asyncio.ensure_future(client.send(long_poll("t", 20000), version=FETCH_VERSION))
            await asyncio.sleep(0)  # the fetch is written first
            too_big = MetadataRequest(topics=[MetadataRequestTopic(name=f"{i:05}" + "x" * 10000)
                                              for i in range(20)])
            with pytest.raises(NodeDisconnectedError):
                await client.send(too_big)  # the broker closes the connection on it
            with pytest.raises(NodeDisconnectedError):
                await waiting
            dropped = client.connected
            again = await client.send(MetadataRequest(topics=None))
            return dropped, again, client.connected
        finally:
            await client.close()

    dropped, again, reconnected = run(scenario())
    assert not dropped and isinstance(again, MetadataResponse) and reconnected
    assert "frame of" in broker.log() and "is invalid or larger than the maximum" in broker.log()


def test_a_request_that_times_out_closes_the_connection(broker: BrokerProcess) -> None:
    async def scenario() -> tuple[Any, ...]:
        client = NodeClient(broker.host, broker.port, client_id="node-test", request_timeout_ms=300)
        try:
            await create_topic(client, "t")
            loop = asyncio.get_running_loop()
            started = loop.time()
            fetch = asyncio.ensure_future(client.send(long_poll("t", 5000), version=FETCH_VERSION))
            await asyncio.sleep(0.1)
            behind = asyncio.ensure_future(client.send(MetadataRequest(topics=None)))
            with pytest.raises(NodeRequestTimeoutError, match="no answer within 300 ms"):
                await fetch
            elapsed = loop.time() - started
            with pytest.raises(NodeDisconnectedError, match="after a request timed out"):
                await behind  # answered in order, behind the long poll: lost with it
            connected = client.connected
            again = await client.send(MetadataRequest(topics=None))
            return elapsed, connected, again
        finally:
            await client.close()

    elapsed, connected, again = run(scenario())
    assert 0.25 <= elapsed < 3 and not connected and isinstance(again, MetadataResponse)


def test_a_broker_that_dies_is_reconnected_to_when_it_is_back(start_broker: Any) -> None:
    broker = start_broker()

    async def scenario() -> tuple[Any, ...]:
        client = NodeClient(broker.host, broker.port, client_id="node-test",
                            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200)
        try:
            await client.send(MetadataRequest(topics=None))
            assert broker.process is not None
            broker.process.send_signal(signal.SIGKILL)
            await asyncio.get_running_loop().run_in_executor(None, broker.process.wait)
            failures = []
            for _ in range(3):  # the connection is lost, then refused, with a growing backoff
                with pytest.raises(NodeDisconnectedError) as caught:
                    await client.send(MetadataRequest(topics=None))
                failures.append((str(caught.value), client.backoff.failures))
            revived = start_broker(listeners=f"PLAINTEXT://127.0.0.1:{broker.port}")
            answer = await client.send(MetadataRequest(topics=None))
            return failures, answer, revived.port
        finally:
            await client.close()

    failures, answer, port = run(scenario())
    counts = [count for _, count in failures]
    # The lost connection counts once (before the first send if the loop saw it first), then
    # each refused attempt once more.
    assert counts[0] in (1, 2) and counts == list(range(counts[0], counts[0] + 3))
    assert "cannot connect" in failures[-1][0]
    assert isinstance(answer, MetadataResponse) and answer.brokers[0].port == port == broker.port


def test_the_pool_addresses_nodes_by_id_and_send_or_none_never_raises(
    broker: BrokerProcess,
) -> None:
    endpoints = {1: (broker.host, broker.port), 3: ("127.0.0.1", closed_port())}

    async def scenario() -> tuple[Any, ...]:
        clients = NodeClients(endpoints.get, client_id="node-test", request_timeout_ms=2000)
        try:
            known = await clients.send_or_none(1, MetadataRequest(topics=None))
            unknown = await clients.send_or_none(2, MetadataRequest(topics=None))
            unreachable = await clients.send_or_none(3, MetadataRequest(topics=None))
            with pytest.raises(NodeNotAvailableError, match="node 2 has no known endpoint"):
                await clients.send(2, MetadataRequest(topics=None))
            first = clients.client(1)
            endpoints[1] = ("localhost", broker.port)  # the node moved: a new client
            moved = await clients.send(1, MetadataRequest(topics=None))
            return known, unknown, unreachable, first is not clients.client(1), moved
        finally:
            await clients.close()

    known, unknown, unreachable, replaced, moved = run(scenario())
    assert isinstance(known, MetadataResponse) and isinstance(moved, MetadataResponse)
    assert unknown is None and unreachable is None and replaced


def test_closing_the_client_fails_what_waits_on_it(broker: BrokerProcess) -> None:
    async def scenario() -> None:
        client = NodeClient(broker.host, broker.port, client_id="node-test")
        connecting = asyncio.ensure_future(client.send(MetadataRequest(topics=None)))
        await asyncio.sleep(0)  # the send is connecting
        await client.close()
        with pytest.raises(NodeDisconnectedError, match="the client is closed"):
            await connecting
        with pytest.raises(NodeDisconnectedError, match="the client is closed"):
            await client.send(MetadataRequest(topics=None))

        connected = NodeClient(broker.host, broker.port, client_id="node-test")
        await connected.send(MetadataRequest(topics=None))
        waiting = asyncio.ensure_future(connected.send(DescribeClusterRequest()))
        await asyncio.sleep(0)  # written
        await connected.close()
        with pytest.raises(NodeDisconnectedError, match="the client is closed"):
            await waiting

    run(scenario())
