"""A share partition's coordinator key and ``__share_group_state`` partition: golden values
computed with Kafka 4.3.1's ``Uuid.toString`` and Java's ``String.hashCode`` (with Kafka's
``Utils.abs``) under a JVM, so FindCoordinator SHARE agrees with a Kafka client's."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.share.coordinator_key import (
    coordinator_key,
    kafka_uuid_string,
    parse_coordinator_key,
    share_partition_for,
)
from broker.share.state_records import SharePartitionKey
from protocol.errors import InvalidRequestError

MIXED = UUID("01234567-89ab-cdef-fedc-ba9876543210")
ONE = UUID(int=1)
HIGH = UUID(bytes=b"\xff" * 15 + b"\xfe")


@pytest.mark.parametrize(("topic_id", "text"), [
    (MIXED, "ASNFZ4mrze_-3LqYdlQyEA"), (ONE, "AAAAAAAAAAAAAAAAAAAAAQ"), (HIGH, "_____________________g"),
])
def test_topic_ids_are_kafkas_text(topic_id: UUID, text: str) -> None:
    assert kafka_uuid_string(topic_id) == text


@pytest.mark.parametrize(("group", "topic_id", "partition", "of_50", "of_3"), [
    ("share-group", MIXED, 0, 38, 1), ("share-group", MIXED, 7, 45, 2), ("g", MIXED, 0, 14, 0),
    ("grüppe:with:colons", MIXED, 0, 21, 2), ("\U0001F600emoji", MIXED, 0, 8, 0),
    ("share-group", ONE, 0, 49, 2), ("grüppe:with:colons", ONE, 7, 1, 1),
    ("share-group", HIGH, 0, 5, 1), ("grüppe:with:colons", HIGH, 7, 3, 2), ("\U0001F600emoji", HIGH, 7, 14, 0),
])
def test_the_partition_is_kafkas(group: str, topic_id: UUID, partition: int, of_50: int, of_3: int) -> None:
    key = SharePartitionKey(group, topic_id, partition)
    assert coordinator_key(key) == f"{group}:{kafka_uuid_string(topic_id)}:{partition}"
    assert (share_partition_for(key, 50), share_partition_for(key, 3)) == (of_50, of_3)


@given(st.builds(SharePartitionKey, st.text(min_size=1).filter(str.strip), st.uuids(),
                 st.integers(-(2**31), 2**31 - 1)))
def test_a_key_parses_back(key: SharePartitionKey) -> None:
    assert parse_coordinator_key(coordinator_key(key)) == key


@pytest.mark.parametrize("text", [
    "", "group", "group:topic", ":ASNFZ4mrze_-3LqYdlQyEA:0", " :ASNFZ4mrze_-3LqYdlQyEA:0",
    "g:not-base64!:0", "g:ASNFZ4mrze_-3LqYdlQy!EA:0", "g:ASNFZ4mrze+/3LqYdlQyEA:0", "g:AAAA:0", "g:ASNFZ4mrze_-3LqYdlQyEA:x", "g:ASNFZ4mrze_-3LqYdlQyEA:99999999999",
])
def test_malformed_keys_are_invalid_requests(text: str) -> None:
    with pytest.raises(InvalidRequestError):
        parse_coordinator_key(text)
