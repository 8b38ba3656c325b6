"""Kafka's partitioner: murmur2 as Java's ``Utils.murmur2`` computes it, keyed records placed
as the Java client places them, and the sticky partitioner for records without a key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from samsa.partitioner import StickyPartitioner, murmur2, partition_for_key

# Apache Kafka's UtilsTest.testMurmur2: Utils.murmur2 of these bytes, as Java ints.
JAVA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# kafka-python's test_murmur2_java_compatibility: the partition, out of 1,000, that the Java
# client's default partitioner gives these keys.
JAVA_PARTITIONS_OF_1000 = [
    (b"", 681), (b"a", 524), (b"ab", 434), (b"abc", 107), (b"123456789", 566), (b"\x00 ", 742),
]


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2)
def test_murmur2_equals_javas(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_PARTITIONS_OF_1000)
def test_keyed_partition_equals_the_java_clients(key: bytes, expected: int) -> None:
    assert partition_for_key(key, 1000) == expected


@given(st.binary(max_size=200))
def test_murmur2_agrees_with_kafka_python(key: bytes) -> None:
    # kafka-python's murmur2 is an independent port of the same Java code (unsigned result)
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF


@given(st.binary(max_size=64), st.integers(1, 500))
def test_partition_is_in_range_and_stable(key: bytes, partitions: int) -> None:
    chosen = partition_for_key(key, partitions)
    assert 0 <= chosen < partitions
    assert chosen == partition_for_key(bytearray(key), partitions) \
        == partition_for_key(memoryview(key), partitions)


def test_sticky_partition_stays_until_a_new_batch_is_needed() -> None:
    sticky = StickyPartitioner()
    first = sticky.partition("t", (0, 1, 2, 3), 4)
    assert all(sticky.partition("t", (0, 1, 2, 3), 4) == first for _ in range(50))
    sticky.on_new_batch("t", first, (0, 1, 2, 3), 4)
    second = sticky.partition("t", (0, 1, 2, 3), 4)
    assert second != first
    # another thread that saw the old partition need a new batch does not move it again
    sticky.on_new_batch("t", first, (0, 1, 2, 3), 4)
    assert sticky.partition("t", (0, 1, 2, 3), 4) == second


def test_sticky_partition_is_one_with_a_leader() -> None:
    sticky = StickyPartitioner()
    seen = set()
    for _ in range(40):
        current = sticky.partition("t", (1, 3), 4)
        seen.add(current)
        sticky.on_new_batch("t", current, (1, 3), 4)
    assert seen == {1, 3}


def test_sticky_partition_without_leaders_uses_any_and_one_partition_stays() -> None:
    sticky = StickyPartitioner()
    assert sticky.partition("t", (), 3) in (0, 1, 2)
    sticky.on_new_batch("single", sticky.partition("single", (0,), 1), (0,), 1)
    assert sticky.partition("single", (0,), 1) == 0


def test_topics_are_independent() -> None:
    sticky = StickyPartitioner()
    a = sticky.partition("a", tuple(range(100)), 100)
    b = sticky.partition("b", tuple(range(100)), 100)
    sticky.on_new_batch("b", b, tuple(range(100)), 100)
    assert sticky.partition("a", tuple(range(100)), 100) == a
