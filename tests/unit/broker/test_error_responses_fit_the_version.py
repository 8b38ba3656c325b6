"""An API's ``error_response`` is not told the request's version; the answer must still fit it.
Found by the protocol fuzzer (``tests/faults/fuzz.py``) on a 3-node cluster: an ElectLeaders v0
request the controller refused was answered with a top-level error code, which v0 lacks; the
encoder refused it, the error response too, and the client got the empty defaults (two logged
tracebacks) instead of its partitions' errors. Kafka sets that code only ``if (version >= 1)``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from broker.apis import RequestContext, elect_leaders
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.responses import failure_response, fit_to_version, response_parts
from protocol.errors import ErrorCode, NotControllerError
from protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from protocol.messages.elect_leaders_response import ElectLeadersResponse
from protocol.messages.request_header import RequestHeader
from storage.clock import ManualClock
from tests.unit.broker.test_responses import decode_frame, tracebacks

SPEC = elect_leaders.SPEC
REQUEST = ElectLeadersRequest(topic_partitions=[TopicPartitions(topic="t", partitions=[0, 1])])


def context(version: int, broker: Broker | None = None) -> RequestContext:
    header = RequestHeader(request_api_key=SPEC.api_key, request_api_version=version,
                           correlation_id=7)
    return RequestContext(header=header, api_version=version, broker=broker,  # type: ignore[arg-type]
                          connection_id="test")


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_refused_elect_leaders_reports_each_partition_at_every_version(
    version: int, caplog: pytest.LogCaptureFixture,
) -> None:
    response = failure_response(SPEC, context(version), REQUEST, NotControllerError())
    parts = response_parts(SPEC, context(version), REQUEST, response)
    _, decoded = decode_frame(parts[0], SPEC.api_key, version)  # type: ignore[arg-type]
    codes = [p.error_code for t in decoded.replica_election_results for p in t.partition_result]
    assert codes == [ErrorCode.NOT_CONTROLLER] * 2
    assert decoded.error_code == (ErrorCode.NOT_CONTROLLER if version >= 1 else 0)
    assert tracebacks(caplog) == 0


def test_fit_to_version_drops_only_a_top_level_code_the_version_lacks() -> None:
    response = ElectLeadersResponse(error_code=ErrorCode.NOT_CONTROLLER)
    assert fit_to_version(response, 1) is response
    fitted = fit_to_version(response, 0)
    assert fitted.error_code == 0 and response.error_code == ErrorCode.NOT_CONTROLLER  # type: ignore[attr-defined]


def test_the_handler_refuses_an_unknown_election_type_at_the_top_level_from_v1(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    broker = Broker.create(BrokerConfig.from_properties({"log.dirs": str(tmp_path)}),
                           clock=ManualClock(1000))
    broker.startup()
    try:
        request = ElectLeadersRequest(election_type=7, topic_partitions=REQUEST.topic_partitions)
        response = elect_leaders.handle(context(1, broker), request)
    finally:
        broker.shutdown()
    assert response.error_code == ErrorCode.INVALID_REQUEST  # type: ignore[union-attr]
    assert tracebacks(caplog) == 0
