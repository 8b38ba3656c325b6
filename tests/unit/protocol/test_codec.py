"""The generated codec: every message at every version, golden bytes, malformed input.

The round-trip cases are built from Kafka's schemas (``../shared/kafka-protocol``),
which CI has; the schema-driven tests skip where the schemas are absent.
"""

from __future__ import annotations

import contextlib
import importlib
import random
import shutil
import struct
import subprocess
import sys
import uuid
import warnings
from pathlib import Path
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

SCHEMAS = codegen.schema_dir(None)
MESSAGES = codegen.load_messages(SCHEMAS) if SCHEMAS.is_dir() else []
BY_NAME = {m.name: m for m in MESSAGES}
needs_schemas = pytest.mark.skipif(not MESSAGES, reason=f"no Kafka schemas at {SCHEMAS}")

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}

# kafka-python 3.0.12 reads its schemas with deprecated importlib.resources calls.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# ---------------------------------------------------------------- values from the schemas


def classes_of(message: codegen.MessageSpec) -> dict[str, type]:
    module = importlib.import_module(f"protocol.messages.{message.module}")
    return {struct.name: getattr(module, struct.name) for struct in message.structs}


class Values:
    """Builds an object valid for one version: every field present in the version is
    set. ``full`` makes every value non-null, non-empty and non-default (so that all
    tagged fields are written); otherwise values are random, nulls included."""

    def __init__(self, message: codegen.MessageSpec, version: int, seed: int, full: bool) -> None:
        self.classes = classes_of(message)
        self.version = version
        self.flexible = version in message.flexible
        self.rng = random.Random(f"{message.name}/{version}/{seed}")
        self.full = full

    def struct(self, spec: codegen.StructSpec) -> Any:
        values = {}
        for field in spec.fields:
            if self.version in field.versions:
                values[field.attr] = self.field(field)
        if self.flexible and (self.full or self.rng.random() < 0.3):
            # Unknown tags above every known one, so re-encoding keeps their order.
            values["unknown_tagged_fields"] = [(90, b"\x01\x02\x03"), (200, b"")]
        return self.classes[spec.name](**values)

    def field(self, field: codegen.FieldSpec) -> Any:
        if self.version in field.nullable and not self.full and self.rng.random() < 0.25:
            return None
        if field.is_array:
            count = 2 if self.full else self.rng.choice([0, 1, 3])
            if field.struct is not None:
                return [self.struct(field.struct) for _ in range(count)]
            return [self.scalar(field.element, None) for _ in range(count)]
        if field.struct is not None:
            return self.struct(field.struct)
        return self.scalar(field.type, field)

    def scalar(self, kind: str, field: codegen.FieldSpec | None) -> Any:
        rng = self.rng
        if kind in INT_RANGES:
            low, high = INT_RANGES[kind]
            value = rng.choice([low, high, 1, rng.randint(low, high)])
            default = codegen._int_default(field.default) if field and field.default else 0
            return value if value != default or not self.full else 7
        if kind == "bool":
            return True if self.full else rng.random() < 0.5
        if kind == "float64":
            return rng.choice([-1.5, 1e300, 2.5e-308, rng.random()])
        if kind == "uuid":
            return uuid.UUID(int=rng.getrandbits(128) | 1)
        if kind == "string":
            return rng.choice(["topic-ä", "ü" * rng.randint(1, 3), "x" * rng.randint(1, 300)])
        if kind in ("bytes", "records"):
            return bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 5, 200])))
        raise AssertionError(kind)


def build(message: codegen.MessageSpec, version: int, seed: int = 0, full: bool = False) -> Any:
    return Values(message, version, seed, full).struct(message.struct)


# ---------------------------------------------------------------- round trips


@needs_schemas
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_every_message_round_trips_at_every_version(name: str) -> None:
    message = BY_NAME[name]
    cls = classes_of(message)[name]
    for version in message.valid:
        for seed, full in ((0, True), (1, False), (2, False), (3, False)):
            original = build(message, version, seed, full)
            data = original.encode(version)
            decoded = cls.decode(data, version)
            assert decoded == original, f"{name} v{version} seed {seed}"
            assert decoded.encode(version) == data, f"{name} v{version} seed {seed}"


@needs_schemas
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
    assert len(REQUESTS) == len(RESPONSES) == 88 + 1  # Kafka's 0-87 and Samsa's own 10000
    assert REQUESTS[0] is ProduceRequest and RESPONSES[1] is FetchResponse
    assert REQUESTS[10000].__name__ == "SamsaDescribeLogSegmentsRequest"
    assert RESPONSES[10000].__name__ == "SamsaDescribeLogSegmentsResponse"
    assert request_header_version(10000, 0) == 2 and response_header_version(10000, 0) == 1
    assert 1000 not in REQUESTS
    with pytest.raises(KeyError):
        REQUESTS[1000]


def test_a_field_absent_from_a_version_decodes_to_its_default() -> None:
    request = MetadataRequest(topics=[MetadataRequestTopic(name="a")])
    decoded = MetadataRequest.decode(request.encode(0), 0)
    assert decoded.allow_auto_topic_creation is True  # Kafka's default; v0 lacks the field
    assert decoded.topics[0].topic_id == uuid.UUID(int=0)


# ---------------------------------------------------------------- golden bytes: kafka-python 3.0.12


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


# kafka-python presents these int32 bitfields as sets of ACL operations: the golden
# cases leave them at Kafka's default, which both sides then encode alike.
AUTHORIZED_OPERATIONS = {
    "authorized_operations",
    "topic_authorized_operations",
    "cluster_authorized_operations",
}


def to_kafka_python(obj: Any, spec: codegen.StructSpec, cls: Any, version: int) -> Any:
    """The same message as a kafka-python object. A tagged field is passed only if it is
    not its default: kafka-python writes every tagged field it was given. Resets
    ``obj``'s authorized-operations fields to their default (see above)."""
    values = {}
    for field in spec.fields:
        if version not in field.versions:
            continue
        value = getattr(obj, field.attr)
        if field.attr in AUTHORIZED_OPERATIONS:
            setattr(obj, field.attr, getattr(type(obj)(), field.attr))
            continue
        if version in field.tagged and value == getattr(type(obj)(), field.attr):
            continue
        if field.struct is not None and value is not None:
            nested = getattr(cls, field.struct.name)
            if field.is_array:
                value = [to_kafka_python(item, field.struct, nested, version) for item in value]
            else:
                value = to_kafka_python(value, field.struct, nested, version)
        values[field.attr] = value
    return cls(version=version, **values) if hasattr(cls, "API_KEY") else cls(**values)


def kafka_python_cases() -> list[tuple[str, int]]:
    if not MESSAGES:
        return []
    cases = []
    for name, cls in sorted(kafka_python_classes().items()):
        message = BY_NAME.get(name)
        if message is None or message.kind not in ("request", "response"):
            continue
        top = min(message.valid.high, cls.max_version)
        cases += [(name, version) for version in range(message.valid.low, top + 1)]
    return cases


@needs_schemas
@pytest.mark.parametrize(("name", "version"), kafka_python_cases())
def test_same_bytes_as_kafka_python(name: str, version: int) -> None:
    message = BY_NAME[name]
    ours = classes_of(message)[name]
    theirs = kafka_python_classes()[name]
    for seed, full in ((0, True), (1, False)):
        obj = _without_unknown_tags(build(message, version, seed, full))
        expected = to_kafka_python(obj, message.struct, theirs, version).encode(version=version)
        data = obj.encode(version)
        assert data == expected
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
    if not MESSAGES:
        pytest.skip("no schemas")
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


# ---------------------------------------------------------------- the generator


@needs_schemas
def test_check_passes_on_the_committed_output() -> None:
    assert codegen.main(["--check", "--schemas", str(SCHEMAS)]) == 0


@needs_schemas
def test_check_fails_after_a_generated_file_is_edited(tmp_path: Path, capsys: Any) -> None:
    copy = tmp_path / "messages"
    shutil.copytree(codegen.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    argv = ["--check", "--schemas", str(SCHEMAS), "--output", str(copy)]
    assert codegen.main(argv) == 0
    target = copy / "produce_request.py"
    target.write_text(target.read_text() + "# an edit\n")
    (copy / "stale_request.py").write_text(codegen.GENERATED_MARKER + " by hand\n")
    assert codegen.main(argv) == 1
    output = capsys.readouterr().out
    assert "protocol/messages/produce_request.py" in output
    assert "protocol/messages/stale_request.py" in output
    assert codegen.main(["--schemas", str(SCHEMAS), "--output", str(copy)]) == 0  # regenerate
    assert codegen.main(argv) == 0 and not (copy / "stale_request.py").exists()


def test_samsa_schemas_are_generated_with_kafkas(tmp_path: Path) -> None:
    messages = {m.name: m for m in codegen.load_messages(tmp_path)}  # no Kafka schemas here
    request = messages["SamsaDescribeLogSegmentsRequest"]
    assert request.api_key == 10000 and request.source.startswith("protocol/schemas/")
    assert request.module == "samsa_describe_log_segments_request"
    assert (request.valid.low, request.valid.high, request.flexible.low) == (0, 0, 0)
    generated = codegen.render_module(request)
    assert generated.startswith(codegen.GENERATED_MARKER + " from protocol/schemas/")
    assert generated == (codegen.PACKAGE_DIR / f"{request.module}.py").read_text()


def test_a_samsa_schema_may_not_reuse_a_kafka_api_key(tmp_path: Path) -> None:
    kafka, samsa = tmp_path / "kafka", tmp_path / "samsa"
    kafka.mkdir()
    samsa.mkdir()
    schema = '{"apiKey": 0, "type": "request", "name": "%s", "validVersions": "0", "fields": []}'
    (kafka / "ProduceRequest.json").write_text(schema % "ProduceRequest")
    (samsa / "SamsaProduceRequest.json").write_text(schema % "SamsaProduceRequest")
    with pytest.raises(codegen.SchemaError, match="API key 0"):
        codegen.load_messages(kafka, samsa)


def test_check_passes_with_a_note_when_there_are_no_schemas(tmp_path: Path, capsys: Any) -> None:
    assert codegen.main(["--check", "--schemas", str(tmp_path / "absent")]) == 0
    assert "no schema directory" in capsys.readouterr().out


@needs_schemas
def test_check_runs_as_a_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "protocol.codegen", "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_files_are_small() -> None:
    for path in codegen.PACKAGE_DIR.rglob("*.py"):
        assert path.stat().st_size < 1 << 20, path


@pytest.mark.parametrize(
    ("name", "snake"),
    [
        ("TopicName", "topic_name"),
        ("KRaftVersion", "kraft_version"),
        ("clientId", "client_id"),
        ("isKRaftController", "is_kraft_controller"),
        ("ISR", "isr"),
    ],
)
def test_snake_case_is_kafkas(name: str, snake: str) -> None:
    assert codegen.snake_case(name) == snake


def test_comments_are_stripped_outside_strings_only() -> None:
    text = '// licence\n{ "a": "http://x", // why\n "b": 1 }'
    assert codegen.strip_comments(text) == '\n{ "a": "http://x", \n "b": 1 }'
