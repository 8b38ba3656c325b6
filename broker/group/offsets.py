"""Committed offsets, kept in the compacted ``__consumer_offsets`` log (Kafka's
OffsetMetadataManager and the offset parts of its GroupCoordinatorShard, on one node).

The topic is created through the replica manager on the first commit: ``offsets.topic.num.partitions``
partitions, ``cleanup.policy=compact``, ``segment.bytes`` = ``offsets.topic.segment.bytes``;
it is internal, so Produce refuses it. A group lives in partition
``abs(java_hash(group_id)) % partitions`` (Kafka's ``Utils.abs(groupId.hashCode())``).

Record layout, byte for byte what Kafka's ``GroupCoordinatorRecordHelpers`` writes (one
RecordBatch v2 per write, uncompressed, no producer id, CreateTime = now):

    key    int16 1 (OffsetCommitKey version, also the record type) | OffsetCommitKey v1
           {group: string, topic: string, partition: int32}
    value  int16 3 | OffsetCommitValue v3 {offset: int64, leader_epoch: int32,
           metadata: string, commit_timestamp: int64}, or, when the commit carried a
           retention time (OffsetCommit v2-v4), int16 1 | OffsetCommitValue v1 {offset,
           metadata, commit_timestamp, expire_timestamp: int64}
    null value: a tombstone (offset deleted, expired, or its group deleted)

Keys of type 0 are read as offset commits too. Types 11 and 15 are a share group's
(``broker.group.share_records``, ``store_share_group`` / ``delete_share_group``). Type 2 is a classic group's GroupMetadata
record (``broker.group.group_records``): written by ``store_group`` when a group completes a
rebalance or becomes Empty, tombstoned with the group's offsets by ``delete_group``, and
replayed at load into the group coordinator (the last record of a group wins). The
consumer-group records (3+) are skipped when loading.

Invariants: the cache changes only after the append returned, so a response never reports an
offset that is not in the log; one write (one group) is one batch in one partition, so a crash
keeps all of it or none. Loading happens in the background after the listeners open
(``broker.group.loading``: COORDINATOR_LOAD_IN_PROGRESS meanwhile); nothing writes to a
partition while it loads.

Expiry (``offsets.retention.minutes``, checked every ``offsets.retention.check.interval.ms``)
follows KIP-211 and deletes groups whose last offset expired: ``broker.group.expiry``.

Owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.commits import create_internal_topic, internal_partition_pending
from broker.group.expiry import cleanup_group_metadata
from broker.group.group_records import (
    group_metadata_key,
    group_metadata_value,
)
from broker.group.share_records import (
    InitializedTopics,
    share_group_epoch_record,
    share_group_partitions_record,
    share_group_tombstones,
)
from broker.group.transactional_offsets import PendingTransactionalOffsets
from protocol.errors import (
    ErrorCode,
    KafkaError,
    NotLeaderOrFollowerError,
)
from protocol.messages.group_coordinator.offset_commit_key import OffsetCommitKey
from protocol.messages.group_coordinator.offset_commit_value import OffsetCommitValue
from protocol.records import (
    Record,
    encode_batch,
)
from replication.append import ReplicaAppender, verified
from replication.partition import Partition
from storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.group.classic import ClassicGroup
    from replication.controller.interface import Controller
    from replication.replica_manager import ReplicaManager
    from storage.clock import Clock

__all__ = [
    "OFFSETS_TOPIC",
    "OffsetAndMetadata",
    "OffsetStore",
    "OffsetsConfig",
    "coordinator_error_code",
    "decode_offsets_record",
    "expire_offsets",
    "group_is_dead",
    "group_is_empty",
    "java_string_hash",
    "offset_commit_key",
    "offset_commit_value",
    "partition_for",
    "validate_offset_commit",
]

logger = logging.getLogger("samsa.broker.group.offsets")

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_COMMIT_KEY_VERSION = 1  # Kafka writes type 1; type 0 is the pre-0.10 layout, same bytes
VALUE_VERSION_WITH_EXPIRE = 1
VALUE_VERSION = 3  # Kafka's highest non-flexible version (MetadataVersion.offsetCommitValueVersion)
_VERSION = struct.Struct(">h")

TopicPartition = tuple[str, int]


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, int32."""
    units = text.encode("utf-16-be")
    value = 0
    for (unit,) in struct.iter_unpack(">H", units):
        value = (31 * value + unit) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % numPartitions`` (abs(MIN_VALUE) is 0 there)."""
    value = java_string_hash(group_id)
    return (0 if value == -(1 << 31) else abs(value)) % num_partitions


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    committed_offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int | None = None  # only from OffsetCommit v2-v4 with a retention time


@dataclass(frozen=True, slots=True)
class OffsetsConfig:
    num_partitions: int = 50
    segment_bytes: int = 104857600
    retention_ms: int = 10080 * 60_000
    metadata_max_bytes: int = 4096
    # offsets.topic.replication.factor in a cluster; a single node creates the topic with 1
    replication_factor: int = 1


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    key = OffsetCommitKey(group=group_id, topic=topic, partition=partition)
    return _VERSION.pack(OFFSET_COMMIT_KEY_VERSION) + key.encode(OFFSET_COMMIT_KEY_VERSION)


def offset_commit_value(offset: OffsetAndMetadata) -> bytes:
    version = VALUE_VERSION if offset.expire_timestamp_ms is None else VALUE_VERSION_WITH_EXPIRE
    value = OffsetCommitValue(
        offset=offset.committed_offset,
        leader_epoch=offset.leader_epoch,
        metadata=offset.metadata,
        commit_timestamp=offset.commit_timestamp_ms,
        expire_timestamp=-1 if offset.expire_timestamp_ms is None else offset.expire_timestamp_ms,
    )
    return _VERSION.pack(version) + value.encode(version)


def decode_offsets_record(
    key: bytes, value: bytes | None
) -> tuple[OffsetCommitKey, OffsetAndMetadata | None] | None:
    """An offset-commit record (value None: a tombstone); None for other record types."""
    key_version = _VERSION.unpack_from(key)[0]
    if key_version not in (0, OFFSET_COMMIT_KEY_VERSION):
        return None
    commit_key = OffsetCommitKey.decode(memoryview(key)[2:], key_version)
    if value is None:
        return commit_key, None
    decoded = OffsetCommitValue.decode(memoryview(value)[2:], _VERSION.unpack_from(value)[0])
    return commit_key, OffsetAndMetadata(
        committed_offset=decoded.offset,
        leader_epoch=decoded.leader_epoch,
        metadata=decoded.metadata,
        commit_timestamp_ms=decoded.commit_timestamp,
        expire_timestamp_ms=None if decoded.expire_timestamp < 0 else decoded.expire_timestamp,
    )


class OffsetStore:
    def __init__(
        self, replica_manager: ReplicaManager, controller: Controller, *, config: OffsetsConfig,
        clock: Clock, appender: ReplicaAppender,
    ) -> None:
        self.replica_manager = replica_manager
        self.controller = controller
        self.appender = appender
        self.config = config
        self.clock = clock
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        # Offsets committed in transactions not yet ended (``broker.group.transactional_offsets``).
        self.transactional = PendingTransactionalOffsets()

    # ---- reads -----------------------------------------------------------------------

    def fetch(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group_id, {}).get((topic, partition))

    def group_offsets(self, group_id: str) -> Mapping[TopicPartition, OffsetAndMetadata]:
        return dict(self._offsets.get(group_id, {}))

    def has_group(self, group_id: str) -> bool:
        return group_id in self._offsets

    def groups(self) -> list[str]:
        return sorted(self._offsets)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self._num_partitions())

    # ---- writes ----------------------------------------------------------------------

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Append the offsets as one batch, then cache them; raises the append's KafkaError."""
        if not offsets:
            return
        self._append(group_id, [(offset_commit_key(group_id, *tp), offset_commit_value(o))
                                for tp, o in offsets.items()])
        cached = self._offsets.setdefault(group_id, {})
        cached.update(offsets)

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> int:
        """Tombstones for the partitions that have an offset; the number deleted."""
        present = [tp for tp in dict.fromkeys(partitions) if self.fetch(group_id, *tp) is not None]
        self._write_tombstones(group_id, present)
        return len(present)

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups: tombstones for every offset of the group and for its GroupMetadata
        record, in one batch (Kafka's createGroupTombstoneRecords); the offsets deleted."""
        partitions = list(self._offsets.get(group_id, {}))
        pending = sorted(self.transactional.partitions_of(group_id) - set(partitions))
        entries = [(offset_commit_key(group_id, *tp), None) for tp in partitions + pending]
        self._append(group_id, [*entries, (group_metadata_key(group_id), None)])
        self._offsets.pop(group_id, None)
        self.transactional.forget(group_id)  # pending transactional offsets go too (Kafka's)
        return len(partitions)

    def store_group(self, group: ClassicGroup) -> None:
        """Append the group's GroupMetadata record; raises the append's KafkaError."""
        value = group_metadata_value(group)
        self._append(group.group_id, [(group_metadata_key(group.group_id), value)])

    def store_share_group(self, group_id: str, epoch: int, initialized: InitializedTopics | None) -> None:
        """A share group's epoch record, and its partitions record unless None, in one batch
        (``broker.group.share_records``); raises the append's KafkaError."""
        entries: list[tuple[bytes, bytes | None]] = [share_group_epoch_record(group_id, epoch)]
        if initialized is not None:
            entries.append(share_group_partitions_record(group_id, initialized))
        self._append(group_id, entries)

    def delete_share_group(self, group_id: str) -> None:
        self._append(group_id, list(share_group_tombstones(group_id)))

    def _write_tombstones(self, group_id: str, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        self._append(group_id, [(offset_commit_key(group_id, *tp), None) for tp in partitions])
        self.transactional.forget(group_id, partitions)
        cached = self._offsets.get(group_id, {})
        for tp in partitions:
            cached.pop(tp, None)
        if not cached:
            self._offsets.pop(group_id, None)

    def _append(
        self, group_id: str, entries: list[tuple[bytes, bytes | None]],
        *, producer: tuple[int, int] | None = None,
    ) -> None:
        partition = self._partition(self.partition_for(group_id))
        now_ms = self.clock.milliseconds()
        records = [Record(offset=i, timestamp=now_ms, key=key, value=value)
                   for i, (key, value) in enumerate(entries)]
        if producer is None:
            batch = encode_batch(records)
        else:  # a transactional offset commit: the producer's id and epoch, no sequence
            batch = encode_batch(records, producer_id=producer[0], producer_epoch=producer[1],
                                 is_transactional=True)
        self.appender.append_one((partition.topic, partition.partition), batch,
                                 origin=AppendOrigin.COORDINATOR, verify=verified)

    def _partition(self, index: int) -> Partition:
        self.ensure_topic()
        # Hosted, or NOT_LEADER_OR_FOLLOWER while its log is still being created after the
        # election (NOT_COORDINATOR to the client, which retries), as Kafka's append does.
        partition = self.replica_manager.partition_or_error(OFFSETS_TOPIC, index)
        if partition.leader_id != self.replica_manager.node_id:  # it moved: NOT_COORDINATOR
            raise NotLeaderOrFollowerError(f"{OFFSETS_TOPIC}-{index} is led by {partition.leader_id}")
        return partition

    def partition_pending(self, index: int) -> bool:
        """Whether ``{OFFSETS_TOPIC}-<index>`` cannot take writes here yet: the topic is being
        created (asked for now when missing) or the partition's log is."""
        return internal_partition_pending(self.ensure_topic, self.replica_manager.creating,
                                          OFFSETS_TOPIC, index)

    def ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` unless it exists (raises the refusal, or
        COORDINATOR_NOT_AVAILABLE until the creation is committed)."""
        create_internal_topic(self.controller, OFFSETS_TOPIC,
                              num_partitions=self.config.num_partitions,
                              segment_bytes=self.config.segment_bytes,
                              replication_factor=self.config.replication_factor)

    def _num_partitions(self) -> int:
        """The existing topic's partition count wins over the config (as in Kafka)."""
        topic = self.replica_manager.topic_by_name(OFFSETS_TOPIC)
        return self.config.num_partitions if topic is None else len(topic.partitions)

    # ---- transactional offsets (``broker.group.transactional_offsets``) ----------------------

    def commit_transactional(
        self, group_id: str, producer_id: int, producer_epoch: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> None:
        """TxnOffsetCommit: append one transactional batch; the offsets stay pending until the
        transaction's marker (``complete_transaction``). Raises the append's KafkaError."""
        if not offsets:
            return
        self._append(group_id, [(offset_commit_key(group_id, *tp), offset_commit_value(o))
                                for tp, o in offsets.items()], producer=(producer_id, producer_epoch))
        self.transactional.add(producer_id, group_id, offsets)

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker was written to ``__consumer_offsets-<partition>``: the producer's pending
        offsets of that partition's groups become committed (or are dropped)."""
        ended = self.transactional.complete(
            producer_id, commit, lambda group_id: self.partition_for(group_id) == partition)
        for group_id, offsets in ended.items():
            self._offsets.setdefault(group_id, {}).update(offsets)

    # ---- loading (``broker.group.loading`` reads a partition; this takes its offsets) --------

    def add_loaded(self, offsets: Mapping[str, dict[TopicPartition, OffsetAndMetadata]]) -> None:
        """A loaded partition's offsets, by group (its groups live in that partition only)."""
        self._offsets.update(offsets)

    def unload(self, partition: int) -> None:
        """``__consumer_offsets-<partition>`` is led elsewhere now: forget its groups' offsets,
        committed and pending (the new coordinator loads them from its log)."""
        for group_id in [g for g in self._offsets if self.partition_for(g) == partition]:
            del self._offsets[group_id]
        for group_id in self.transactional.group_ids():
            if self.partition_for(group_id) == partition:
                self.transactional.forget(group_id)

    def hosted_partitions(self) -> list[int]:
        """The ``__consumer_offsets`` partitions hosted here (none before the first commit)."""
        topic = self.replica_manager.topic_by_name(OFFSETS_TOPIC)
        if topic is None:
            return []
        return [index for index in sorted(topic.partitions)
                if self.replica_manager.partition(OFFSETS_TOPIC, index) is not None]

def group_is_empty(broker: Broker, group_id: str) -> bool:
    """True when the group has no members: Empty, Dead, or unknown to the coordinator."""
    coordinator = getattr(broker, "group_coordinator", None)
    group = None if coordinator is None else coordinator.get_group(group_id)
    if group is None:
        return True
    return getattr(group.state, "value", None) in ("Empty", "Dead")


def expire_offsets(broker: Broker) -> int:
    """The scheduled expiry check (on the event loop): ``broker.group.expiry``; offsets expired."""
    store = getattr(broker, "offset_store", None)
    if store is None:
        return 0
    coordinator = getattr(broker, "group_coordinator", None)
    return cleanup_group_metadata(store, coordinator, broker.clock.milliseconds()).expired_offsets


def coordinator_error_code(error: KafkaError) -> int:
    """Kafka's CoordinatorOperationExceptionHelper: how a failed append reaches the client."""
    if error.code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                      ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error.code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                      ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error.code


def validate_offset_commit(
    broker: Broker, group_id: str, *, generation_id: int, member_id: str,
    group_instance_id: str | None, api_version: int,
) -> ErrorCode | None:
    """Kafka's OffsetMetadataManager.validateOffsetCommit: None when the commit may be stored.

    No group: generation < 0 is a simple consumer or the admin client, and creates an Empty
    group (when a coordinator runs); otherwise GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION
    before."""
    coordinator = getattr(broker, "group_coordinator", None)
    group = None if coordinator is None else coordinator.get_group(group_id)
    if coordinator is not None and group_id in coordinator.share.groups:
        return ErrorCode.GROUP_ID_NOT_FOUND  # Kafka's ShareGroup.validateOffsetCommit
    if group is None:
        if generation_id < 0:
            if coordinator is not None:
                coordinator.get_or_create_group(group_id)
            return None
        return ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
    error: ErrorCode | None = group.validate_offset_commit(
        member_id, generation_id, group_instance_id, now_ms=broker.clock.monotonic_ms()
    )
    return error


def group_is_dead(broker: Broker, group_id: str) -> bool:
    coordinator = getattr(broker, "group_coordinator", None)
    group = None if coordinator is None else coordinator.get_group(group_id)
    return group is not None and getattr(group.state, "value", None) == "Dead"
