"""``partition.metadata``: Kafka's exact text, atomic writes, strict reads naming the file."""

from __future__ import annotations

import base64
import struct
import tempfile
from pathlib import Path
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.errors import CorruptPartitionMetadataError
from storage.partition_metadata import (
    METADATA_TOPIC_ID,
    PARTITION_METADATA_FILE,
    PartitionMetadata,
    decode_partition_metadata,
    read_partition_metadata,
    topic_id_from_string,
    topic_id_to_string,
    write_partition_metadata,
)

PATH = Path("/data/orders-0/partition.metadata")
topic_ids = st.integers(min_value=1, max_value=2**128 - 1).map(lambda value: UUID(int=value))
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def kafka_uuid_string(most: int, least: int) -> str:
    """Kafka's ``Uuid.toString()`` from its two signed longs, written from its source."""
    return base64.urlsafe_b64encode(struct.pack(">qq", most, least)).decode().rstrip("=")


def test_the_metadata_topic_id_is_kafkas() -> None:
    assert topic_id_to_string(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid(0L, 1L)


@given(longs, longs)
def test_topic_ids_print_as_kafkas_uuid_to_string(most: int, least: int) -> None:
    topic_id = UUID(bytes=struct.pack(">qq", most, least))
    text = topic_id_to_string(topic_id)
    assert text == kafka_uuid_string(most, least) and len(text) == 22
    assert topic_id_from_string(text) == topic_id


@given(topic_ids)
def test_encode_is_kafkas_exact_text_and_reads_back(topic_id: UUID) -> None:
    data = PartitionMetadata(topic_id).encode()
    assert data == f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}".encode()
    assert decode_partition_metadata(data, PATH) == PartitionMetadata(topic_id, 0)


@given(topic_ids)
def test_write_then_read_round_trips_and_leaves_no_temp_file(topic_id: UUID) -> None:
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        assert read_partition_metadata(directory) is None
        write_partition_metadata(directory, topic_id)
        write_partition_metadata(directory, topic_id)  # replaces, never appends
        assert read_partition_metadata(directory) == PartitionMetadata(topic_id)
        assert sorted(p.name for p in directory.iterdir()) == [PARTITION_METADATA_FILE]


@given(st.binary(max_size=80))
def test_any_bytes_either_parse_or_raise_the_one_error_naming_the_file(data: bytes) -> None:
    try:
        parsed = decode_partition_metadata(data, PATH)
    except CorruptPartitionMetadataError as error:
        assert error.path == PATH and str(PATH) in str(error)
    else:  # what was accepted has both keys and re-encodes to an equal value
        assert parsed.topic_id != UUID(int=0) and parsed.version >= 0
        assert decode_partition_metadata(PartitionMetadata(parsed.topic_id).encode(), PATH).topic_id == parsed.topic_id


@given(topic_ids, st.integers(min_value=0, max_value=79), st.integers(min_value=0, max_value=255))
def test_a_changed_byte_is_rejected_or_reads_as_what_the_bytes_say(
    topic_id: UUID, position: int, value: int
) -> None:
    data = bytearray(PartitionMetadata(topic_id).encode())
    position %= len(data)
    data[position] = value
    try:
        parsed = decode_partition_metadata(bytes(data), PATH)
    except CorruptPartitionMetadataError:
        return
    # Accepted: the version digit or a topic id character changed into another valid one, or a
    # separator into other whitespace; the text still says exactly what was parsed.
    text = bytes(data).decode()
    assert text.split()[1] == str(parsed.version)
    assert text.split()[3] == topic_id_to_string(parsed.topic_id)


GOOD_ID = topic_id_to_string(UUID(int=0x1234))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "line 1 is ''"),
        ("version: 0", "line 2 (topic_id) is missing"),
        (f"version:0\ntopic_id: {GOOD_ID}", "expected 'version: <value>'"),
        (f"vers: 0\ntopic_id: {GOOD_ID}", "expected 'version: <value>'"),
        (f"version: x\ntopic_id: {GOOD_ID}", "version 'x' is not a decimal integer"),
        (f"version: -1\ntopic_id: {GOOD_ID}", "version '-1' is not a decimal integer"),
        (f"version: 0\ntopic: {GOOD_ID}", "expected 'topic_id: <value>'"),
        ("version: 0\ntopic_id: not-an-id", "is not 22 characters"),
        (f"version: 0\ntopic_id: {GOOD_ID}A", "is not 22 characters"),
        ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAB", "not in canonical form"),
        ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "the zero id"),
        (f"version: 0\ntopic_id: {GOOD_ID}\nextra: 1", "unexpected line 3"),
        (f"version: 0\ntopic_id: {GOOD_ID} ", "expected 'topic_id: <value>'"),
    ],
)
def test_malformed_files_are_rejected_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(CorruptPartitionMetadataError, match=str(PATH)) as raised:
        decode_partition_metadata(text.encode(), PATH)
    assert reason in raised.value.reason


def test_non_utf8_is_rejected() -> None:
    with pytest.raises(CorruptPartitionMetadataError, match="not UTF-8"):
        decode_partition_metadata(b"version: 0\ntopic_id: \xff", PATH)


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (f"version: 0\ntopic_id: {GOOD_ID}\n", 0),  # a final newline
        (f"version: 0\r\ntopic_id: {GOOD_ID}\r\n", 0),  # Windows line ends (Java's readLine)
        (f"version:  0\ntopic_id:\t{GOOD_ID}", 0),  # Kafka splits on ':' and whitespace
        (f"version: 1\ntopic_id: {GOOD_ID}\nfuture: yes", 1),  # newer: read as Kafka does
    ],
)
def test_what_kafkas_reader_accepts_is_accepted(text: str, version: int) -> None:
    assert decode_partition_metadata(text.encode(), PATH) == PartitionMetadata(UUID(int=0x1234), version)


def test_reading_a_corrupt_file_names_it(tmp_path: Path) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_text("version: 0\ntopic_id: ???")
    with pytest.raises(CorruptPartitionMetadataError) as raised:
        read_partition_metadata(tmp_path)
    assert raised.value.path == tmp_path / PARTITION_METADATA_FILE
    assert str(tmp_path / PARTITION_METADATA_FILE) in str(raised.value)
