"""read_committed: leave out the records of aborted transactions, as Kafka's consumer does.

What is known of a range's aborted transactions is a list of (producer id, offset of the
transaction's first record): the broker sends it with each read_committed Fetch for what that
fetch returns, and file mode reads it from the segments' ``.txnindex`` files (Kafka's entries,
written when an ABORT marker is appended). Walking the batches in offset order, as Kafka's
``CompletedFetch`` does: before a batch of a producer, each listed transaction that began at
or before the batch's last offset becomes active for its producer; a transactional batch of a
producer with an active aborted transaction holds no rows; that producer's ABORT marker (a
control batch) ends it. Control batches never hold rows (the decoder leaves them out either
way). Batches of committed transactions and non-transactional batches are kept.

The list may be fed in pieces (one per fetch) and may repeat entries: each (producer, first
offset) counts once. Entries must cover every transaction that is still open at the first
batch walked (the broker's and the ``.txnindex`` lists both do: they name transactions whose
marker is at or past the read's start).

State: one ``AbortedTransactions`` per range read, used by one thread, in offset order.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from protocol.errors import CorruptMessageError
from protocol.records import BatchHeader, ControlRecordType, control_record_type, decode_batch

__all__ = ["AbortedTransactions"]


class AbortedTransactions:
    """The aborted transactions met so far in one range read (see the module docstring)."""

    def __init__(self, transactions: Iterable[tuple[int, int]] = ()) -> None:
        self._pending: list[tuple[int, int]] = []  # heap of (first offset, producer id)
        self._known: set[tuple[int, int]] = set()
        self._active: set[int] = set()  # producers whose aborted transaction we are inside
        self.add(transactions)

    def add(self, transactions: Iterable[tuple[int, int]]) -> None:
        """More (producer id, first offset) pairs, e.g. from the next fetch's response."""
        for producer_id, first_offset in transactions:
            entry = (first_offset, producer_id)
            if entry not in self._known:
                self._known.add(entry)
                heapq.heappush(self._pending, entry)

    def holds_no_rows(self, buffer: memoryview, position: int, header: BatchHeader) -> bool:
        """Whether the batch at ``position`` of ``buffer`` is left out by a read_committed
        reader; call it for each batch, in offset order."""
        producer_id = header.producer_id
        if producer_id < 0:
            return header.is_control
        pending = self._pending
        while pending and pending[0][0] <= header.last_offset:
            self._active.add(heapq.heappop(pending)[1])
        if header.is_control:
            if producer_id in self._active and _is_abort_marker(buffer, position):
                self._active.discard(producer_id)
            return True
        return header.is_transactional and producer_id in self._active


def _is_abort_marker(buffer: memoryview, position: int) -> bool:
    batch = decode_batch(buffer, position, verify_crc=False)  # the caller checked the CRC
    if not batch.records:
        raise CorruptMessageError(f"control batch at offset {batch.base_offset} has no record")
    return control_record_type(batch.records[0]) is ControlRecordType.ABORT
