"""Offsets committed inside transactions, pending until their transaction ends (the
``pendingTransactionalOffsets`` of Kafka's ``OffsetMetadataManager``).

A TxnOffsetCommit appends its offsets to the group's ``__consumer_offsets`` partition as a
transactional batch (the producer's id and epoch, attributes transactional, no sequence; the
records are ordinary OffsetCommit key/values) and records them here, by producer id. Nothing is
visible in the group's committed offsets (OffsetFetch) until the transaction coordinator
writes the COMMIT marker into that partition: then ``complete`` hands the producer's offsets
of the groups in that partition over to the committed offsets; an ABORT marker drops them.
While offsets are pending, OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT
for those partitions (``has_pending``).

Loading (``replay_batch``) goes through the log in order: a transactional batch's offsets
become pending, a marker completes them (into the loaded committed offsets), so a load
rebuilds exactly the state a running broker had; a transaction still open at the end stays
pending.

Deviation: Kafka keeps, of a committed transactional offset and a plain commit of the same
partition, the one written later in the log; here the transaction's commit wins when its
marker is written (the plain commit in between is overwritten).

Owned by the broker's event loop (loading fills a fresh instance in a worker thread, handed
over on the loop).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from protocol.errors import InvalidRecordError
from protocol.records import ControlRecordType, RecordBatch, decode_control_record

if TYPE_CHECKING:
    from broker.group.offsets import OffsetAndMetadata

__all__ = ["GroupOffsets", "PendingTransactionalOffsets"]

TopicPartition = tuple[str, int]
GroupOffsets = dict[str, dict[TopicPartition, "OffsetAndMetadata"]]


class PendingTransactionalOffsets:
    def __init__(self) -> None:
        self._by_producer: dict[int, GroupOffsets] = {}

    def __len__(self) -> int:
        return len(self._by_producer)

    def add(
        self, producer_id: int, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def merge(self, other: PendingTransactionalOffsets) -> None:
        """Take over a loaded partition's pending offsets."""
        for producer_id, groups in other._by_producer.items():
            for group_id, offsets in groups.items():
                self.add(producer_id, group_id, offsets)

    def complete(
        self, producer_id: int, commit: bool, in_partition: Callable[[str], bool]
    ) -> GroupOffsets:
        """End the producer's pending offsets of the groups ``in_partition`` accepts (those of
        the ``__consumer_offsets`` partition the marker went to); the committed ones."""
        groups = self._by_producer.get(producer_id, {})
        ended = {group_id: offsets for group_id, offsets in groups.items() if in_partition(group_id)}
        for group_id in ended:
            del groups[group_id]
        if not groups:
            self._by_producer.pop(producer_id, None)
        return ended if commit else {}

    def has_pending(self, group_id: str, topic_partition: TopicPartition) -> bool:
        return any(
            topic_partition in groups.get(group_id, {}) for groups in self._by_producer.values()
        )

    def group_ids(self) -> set[str]:
        """Every group with pending offsets."""
        return {group_id for groups in self._by_producer.values() for group_id in groups}

    def partitions_of(self, group_id: str) -> set[TopicPartition]:
        """The partitions the group has pending offsets for, in any transaction."""
        return {tp for groups in self._by_producer.values() for tp in groups.get(group_id, {})}

    def forget(self, group_id: str, partitions: list[TopicPartition] | None = None) -> None:
        """Offsets deleted (``partitions``) or the whole group deleted (None)."""
        for groups in self._by_producer.values():
            pending = groups.get(group_id)
            if pending is None:
                continue
            if partitions is None:
                del groups[group_id]
                continue
            for topic_partition in partitions:
                pending.pop(topic_partition, None)

    # -- loading ------------------------------------------------------------------------------

    def replay_batch(
        self,
        batch: RecordBatch,
        decode: Callable[[bytes, bytes | None], tuple[str, TopicPartition, OffsetAndMetadata | None] | None],
        committed: GroupOffsets,
    ) -> None:
        """A transactional or control batch read back from the partition, in log order:
        pending offsets (``decode`` reads an offset-commit record), or the end of a producer's
        transaction (its committed offsets go into ``committed``)."""
        producer_id = batch.header.producer_id
        if batch.is_control:
            commit = _marker_commits(batch)
            if commit is not None:
                for group_id, offsets in self.complete(producer_id, commit, lambda _: True).items():
                    committed.setdefault(group_id, {}).update(offsets)
            return
        for record in batch.records:
            decoded = None if record.key is None else decode(record.key, record.value)
            if decoded is not None:
                group_id, topic_partition, offset = decoded
                if offset is not None:
                    self.add(producer_id, group_id, {topic_partition: offset})


def _marker_commits(batch: RecordBatch) -> bool | None:
    """True for a COMMIT marker, False for ABORT, None for anything else."""
    if not batch.records:
        return None
    try:
        record_type, _ = decode_control_record(batch.records[0])
    except InvalidRecordError:
        return None
    return record_type is ControlRecordType.COMMIT
