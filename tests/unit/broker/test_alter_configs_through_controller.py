"""AlterConfigs in-process on a real broker: each resource is a proposal to the controller; the
committed change reaches the live log, refusals are per resource, validate_only writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import RequestContext, alter_configs
from broker.broker import Broker
from broker.config import BrokerConfig
from protocol.errors import ErrorCode
from protocol.messages.alter_configs_request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from protocol.messages.request_header import RequestHeader
from replication.metadata.image import TOPIC_RESOURCE_TYPE
from storage.clock import ManualClock
from tests.unit.broker.helpers import create_topic


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    started = Broker.create(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}),
                            clock=ManualClock(1000))
    started.startup()
    create_topic(started, "t")
    yield started
    started.shutdown()


def alter(broker: Broker, *resources: tuple[str, str], validate_only: bool = False) -> list[int]:
    header = RequestHeader(request_api_key=33, request_api_version=2, client_id="c")
    context = RequestContext(header=header, api_version=2, broker=broker, connection_id="c",
                             principal="User:ANONYMOUS", client_host="127.0.0.1")
    request = AlterConfigsRequest(validate_only=validate_only, resources=[
        AlterConfigsResource(resource_type=TOPIC_RESOURCE_TYPE, resource_name=name,
                             configs=[AlterableConfig(name="retention.ms", value=value)])
        for name, value in resources])
    response = alter_configs.handle(context, request)
    assert isinstance(response, alter_configs.AlterConfigsResponse)  # committed at once
    return [result.error_code for result in response.responses]


def retention_ms(broker: Broker) -> int:
    return broker.replica_manager.partitions[("t", 0)].log.config.retention_ms


def test_a_committed_change_reaches_the_live_log(broker: Broker) -> None:
    assert alter(broker, ("t", "1234"), ("nope", "1")) == [
        ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert retention_ms(broker) == 1234


def test_refusals_are_per_resource_and_validate_only_writes_nothing(broker: Broker) -> None:
    before = retention_ms(broker)
    assert alter(broker, ("t", "1"), ("t", "2")) == [ErrorCode.INVALID_REQUEST] * 2
    assert alter(broker, ("t", "-5x")) == [ErrorCode.INVALID_CONFIG]
    assert alter(broker, ("t", "99"), validate_only=True) == [ErrorCode.NONE]
    assert retention_ms(broker) == before
