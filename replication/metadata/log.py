"""``__cluster_metadata-0``: the metadata log, a Samsa ``Log`` of KRaft-framed records.

Layout on disk: ``<first log dir>/__cluster_metadata-0/``, ordinary segments. Each batch is a
RecordBatch v2 whose records have a null key and a value framed by
``replication.metadata.records`` (frame version 1, record type, version, record). One batch
holds the records of one operation, so an operation is applied whole or not at all.

Durability: ``append`` fsyncs before it returns, as the KRaft controller commits a batch only
once it is flushed; an operation is visible in the image only after that.

On a single node this class writes the log directly; the Raft work will replace ``append`` by
"propose to the quorum" and keep ``replay``. Owned by the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from protocol.codec import Message
from protocol.records import Record, decode_batch, encode_batch
from replication.metadata.image import MetadataImage
from replication.metadata.records import decode_metadata_record, encode_metadata_record
from storage.clock import Clock
from storage.log import Log

__all__ = ["METADATA_PARTITION", "METADATA_TOPIC", "MetadataLog"]

logger = logging.getLogger("samsa.replication.metadata")

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0


class MetadataLog:
    def __init__(self, log: Log, *, clock: Clock, leader_epoch: int = 0) -> None:
        self.log = log
        self.clock = clock
        self.leader_epoch = leader_epoch
        self.image = MetadataImage()

    def replay(self) -> MetadataImage:
        """Rebuild the image from every batch of the log (start-up)."""
        image = MetadataImage()
        count = 0
        for segment, position, header in list(self.log.batches(0)):
            batch = decode_batch(segment.read_batch_bytes(position, header))
            for record in batch.records:
                if record.value is None:
                    continue
                message, _ = decode_metadata_record(record.value)
                image.apply(message, record.offset)
                count += 1
        self.image = image
        logger.info(
            "replayed %d metadata records: %d topics", count, len(image.topics_by_name)
        )
        return image

    def append(self, messages: Sequence[Message]) -> int:
        """Write ``messages`` as one batch, fsync, then apply them; returns the last offset."""
        now = self.clock.milliseconds()
        records = [
            Record(offset=index, timestamp=now, key=None, value=encode_metadata_record(message))
            for index, message in enumerate(messages)
        ]
        result = self.log.append_as_leader(encode_batch(records), leader_epoch=self.leader_epoch)
        self.log.flush()
        for offset, message in enumerate(messages, start=result.first_offset):
            self.image.apply(message, offset)
        return result.last_offset
