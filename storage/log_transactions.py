"""The transaction side of a partition log: end-transaction markers and aborted-transaction
lookups (Kafka's ``UnifiedLog``/``LocalLog`` pieces for transactions).

- ``end_marker_batch``: the control batch the transaction coordinator writes to end a
  producer's transaction in a partition, byte for byte what Kafka's
  ``MemoryRecords.withEndTransactionMarker`` builds: one record, key = int16 version 0 +
  int16 type (0 ABORT, 1 COMMIT), value = int16 version 0 + int32 coordinator epoch;
  attributes transactional + control; the producer's id and epoch; base sequence -1;
  uncompressed, CreateTime = now.
- ``collect_aborted_transactions``: the aborted transactions a read_committed fetch must be
  told about (Kafka's ``LocalLog.collectAbortedTransactions``): walk the ``.txnindex`` of the
  segment holding the fetch offset and of the later ones, until an entry's last stable offset
  reaches the fetch's upper bound. An entry lives in the segment of its ABORT marker, which may
  come after the segment the fetch reads, hence the walk.

Pure functions over segments (no state of their own); called by ``Log`` on its owner.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from protocol.records import ControlRecordType, encode_batch, encode_control_record
from storage.producer_state import EndMarker
from storage.segment import LogSegment
from storage.transaction_index import AbortedTxn

__all__ = ["collect_aborted_transactions", "end_marker_batch", "upper_bound_offset"]


def end_marker_batch(
    producer_id: int,
    producer_epoch: int,
    marker: EndMarker,
    *,
    base_offset: int,
    timestamp: int,
    leader_epoch: int,
) -> bytes:
    record_type = ControlRecordType.ABORT if marker.is_abort else ControlRecordType.COMMIT
    record = encode_control_record(
        record_type, coordinator_epoch=marker.coordinator_epoch, offset=base_offset,
        timestamp=timestamp,
    )
    return encode_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=leader_epoch,
        is_transactional=True,
        is_control=True,
    )


def collect_aborted_transactions(
    segments: Sequence[LogSegment], start_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """The aborted transactions overlapping [start_offset, upper_bound_offset), oldest first."""
    bases = [segment.base_offset for segment in segments]
    first = max(0, bisect.bisect_right(bases, start_offset) - 1)
    found: list[AbortedTxn] = []
    for segment in segments[first:]:
        result = segment.txn_index.collect(start_offset, upper_bound_offset)
        found += result.aborted
        if result.complete:
            break
    return found


def upper_bound_offset(segments: Sequence[LogSegment], offset: int, log_end_offset: int) -> int:
    """An upper bound of what a read from ``offset`` returns: reads never cross a segment, so
    the next segment's base offset (the log end offset for the active one)."""
    bases = [segment.base_offset for segment in segments]
    index = bisect.bisect_right(bases, offset)
    return bases[index] if index < len(bases) else log_end_offset
