"""Building and reading the KRaft messages for the one partition ``__cluster_metadata-0``.

The generated classes of ``protocol.messages`` at their latest versions' fields; nothing is
encoded here (the daemon's shell does that). Every request names the partition once; a
response carries the sender's view of the leader (id, or -1, and epoch) so the receiver learns
of a newer epoch from any answer. A request with another cluster id gets a response whose
top-level error is INCONSISTENT_CLUSTER_ID and no partitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from protocol.codec import Message
from protocol.messages import (
    begin_quorum_epoch_request as bqe_req,
)
from protocol.messages import (
    begin_quorum_epoch_response as bqe_resp,
)
from protocol.messages import (
    end_quorum_epoch_request as eqe_req,
)
from protocol.messages import (
    end_quorum_epoch_response as eqe_resp,
)
from protocol.messages import (
    fetch_request as fetch_req,
)
from protocol.messages import (
    fetch_response as fetch_resp,
)
from protocol.messages import (
    fetch_snapshot_request as snap_req,
)
from protocol.messages import (
    fetch_snapshot_response as snap_resp,
)
from protocol.messages import (
    vote_request as vote_req,
)
from protocol.messages import (
    vote_response as vote_resp,
)
from replication.raft.log import SnapshotId

__all__ = ["METADATA_PARTITION", "METADATA_TOPIC", "POSITION_OUT_OF_RANGE", "LeaderView"]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
# Kafka's Uuid.METADATA_TOPIC_ID: Fetch v13+ names topics by id only.
METADATA_TOPIC_ID = UUID(int=1)
NO_LEADER = -1
# Kafka's POSITION_OUT_OF_RANGE (99, FetchSnapshot) is missing from protocol.errors.ErrorCode.
POSITION_OUT_OF_RANGE = 99


@dataclass(frozen=True, slots=True)
class LeaderView:
    """What a response says about the sender's quorum: its error, leader and epoch."""

    error_code: int
    leader_id: int | None
    epoch: int


def _leader_field(leader_id: int | None) -> int:
    return NO_LEADER if leader_id is None else leader_id


def _leader_from(field: int) -> int | None:
    return None if field < 0 else field


def top_level_error(message: Message) -> int:
    return int(getattr(message, "error_code", 0))


# --- Vote -------------------------------------------------------------------------------


def vote_request(
    cluster_id: str | None, *, epoch: int, candidate_id: int, voter_id: int,
    last_epoch: int, last_offset: int,
) -> vote_req.VoteRequest:  # fmt: skip
    partition = vote_req.PartitionData(
        partition_index=METADATA_PARTITION, candidate_epoch=epoch, candidate_id=candidate_id,
        last_offset_epoch=last_epoch, last_offset=last_offset,
    )  # fmt: skip
    return vote_req.VoteRequest(
        cluster_id=cluster_id, voter_id=voter_id,
        topics=[vote_req.TopicData(METADATA_TOPIC, [partition])],
    )  # fmt: skip


def vote_response(
    error: int, *, leader_id: int | None, epoch: int, granted: bool
) -> vote_resp.VoteResponse:
    partition = vote_resp.PartitionData(
        partition_index=METADATA_PARTITION, error_code=error,
        leader_id=_leader_field(leader_id), leader_epoch=epoch, vote_granted=granted,
    )  # fmt: skip
    return vote_resp.VoteResponse(topics=[vote_resp.TopicData(METADATA_TOPIC, [partition])])


# --- BeginQuorumEpoch / EndQuorumEpoch --------------------------------------------------


def begin_quorum_epoch_request(
    cluster_id: str | None, *, epoch: int, leader_id: int, voter_id: int
) -> bqe_req.BeginQuorumEpochRequest:
    partition = bqe_req.PartitionData(
        partition_index=METADATA_PARTITION, leader_id=leader_id, leader_epoch=epoch
    )
    return bqe_req.BeginQuorumEpochRequest(
        cluster_id=cluster_id, voter_id=voter_id,
        topics=[bqe_req.TopicData(METADATA_TOPIC, [partition])],
    )  # fmt: skip


def begin_quorum_epoch_response(
    error: int, *, leader_id: int | None, epoch: int
) -> bqe_resp.BeginQuorumEpochResponse:
    partition = bqe_resp.PartitionData(
        partition_index=METADATA_PARTITION, error_code=error,
        leader_id=_leader_field(leader_id), leader_epoch=epoch,
    )  # fmt: skip
    return bqe_resp.BeginQuorumEpochResponse(
        topics=[bqe_resp.TopicData(METADATA_TOPIC, [partition])]
    )


def end_quorum_epoch_request(
    cluster_id: str | None, *, epoch: int, leader_id: int, preferred_successors: list[int]
) -> eqe_req.EndQuorumEpochRequest:
    partition = eqe_req.PartitionData(
        partition_index=METADATA_PARTITION, leader_id=leader_id, leader_epoch=epoch,
        preferred_successors=list(preferred_successors),
        preferred_candidates=[eqe_req.ReplicaInfo(candidate_id=i) for i in preferred_successors],
    )  # fmt: skip
    return eqe_req.EndQuorumEpochRequest(
        cluster_id=cluster_id, topics=[eqe_req.TopicData(METADATA_TOPIC, [partition])]
    )


def preferred_successors(partition: eqe_req.PartitionData) -> list[int]:
    """v1 names candidates (``preferred_candidates``), v0 ids (``preferred_successors``)."""
    if partition.preferred_candidates:
        return [info.candidate_id for info in partition.preferred_candidates]
    return list(partition.preferred_successors)


def end_quorum_epoch_response(
    error: int, *, leader_id: int | None, epoch: int
) -> eqe_resp.EndQuorumEpochResponse:
    partition = eqe_resp.PartitionData(
        partition_index=METADATA_PARTITION, error_code=error,
        leader_id=_leader_field(leader_id), leader_epoch=epoch,
    )  # fmt: skip
    return eqe_resp.EndQuorumEpochResponse(topics=[eqe_resp.TopicData(METADATA_TOPIC, [partition])])


# --- Fetch ------------------------------------------------------------------------------


def fetch_request(
    cluster_id: str | None, *, replica_id: int, epoch: int, fetch_offset: int,
    last_fetched_epoch: int, max_wait_ms: int, max_bytes: int,
) -> fetch_req.FetchRequest:  # fmt: skip
    partition = fetch_req.FetchPartition(
        partition=METADATA_PARTITION, current_leader_epoch=epoch, fetch_offset=fetch_offset,
        last_fetched_epoch=last_fetched_epoch, partition_max_bytes=max_bytes,
    )  # fmt: skip
    return fetch_req.FetchRequest(
        # v15+ carries the fetcher only in replica_state (replica_id must stay -1 there);
        # a shell encoding an older version moves it to replica_id
        cluster_id=cluster_id, replica_state=fetch_req.ReplicaState(replica_id=replica_id),
        max_wait_ms=max_wait_ms,
        min_bytes=1, max_bytes=max_bytes,
        topics=[fetch_req.FetchTopic(METADATA_TOPIC, METADATA_TOPIC_ID, [partition])],
    )  # fmt: skip


def fetch_replica_id(request: fetch_req.FetchRequest) -> int:
    """v15+ puts the fetcher in ``replica_state``; earlier versions in ``replica_id``."""
    if request.replica_state.replica_id >= 0:
        return request.replica_state.replica_id
    return request.replica_id


def fetch_response(
    error: int, *, leader_id: int | None, epoch: int, high_watermark: int | None = None,
    log_start_offset: int = -1, records: bytes | None = None,
    diverging: tuple[int, int] | None = None, snapshot_id: SnapshotId | None = None,
) -> fetch_resp.FetchResponse:  # fmt: skip
    """``diverging`` is (epoch, end offset); ``high_watermark`` None is sent as -1."""
    partition = fetch_resp.PartitionData(
        partition_index=METADATA_PARTITION, error_code=error,
        high_watermark=-1 if high_watermark is None else high_watermark,
        log_start_offset=log_start_offset, records=records,
        current_leader=fetch_resp.LeaderIdAndEpoch(_leader_field(leader_id), epoch),
    )  # fmt: skip
    if diverging is not None:
        partition.diverging_epoch = fetch_resp.EpochEndOffset(diverging[0], diverging[1])
    if snapshot_id is not None:
        partition.snapshot_id = fetch_resp.SnapshotId(snapshot_id.end_offset, snapshot_id.epoch)
    return fetch_resp.FetchResponse(
        responses=[
            fetch_resp.FetchableTopicResponse(METADATA_TOPIC, METADATA_TOPIC_ID, [partition])
        ]
    )


# --- FetchSnapshot ----------------------------------------------------------------------


def fetch_snapshot_request(
    cluster_id: str | None, *, replica_id: int, epoch: int, snapshot_id: SnapshotId,
    position: int, max_bytes: int,
) -> snap_req.FetchSnapshotRequest:  # fmt: skip
    partition = snap_req.PartitionSnapshot(
        partition=METADATA_PARTITION, current_leader_epoch=epoch,
        snapshot_id=snap_req.SnapshotId(snapshot_id.end_offset, snapshot_id.epoch),
        position=position,
    )  # fmt: skip
    return snap_req.FetchSnapshotRequest(
        cluster_id=cluster_id, replica_id=replica_id, max_bytes=max_bytes,
        topics=[snap_req.TopicSnapshot(METADATA_TOPIC, [partition])],
    )  # fmt: skip


def fetch_snapshot_response(
    error: int, *, leader_id: int | None, epoch: int, snapshot_id: SnapshotId | None = None,
    size: int = 0, position: int = 0, chunk: bytes | None = None,
) -> snap_resp.FetchSnapshotResponse:  # fmt: skip
    partition = snap_resp.PartitionSnapshot(
        index=METADATA_PARTITION, error_code=error,
        current_leader=snap_resp.LeaderIdAndEpoch(_leader_field(leader_id), epoch),
        size=size, position=position, unaligned_records=b"" if chunk is None else chunk,
    )  # fmt: skip
    if snapshot_id is not None:
        partition.snapshot_id = snap_resp.SnapshotId(snapshot_id.end_offset, snapshot_id.epoch)
    return snap_resp.FetchSnapshotResponse(
        topics=[snap_resp.TopicSnapshot(METADATA_TOPIC, [partition])]
    )


def top_level_error_response(message: Message, code: int) -> Message:
    """The response to request ``message`` with a top-level error and no partitions
    (INCONSISTENT_CLUSTER_ID for another cluster's request, INVALID_REQUEST without our
    partition)."""
    responses: dict[type, type] = {
        vote_req.VoteRequest: vote_resp.VoteResponse,
        bqe_req.BeginQuorumEpochRequest: bqe_resp.BeginQuorumEpochResponse,
        eqe_req.EndQuorumEpochRequest: eqe_resp.EndQuorumEpochResponse,
        fetch_req.FetchRequest: fetch_resp.FetchResponse,
        snap_req.FetchSnapshotRequest: snap_resp.FetchSnapshotResponse,
    }
    response: Message = responses[type(message)]()
    response.error_code = code  # type: ignore[attr-defined]
    return response


def only_partition(message: Message) -> Any:
    """The ``__cluster_metadata-0`` entry of any of these messages, or None if absent."""
    topics = getattr(message, "topics", None)
    if topics is None:
        topics = getattr(message, "responses", [])
    for topic in topics:
        name = getattr(topic, "topic_name", None) or getattr(topic, "topic", None)
        name = name or getattr(topic, "name", None)
        if name != METADATA_TOPIC and getattr(topic, "topic_id", None) != METADATA_TOPIC_ID:
            continue
        for partition in topic.partitions:
            index = _partition_index(partition)
            if index == METADATA_PARTITION:
                return partition
    return None


def _partition_index(partition: object) -> int:
    for name in ("partition_index", "partition", "index"):
        value = getattr(partition, name, None)
        if value is not None:
            return int(value)
    return -1


def leader_view(partition: Any) -> LeaderView:
    """(error, leader, epoch) from any response partition of the five APIs."""
    error = int(partition.error_code)
    current = getattr(partition, "current_leader", None)
    if current is not None:
        return LeaderView(error, _leader_from(current.leader_id), current.leader_epoch)
    return LeaderView(error, _leader_from(partition.leader_id), partition.leader_epoch)


def response_partition(message: Message | None) -> Any:
    """The metadata partition of a response; None for a timeout (``message`` None), a
    top-level error, or a response without it."""
    if message is None or top_level_error(message) != 0:
        return None
    return only_partition(message)
