"""A follower's side of replication, sans-IO: what to ask the leader for, and what to do with
its answer (Kafka's ``AbstractFetcherThread.processFetchRequest`` and
``ReplicaFetcherThread.processPartitionData``). The shell (``broker.replica_fetcher``, or the
simulator) sends the Fetch and calls ``apply_answer`` with each partition's part of the response.

Per partition, the follower asks from ``fetch_position``: its log end offset, the epoch of its
last batch (KIP-320: the leader checks it and answers a *diverging epoch* where the logs part),
the leader epoch it believes current (so a stale leader or follower is fenced:
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) and its log start offset. The answer, in order:

1. an answer for another epoch or position than the current one (the partition changed role
   or epoch, or the log moved, while the request was out) is dropped: ``STALE``;
2. an error: OFFSET_OUT_OF_RANGE -> ``OUT_OF_RANGE`` (the shell asks the leader for its log
   start and end offsets and calls ``reset_out_of_range``); NOT_LEADER_OR_FOLLOWER,
   FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID and
   anything else -> ``BACK_OFF`` (retry after ``replica.fetch.backoff.ms``; the metadata image
   will move the partition if leadership changed);
3. a diverging epoch: truncate there (``Partition.truncate_on_divergence``) -> ``TRUNCATED``;
   never to the high watermark (the pre-KIP-101 rule that can lose acknowledged records);
4. records: appended verbatim (CRC checked by the log; a batch cut short by the response's size
   limit is left for the next fetch), then the leader's high watermark and log start offset,
   capped by this log's end -> ``APPENDED`` (or ``CAUGHT_UP`` with nothing to append).

Invariant: a follower's log only ever grows by the leader's batches at its own log end, and
shrinks only by a truncation the leader's epochs justify, so below the leader's high watermark
every ISR member holds the leader's batches byte for byte.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from protocol.errors import ErrorCode
from protocol.records import LOG_OVERHEAD
from replication.partition import Partition

__all__ = ["FetchPosition", "FollowerOutcome", "LeaderAnswer", "apply_answer", "fetch_position",
           "reset_out_of_range", "whole_batches"]

logger = logging.getLogger("samsa.replication.follower")


class FollowerOutcome(enum.Enum):
    APPENDED = "appended"
    CAUGHT_UP = "caught_up"
    TRUNCATED = "truncated"
    OUT_OF_RANGE = "out_of_range"
    BACK_OFF = "back_off"
    STALE = "stale"


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """What a follower's Fetch says of one partition."""

    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class LeaderAnswer:
    """One partition of the leader's Fetch response."""

    error_code: int = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging_epoch: tuple[int, int] | None = None  # None: the wire's (-1, -1)
    records: bytes | bytearray | memoryview | None = None


def fetch_position(partition: Partition) -> FetchPosition:
    return FetchPosition(partition.log_end_offset, partition.last_fetched_epoch,
                         partition.leader_epoch, partition.log_start_offset)


def apply_answer(partition: Partition, asked: FetchPosition, answer: LeaderAnswer) -> FollowerOutcome:
    """Apply the leader's answer to a Fetch made at ``asked`` (see the module docstring)."""
    if (partition.is_leader or partition.leader_epoch != asked.current_leader_epoch
            or partition.log_end_offset != asked.fetch_offset):
        return FollowerOutcome.STALE
    if answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
        return FollowerOutcome.OUT_OF_RANGE
    if answer.error_code != ErrorCode.NONE:
        return FollowerOutcome.BACK_OFF
    if answer.diverging_epoch is not None:
        epoch, end_offset = answer.diverging_epoch
        target = partition.truncate_on_divergence(epoch, end_offset)
        logger.info("%s-%d diverges from leader %d at epoch %d end %d: truncated to %d",
                    partition.topic, partition.partition, partition.leader_id, epoch, end_offset,
                    target)
        return FollowerOutcome.TRUNCATED
    records = whole_batches(answer.records)
    if records:
        partition.append_as_follower(records)
    partition.follower_high_watermark(answer.high_watermark, answer.log_start_offset)
    return FollowerOutcome.APPENDED if records else FollowerOutcome.CAUGHT_UP


def reset_out_of_range(partition: Partition, leader_start: int, leader_end: int) -> int | None:
    """After OFFSET_OUT_OF_RANGE (Kafka's ``handleOutOfRangeError``): a log ending past the
    leader's end is truncated to it (only after an unclean election can it be); one ending
    before the leader's log start restarts, empty, at that start. Returns the new log end
    offset, None when nothing had to change."""
    if partition.log_end_offset > leader_end:
        partition.truncate_to(leader_end)
        return leader_end
    if partition.log_end_offset < leader_start:
        partition.truncate_fully_and_start_at(leader_start)
        return leader_start
    return None


def whole_batches(records: bytes | bytearray | memoryview | None) -> memoryview:
    """The complete batches at the head of ``records`` (a response cut at its size limit can
    end with part of one)."""
    if not records:
        return memoryview(b"")
    view = memoryview(records)
    position = 0
    while position + LOG_OVERHEAD <= len(view):
        length = int.from_bytes(view[position + 8:position + 12], "big", signed=True)
        end = position + LOG_OVERHEAD + length
        if length <= 0 or end > len(view):
            break
        position = end
    return view[:position]
