"""Who wrote each copy of a duplicated value: the broker's deduplication, or the client's epoch bump.

An idempotent producer's retry carries the same producer id, epoch and sequence as the first
attempt, and the broker answers a retry of one of the last five batches with the first append's
offsets — a value written twice *in one producer epoch* is the broker's failure. librdkafka,
though, bumps its epoch and resets its sequence when queued messages time out (or on some
OUT_OF_ORDER_SEQUENCE_NUMBER answers) and then re-sends messages whose earlier attempt may have
been written: a duplicate across two epochs of one producer id is the client's documented limit,
the same against Apache Kafka (librdkafka issue #4953: "even if the idempotent producer isn't
restarted, it can have duplications in case messages time out because the epoch needs to be
bumped"). The campaign reports those apart and fails only on the first kind.

The copies are found in the replicas' batches (RecordBatch v2 header: producer id at byte 43,
epoch at 51, last offset delta at 23).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["split_duplicates"]


def _writers(batches: Sequence[tuple[int, bytes]]) -> tuple[list[int], list[tuple[int, int, int]]]:
    """(base offsets, (last offset, producer id, epoch)) of a replica's batches, in order."""
    bases, writers = [], []
    for base, data in batches:
        (last_delta,) = struct.unpack_from(">i", data, 23)
        producer_id, epoch = struct.unpack_from(">qh", data, 43)
        bases.append(base)
        writers.append((base + last_delta, producer_id, epoch))
    return bases, writers


def _writer_at(index: tuple[list[int], list[tuple[int, int, int]]], offset: int) -> tuple[int, int] | None:
    bases, writers = index
    position = bisect.bisect_right(bases, offset) - 1
    if position < 0 or writers[position][0] < offset:
        return None
    return writers[position][1], writers[position][2]


def split_duplicates(duplicates: Sequence[dict[str, Any]],
                     replicas: Mapping[Any, Mapping[tuple[str, int], Any]]
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(broker duplicates, client epoch-bump duplicates) of the checker's ``duplicate``
    examples, each with the (producer id, epoch) of every copy added as ``writers``. A copy
    no replica holds counts as the broker's (nothing proves otherwise)."""
    indexes: dict[tuple[str, int], tuple[list[int], list[tuple[int, int, int]]]] = {}
    for held in replicas.values():
        for key, replica in held.items():
            batches = replica.batches if hasattr(replica, "batches") else replica[2]
            if key not in indexes or len(batches) > len(indexes[key][0]):
                indexes[key] = _writers(batches)
    broker, client = [], []
    for duplicate in duplicates:
        writers = []
        for topic, partition, offset in duplicate["found"]:
            index = indexes.get((topic, partition))
            writers.append(None if index is None else _writer_at(index, offset))
        known = [writer for writer in writers if writer is not None]
        bumped = (len(known) == len(writers) and len({pid for pid, _ in known}) == 1
                  and len({epoch for _, epoch in known}) == len(known))
        (client if bumped else broker).append({**duplicate, "writers": writers})
    return broker, client
