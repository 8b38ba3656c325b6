"""Replicas compared byte for byte after a run, and a reader of a partition directory's batches.

``ReplicaBytes`` maps node -> (topic, partition) -> :class:`ReplicaLog` (log start offset, high
watermark, the batches as (base offset, the batch's bytes) in offset order). Followers append
the leader's batches verbatim (partition leader epoch included), so below the smallest high
watermark every replica of a partition holds the same bytes at the same base offsets: the
checker compares the batches whose base offset lies in [largest log start, smallest high
watermark). Compacted topics are skipped: each replica runs its own cleaner.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from storage.checkpoint import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile
from storage.errors import StorageError
from storage.inspect import dump_log_file
from storage.segment import LOG_SUFFIX, parse_base_offset
from tests.faults.checker_report import Anomalies

__all__ = ["ReplicaBytes", "ReplicaLog", "check_replicas", "read_replica"]


class ReplicaLog(NamedTuple):
    log_start: int
    high_watermark: int
    batches: Sequence[tuple[int, bytes]]


ReplicaBytes = Mapping[Any, Mapping[tuple[str, int], ReplicaLog | tuple[int, int, Sequence[Any]]]]


def read_replica(partition_dir: Path, high_watermark: int) -> ReplicaLog:
    """The batches of a Kafka-format partition directory (``<topic>-<partition>``) with a base
    offset below ``high_watermark``, read from its ``.log`` segments in offset order; reading a
    segment stops at its first batch whose framing is unreadable (a batch with a bad CRC is
    kept: its bytes differ from a healthy replica's). The log start offset is the first
    segment's base offset, or the log directory's ``log-start-offset-checkpoint`` entry when
    that is ahead; a replica whose data is gone thus still claims its range, and differs."""
    segments = sorted(partition_dir.glob(f"*{LOG_SUFFIX}"), key=lambda p: parse_base_offset(p.name))
    batches: list[tuple[int, bytes]] = []
    for segment in segments:
        batches.extend(_segment_batches(segment, high_watermark))
    first = parse_base_offset(segments[0].name) if segments else 0
    return ReplicaLog(max(first, _checkpointed_log_start(partition_dir)), high_watermark, batches)


def _segment_batches(segment: Path, high_watermark: int) -> list[tuple[int, bytes]]:
    report = dump_log_file(segment)
    batches: list[tuple[int, bytes]] = []
    fd = os.open(segment, os.O_RDONLY)
    try:
        for batch in report.batches:
            if batch.header.base_offset >= high_watermark:
                break
            size = batch.header.size_in_bytes
            batches.append((batch.header.base_offset, os.pread(fd, size, batch.position)))
    finally:
        os.close(fd)
    return batches


def _checkpointed_log_start(partition_dir: Path) -> int:
    topic, _, partition = partition_dir.name.rpartition("-")
    try:
        offsets = OffsetCheckpointFile(partition_dir.parent / LOG_START_OFFSET_CHECKPOINT).read()
    except (StorageError, OSError, ValueError):
        return 0
    return offsets.get((topic, int(partition)), 0) if partition.isdigit() else 0


def check_replicas(
    replicas: ReplicaBytes, anomalies: Anomalies, *, skip_topics: frozenset[str] = frozenset()
) -> int:
    """Adds a ``replica-divergence`` per partition and pair of nodes whose batches differ;
    returns how many partitions held by two or more replicas were compared."""
    by_partition: dict[tuple[str, int], dict[Any, Any]] = {}
    for node, logs in replicas.items():
        for topic_partition, log in logs.items():
            by_partition.setdefault(topic_partition, {})[node] = log
    compared = 0
    for (topic, partition), logs in sorted(by_partition.items()):
        if len(logs) < 2 or topic in skip_topics:
            continue
        compared += 1
        _compare_partition(topic, partition, logs, anomalies)
    return compared


def _compare_partition(
    topic: str, partition: int, logs: dict[Any, Any], anomalies: Anomalies
) -> None:
    unpacked = {node: ReplicaLog(*log) for node, log in logs.items()}  # plain tuples welcome
    lower = max(log.log_start for log in unpacked.values())
    upper = min(log.high_watermark for log in unpacked.values())
    nodes = sorted(unpacked, key=repr)
    in_range = {
        node: {offset: data for offset, data in unpacked[node].batches if lower <= offset < upper}
        for node in nodes
    }
    reference = nodes[0]
    for node in nodes[1:]:
        differing = _differing_offsets(in_range[reference], in_range[node])
        if differing:
            anomalies.add(
                "replica-divergence", topic=topic, partition=partition, nodes=[reference, node],
                offset=differing[0], differing_batches=len(differing), compared=[lower, upper],
                ops=[],
            )  # fmt: skip


def _differing_offsets(one: dict[int, bytes], other: dict[int, bytes]) -> list[int]:
    offsets = one.keys() | other.keys()
    return sorted(offset for offset in offsets if one.get(offset) != other.get(offset))
