"""The transaction log: every transactional id's state in the compacted internal topic
``__transaction_state`` (Kafka's ``TransactionStateManager`` and ``TransactionLog``, one node).

The topic is created through the replica manager at the first write:
``transaction.state.log.num.partitions`` partitions (50), ``cleanup.policy=compact``,
``segment.bytes`` = ``transaction.state.log.segment.bytes``; it is internal, so Produce
refuses it. A transactional id lives in partition ``abs(java_hash(id)) % partitions`` (Kafka's
``Utils.abs(transactionalId.hashCode)``); the coordinator epoch of its transactions is that
partition's leader epoch.

Record layout, byte for byte what Kafka's ``TransactionLog`` writes (one RecordBatch v2 per
write, uncompressed, no producer id, CreateTime = now)::

    key    int16 0 | TransactionLogKey v0 {transactional_id: string}
    value  int16 0 | TransactionLogValue v0 {producer_id: int64, producer_epoch: int16,
           transaction_timeout_ms: int32, transaction_status: int8,
           transaction_partitions: nullable [{topic: string, partition_ids: [int32]}]
           (null in state Empty), transaction_last_update_timestamp_ms: int64,
           transaction_start_timestamp_ms: int64}
    null value: a tombstone (the id expired: state Dead)

Version 0 is what Kafka writes with transaction.version 0 (Samsa's level: no epoch bump per
transaction); version 1 (flexible, tagged previous/next producer id and client transaction
version) is read too. The schemas are Samsa's copies of Kafka's
(``protocol/schemas/transaction-coordinator/``).

Loading (``load``), synchronous at start-up before the listeners open on a single node: every
partition is replayed, the last record of an id wins, a tombstone removes it. In a cluster
each partition this node is elected leader of is replayed the same way (``load_partition``, in
the background: ``broker.transaction.service``). The previous producer id is
not in v0 values (Kafka reads it as -1 too).

Owned by the broker's event loop (``load`` runs before it serves).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from itertools import groupby
from typing import TYPE_CHECKING

from broker.commits import create_internal_topic, internal_partition_pending
from broker.group.offsets import partition_for
from broker.transaction.metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransit,
)
from protocol.errors import KafkaError, NotLeaderOrFollowerError
from protocol.messages.transaction_coordinator.transaction_log_key import TransactionLogKey
from protocol.messages.transaction_coordinator.transaction_log_value import (
    PartitionsSchema,
    TransactionLogValue,
)
from protocol.records import (
    BATCH_HEADER_SIZE,
    Record,
    decode_batch,
    encode_batch,
    read_batch_header,
)
from replication.partition import Partition
from storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from replication.append import ReplicaAppender
    from replication.controller.interface import Controller
    from replication.replica_manager import ReplicaManager
    from storage.clock import Clock

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TransactionStateLog",
    "decode_transaction_record",
    "transaction_log_key",
    "transaction_log_value",
]

logger = logging.getLogger("samsa.broker.transaction.state_log")

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
LOAD_READ_BYTES = 1 << 20
_VERSION = struct.Struct(">h")


def transaction_log_key(transactional_id: str) -> bytes:
    key = TransactionLogKey(transactional_id=transactional_id)
    return _VERSION.pack(KEY_VERSION) + key.encode(KEY_VERSION)


def transaction_log_value(transit: TxnTransit) -> bytes | None:
    """The value of ``transit``; None (a tombstone) for Dead."""
    if transit.state is TransactionState.DEAD:
        return None
    partitions = None
    if transit.state is not TransactionState.EMPTY:
        ordered = sorted(transit.partitions)
        partitions = [
            PartitionsSchema(topic=topic, partition_ids=[index for _, index in group])
            for topic, group in groupby(ordered, key=lambda tp: tp[0])
        ]
    value = TransactionLogValue(
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.timeout_ms,
        transaction_status=transit.state.value,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.last_update_timestamp_ms,
        transaction_start_timestamp_ms=transit.start_timestamp_ms,
    )
    return _VERSION.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


def decode_transaction_record(
    key: bytes, value: bytes | None
) -> tuple[str, TransactionMetadata | None] | None:
    """(transactional id, its state or None for a tombstone); None for an unknown key version."""
    key_version = _VERSION.unpack_from(key)[0]
    if key_version != KEY_VERSION:
        return None
    transactional_id = TransactionLogKey.decode(memoryview(key)[2:], key_version).transactional_id
    if value is None:
        return transactional_id, None
    decoded = TransactionLogValue.decode(memoryview(value)[2:], _VERSION.unpack_from(value)[0])
    state = TransactionState(decoded.transaction_status)
    partitions = set()
    if state is not TransactionState.EMPTY:
        partitions = {(p.topic, index) for p in decoded.transaction_partitions or ()
                      for index in p.partition_ids}
    return transactional_id, TransactionMetadata(
        transactional_id,
        producer_id=decoded.producer_id,
        previous_producer_id=decoded.previous_producer_id,
        producer_epoch=decoded.producer_epoch,
        timeout_ms=decoded.transaction_timeout_ms,
        state=state,
        partitions=partitions,
        start_timestamp_ms=decoded.transaction_start_timestamp_ms,
        last_update_timestamp_ms=decoded.transaction_last_update_timestamp_ms,
    )


class TransactionStateLog:
    """The ``TransactionLogWriter`` of the coordinator, over the replica manager."""

    def __init__(
        self, replica_manager: ReplicaManager, controller: Controller, *, num_partitions: int,
        segment_bytes: int, clock: Clock, appender: ReplicaAppender, replication_factor: int = 1,
        min_insync_replicas: int | None = None,
    ) -> None:
        self.replica_manager = replica_manager
        self.controller = controller
        self.appender = appender
        self.num_partitions = num_partitions
        self.segment_bytes = segment_bytes
        self.replication_factor = replication_factor  # 1 on a single node
        self.min_insync_replicas = min_insync_replicas  # transaction.state.log.min.isr (cluster)
        self.clock = clock

    def partition_for(self, transactional_id: str) -> int:
        """The existing topic's partition count wins over the config (as in Kafka)."""
        topic = self.replica_manager.topic_by_name(TRANSACTION_STATE_TOPIC)
        count = self.num_partitions if topic is None else len(topic.partitions)
        return partition_for(transactional_id, count)

    def coordinator_epoch(self, transactional_id: str) -> int:
        index = self.partition_for(transactional_id)
        partition = self.replica_manager.partition(TRANSACTION_STATE_TOPIC, index)
        return 0 if partition is None else partition.leader_epoch

    def append(self, transactional_id: str, transit: TxnTransit) -> None:
        partition = self._partition(self.partition_for(transactional_id))
        record = Record(offset=0, timestamp=self.clock.milliseconds(),
                        key=transaction_log_key(transactional_id),
                        value=transaction_log_value(transit))
        self.appender.append_one((partition.topic, partition.partition), encode_batch([record]),
                                 origin=AppendOrigin.COORDINATOR)

    def partition_pending(self, index: int) -> bool:
        """Whether ``{TRANSACTION_STATE_TOPIC}-<index>`` cannot take writes here yet: the topic is being
        created (asked for now when missing) or the partition's log is."""
        return internal_partition_pending(self.ensure_topic, self.replica_manager.creating,
                                          TRANSACTION_STATE_TOPIC, index)

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` unless it exists (raises the refusal, or
        COORDINATOR_NOT_AVAILABLE until the creation is committed)."""
        create_internal_topic(self.controller, TRANSACTION_STATE_TOPIC,
                              num_partitions=self.num_partitions, segment_bytes=self.segment_bytes,
                              replication_factor=self.replication_factor,
                              min_insync_replicas=self.min_insync_replicas)

    def _partition(self, index: int) -> Partition:
        self.ensure_topic()
        # Hosted, or NOT_LEADER_OR_FOLLOWER while its log is still being created after the
        # election (NOT_COORDINATOR to the client, which retries), as Kafka's append does.
        partition = self.replica_manager.partition_or_error(TRANSACTION_STATE_TOPIC, index)
        if partition.leader_id != self.replica_manager.node_id:  # it moved: NOT_COORDINATOR
            raise NotLeaderOrFollowerError(
                f"{TRANSACTION_STATE_TOPIC}-{index} is led by {partition.leader_id}")
        return partition

    def load(self) -> dict[str, TransactionMetadata]:
        """Every transactional id's last state (see the module docstring)."""
        topic = self.replica_manager.topic_by_name(TRANSACTION_STATE_TOPIC)
        loaded: dict[str, TransactionMetadata] = {}
        if topic is None:
            return loaded
        for index in sorted(topic.partitions):
            loaded.update(self.load_partition(index))
        logger.info("loaded %d transactional id(s) from %s", len(loaded), TRANSACTION_STATE_TOPIC)
        return loaded

    def load_partition(self, index: int) -> dict[str, TransactionMetadata]:
        """The last state of each id of one partition (blocking; any thread: nothing appends
        to a partition while it loads)."""
        loaded: dict[str, TransactionMetadata] = {}
        partition = self.replica_manager.partition(TRANSACTION_STATE_TOPIC, index)
        if partition is None:
            return loaded
        for record in _records_of(partition):
            decoded = None if record.key is None else decode_transaction_record(
                record.key, record.value)
            if decoded is not None:
                _replay(loaded, *decoded)
        return loaded


def _replay(
    loaded: dict[str, TransactionMetadata], transactional_id: str, txn: TransactionMetadata | None
) -> None:
    if txn is None:
        loaded.pop(transactional_id, None)
    else:
        loaded[transactional_id] = txn


def _records_of(partition: Partition) -> Iterator[Record]:
    """Every record of the partition's log, in offset order (control batches skipped)."""
    log = partition.log
    offset, end_offset = log.log_start_offset, log.log_end_offset
    while offset < end_offset:
        fetched = log.read(offset, LOAD_READ_BYTES, max_offset=end_offset)
        if fetched is None:
            return
        data = memoryview(fetched.read())
        position = 0
        while position + BATCH_HEADER_SIZE <= len(data):
            header = read_batch_header(data, position)
            if position + header.size_in_bytes > len(data):
                break
            batch = decode_batch(data, position)
            if not batch.is_control:
                yield from batch.records
            offset = batch.next_offset
            position += header.size_in_bytes
        if position == 0:
            raise KafkaError(f"{log.directory.name}: a batch at offset {offset} exceeds the read size")
