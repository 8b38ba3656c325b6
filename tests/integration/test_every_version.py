"""Every (API, version) that ApiVersions advertises is served, over a real socket.

One broker per test; its ApiVersions answer says which versions to try.

Drawn requests: for each advertised (API, version), requests drawn from the Kafka schemas
(``tests.message_strategies``) go over one connection with the protocol package's framing; half
of them are aimed at an existing topic and group (their topic names, topic ids and group ids
replaced), the others name random ones and mostly get errors, which is fine. Each response must
carry the request's correlation id and decode completely at that version, and an ApiVersions
request on the same connection afterwards must be answered (the connection stayed open). The
broker must log no traceback and answer no UNKNOWN_SERVER_ERROR: a handler or encoder failure
is a bug whatever the input (the connection-level fallback that keeps such a connection open is
tested in tests/unit/broker/test_responses.py).

Hand-made requests (``valid_requests.py``): valid requests at every advertised version of the
APIs clients use most must succeed with no error code anywhere, and say the right things
(records produced at each Produce version come back whole from each Fetch version, ...).

Requests Kafka answers by closing the connection or not at all, and requests kept cheap:

| request                                 | Kafka                          | here                       |
|-----------------------------------------|--------------------------------|----------------------------|
| Produce with acks=0                     | no response; a failed one      | drawn acks=0 is sent as    |
|                                         | closes the connection          | acks=1; acks=0 hand-made   |
| a request that cannot be parsed         | closes the connection          | never drawn: every drawn   |
|                                         |                                | request encodes            |
| ApiVersions above its max version       | a v0 UNSUPPORTED_VERSION reply | not advertised: not here   |
| Produce v0-v2 (listed from v0 for old   | closes the connection          | UNSUPPORTED_VERSION for    |
| librdkafka, KAFKA-18659; served from v3)|                                | every partition            |
| (Share)Fetch max_wait_ms up to 2^31-1   | a long poll that long          | capped at 100 ms           |
| JoinGroup rebalance_timeout_ms 2^31-1   | waits that long for members    | capped at 100 ms           |
| CreateTopics/CreatePartitions of up to  | tries to create them           | capped at 4 partitions     |
| 2^31-1 partitions                       |                                |                            |
| DeleteTopics aimed at the topic         | deletes it                     | not aimed                  |
| SaslHandshake/SaslAuthenticate on a     | ILLEGAL_SASL_STATE             | the same (authentication   |
| PLAINTEXT listener                      |                                | itself: test_sasl.py)      |
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, fields, is_dataclass
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.frames import encode_request
from protocol.messages import RESPONSES, response_header_version
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersionsResponse
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestGroup
from protocol.messages.produce_request import ProduceRequest
from protocol.messages.request_header import RequestHeader
from protocol.messages.response_header import ResponseHeader
from tests.integration.valid_requests import VALID_REQUESTS, Scene, produce
from tests.message_strategies import message_strategy, spec_for

RETRIABLE_COORDINATOR_ERRORS = {14, 15}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE

pytestmark = pytest.mark.integration

UNKNOWN_SERVER_ERROR = -1
EXAMPLES_PER_VERSION = 25  # ~5,000 requests in ~30 s on one core
TOPIC, GROUP = "every-version", "every-version-group"
# Cheap and bounded (see the table above): no group waits its initial delay.
BROKER_OVERRIDES = {"group_initial_rebalance_delay_ms": "0"}
CAP_MS = 100
CAP_PARTITIONS = 4
DELETE_TOPICS = 20
UNSUPPORTED_VERSION = 35
# Advertised but answered UNSUPPORTED_VERSION, as Kafka 4 lists them (KAFKA-18659: librdkafka
# before 2.10 compresses only if Produce v0 is listed; Kafka closes the connection instead).
NOT_SERVED = {(0, 0), (0, 1), (0, 2)}
TOPIC_NAME_FIELDS = ("name", "topic", "topic_name")


class Wire:
    """One connection speaking the protocol package's framing; decodes at the request's version."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.sock = socket.create_connection((broker.host, broker.port), timeout=15)
        self.correlation_id = 0

    def send(self, api_key: int, version: int, request: Any) -> None:
        self.correlation_id += 1
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=self.correlation_id, client_id="every-version")
        self.sock.sendall(encode_request(header, request))

    def receive(self, api_key: int, version: int) -> Any:
        """The next response, which must answer the last request sent, decoded whole."""
        frame = memoryview(self._read(struct.unpack(">i", self._read(4))[0]))
        response_header, offset = ResponseHeader.decode_from(
            frame, 0, response_header_version(api_key, version))
        assert response_header.correlation_id == self.correlation_id
        return RESPONSES[api_key].decode(frame[offset:], version)  # no trailing bytes either

    def call(self, api_key: int, version: int, request: Any) -> Any:
        self.send(api_key, version, request)
        return self.receive(api_key, version)

    def api_versions(self) -> ApiVersionsResponse:
        response = self.call(ApiVersionsRequest.API_KEY, 0, ApiVersionsRequest())
        assert response.error_code == 0
        return response  # type: ignore[no-any-return]

    def _read(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError(f"the broker closed the connection\n{self.broker.log()[-3000:]}")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


@dataclass
class Connections:
    """The current connection; a new one after a failure, so one bad example spoils no other."""

    broker: Any
    wire: Wire | None = None
    answered: int = 0

    def get(self) -> Wire:
        if self.wire is None:
            self.wire = Wire(self.broker)
        return self.wire

    def drop(self) -> None:
        if self.wire is not None:
            self.wire.close()
            self.wire = None


def advertised(wire: Wire) -> list[tuple[int, int]]:
    """(API key, version) for every version the broker's ApiVersions (v3) advertises."""
    response = wire.call(ApiVersionsRequest.API_KEY, 3, ApiVersionsRequest(
        client_software_name="every-version", client_software_version="1"))
    assert response.error_code == 0
    return [(api.api_key, version) for api in response.api_keys
            for version in range(api.min_version, api.max_version + 1)]


def create_scene(wire: Wire) -> Scene:
    """The topic (two partitions) and group that aimed and hand-made requests name."""
    created = wire.call(19, 7, CreateTopicsRequest(timeout_ms=5000, topics=[CreatableTopic(
        name=TOPIC, num_partitions=2, replication_factor=1)]))
    assert created.topics[0].error_code == 0
    described = wire.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]))
    await_group_coordinator(wire, GROUP)
    return Scene(topic=TOPIC, topic_id=described.topics[0].topic_id, group=GROUP)


def await_group_coordinator(wire: Wire, group: str, timeout_s: float = 30) -> None:
    """Retry OffsetFetch while the group's coordinator is not ready, as a client would: the
    first group request creates ``__consumer_offsets``, whose logs are created off the event
    loop (COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while True:
        fetched = wire.call(9, 8, OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
            group_id=group, topics=None)]))
        if fetched.groups[0].error_code not in RETRIABLE_COORDINATOR_ERRORS:
            return
        assert time.monotonic() < deadline, f"the coordinator of {group} is not ready"
        time.sleep(0.05)


def error_codes(message: Any) -> list[int]:
    """Every ``*error_code`` value anywhere in a decoded message."""
    codes: list[int] = []
    if isinstance(message, list):
        for element in message:
            codes += error_codes(element)
    elif is_dataclass(message):
        for field in fields(message):
            value = getattr(message, field.name)
            if field.name.endswith("error_code") and isinstance(value, int):
                codes.append(value)
            elif isinstance(value, list) or is_dataclass(value):
                codes += error_codes(value)
    return codes


def aim(message: Any, scene: Scene) -> None:
    """Name the scene's topic and group wherever ``message`` names a topic or a group. Only
    drawn values are replaced: a field left at its default may not exist at the version."""
    if isinstance(message, list):
        for element in message:
            aim(element, scene)
        return
    if not is_dataclass(message):
        return
    defaults = type(message)()
    for field in fields(message):
        value = getattr(message, field.name)
        if value == getattr(defaults, field.name):
            continue
        if field.name in TOPIC_NAME_FIELDS and (value is None or isinstance(value, str)):
            setattr(message, field.name, scene.topic)
        elif field.name == "topic_id" and isinstance(value, UUID):
            setattr(message, field.name, scene.topic_id)
        elif field.name == "group_id" and isinstance(value, str):
            setattr(message, field.name, scene.group)
        elif isinstance(value, list) or is_dataclass(value):
            aim(value, scene)


def tame(api_key: int, request: Any) -> Any:
    """Keep a drawn request answerable at once and cheap (the module's table says why)."""
    if api_key == 0 and request.acks == 0:
        request.acks = 1
    elif api_key in (1, 78):  # Fetch, ShareFetch
        request.max_wait_ms = min(request.max_wait_ms, CAP_MS)
    elif api_key == 11:
        request.rebalance_timeout_ms = min(request.rebalance_timeout_ms, CAP_MS)
    elif api_key == 19:
        for topic in request.topics:
            topic.num_partitions = min(topic.num_partitions, CAP_PARTITIONS)
    elif api_key == 37:
        for topic in request.topics:
            topic.count = min(topic.count, CAP_PARTITIONS)
    return request


def exchange(connections: Connections, api_key: int, version: int, request: Any) -> Any:
    """Send ``request``, decode its answer, then check the connection still answers."""
    try:
        wire = connections.get()
        response = wire.call(api_key, version, request)
        wire.api_versions()
    except BaseException:
        connections.drop()
        raise
    connections.answered += 1
    return response


def exercise(connections: Connections, scene: Scene, api_key: int, version: int) -> None:
    """Drawn requests of one (API, version): answered, decodable, the connection kept."""
    broker = connections.broker

    @settings(max_examples=EXAMPLES_PER_VERSION, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(request=message_strategy(spec_for(api_key, "request"), version), aimed=st.booleans())
    def check(request: Any, aimed: bool) -> None:
        if aimed and api_key != DELETE_TOPICS:
            aim(request, scene)
        log_before = len(broker.log())
        response = exchange(connections, api_key, version, tame(api_key, request))
        logged = broker.log()[log_before:]
        assert "Traceback" not in logged, f"the broker logged a failure:\n{logged[-2500:]}"
        assert UNKNOWN_SERVER_ERROR not in error_codes(response), "UNKNOWN_SERVER_ERROR"
        if (api_key, version) in NOT_SERVED:
            assert set(error_codes(response)) <= {UNSUPPORTED_VERSION}

    check()


def test_every_advertised_version_answers_drawn_requests(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**BROKER_OVERRIDES)
    connections = Connections(broker)
    pairs = advertised(connections.get())
    scene = create_scene(connections.get())
    assert len(pairs) > 150  # every API we serve, not an empty list
    failures: list[str] = []
    started = time.monotonic()
    for api_key, version in pairs:
        try:
            exercise(connections, scene, api_key, version)
        except Exception as error:  # every failing pair is reported, not just the first
            notes = "\n".join(getattr(error, "__notes__", []))
            failures.append(f"{RESPONSES[api_key].__name__} v{version}: "
                            f"{type(error).__name__}: {error}\n{notes}")
    print(f"{len(pairs)} (API, version) pairs, {connections.answered} requests answered "
          f"in {time.monotonic() - started:.1f} s")
    assert not failures, f"{len(failures)} failing:\n" + "\n".join(failures)
    assert connections.answered > len(pairs) * 5


def test_every_advertised_version_serves_valid_requests(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker(**BROKER_OVERRIDES)
    wire = Wire(broker)
    pairs = advertised(wire)
    scene = create_scene(wire)
    served = 0
    for api_key, (build, check) in VALID_REQUESTS.items():
        for version in [v for key, v in pairs if key == api_key]:
            response = wire.call(api_key, version, build(scene, version))
            codes = error_codes(response)
            if (api_key, version) in NOT_SERVED:
                assert set(codes) == {UNSUPPORTED_VERSION}
                continue
            assert set(codes) <= {0}, f"{type(response).__name__} v{version}: {response}"
            check(scene, version, response)
            served += 1
    assert served > 90
    assert "Traceback" not in broker.log() and " ERROR " not in broker.log(), broker.log()


def test_produce_with_acks_0_is_not_answered_and_keeps_the_connection(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    wire = Wire(broker)
    scene = create_scene(wire)
    for version in [v for key, v in advertised(wire)
                    if key == ProduceRequest.API_KEY and (key, v) not in NOT_SERVED]:
        request = produce(scene, version)
        request.acks = 0
        wire.send(ProduceRequest.API_KEY, version, request)
        scene.produced += scene.sending
        wire.api_versions()  # the next frame on the wire answers this, not the produce
    fetched = wire.call(1, 12, VALID_REQUESTS[1][0](scene, 12))
    assert fetched.responses[0].partitions[0].high_watermark == len(scene.produced)
