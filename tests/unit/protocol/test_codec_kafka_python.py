"""Golden bytes: the codec against kafka-python 3.0.12's independent codecs.

Every kafka-python request and response class built from Kafka's JSON schemas is compared
at every version both know, on objects drawn by hypothesis from our schemas; then a few
messages against kafka-python's older hand-written classes.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import codegen
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.metadata_response import MetadataResponse, MetadataResponseTopic
from protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from tests.message_strategies import classes_of, load_specs, message_strategy

BY_NAME = {m.name: m for m in load_specs()}  # raises at collection if the schemas are missing
GOLDEN_EXAMPLES = 1  # per message and version, each drawing a full and a random object

# kafka-python 3.0.12 reads its schemas with deprecated importlib.resources calls.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def kafka_python_classes() -> dict[str, Any]:
    with warnings.catch_warnings():  # see pytestmark; this also runs at collection
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka.protocol.admin
        import kafka.protocol.consumer
        import kafka.protocol.metadata
        import kafka.protocol.producer

    found = {}
    for module in (
        kafka.protocol.metadata,
        kafka.protocol.producer,
        kafka.protocol.consumer,
        kafka.protocol.admin,
    ):
        for name in dir(module):
            value = getattr(module, name)
            if isinstance(value, type) and getattr(value, "_json", None):
                found[name] = value
    return found


def to_kafka_python(obj: Any, spec: codegen.StructSpec, cls: Any, version: int) -> Any:
    """The same message as a kafka-python object. A tagged field is passed only if it is
    not its default: kafka-python writes every tagged field it was given."""
    theirs = cls.fields
    values = {}
    for index, field in enumerate(spec.fields):
        if version not in field.versions:
            continue
        value = getattr(obj, field.attr)
        if version in field.tagged and value == getattr(type(obj)(), field.attr):
            continue
        name = field.attr if field.attr in theirs else list(theirs)[index]
        if theirs[name]._type_str == "bitfield":
            value = as_bitfield(value)
        elif field.struct is not None and value is not None:
            nested = getattr(cls, field.struct.name)
            if field.is_array:
                value = [to_kafka_python(item, field.struct, nested, version) for item in value]
            else:
                value = to_kafka_python(value, field.struct, nested, version)
        values[name] = value
    return cls(version=version, **values) if hasattr(cls, "API_KEY") else cls(**values)


def as_bitfield(value: int) -> set[int] | None:
    """kafka-python's view of an int32 ``*AuthorizedOperations`` field (which it also
    renames ``authorized_operations``): the set of bits that are set, and None for Kafka's
    default, -2147483648 (bit 31 alone), which it writes back as that default."""
    bits = {bit for bit in range(32) if value >> bit & 1}
    return None if bits == {31} else bits


def kafka_python_cases() -> list[tuple[str, int]]:
    cases = []
    for name, cls in sorted(kafka_python_classes().items()):
        message = BY_NAME.get(name)
        if message is None or message.kind not in ("request", "response"):
            continue
        top = min(message.valid.high, cls.max_version)
        cases += [(name, version) for version in range(message.valid.low, top + 1)]
    return cases


@pytest.mark.parametrize(("name", "version"), kafka_python_cases())
@settings(max_examples=GOLDEN_EXAMPLES, deadline=None)
@given(data=st.data())
def test_same_bytes_as_kafka_python(name: str, version: int, data: st.DataObject) -> None:
    message = BY_NAME[name]
    ours = classes_of(message)[name]
    theirs = kafka_python_classes()[name]
    for full in (True, False):
        obj = _without_unknown_tags(data.draw(message_strategy(message, version, full=full)))
        expected = to_kafka_python(obj, message.struct, theirs, version).encode(version=version)
        assert obj.encode(version) == expected
        assert ours.decode(expected, version) == obj


def _without_unknown_tags(obj: Any) -> Any:
    for name in obj.__dataclass_fields__:
        value = getattr(obj, name)
        if name == "unknown_tagged_fields":
            setattr(obj, name, None)
        elif hasattr(value, "__dataclass_fields__"):
            _without_unknown_tags(value)
        elif isinstance(value, list):
            for item in value:
                if hasattr(item, "__dataclass_fields__"):
                    _without_unknown_tags(item)
    return obj


def test_the_briefed_apis_are_among_the_kafka_python_goldens() -> None:
    names = {name for name, _ in kafka_python_cases()}
    for api in (
        "Metadata",
        "Produce",
        "Fetch",
        "ApiVersions",
        "ListOffsets",
        "FindCoordinator",
        "JoinGroup",
    ):
        assert {f"{api}Request", f"{api}Response"} <= names


def test_authorized_operations_are_compared_as_kafka_python_sees_them() -> None:
    assert as_bitfield(-(2**31)) is None  # Kafka's default
    assert as_bitfield(0) == set()
    assert as_bitfield(-1) == set(range(32))
    assert as_bitfield(0b1010) == {1, 3}
    response = MetadataResponse(
        topics=[MetadataResponseTopic(name="t", topic_authorized_operations=-1)],
        cluster_authorized_operations=0b1010,
    )
    theirs = kafka_python_classes()["MetadataResponse"]
    expected = to_kafka_python(response, BY_NAME["MetadataResponse"].struct, theirs, 8)
    data = expected.encode(version=8)
    assert data.endswith(b"\xff\xff\xff\xff" + b"\x00\x00\x00\x0a")  # topic's, cluster's
    assert response.encode(8) == data
    assert MetadataResponse.decode(data, 8) == response


# Hand-built goldens against kafka-python's independent, hand-written (pre-JSON) classes.


def test_produce_request_v3_matches_kafka_python_classic() -> None:
    from kafka.protocol.old.produce import ProduceRequest_v3

    batch = bytes(range(61)) + b"records"
    expected = ProduceRequest_v3(None, -1, 30000, [("events", [(0, batch), (7, None)])]).encode()
    ours = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(
                name="events",
                partition_data=[
                    PartitionProduceData(index=0, records=batch),
                    PartitionProduceData(index=7, records=None),
                ],
            )
        ],
    )
    assert ours.encode(3) == expected
    assert ProduceRequest.decode(expected, 3) == ours


def test_api_versions_matches_kafka_python_classic() -> None:
    from kafka.protocol.old.api_versions import (
        ApiVersionsRequest_v0,
        ApiVersionsRequest_v3,
        ApiVersionsResponse_v0,
        ApiVersionsResponse_v3,
    )

    assert ApiVersionsRequest().encode(0) == ApiVersionsRequest_v0().encode() == b""
    request = ApiVersionsRequest(client_software_name="samsa", client_software_version="0.1.0")
    assert request.encode(3) == ApiVersionsRequest_v3("samsa", "0.1.0", {}).encode()
    keys = [
        ApiVersion(api_key=0, min_version=3, max_version=11),
        ApiVersion(api_key=18, max_version=4),
    ]
    response = ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=5)
    assert response.encode(0) == ApiVersionsResponse_v0(0, [(0, 3, 11), (18, 0, 4)]).encode()
    classic = ApiVersionsResponse_v3(0, [(0, 3, 11, {}), (18, 0, 4, {})], 5, {}).encode()
    assert response.encode(3) == classic
    assert ApiVersionsResponse.decode(classic, 3) == response


def test_metadata_request_matches_kafka_python_classic() -> None:
    from kafka.protocol.old.metadata import MetadataRequest_v0, MetadataRequest_v1

    topics = [MetadataRequestTopic(name="a"), MetadataRequestTopic(name="bb")]
    assert MetadataRequest(topics=topics).encode(0) == MetadataRequest_v0(["a", "bb"]).encode()
    assert MetadataRequest(topics=None).encode(1) == MetadataRequest_v1(None).encode()
