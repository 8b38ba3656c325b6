"""Which partition a record goes to: Kafka's built-in partitioner.

- A record with a partition given goes there.
- A keyed record (unless ``partitioner.ignore.keys``) goes to
  ``(murmur2(key) & 0x7fffffff) % number_of_partitions`` over *all* partitions of the topic,
  with Kafka's ``Utils.murmur2`` (seed 0x9747b28c), so keys land where the Java client,
  librdkafka's ``murmur2_random`` and kafka-python put them.
- A record without a key sticks to one partition (KIP-480): the topic's sticky partition
  changes when a record would need a new batch there (the last one is full or was sent), to a
  random partition with a leader (another one when there is a choice), and that record goes
  to the new partition. Null-key records so fill whole batches instead of being spread
  thinly over many small ones.

State: ``StickyPartitioner`` keeps the current partition of each topic. Producing threads
call it under no lock of its own: a race can only make two records pick differently, which
the rule allows (dict updates are atomic under the GIL).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

__all__ = ["StickyPartitioner", "murmur2", "partition_for_key"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


_WORDS: dict[int, struct.Struct] = {}  # little-endian uint32 × n, by n


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: MurmurHash2 (32 bits, seed 0x9747b28c) as a signed int32."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    if whole:
        words = _WORDS.get(whole)
        if words is None:
            words = struct.Struct(f"<{whole // 4}I")
            if whole <= 1024:
                _WORDS[whole] = words
        for k in words.unpack_from(data):
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ (((k ^ (k >> 24)) * _M) & _MASK)
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h = ((h ^ data[whole]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


_HASHES: dict[bytes, int] = {}  # recent keys' positive murmur2: keys repeat, hashing is slow
_HASHES_LIMIT = 65_536


def partition_for_key(key: bytes | bytearray | memoryview, number_of_partitions: int) -> int:
    """Kafka's ``BuiltInPartitioner.partitionForKey``: positive murmur2 modulo the count."""
    if key.__class__ is bytes:
        hashed = _HASHES.get(key)
        if hashed is None:
            if len(_HASHES) >= _HASHES_LIMIT:
                _HASHES.clear()
            hashed = _HASHES[key] = murmur2(key) & 0x7FFFFFFF
        return hashed % number_of_partitions
    return (murmur2(key) & 0x7FFFFFFF) % number_of_partitions


class StickyPartitioner:
    """The partition for null-key records of each topic (see the module docstring)."""

    def __init__(self) -> None:
        self.current: dict[str, int] = {}  # topic -> partition; read directly by send()

    def partition(self, topic: str, available: Sequence[int], all_partitions: int) -> int:
        """The sticky partition of ``topic``: one of ``available`` (partitions with a leader),
        or of ``range(all_partitions)`` when none has a leader."""
        current = self.current.get(topic)
        if current is None or current >= all_partitions:
            current = self.current[topic] = self._choose(available, all_partitions, -1)
        return current

    def on_new_batch(self, topic: str, previous: int, available: Sequence[int],
                     all_partitions: int) -> None:
        """A record for ``previous`` would need a new batch: move on (unless another thread
        already did), so the record and those after it start a batch elsewhere."""
        if self.current.get(topic, previous) == previous:
            self.current[topic] = self._choose(available, all_partitions, previous)

    @staticmethod
    def _choose(available: Sequence[int], all_partitions: int, current: int) -> int:
        choices: Sequence[int] = available if available else range(all_partitions)
        if len(choices) == 1:
            return choices[0]
        while True:
            chosen = random.choice(choices)
            if chosen != current:
                return chosen
