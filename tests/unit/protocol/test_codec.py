"""The generated codec: every message at every version, tagged fields, malformed input.

The round trips are drawn by hypothesis from Kafka's schemas, which the repository carries
(``protocol/schemas/kafka``; ``$SAMSA_KAFKA_SCHEMAS`` overrides): without them this module
fails at collection rather than shrinking to a few tests. Golden bytes against kafka-python
are in ``test_codec_kafka_python.py``, the generator's own tests in ``test_codegen.py``.
"""

from __future__ import annotations

import contextlib
import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import codegen
from protocol.codec import DecodeError, EncodeError, Message, read_uvarint, write_uvarint
from protocol.errors import UnsupportedVersionError
from protocol.messages import (
    REQUESTS,
    RESPONSES,
    request_header_version,
    response_header_version,
)
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from protocol.messages.fetch_request import FetchRequest, ReplicaState
from protocol.messages.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from protocol.messages.request_header import RequestHeader
from tests.message_strategies import classes_of, load_specs, message_strategy, spec_for

MESSAGES = load_specs()  # raises at collection if the schemas are missing
BY_NAME = {m.name: m for m in MESSAGES}
EVERY_VERSION = [(m.name, version) for m in MESSAGES for version in m.valid]
ROUND_TRIP_EXAMPLES = 2  # per message and version, each drawing a full and a random object


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize(("name", "version"), EVERY_VERSION)
@settings(max_examples=ROUND_TRIP_EXAMPLES, deadline=None)
@given(data=st.data())
def test_every_message_round_trips_at_every_version(
    name: str, version: int, data: st.DataObject
) -> None:
    message = BY_NAME[name]
    cls = classes_of(message)[name]
    for full in (True, False):
        original = data.draw(message_strategy(message, version, full=full))
        encoded = original.encode(version)
        decoded = cls.decode(encoded, version)
        assert decoded == original
        assert decoded.encode(version) == encoded


def test_every_message_at_every_version_is_a_case() -> None:
    # Kafka's messages (+6: the share-group offsets APIs of Kafka 4.3.1), __consumer_offsets (+4:
    # the share-group records), __share_group_state and metadata records; Samsa's ten.
    assert len(MESSAGES) == 192 + 8 + 4 + 24 + 10
    # DescribeCluster v2 (KIP-1073) added by hand; RegisterBrokerRecord v4 and
    # BrokerRegistrationChangeRecord v3 from Kafka 4.3.1: SOURCE.md; the four
    # __share_group_state records have one version each; the share-group APIs as Kafka 4.3.1
    # has them (SOURCE.md), v0 of the early-access ones gone, and the four share-group records;
    # SamsaDescribeSharePartitions v0
    assert len(EVERY_VERSION) == 759


FLEXIBLE_VERSIONS = [
    (name, version) for name, version in EVERY_VERSION if version in BY_NAME[name].flexible
]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(FLEXIBLE_VERSIONS), st.data())
def test_full_objects_write_every_tagged_field(case: tuple[str, int], data: st.DataObject) -> None:
    """What makes the round trips' ``full`` objects worth drawing (tests/message_strategies.py)."""
    name, version = case
    message = BY_NAME[name]
    drawn = data.draw(message_strategy(message, version, full=True))
    assert_every_tag_set(drawn, codegen.layout_of(message.struct, version, message))


def assert_every_tag_set(obj: Any, layout: codegen.StructLayout) -> None:
    assert obj.unknown_tagged_fields, layout.struct.name
    default = type(obj)()
    for fl in layout.fields:
        value = getattr(obj, fl.spec.attr)
        if fl.mode == "tagged":
            assert value != getattr(default, fl.spec.attr), f"{layout.struct.name}.{fl.spec.attr}"
        if fl.child is not None:
            for item in value if fl.spec.is_array else [value]:
                assert_every_tag_set(item, fl.child)


def test_spec_for_finds_an_apis_request_or_response() -> None:
    assert spec_for(0).name == "ProduceRequest"
    assert spec_for(18, "response").name == "ApiVersionsResponse"
    assert spec_for(10000).name == "SamsaDescribeLogSegmentsRequest"
    with pytest.raises(KeyError):
        spec_for(1000)
    with pytest.raises(ValueError, match="kind"):
        spec_for(0, "header")
    with pytest.raises(ValueError, match="no version 99"):
        message_strategy(spec_for(0), 99)


def test_message_classes_carry_their_version_range() -> None:
    for message in MESSAGES:
        cls = classes_of(message)[message.name]
        assert (message.valid.low, message.valid.high) == (cls.MIN_VERSION, cls.MAX_VERSION)
        flexible = message.flexible.low if message.flexible.low <= message.valid.high else None
        assert flexible == cls.FLEXIBLE_VERSIONS
        if message.kind in ("request", "response"):
            registry = REQUESTS if message.kind == "request" else RESPONSES
            assert registry[message.api_key] is cls
            assert message.api_key == cls.API_KEY


def test_registries_cover_every_api() -> None:
    # Kafka's 0-87 and 90-92 (the share-group offsets APIs) and Samsa's own 10000
    # (SamsaDescribeLogSegments), 10001 (SamsaConditionalProduce), 10002 (SamsaReadKey), 10003
    # (SamsaDescribeSharePartitions).
    assert len(REQUESTS) == len(RESPONSES) == 88 + 3 + 4
    assert REQUESTS[0] is ProduceRequest and RESPONSES[1] is FetchResponse
    assert REQUESTS[10000].__name__ == "SamsaDescribeLogSegmentsRequest"
    assert RESPONSES[10000].__name__ == "SamsaDescribeLogSegmentsResponse"
    assert request_header_version(10000, 0) == 2 and response_header_version(10000, 0) == 1
    assert REQUESTS[10001].__name__ == "SamsaConditionalProduceRequest"
    assert RESPONSES[10001].__name__ == "SamsaConditionalProduceResponse"
    assert request_header_version(10001, 0) == 2 and response_header_version(10001, 0) == 1
    assert 1000 not in REQUESTS
    with pytest.raises(KeyError):
        REQUESTS[1000]


def test_a_field_absent_from_a_version_decodes_to_its_default() -> None:
    request = MetadataRequest(topics=[MetadataRequestTopic(name="a")])
    decoded = MetadataRequest.decode(request.encode(0), 0)
    assert decoded.allow_auto_topic_creation is True  # Kafka's default; v0 lacks the field
    assert decoded.topics[0].topic_id == uuid.UUID(int=0)


# ---------------------------------------------------------------- tagged fields


def test_unknown_tagged_fields_survive_decode_and_encode() -> None:
    # ApiVersionsRequest v3 with unknown tags 3 and 40 at the top level.
    base = ApiVersionsRequest(client_software_name="c", client_software_version="1").encode(3)
    assert base.endswith(b"\x00")
    data = base[:-1] + b"\x02" + b"\x03\x02hi" + b"\x28\x00"
    request = ApiVersionsRequest.decode(data, 3)
    assert request.unknown_tagged_fields == [(3, b"hi"), (40, b"")]
    assert request.encode(3) == data


def test_unknown_tagged_fields_in_a_nested_struct_survive() -> None:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name="t", unknown_tagged_fields=[(5, b"\xff")])]
    )
    data = request.encode(12)
    decoded = MetadataRequest.decode(data, 12)
    assert decoded.topics[0].unknown_tagged_fields == [(5, b"\xff")]
    assert decoded.encode(12) == data


def test_known_tagged_fields_are_written_only_when_not_default() -> None:
    request = FetchRequest(cluster_id=None, replica_state=ReplicaState())
    plain = request.encode(15)
    assert plain.endswith(b"\x00")  # no tagged fields at the top level
    request.cluster_id = "cluster"
    request.replica_state = ReplicaState(replica_id=3, replica_epoch=9)
    tagged = request.encode(15)
    decoded = FetchRequest.decode(tagged, 15)
    assert decoded.cluster_id == "cluster" and decoded.replica_state.replica_id == 3
    assert len(tagged) > len(plain)


def test_known_and_unknown_tags_are_merged_in_tag_order() -> None:
    request = FetchRequest(cluster_id="c", unknown_tagged_fields=[(2, b"zz"), (9, b"")])
    data = request.encode(15)
    # count 3; tag 0 (cluster_id, compact "c"), then the unknown tags 2 and 9
    assert data.endswith(b"\x03" + b"\x00\x02\x02c" + b"\x02\x02zz" + b"\x09\x00")
    assert FetchRequest.decode(data, 15) == request


def test_tagged_fields_cannot_be_written_to_a_version_without_them() -> None:
    request = ApiVersionsRequest(unknown_tagged_fields=[(1, b"")])
    with pytest.raises(UnsupportedVersionError):
        request.encode(2)


# ---------------------------------------------------------------- versions and headers


def test_a_non_default_value_of_a_non_ignorable_field_cannot_be_dropped() -> None:
    request = ProduceRequest(transactional_id="txn", acks=1)
    with pytest.raises(UnsupportedVersionError, match="transactional_id"):
        request.encode(2)
    assert request.encode(3)  # the version that has the field


def test_a_non_default_value_of_an_ignorable_field_is_dropped() -> None:
    header = RequestHeader(
        request_api_key=18, request_api_version=0, correlation_id=1, client_id="c"
    )
    assert header.encode(0) == struct.pack(">hhi", 18, 0, 1)


def test_unsupported_versions_are_refused() -> None:
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest().encode(99)
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest.decode(b"", -1)


@pytest.mark.parametrize(
    ("api_key", "api_version", "request_header", "response_header"),
    [
        (0, 8, 1, 0),  # Produce: flexible from v9
        (0, 9, 2, 1),
        (3, 9, 2, 1),
        (7, 0, 0, 0),  # ControlledShutdown v0: the header without client id
        (7, 1, 1, 0),
        (7, 3, 2, 1),
        (18, 2, 1, 0),
        (18, 3, 2, 0),  # ApiVersions: the response header is always v0 (KIP-511)
        (18, 9, 2, 0),  # ... even for a version newer than this codec knows
    ],
)
def test_header_versions_follow_kafka(
    api_key: int, api_version: int, request_header: int, response_header: int
) -> None:
    assert request_header_version(api_key, api_version) == request_header
    assert response_header_version(api_key, api_version) == response_header


def test_request_header_v2_keeps_a_non_compact_client_id() -> None:
    header = RequestHeader(
        request_api_key=18, request_api_version=3, correlation_id=7, client_id="id"
    )
    assert header.encode(2) == struct.pack(">hhih", 18, 3, 7, 2) + b"id" + b"\x00"
    assert header.encode(1) == struct.pack(">hhih", 18, 3, 7, 2) + b"id"
    assert RequestHeader.decode(header.encode(2), 2) == header


# ---------------------------------------------------------------- malformed input


def sample_messages() -> list[tuple[type[Message], int, bytes]]:
    produce = ProduceRequest(
        transactional_id="t",
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData("events", [PartitionProduceData(i, bytes(150)) for i in range(3)])
        ],
    )
    fetch = FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic="events",
                partitions=[
                    PartitionData(partition_index=1, records=b"batch", aborted_transactions=None)
                ],
            )
        ]
    )
    metadata = MetadataRequest(topics=[MetadataRequestTopic(name="ä" * 70, topic_id=uuid.uuid4())])
    versions = ApiVersionsResponse(
        api_keys=[ApiVersion(api_key=i, max_version=i) for i in range(3)]
    )
    return [
        (ProduceRequest, 9, produce.encode(9)),
        (ProduceRequest, 3, produce.encode(3)),
        (FetchResponse, 12, fetch.encode(12)),
        (FetchResponse, 11, fetch.encode(11)),
        (MetadataRequest, 12, metadata.encode(12)),
        (ApiVersionsResponse, 3, versions.encode(3)),
    ]


@pytest.mark.parametrize(("cls", "version", "data"), sample_messages())
def test_truncation_at_every_byte_raises_the_decode_error(
    cls: type[Message], version: int, data: bytes
) -> None:
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            cls.decode(data[:cut], version)
        with pytest.raises(DecodeError):
            cls.decode_from(memoryview(data[:cut]), 0, version)


def test_trailing_bytes_are_refused() -> None:
    data = ApiVersionsRequest().encode(0)
    with pytest.raises(DecodeError, match="trailing"):
        ApiVersionsRequest.decode(data + b"\x00", 0)
    assert ApiVersionsRequest.decode_from(memoryview(data + b"\x00"), 0, 0)[1] == 0


@pytest.mark.parametrize(
    ("cls", "version", "data", "match"),
    [
        # MetadataRequest v1: int32 topic count, then int16-length names
        (MetadataRequest, 1, b"\x00\x00\x00\x01\x00\x02\xff\xfe", "UTF-8"),
        (MetadataRequest, 1, b"\x00\x00\x00\x01\xff\xff", "non-nullable"),
        (MetadataRequest, 1, b"\x00\x00\x00\x01\x00\x09abc", "invalid length"),
        # ApiVersionsRequest v3: compact strings (unsigned varint length + 1)
        (ApiVersionsRequest, 3, b"\x03\xff\xfe\x01\x00", "UTF-8"),
        (ApiVersionsRequest, 3, b"\x00\x01\x00", "non-nullable"),
        (ApiVersionsRequest, 3, b"\x82\x80\x02" + b"x" * 40000 + b"\x01\x00", "invalid length"),
    ],
)
def test_malformed_strings_raise_the_decode_error(
    cls: type[Message], version: int, data: bytes, match: str
) -> None:
    with pytest.raises(DecodeError, match=match):
        cls.decode(data, version)


def test_a_huge_array_count_is_refused_before_decoding_elements() -> None:
    data = struct.pack(">i", 2**31 - 1)  # MetadataRequest v1: topics count, no elements
    with pytest.raises(DecodeError, match="invalid length"):
        MetadataRequest.decode(data, 1)


def test_an_overlong_varint_is_refused() -> None:
    with pytest.raises(DecodeError):
        read_uvarint(memoryview(b"\xff\xff\xff\xff\x7f"), 0)
    assert read_uvarint(memoryview(b"\xff\xff\xff\xff\x0f"), 0) == (2**32 - 1, 5)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_uvarints_round_trip(value: int) -> None:
    out = bytearray()
    write_uvarint(out, value)
    assert read_uvarint(memoryview(bytes(out)), 0) == (value, len(out))


def fuzz_targets() -> list[tuple[type[Message], int, bytes]]:
    extra = [
        (
            FetchRequest,
            15,
            FetchRequest(cluster_id="c", replica_state=ReplicaState(1, 2)).encode(15),
        ),
        (RequestHeader, 2, RequestHeader(request_api_key=1, client_id="c").encode(2)),
        (ApiVersionsRequest, 3, ApiVersionsRequest(client_software_name="n").encode(3)),
    ]
    return sample_messages() + extra


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(fuzz_targets()), st.binary(max_size=80), st.data())
def test_arbitrary_input_decodes_or_raises_only_the_decode_error(
    target: tuple[type[Message], int, bytes], noise: bytes, data: st.DataObject
) -> None:
    cls, version, encoded = target
    # Mutated valid encodings reach deeper than pure noise does.
    mutated = bytearray(encoded)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    for candidate in (noise, bytes(mutated)):
        with contextlib.suppress(DecodeError):
            cls.decode(candidate, version)


# ---------------------------------------------------------------- encoding errors


def test_values_out_of_range_raise_the_encode_error() -> None:
    with pytest.raises(EncodeError):
        ProduceRequest(acks=1 << 20).encode(9)
    with pytest.raises(EncodeError):
        ProduceRequest(topic_data=[TopicProduceData(name=None)]).encode(9)
    with pytest.raises(EncodeError, match="too long"):
        ProduceRequest(topic_data=[TopicProduceData(name="x" * 40000)]).encode(9)


def test_a_failed_encode_into_leaves_the_buffer_as_it_was() -> None:
    out = bytearray(b"head")
    with pytest.raises(EncodeError):
        ProduceRequest(acks=1 << 20).encode_into(out, 9)
    assert out == b"head"


def test_records_decode_as_a_zero_copy_view() -> None:
    data = ProduceRequest(
        topic_data=[TopicProduceData("t", [PartitionProduceData(0, b"abc")])]
    ).encode(9)
    decoded = ProduceRequest.decode(data, 9)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is data and records == b"abc"
