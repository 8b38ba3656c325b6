"""``StagedBatch``: the costly part of applying a batch of metadata records, done in advance.

Issue 18: a CreateTopics of 5,000 partitions is one batch of 5,000 PartitionRecords. Applying it
record by record on the event loop (decode, note the delta, build each ``PartitionImage``) stalls
every client for tens of milliseconds. When this node wrote the batch itself (the single-node
controller, ``replication.controller.local``) it still holds the records, so nothing needs to be
decoded again, and the per-partition work can be done on the storage worker *before* the batch is
applied: ``stage_batch`` reads the image as it is before the batch and returns

- ``delta``: the batch's ``MetadataDelta`` (each touched partition's state before the batch);
- ``partitions``: for each topic a PartitionRecord or PartitionChangeRecord touches, its whole
  new partition map (a copy of the current one with the batch's records applied, or a new map
  for a topic the batch creates);
- ``others``: the remaining records (topics, configs, brokers, ACLs, ...) with their index in
  the batch, few in number, applied one by one.

``apply_staged`` then applies it to the image on the owner's thread in O(topics touched +
other records): the other records in batch order, then each staged partition map swapped in for
the topics still present.

Invariant (the caller's): the image is not mutated between ``stage_batch`` and
``apply_staged`` (the single-node controller has one operation in flight at a time, and nothing
else writes metadata on a single node). Reading the image from the worker while the event loop
also reads it is safe: neither mutates it.

Equivalence with applying the records one by one (``MetadataImage.apply`` + ``observe``), for
the batches the planners write: a batch never removes a topic it also creates or adds
partitions to after removing it (a RemoveTopicRecord drops the topic's staged map).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from protocol.codec import Message
from protocol.messages.metadata.partition_change_record import PartitionChangeRecord
from protocol.messages.metadata.partition_record import PartitionRecord
from protocol.messages.metadata.remove_topic_record import RemoveTopicRecord
from protocol.messages.metadata.topic_record import TopicRecord
from replication.metadata.delta import MetadataDelta
from replication.metadata.image import MetadataImage, PartitionImage, merge_partition

__all__ = ["StagedBatch", "apply_staged", "stage_batch"]

logger = logging.getLogger("samsa.replication.metadata")


@dataclass(frozen=True, slots=True)
class StagedBatch:
    records: Sequence[Message]
    delta: MetadataDelta
    partitions: dict[UUID, dict[int, PartitionImage]]
    others: tuple[tuple[int, Message], ...]  # (index in the batch, record)


def stage_batch(image: MetadataImage, records: Sequence[Message]) -> StagedBatch:
    """Stage ``records`` (one batch) against ``image`` as it is before the batch; any thread."""
    delta = MetadataDelta()
    partitions: dict[UUID, dict[int, PartitionImage]] = {}
    others: list[tuple[int, Message]] = []
    for index, record in enumerate(records):
        delta.observe(image, record)
        if isinstance(record, (PartitionRecord, PartitionChangeRecord)):
            _stage_partition(image, partitions, record)
            continue
        if isinstance(record, TopicRecord):
            partitions[record.topic_id] = {}  # a new topic starts with no partitions
        elif isinstance(record, RemoveTopicRecord):
            partitions.pop(record.topic_id, None)
        others.append((index, record))
    return StagedBatch(records, delta, partitions, tuple(others))


def _stage_partition(
    image: MetadataImage,
    partitions: dict[UUID, dict[int, PartitionImage]],
    record: PartitionRecord | PartitionChangeRecord,
) -> None:
    staged = partitions.get(record.topic_id)
    if staged is None:
        topic = image.topics_by_id.get(record.topic_id)
        if topic is None:
            if isinstance(record, PartitionRecord):
                logger.warning("PartitionRecord for unknown topic id %s ignored", record.topic_id)
            return
        staged = partitions[record.topic_id] = dict(topic.partitions)
    if isinstance(record, PartitionRecord):
        staged[record.partition_id] = PartitionImage.from_record(record)
        return
    old = staged.get(record.partition_id)
    if old is not None:
        staged[record.partition_id] = merge_partition(old, record)


def apply_staged(image: MetadataImage, staged: StagedBatch, base_offset: int) -> None:
    """Apply a staged batch whose first record is at ``base_offset``; the owner's thread."""
    for index, record in staged.others:
        image.apply(record, base_offset + index)
    for topic_id, partitions in staged.partitions.items():
        topic = image.topics_by_id.get(topic_id)
        if topic is not None:
            topic.partitions = partitions
    if staged.records:
        image.last_offset = base_offset + len(staged.records) - 1
