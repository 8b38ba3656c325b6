"""The offset of the last record with a key in a partition's log, by scanning it: the naive
version of ``Log.last_offset_of_key``, to be replaced by the per-segment key index.

Segments are read newest first and, inside one, batches newest first; each data batch is
decoded (decompressed if need be) and its records looked at newest first, so the scan stops at
the first match from the end. Skipped: control batches (transaction markers), batches of
aborted transactions (as a read_committed reader skips them), and offsets below the log start
offset (DeleteRecords). Records of a transaction still open count: they are in the log.

No state: the ``Log`` calls this on its owner's thread with a snapshot of its segment list.
Cost: O(bytes of the log after the key's last record), which is why an index replaces it.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.records import BatchHeader, decode_batch
from storage.segment import LogSegment
from storage.transaction_index import AbortedTxn

__all__ = ["NO_OFFSET", "last_offset_of_key"]

NO_OFFSET = -1  # no record has the key


def last_offset_of_key(
    segments: Sequence[LogSegment], key: bytes, *, log_start_offset: int,
    aborted: Sequence[AbortedTxn],
) -> int:
    """The offset of the last record whose key is ``key`` (see the module docstring), or -1."""
    for segment in reversed(segments):
        batches = [(position, header) for position, header in segment.scan_headers()
                   if _may_hold_keys(header, log_start_offset, aborted)]
        for position, header in reversed(batches):
            found = _last_in_batch(segment, position, header, key, log_start_offset)
            if found != NO_OFFSET:
                return found
    return NO_OFFSET


def _may_hold_keys(header: BatchHeader, log_start_offset: int,
                   aborted: Sequence[AbortedTxn]) -> bool:
    if header.is_control or header.records_count == 0 or header.last_offset < log_start_offset:
        return False
    return not (header.is_transactional and _is_aborted(header, aborted))


def _is_aborted(header: BatchHeader, aborted: Sequence[AbortedTxn]) -> bool:
    return any(txn.producer_id == header.producer_id
               and txn.first_offset <= header.base_offset <= txn.last_offset
               for txn in aborted)


def _last_in_batch(segment: LogSegment, position: int, header: BatchHeader, key: bytes,
                   log_start_offset: int) -> int:
    batch = decode_batch(segment.read_batch_bytes(position, header), verify_crc=False)
    for record in reversed(batch.records):
        if record.key == key and record.offset >= log_start_offset:
            return record.offset
    return NO_OFFSET
