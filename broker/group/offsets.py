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

Keys of type 0 are read as offset commits too. Type 2 is a classic group's GroupMetadata
record (``broker.group.group_records``): written by ``store_group`` when a group completes a
rebalance or becomes Empty, tombstoned with the group's offsets by ``delete_group``, and
replayed at load into the group coordinator (the last record of a group wins). The
consumer-group records (3+) are skipped when loading.

Invariants: the cache changes only after the append returned, so a response never reports an
offset that is not in the log; one write (one group) is one batch in one partition, so a crash
keeps all of it or none. Loading is synchronous in ``Broker.startup``, before the listeners
open: there is no window in which COORDINATOR_LOAD_IN_PROGRESS would be answered.

Expiry (``offsets.retention.minutes``, checked every ``offsets.retention.check.interval.ms``):
an offset with an expire timestamp expires at it; any other expires once its group is Empty
(or unknown: a simple consumer) and its commit is older than the retention. Deviation: Kafka
counts from the time a group with a protocol type became Empty; the group state machine does
not record that yet, so the commit timestamp is the base for every group.

Owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.group.group_records import (
    decode_group_metadata_record,
    group_metadata_key,
    group_metadata_value,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.group_coordinator.group_metadata_value import GroupMetadataValue
from protocol.messages.group_coordinator.offset_commit_key import OffsetCommitKey
from protocol.messages.group_coordinator.offset_commit_value import OffsetCommitValue
from protocol.records import (
    BATCH_HEADER_SIZE,
    Record,
    decode_batch,
    encode_batch,
    read_batch_header,
)
from replication.partition import Partition

if TYPE_CHECKING:
    from broker.broker import Broker
    from broker.group.classic import ClassicGroup
    from broker.group.coordinator import GroupCoordinator
    from broker.replica_manager import ReplicaManager
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
LOAD_READ_BYTES = 1 << 20
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
    def __init__(self, replica_manager: ReplicaManager, *, config: OffsetsConfig, clock: Clock) -> None:
        self.replica_manager = replica_manager
        self.config = config
        self.clock = clock
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}

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
        entries = [(offset_commit_key(group_id, *tp), None) for tp in partitions]
        self._append(group_id, [*entries, (group_metadata_key(group_id), None)])
        self._offsets.pop(group_id, None)
        return len(partitions)

    def store_group(self, group: ClassicGroup) -> None:
        """Append the group's GroupMetadata record; raises the append's KafkaError."""
        value = group_metadata_value(group, current_state_timestamp_ms=self.clock.milliseconds())
        self._append(group.group_id, [(group_metadata_key(group.group_id), value)])

    def expire(self, now_ms: int, *, is_empty: Callable[[str], bool]) -> int:
        """Write tombstones for the expired offsets (see the module docstring); how many."""
        expired = 0
        for group_id in list(self._offsets):
            partitions = [tp for tp, offset in self._offsets[group_id].items()
                          if self._is_expired(offset, now_ms, group_id, is_empty)]
            if partitions:
                self._write_tombstones(group_id, partitions)
                expired += len(partitions)
                logger.info("expired %d offset(s) of group %s", len(partitions), group_id)
        return expired

    def _is_expired(
        self, offset: OffsetAndMetadata, now_ms: int, group_id: str, is_empty: Callable[[str], bool]
    ) -> bool:
        if offset.expire_timestamp_ms is not None:
            return now_ms >= offset.expire_timestamp_ms
        return now_ms - offset.commit_timestamp_ms >= self.config.retention_ms and is_empty(group_id)

    def _write_tombstones(self, group_id: str, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        self._append(group_id, [(offset_commit_key(group_id, *tp), None) for tp in partitions])
        cached = self._offsets.get(group_id, {})
        for tp in partitions:
            cached.pop(tp, None)
        if not cached:
            self._offsets.pop(group_id, None)

    def _append(self, group_id: str, entries: list[tuple[bytes, bytes | None]]) -> None:
        partition = self._partition(self.partition_for(group_id))
        now_ms = self.clock.milliseconds()
        records = [Record(offset=i, timestamp=now_ms, key=key, value=value)
                   for i, (key, value) in enumerate(entries)]
        _, waiters = partition.append_as_leader(encode_batch(records))
        for waiter in waiters:  # fetchers long-polling __consumer_offsets
            waiter()

    def _partition(self, index: int) -> Partition:
        self._ensure_topic()
        partition = self.replica_manager.partition(OFFSETS_TOPIC, index)
        if partition is None:
            raise KafkaError(f"{OFFSETS_TOPIC}-{index} is not hosted here")
        return partition

    def _ensure_topic(self) -> None:
        if self.replica_manager.topic_by_name(OFFSETS_TOPIC) is not None:
            return
        self.replica_manager.create_topic(
            OFFSETS_TOPIC,
            num_partitions=self.config.num_partitions,
            replication_factor=1,
            configs={"cleanup.policy": "compact", "segment.bytes": str(self.config.segment_bytes)},
        )

    def _num_partitions(self) -> int:
        """The existing topic's partition count wins over the config (as in Kafka)."""
        topic = self.replica_manager.topic_by_name(OFFSETS_TOPIC)
        return self.config.num_partitions if topic is None else len(topic.partitions)

    # ---- loading ---------------------------------------------------------------------

    def load(self, *, coordinator: GroupCoordinator | None = None) -> int:
        """Replay every ``__consumer_offsets`` partition into the cache, and the groups into
        ``coordinator``; records applied."""
        topic = self.replica_manager.topic_by_name(OFFSETS_TOPIC)
        if topic is None:
            return 0
        applied = 0
        groups: dict[str, GroupMetadataValue] = {}
        for index in sorted(topic.partitions):
            partition = self.replica_manager.partition(OFFSETS_TOPIC, index)
            if partition is not None:
                applied += self.replay(_records_of(partition), groups=groups)
        if coordinator is not None:
            for group_id, value in groups.items():
                coordinator.load_group(group_id, value)
        logger.info("loaded %d offset(s) of %d group(s) and %d group(s) from %s",
                    sum(map(len, self._offsets.values())), len(self._offsets), len(groups), OFFSETS_TOPIC)
        return applied

    def replay(self, records: Iterable[Record], *, groups: dict[str, GroupMetadataValue] | None = None) -> int:
        """Apply offset commits to the cache and GroupMetadata records to ``groups`` (the last
        value of each group; a tombstone removes it)."""
        applied = 0
        for record in records:
            if record.key is None:
                continue
            metadata = decode_group_metadata_record(record.key, record.value)
            if metadata is not None:
                if groups is not None:
                    _replay_group(groups, *metadata)
                applied += 1
                continue
            decoded = decode_offsets_record(record.key, record.value)
            if decoded is None:
                continue
            key, offset = decoded
            if offset is None:
                group = self._offsets.get(key.group, {})
                group.pop((key.topic, key.partition), None)
                if not group:
                    self._offsets.pop(key.group, None)
            else:
                self._offsets.setdefault(key.group, {})[(key.topic, key.partition)] = offset
            applied += 1
        return applied


def _replay_group(groups: dict[str, GroupMetadataValue], group_id: str, value: GroupMetadataValue | None) -> None:
    if value is None:
        groups.pop(group_id, None)
    else:
        groups[group_id] = value


def _records_of(partition: Partition) -> Iterator[Record]:
    """Every record of the partition's log, in offset order (control batches skipped)."""
    log = partition.log
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, LOAD_READ_BYTES)
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


def group_is_empty(broker: Broker, group_id: str) -> bool:
    """True when the group has no members: Empty, Dead, or unknown to the coordinator."""
    coordinator = getattr(broker, "group_coordinator", None)
    group = None if coordinator is None else coordinator.get_group(group_id)
    if group is None:
        return True
    return getattr(group.state, "value", None) in ("Empty", "Dead")


def expire_offsets(broker: Broker) -> int:
    """The scheduled expiry check (on the event loop)."""
    store = getattr(broker, "offset_store", None)
    if store is None:
        return 0
    return store.expire(broker.clock.milliseconds(), is_empty=lambda g: group_is_empty(broker, g))


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
