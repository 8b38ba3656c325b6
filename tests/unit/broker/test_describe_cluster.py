"""DescribeCluster on a real in-process ``Broker`` (temp log dir, no sockets): every version
answers this node as the controller and the only broker; v2's IncludeFencedBrokers (KIP-1073)
lists the registrations of the metadata image with their fenced flag."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import RequestContext, describe_cluster
from broker.broker import Broker
from broker.config import BrokerConfig
from protocol.messages.describe_cluster_request import DescribeClusterRequest
from protocol.messages.describe_cluster_response import DescribeClusterResponse
from protocol.messages.metadata.register_broker_record import (
    BrokerEndpoint,
    RegisterBrokerRecord,
)
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    properties = {"log.dirs": str(tmp_path), "node.id": "3", "offsets.topic.num.partitions": "1",
                  "listeners": "PLAINTEXT://127.0.0.1:9092"}
    started = Broker.create(BrokerConfig.from_properties(properties), clock=ManualClock(5000))
    started.startup()
    yield started
    started.shutdown()


def _ask(broker: Broker, request: DescribeClusterRequest, version: int) -> DescribeClusterResponse:
    header = RequestHeader(request_api_key=60, request_api_version=version, client_id="c")
    context = RequestContext(header=header, api_version=version, broker=broker, connection_id="c",
                             listener_name="PLAINTEXT")
    request = DescribeClusterRequest.decode(request.encode(version), version)
    response = describe_cluster.handle(context, request)
    return DescribeClusterResponse.decode(response.encode(version), version)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_this_node_is_the_only_broker_at_every_version(broker: Broker, version: int) -> None:
    response = _ask(broker, DescribeClusterRequest(), version)
    assert (response.error_code, response.controller_id) == (0, 3)
    assert [(b.broker_id, b.host, b.port, b.is_fenced) for b in response.brokers] == [
        (3, "127.0.0.1", 9092, False)]


def test_include_fenced_brokers_on_a_single_node_is_this_node(broker: Broker) -> None:
    response = _ask(broker, DescribeClusterRequest(include_fenced_brokers=True), 2)
    assert [(b.broker_id, b.is_fenced) for b in response.brokers] == [(3, False)]


def _register(broker: Broker, broker_id: int, *, fenced: bool, listener: str = "PLAINTEXT",
              rack: str | None = None) -> None:
    broker.replica_manager.image.brokers.apply(RegisterBrokerRecord(
        broker_id=broker_id, broker_epoch=broker_id, rack=rack, fenced=fenced,
        end_points=[BrokerEndpoint(name=listener, host=f"h{broker_id}", port=9000 + broker_id)]))


def test_registered_brokers_carry_their_fenced_flag_and_rack(broker: Broker) -> None:
    _register(broker, 2, fenced=True, rack="r2")
    _register(broker, 1, fenced=False)
    _register(broker, 4, fenced=False, listener="INTERNAL")  # no endpoint on the client's listener
    listed = describe_cluster._registered_brokers(broker, "plaintext")
    assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in listed] == [
        (1, "h1", 9001, None, False), (2, "h2", 9002, "r2", True)]
    response = DescribeClusterResponse(brokers=listed)
    assert DescribeClusterResponse.decode(response.encode(2), 2).brokers == listed
