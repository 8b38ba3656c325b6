"""Which partition a record goes to: Kafka's built-in partitioner.

- A record with a partition given goes there.
- A keyed record (unless ``partitioner.ignore.keys``) goes to
  ``(murmur2(key) & 0x7fffffff) % number_of_partitions`` over *all* partitions of the topic,
  with Kafka's ``Utils.murmur2`` (seed 0x9747b28c), so keys land where the Java client,
  librdkafka's ``murmur2_random`` and kafka-python put them.
- A record without a key goes to the topic's sticky partition, Kafka's built-in partitioner
  since 3.3 (KIP-794): it changes once ``batch.size`` bytes have gone to it and its last
  batch is complete (full or already sent), or unconditionally after twice that, so each
  partition gets about the same bytes in whole batches. The next one is drawn at random
  among the partitions with a leader; with ``partitioner.adaptive.partitioning.enable``
  (the default) the draw is weighted against partitions whose queues are longer (a slower
  broker gets less), as soon as the sender has seen a queue for every partition.

State: ``BuiltInPartitioner`` keeps each topic's current partition and bytes produced to it
(written by producing threads, no lock of its own: a race can only make records pick
differently or a count come out a record short, which the rule allows; dict updates are
atomic under the GIL) and the queue-size weights (replaced whole by the sender's thread).
"""

from __future__ import annotations

import random
import struct
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from itertools import accumulate

__all__ = ["BuiltInPartitioner", "murmur2", "partition_for_key", "weighted_index"]

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


def weighted_index(cumulative: Sequence[int], draw: int) -> int:
    """The bucket of ``draw`` (0 <= draw < cumulative[-1]) where bucket i holds the draws
    cumulative[i-1] <= draw < cumulative[i]."""
    return bisect_right(cumulative, draw)


class BuiltInPartitioner:
    """The partition for null-key records of each topic (see the module docstring)."""

    def __init__(self, batch_size: int, *, adaptive: bool = True) -> None:
        self.sticky_batch_size = max(batch_size, 1)
        self.adaptive = adaptive
        self.current: dict[str, int] = {}  # topic -> partition; read directly by send()
        self.produced: dict[str, int] = {}  # topic -> bytes to the current partition
        # topic -> (partition ids, cumulative weights), None: draw uniformly
        self._load: dict[str, tuple[tuple[int, ...], tuple[int, ...]] | None] = {}

    def partition(self, topic: str, available: Sequence[int], all_partitions: int) -> int:
        """The sticky partition of ``topic``: one of ``available`` (partitions with a leader),
        or of ``range(all_partitions)`` when none has a leader."""
        current = self.current.get(topic)
        if current is None or current >= all_partitions:
            current = self.current[topic] = self._choose(topic, available, all_partitions)
            self.produced[topic] = 0
        return current

    def record_appended(self, topic: str, partition: int, size: int, batches_complete: bool,
                        available: Sequence[int], all_partitions: int) -> None:
        """``size`` bytes went to ``partition`` as the sticky one; ``batches_complete``: its
        last batch takes no more records (or was sent). Moves on when it is time."""
        if self.current.get(topic) != partition:
            return  # another thread moved on already
        produced = self.produced.get(topic, 0) + size
        if produced >= self.sticky_batch_size and (
                batches_complete or produced >= 2 * self.sticky_batch_size):
            self.current[topic] = self._choose(topic, available, all_partitions)
            produced = 0
        self.produced[topic] = produced

    def update_load(self, topic: str, queue_sizes: Mapping[int, int]) -> None:
        """The sender's queue length (batches) of each partition of ``topic`` with a leader:
        the weights of the next draws (Kafka's ``updatePartitionLoadStats``)."""
        if not self.adaptive or not queue_sizes or len(set(queue_sizes.values())) == 1:
            self._load[topic] = None  # no difference: uniform
            return
        longest = max(queue_sizes.values()) + 1
        partitions = tuple(sorted(queue_sizes))
        self._load[topic] = (partitions, tuple(accumulate(
            longest - queue_sizes[partition] for partition in partitions)))

    def _choose(self, topic: str, available: Sequence[int], all_partitions: int) -> int:
        load = self._load.get(topic)
        if load is not None:
            partitions, cumulative = load
            return partitions[weighted_index(cumulative, random.randrange(cumulative[-1]))]
        return random.choice(available if available else range(all_partitions))
