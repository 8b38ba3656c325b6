"""Writing end-transaction markers into partition logs (Kafka's
``TransactionMarkerChannelManager`` and the partition side of ``WriteTxnMarkers``, on one node).

For the partitions this node leads the coordinator does not send WriteTxnMarkers requests:
``PartitionMarkerWriter`` appends the COMMIT or ABORT control batch to each partition's log
through the broker's one append entry point
(``replication.append.ReplicaAppender.append_end_marker``), which answers the fetches waiting on
it. The same ``write_marker`` serves the WriteTxnMarkers API; a partition hosted here as a
follower answers NOT_LEADER_OR_FOLLOWER. In a cluster (``remote`` set) a partition led by
another broker gets its marker through a WriteTxnMarkers request to that leader
(``broker.transaction.remote_markers``): it is reported as still to write, and the coordinator
hears of it when the leader answers (``TransactionCoordinator.markers_written``).

A marker in a ``__consumer_offsets`` partition also ends the producer's pending
transactional offset commits there (Kafka's ``onTransactionCompleted``): committed ones
become the groups' committed offsets, aborted ones are dropped. While that partition is still
being loaded at start-up the marker is not written (NOT_LEADER_OR_FOLLOWER, retried later, as
Kafka maps a loading group coordinator), so the load never misses it.

What the coordinator does with each outcome (Kafka's ``TransactionMarkerRequestCompletionHandler``):
NONE → done; KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS → retried later;
UNKNOWN_TOPIC_OR_PARTITION (the topic was deleted: Kafka drops partitions without a leader),
INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED and anything else → given up (logged).

Owned by the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from broker.transaction.metadata import TopicPartition
from protocol.errors import ErrorCode, KafkaError
from replication.append import ReplicaAppender
from storage.producer_state import EndMarker

if TYPE_CHECKING:
    from broker.transaction.remote_markers import RemoteMarkerSender
    from replication.replica_manager import ReplicaManager

__all__ = ["RETRIABLE_MARKER_ERRORS", "PartitionMarkerWriter"]

logger = logging.getLogger("samsa.broker.transaction.markers")

OFFSETS_TOPIC = "__consumer_offsets"
NO_LEADER = -1
RETRIABLE_MARKER_ERRORS = frozenset({
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
})

# (offsets partition, producer id, commit): the offset store ends the pending offset commits.
OffsetsMarkerHook = Callable[[int, int, bool], None]


class PartitionMarkerWriter:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        appender: ReplicaAppender,
        *,
        on_offsets_marker: OffsetsMarkerHook | None = None,
        offsets_partition_loading: Callable[[int], bool] | None = None,
    ) -> None:
        self.replica_manager = replica_manager
        self.appender = appender
        self.on_offsets_marker = on_offsets_marker
        self.offsets_partition_loading = offsets_partition_loading
        self.remote: RemoteMarkerSender | None = None  # a cluster: markers for other leaders

    def write_markers(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
        partitions: Iterable[TopicPartition],
    ) -> set[TopicPartition]:
        """The coordinator's ``MarkerWriter``: the partitions whose marker must be retried."""
        marker = EndMarker(is_abort=not commit, coordinator_epoch=coordinator_epoch)
        retry: set[TopicPartition] = set()
        remote: dict[int, list[TopicPartition]] = {}
        for partition in partitions:
            leader_id = self._remote_leader(partition)
            if leader_id is not None:  # written when its leader answers (``remote``)
                remote.setdefault(leader_id, []).append(partition)
                retry.add(partition)
                continue
            error = self.write_marker(partition, producer_id, producer_epoch, marker)
            if error in RETRIABLE_MARKER_ERRORS:
                retry.add(partition)
            elif error is not ErrorCode.NONE:
                logger.warning("marker of producer %d for %s-%d given up: %s", producer_id,
                               *partition, error.name)
        for leader_id, led in remote.items():
            assert self.remote is not None
            self.remote.send(leader_id, producer_id, producer_epoch, coordinator_epoch, commit, led)
        return retry

    def _remote_leader(self, topic_partition: TopicPartition) -> int | None:
        """The partition's leader when it is another broker and a sender is set, else None."""
        if self.remote is None:
            return None
        topic = self.replica_manager.image.topics_by_name.get(topic_partition[0])
        partition = None if topic is None else topic.partitions.get(topic_partition[1])
        if partition is None or partition.leader in (NO_LEADER, self.replica_manager.node_id):
            return None
        return partition.leader

    def write_marker(
        self, topic_partition: TopicPartition, producer_id: int, producer_epoch: int,
        marker: EndMarker,
    ) -> ErrorCode:
        """Append one marker; its error code."""
        topic, index = topic_partition
        partition = self.replica_manager.partition(topic, index)
        if partition is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if partition.leader_id != self.replica_manager.node_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER  # a follower never takes a marker
        offsets = topic == OFFSETS_TOPIC
        if offsets and self.offsets_partition_loading is not None and (
            self.offsets_partition_loading(index)
        ):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        try:
            self.appender.append_end_marker(topic_partition, producer_id, producer_epoch, marker)
        except KafkaError as error:
            return ErrorCode(error.code)
        except Exception:
            logger.exception("writing the marker of producer %d to %s-%d failed", producer_id,
                             topic, index)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        if offsets and self.on_offsets_marker is not None:
            self.on_offsets_marker(index, producer_id, not marker.is_abort)
        return ErrorCode.NONE
