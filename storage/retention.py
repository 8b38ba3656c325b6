"""Which segments retention removes (Kafka's ``UnifiedLog.deleteOldSegments`` predicates).

Pure: takes the segments and the config, returns the oldest run of segments to delete. A segment
goes when every offset in it is below the log start offset (DeleteRecords), or — with
``cleanup.policy`` including ``delete`` — when its largest timestamp is older than
``retention.ms``, or while the log is over ``retention.bytes`` by at least its size. The run stops
at the first segment that stays, never includes the active (last) segment, and never a segment
holding offsets at or above ``upper_offset`` (the high watermark).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from storage.config import LogConfig
from storage.segment import LogSegment


def deletable_segments(
    segments: Sequence[LogSegment],
    config: LogConfig,
    *,
    log_start_offset: int,
    upper_offset: int,
    now_ms: int,
) -> list[LogSegment]:
    excess = sum(segment.size for segment in segments) - config.retention_bytes
    result: list[LogSegment] = []
    for segment, following in itertools.pairwise(segments):
        next_base = following.base_offset
        if next_base > upper_offset:
            break
        if not _breaches(segment, next_base, config, log_start_offset, now_ms, excess):
            break
        excess -= segment.size
        result.append(segment)
    return result


def _breaches(
    segment: LogSegment,
    next_base: int,
    config: LogConfig,
    log_start_offset: int,
    now_ms: int,
    excess: int,
) -> bool:
    if next_base <= log_start_offset:
        return True
    if not config.delete:
        return False
    if config.retention_ms >= 0 and now_ms - segment.largest_timestamp > config.retention_ms:
        return True
    return config.retention_bytes >= 0 and excess - segment.size >= 0
