"""Kafka's partitioner: murmur2 as Java's ``Utils.murmur2`` computes it, keyed records placed
as the Java client places them, and the built-in (KIP-794) sticky partitioner for records without a key."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from samsa.partitioner import BuiltInPartitioner, murmur2, partition_for_key, weighted_index

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


ALL4 = (0, 1, 2, 3)


def test_sticky_partition_moves_on_after_batch_size_bytes_with_its_batches_complete() -> None:
    partitioner = BuiltInPartitioner(1000)
    first = partitioner.partition("t", ALL4, 4)
    for _ in range(9):  # 900 bytes: not yet, complete batches or not
        partitioner.record_appended("t", first, 100, True, ALL4, 4)
        assert partitioner.partition("t", ALL4, 4) == first
    partitioner.record_appended("t", first, 100, False, ALL4, 4)  # 1000, last batch still open
    assert partitioner.partition("t", ALL4, 4) == first
    random.seed(1)
    moves = 0
    for _ in range(200):  # each time 1000 bytes are in and the batch is complete: a new draw
        current = partitioner.partition("t", ALL4, 4)
        partitioner.record_appended("t", current, 1000, True, ALL4, 4)
        assert partitioner.produced["t"] == 0
        moves += partitioner.partition("t", ALL4, 4) != current
    assert 100 < moves < 200  # uniform over 4: the same one comes again a quarter of the time


def test_twice_batch_size_moves_on_even_with_an_open_batch() -> None:
    partitioner = BuiltInPartitioner(1000)
    random.seed(3)
    current = partitioner.partition("t", ALL4, 4)
    partitioner.record_appended("t", current, 1999, False, ALL4, 4)
    assert partitioner.produced["t"] == 1999
    partitioner.record_appended("t", current, 1, False, ALL4, 4)
    assert partitioner.produced["t"] == 0  # a new draw happened


def test_an_append_to_a_partition_no_longer_current_counts_nothing() -> None:
    partitioner = BuiltInPartitioner(1000)
    current = partitioner.partition("t", ALL4, 4)
    partitioner.record_appended("t", (current + 1) % 4, 5000, True, ALL4, 4)
    assert partitioner.partition("t", ALL4, 4) == current
    assert partitioner.produced.get("t", 0) == 0


def test_sticky_partition_is_one_with_a_leader() -> None:
    partitioner = BuiltInPartitioner(10)
    seen = set()
    for _ in range(40):
        current = partitioner.partition("t", (1, 3), 4)
        seen.add(current)
        partitioner.record_appended("t", current, 10, True, (1, 3), 4)
    assert seen == {1, 3}


def test_sticky_partition_without_leaders_uses_any_and_one_partition_stays() -> None:
    partitioner = BuiltInPartitioner(10)
    assert partitioner.partition("t", (), 3) in (0, 1, 2)
    partitioner.record_appended("single", partitioner.partition("single", (0,), 1), 50, True,
                                (0,), 1)
    assert partitioner.partition("single", (0,), 1) == 0


def test_topics_are_independent() -> None:
    partitioner = BuiltInPartitioner(10)
    a = partitioner.partition("a", tuple(range(100)), 100)
    partitioner.partition("b", tuple(range(100)), 100)
    for _ in range(20):
        partitioner.record_appended("b", partitioner.partition("b", tuple(range(100)), 100),
                                    10, True, tuple(range(100)), 100)
    assert partitioner.partition("a", tuple(range(100)), 100) == a


@given(st.dictionaries(st.integers(0, 30), st.integers(0, 20), min_size=1, max_size=12))
def test_adaptive_weights_are_kafkas(queue_sizes: dict[int, int]) -> None:
    # Each partition is drawn in proportion to (longest queue + 1 - its queue), over every draw.
    partitioner = BuiltInPartitioner(10)
    partitioner.update_load("t", queue_sizes)
    load = partitioner._load["t"]
    if len(set(queue_sizes.values())) == 1:
        assert load is None  # all alike: uniform
        return
    assert load is not None
    partitions, cumulative = load
    longest = max(queue_sizes.values())
    counts = Counter(partitions[weighted_index(cumulative, draw)]
                     for draw in range(cumulative[-1]))
    assert counts == {p: longest + 1 - size for p, size in queue_sizes.items()}


def test_adaptive_draws_favour_short_queues_and_can_be_disabled() -> None:
    random.seed(7)
    partitioner = BuiltInPartitioner(10)
    partitioner.update_load("t", {0: 9, 1: 0})  # weights 1 and 10
    draws = Counter(partitioner._choose("t", (0, 1), 2) for _ in range(1100))
    assert draws[1] > 900
    uniform = BuiltInPartitioner(10, adaptive=False)
    uniform.update_load("t", {0: 9, 1: 0})
    assert uniform._load["t"] is None
