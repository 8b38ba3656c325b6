"""Fetch and FetchSnapshot for ``RaftNode``: the leader serving them, followers sending them.

Leader side (Kafka's ``handleFetchRequest`` / ``tryCompleteFetchRequest``):
- epoch checked first (FENCED_LEADER_EPOCH below ours, UNKNOWN_LEADER_EPOCH above), then the
  role (NOT_LEADER_OR_FOLLOWER); the answer always names our leader and epoch;
- the fetch position is validated as Kafka's ``validateOffsetAndEpoch``: below the log start
  (or at it with another epoch, or an epoch older than the oldest snapshot) -> ``snapshot_id``
  of the latest snapshot; an epoch/offset this log does not have -> ``diverging_epoch``;
  otherwise the replica's end offset is recorded (which may advance the high watermark);
- a valid Fetch with nothing to return, whose replica already knows our high watermark, is
  held up to its max_wait_ms in ``LeaderState.held_fetches`` and answered on new data, a new
  high watermark, leadership ending, or its deadline.

Follower side: one request in flight; success moves the fetch timer, appends + flushes,
truncates on ``diverging_epoch``, switches to FetchSnapshot on ``snapshot_id``; errors retry
after retry_backoff_ms. Observers without a leader ask a random bootstrap voter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.codec import Message
from protocol.errors import ErrorCode, SnapshotNotFoundError
from replication.raft import messages
from replication.raft.errors import RaftLogError
from replication.raft.follower import FollowerState
from replication.raft.leader import HeldFetch, LeaderState
from replication.raft.log import OffsetAndEpoch, RaftLog, SnapshotId, validate_offset_and_epoch
from replication.raft.unattached import UnattachedState

if TYPE_CHECKING:
    from replication.raft.node import RaftNode, RaftRequest

_NONE = int(ErrorCode.NONE)


# --- leader: serving Fetch ---------------------------------------------------------------


def handle_fetch(node: RaftNode, now_ms: int, request: RaftRequest) -> None:
    response = fetch_answer(node, now_ms, request, completing=False)
    if response is not None:
        node.respond(request, response)


def fetch_answer(
    node: RaftNode, now_ms: int, request: RaftRequest, *, completing: bool
) -> Message | None:
    """The response to a Fetch now, or None when it is held (``completing`` never holds and
    does not count the fetch again)."""
    fetch: Any = request.message
    partition = messages.only_partition(fetch)
    error = node.leader_only_error(partition.current_leader_epoch)
    if error == _NONE and (partition.fetch_offset < 0 or partition.last_fetched_epoch < 0):
        error = int(ErrorCode.INVALID_REQUEST)
    if error != _NONE:
        return messages.fetch_response(error, leader_id=node.leader_id, epoch=node.epoch)
    state = node.state
    assert isinstance(state, LeaderState)
    log = node.log
    replica_id = messages.fetch_replica_id(fetch)
    if not completing:
        state.record_voter_contact(replica_id, now_ms, node.config)
    kind, position = validate_offset_and_epoch(
        log, partition.fetch_offset, partition.last_fetched_epoch
    )
    answer = _answer_builder(node, state)
    if kind == "snapshot":
        assert position is not None
        return answer(snapshot_id=SnapshotId(position.offset, position.epoch))
    if kind == "diverging":
        assert position is not None
        return answer(diverging=(position.epoch, position.offset))
    if (
        not completing
        and replica_id >= 0
        and state.update_replica(replica_id, partition.fetch_offset, log.end_offset, now_ms)
    ):
        on_leader_high_watermark(node, now_ms, state)
    max_bytes = min(partition.partition_max_bytes or node.config.fetch_max_bytes, fetch.max_bytes,
                    node.config.fetch_max_bytes)  # fmt: skip
    records = b""
    if partition.fetch_offset < log.end_offset:
        records = log.read(partition.fetch_offset, max_bytes)
    replica = state.replicas.get(replica_id)
    known = replica.high_watermark_sent if replica is not None else -1
    hw = state.high_watermark
    if not records and not completing and fetch.max_wait_ms > 0 and (hw is None or known >= hw):
        _hold(node, now_ms, state, replica_id, request, fetch.max_wait_ms)
        return None
    if replica is not None and hw is not None:
        replica.high_watermark_sent = hw
    return answer(records=records)


def _answer_builder(node: RaftNode, state: LeaderState) -> Any:
    def answer(**fields: Any) -> Message:
        return messages.fetch_response(
            _NONE, leader_id=node.node_id, epoch=state.epoch,
            high_watermark=state.high_watermark, log_start_offset=node.log.start_offset, **fields,
        )  # fmt: skip

    return answer


def _hold(
    node: RaftNode, now_ms: int, state: LeaderState, replica_id: int, request: RaftRequest,
    max_wait_ms: int,
) -> None:  # fmt: skip
    previous = state.held_fetches.pop(replica_id, None)
    if previous is not None:  # a newer Fetch from the same replica replaces it
        _complete(node, now_ms, previous)
    wait = min(max_wait_ms, node.config.fetch_max_wait_ms)
    state.held_fetches[replica_id] = HeldFetch(request, now_ms + wait)


def _complete(node: RaftNode, now_ms: int, held: HeldFetch) -> None:
    request: Any = held.request
    response = fetch_answer(node, now_ms, request, completing=True)
    assert response is not None
    node.respond(request, response)


def complete_held_fetches(node: RaftNode, now_ms: int) -> None:
    """New data or a new high watermark: answer every held Fetch now."""
    state = node.state
    if not isinstance(state, LeaderState) or not state.held_fetches:
        return
    held = list(state.held_fetches.values())
    state.held_fetches.clear()
    for fetch in held:
        _complete(node, now_ms, fetch)


def expire_held_fetches(node: RaftNode, now_ms: int, state: LeaderState) -> None:
    for replica_id, held in list(state.held_fetches.items()):
        if held.deadline_ms <= now_ms:
            del state.held_fetches[replica_id]
            _complete(node, now_ms, held)


def answer_held_fetches_after_leadership(node: RaftNode, old: LeaderState) -> None:
    """Leadership ended: held Fetches get this node's new answer (an error naming the epoch)."""
    held = list(old.held_fetches.values())
    old.held_fetches.clear()
    for fetch in held:
        request: Any = fetch.request
        partition = messages.only_partition(request.message)
        error = node.leader_only_error(partition.current_leader_epoch)
        if error == _NONE:  # cannot happen: we are no longer the leader
            error = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        node.respond(
            request, messages.fetch_response(error, leader_id=node.leader_id, epoch=node.epoch)
        )


def on_leader_high_watermark(node: RaftNode, now_ms: int, state: LeaderState) -> None:
    high_watermark = state.high_watermark
    if high_watermark is not None and high_watermark > node.log.high_watermark:
        node.log.update_high_watermark(high_watermark)
    complete_held_fetches(node, now_ms)


# --- leader: serving FetchSnapshot -------------------------------------------------------


def handle_fetch_snapshot(node: RaftNode, now_ms: int, request: RaftRequest) -> None:
    fetch: Any = request.message
    partition = messages.only_partition(fetch)
    error = node.leader_only_error(partition.current_leader_epoch)
    if error != _NONE:
        node.respond(request, messages.fetch_snapshot_response(
            error, leader_id=node.leader_id, epoch=node.epoch))  # fmt: skip
        return
    state = node.state
    assert isinstance(state, LeaderState)
    state.record_voter_contact(fetch.replica_id, now_ms, node.config)
    snapshot_id = SnapshotId(partition.snapshot_id.end_offset, partition.snapshot_id.epoch)
    max_bytes = min(fetch.max_bytes, node.config.fetch_max_bytes)
    answer: dict[str, Any] = {"leader_id": node.node_id, "epoch": state.epoch,
                              "snapshot_id": snapshot_id}  # fmt: skip
    try:
        chunk, size = node.log.read_snapshot(snapshot_id, partition.position, max_bytes)
    except SnapshotNotFoundError:
        response = messages.fetch_snapshot_response(int(ErrorCode.SNAPSHOT_NOT_FOUND), **answer)
    except RaftLogError:  # the position is outside the snapshot
        response = messages.fetch_snapshot_response(messages.POSITION_OUT_OF_RANGE, **answer)
    else:
        response = messages.fetch_snapshot_response(
            _NONE, size=size, position=partition.position, chunk=chunk, **answer
        )
    node.respond(request, response)


# --- follower: sending and handling Fetch ------------------------------------------------


def maybe_send_fetch(node: RaftNode, now_ms: int, state: FollowerState) -> None:
    if state.fetch_in_flight is not None or now_ms < state.next_fetch_ms:
        return
    log, config = node.log, node.config
    message: Message
    if state.snapshot_id is not None:
        message = messages.fetch_snapshot_request(
            node.cluster_id, replica_id=node.node_id, epoch=state.epoch,
            snapshot_id=state.snapshot_id, position=len(state.snapshot_buffer),
            max_bytes=config.fetch_max_bytes,
        )  # fmt: skip
    else:
        message = messages.fetch_request(
            node.cluster_id, replica_id=node.node_id, epoch=state.epoch,
            fetch_offset=log.end_offset, last_fetched_epoch=log.last_fetched_epoch,
            max_wait_ms=config.fetch_max_wait_ms, max_bytes=config.fetch_max_bytes,
        )  # fmt: skip
    state.fetch_in_flight = node.send_request(now_ms, state.leader_id, message)


def maybe_find_leader(node: RaftNode, now_ms: int, state: UnattachedState) -> None:
    """An observer without a leader fetches from any voter; the answer names the leader."""
    if state.fetch_in_flight is not None or now_ms < state.next_fetch_ms:
        return
    log = node.log
    message = messages.fetch_request(
        node.cluster_id, replica_id=node.node_id, epoch=state.epoch,
        fetch_offset=log.end_offset, last_fetched_epoch=log.last_fetched_epoch,
        max_wait_ms=0, max_bytes=node.config.fetch_max_bytes,
    )  # fmt: skip
    state.fetch_in_flight = node.send_request(now_ms, node.pick_bootstrap_voter(), message)


def _claim(node: RaftNode, request_id: int) -> FollowerState | UnattachedState | None:
    """The state waiting for this answer (its in-flight marker cleared), if it still is."""
    state = node.state
    if isinstance(state, (FollowerState, UnattachedState)) and state.fetch_in_flight == request_id:
        state.fetch_in_flight = None
        return state
    return None


def on_fetch_response(
    node: RaftNode, now_ms: int, request_id: int, source: int, message: Message | None
) -> None:
    state = _claim(node, request_id)
    retry_at = now_ms + node.config.retry_backoff_ms
    partition = messages.response_partition(message)
    if partition is None:
        if state is not None:
            state.next_fetch_ms = retry_at
        return
    if node.handle_leader_view(now_ms, messages.leader_view(partition)):
        return
    if not isinstance(state, FollowerState) or partition.error_code != _NONE:
        if state is not None:
            state.next_fetch_ms = retry_at
        return
    state.fetch_deadline_ms = now_ms + node.config.fetch_timeout_ms + state.stagger_ms
    state.next_fetch_ms = now_ms
    diverging, snapshot = partition.diverging_epoch, partition.snapshot_id
    if diverging.epoch >= 0 and diverging.end_offset >= 0:
        truncate_to_end_offset(node.log, OffsetAndEpoch(diverging.end_offset, diverging.epoch))
    elif snapshot.epoch >= 0 and snapshot.end_offset >= 0:
        state.start_snapshot(SnapshotId(snapshot.end_offset, snapshot.epoch))
    else:
        if partition.records:
            node.log.append_as_follower(bytes(partition.records), state.epoch)
            node.log.flush()
        update_follower_high_watermark(node, state, partition.high_watermark)


def truncate_to_end_offset(log: RaftLog, leader_end: OffsetAndEpoch) -> int:
    """Kafka's ``truncateToEndOffset``: cut where this log and the leader's part ways."""
    if leader_end.epoch == 0:
        offset = min(leader_end.offset, log.end_offset)
    else:
        local = log.end_offset_for_epoch(leader_end.epoch)
        if local.epoch == leader_end.epoch:
            offset = min(local.offset, leader_end.offset)
        else:
            offset = local.offset
    log.truncate_to(offset)
    return offset


def update_follower_high_watermark(node: RaftNode, state: FollowerState, leader_hw: int) -> None:
    if leader_hw < 0:
        return
    high_watermark = min(leader_hw, node.log.end_offset)
    if state.high_watermark is None or high_watermark > state.high_watermark:
        state.high_watermark = high_watermark
    if high_watermark > node.log.high_watermark:
        node.log.update_high_watermark(high_watermark)


def on_fetch_snapshot_response(
    node: RaftNode, now_ms: int, request_id: int, message: Message | None
) -> None:
    state = _claim(node, request_id)
    partition = messages.response_partition(message)
    if partition is None:
        if state is not None:
            state.next_fetch_ms = now_ms + node.config.retry_backoff_ms
        return
    if node.handle_leader_view(now_ms, messages.leader_view(partition)):
        return
    if not isinstance(state, FollowerState) or state.snapshot_id is None:
        return
    error = partition.error_code
    if error in (int(ErrorCode.SNAPSHOT_NOT_FOUND), messages.POSITION_OUT_OF_RANGE):
        state.stop_snapshot()  # the leader moved on: fetch again to learn its newer snapshot
        state.next_fetch_ms = now_ms
        return
    if error != _NONE:
        state.next_fetch_ms = now_ms + node.config.retry_backoff_ms
        return
    _take_snapshot_chunk(node, now_ms, state, partition)


def _take_snapshot_chunk(node: RaftNode, now_ms: int, state: FollowerState, partition: Any) -> None:
    snapshot_id = SnapshotId(partition.snapshot_id.end_offset, partition.snapshot_id.epoch)
    if snapshot_id != state.snapshot_id or partition.position != len(state.snapshot_buffer):
        state.stop_snapshot()
        state.next_fetch_ms = now_ms
        return
    state.fetch_deadline_ms = now_ms + node.config.fetch_timeout_ms + state.stagger_ms
    state.next_fetch_ms = now_ms
    state.snapshot_buffer += bytes(partition.unaligned_records or b"")
    if len(state.snapshot_buffer) < partition.size:
        return
    node.log.install_snapshot(snapshot_id, bytes(state.snapshot_buffer))
    state.stop_snapshot()
    if state.high_watermark is None or state.high_watermark < snapshot_id.end_offset:
        state.high_watermark = snapshot_id.end_offset
    node.notify_snapshot_installed(snapshot_id)
