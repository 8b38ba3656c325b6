"""The invariants, named as Kafka's RaftEventSimulationTest names them, checked after every event.

An event changes at most one node (a message delivered, a timer fired, a proposal, a snapshot,
a crash or a restart), so the per-node checks run on that node and the cross-node check
(MajorityReachedHighWatermark) runs over the current leaders:

- SingleLeader: at most one leader per epoch, ever (from the nodes' roles and from every
  quorum-state store's ``leader_id``), across crashes.
- MonotonicEpoch: a node's stored epoch never decreases, across restarts too; a running node's
  epoch is the stored one (the epoch is persisted before it is acted on).
- DurableElectionState (ours, the rest of Kafka's ``epoch == stored epoch`` assertion): a
  running node's vote and leader are the ones in its quorum-state store (persisted before the
  node acts on them, so a crash cannot make it vote twice in an epoch).
- MonotonicHighWatermark: a node's known high watermark never decreases within one incarnation
  (a restart starts from unknown, as KafkaRaftClient does); and the high watermark of the
  leader with the highest epoch never decreases (Kafka's rule), leader after leader.
- MajorityReachedHighWatermark: for every leader with high watermark ``hw > 0``, a majority of
  the voters' logs (running or stopped: a stopped node's log is what survived) hold offset
  ``hw - 1`` with the leader's epoch for it, or start above it (a snapshot covers it).
- SnapshotAtLogStart: a log that starts above 0 has its earliest snapshot ending exactly there.
- LeaderNeverLoadSnapshot (cluster.Listener) and ConsistentCommittedData (cluster.Ledger, and
  ``check_committed_data`` at the end of a run).

State: owned by the one ``Simulation``; it remembers the leader of every epoch, every node's
highest stored epoch and high watermark, and the highest leader high watermark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from protocol.records import read_batch_header
from tests.simulation.cluster import InvariantViolation, SimNode, read_whole_snapshot


class Invariants:
    def __init__(self, nodes: Mapping[int, SimNode], voter_ids: Sequence[int]) -> None:
        self.nodes = nodes
        self.voter_ids = list(voter_ids)
        self.majority = len(voter_ids) // 2 + 1
        self.leaders: dict[int, int] = {}      # epoch -> its one leader
        self.stored_epochs: dict[int, int] = {node_id: 0 for node_id in nodes}
        self.leader_high_watermark = (0, 0)    # (epoch, high watermark) of the latest leader
        self._majority_checked: dict[int, tuple[int, int, int]] = {}
        self._log_signatures: dict[int, tuple[int, int, int]] = {}
        self._logs_version = 0

    def after_event(self, node: SimNode) -> None:
        self.check_node(node)
        self.check_majority_reached_high_watermark()

    def check_node(self, node: SimNode) -> None:
        self._note_log(node)
        self.check_single_leader(node)
        self.check_monotonic_epoch(node)
        self.check_durable_election_state(node)
        self.check_monotonic_high_watermark(node)
        self.check_snapshot_at_log_start(node)

    # -- SingleLeader ----------------------------------------------------------------------

    def check_single_leader(self, node: SimNode) -> None:
        state = node.store.read()
        if state is not None and state.leader_id is not None:
            self._one_leader(state.epoch, state.leader_id, f"node {node.node_id}'s quorum state")
        raft = node.raft
        if raft is not None and raft.role == "leader":
            self._one_leader(raft.epoch, node.node_id, f"node {node.node_id} is leader")

    def _one_leader(self, epoch: int, leader_id: int, source: str) -> None:
        known = self.leaders.setdefault(epoch, leader_id)
        if known != leader_id:
            raise InvariantViolation(
                "SingleLeader", f"epoch {epoch} has two leaders, {known} and {leader_id} "
                                f"({source})")

    # -- MonotonicEpoch --------------------------------------------------------------------

    def check_monotonic_epoch(self, node: SimNode) -> None:
        state = node.store.read()
        epoch = 0 if state is None else state.epoch
        previous = self.stored_epochs[node.node_id]
        if epoch < previous:
            raise InvariantViolation(
                "MonotonicEpoch", f"node {node.node_id}'s stored epoch went {previous} -> {epoch}")
        self.stored_epochs[node.node_id] = epoch
        raft = node.raft
        if raft is not None and raft.epoch != epoch:
            raise InvariantViolation(
                "MonotonicEpoch", f"node {node.node_id} acts in epoch {raft.epoch} but its "
                                  f"quorum state says {epoch}")

    # -- DurableElectionState --------------------------------------------------------------

    def check_durable_election_state(self, node: SimNode) -> None:
        raft = node.raft
        if raft is None:
            return
        state = node.store.read()
        stored = (None, None) if state is None else (state.voted_id, state.leader_id)
        if (raft.voted_id, raft.leader_id) != stored:
            raise InvariantViolation(
                "DurableElectionState",
                f"node {node.node_id} ({raft.role}, epoch {raft.epoch}) has voted for "
                f"{raft.voted_id} and follows {raft.leader_id}; its quorum state says voted "
                f"{stored[0]}, leader {stored[1]}")

    # -- MonotonicHighWatermark ------------------------------------------------------------

    def check_monotonic_high_watermark(self, node: SimNode) -> None:
        raft = node.raft
        if raft is None or raft.high_watermark is None:
            return
        high_watermark = raft.high_watermark
        previous = node.last_high_watermark
        if previous is not None and high_watermark < previous:
            raise InvariantViolation(
                "MonotonicHighWatermark",
                f"node {node.node_id}'s high watermark went {previous} -> {high_watermark} "
                f"(epoch {raft.epoch}, {raft.role})")
        node.last_high_watermark = high_watermark
        if raft.role == "leader":
            self._leader_high_watermark(node.node_id, raft.epoch, high_watermark)

    def _leader_high_watermark(self, node_id: int, epoch: int, high_watermark: int) -> None:
        latest_epoch, latest = self.leader_high_watermark
        if epoch < latest_epoch:
            return  # a deposed leader that does not know it yet
        if high_watermark < latest:
            raise InvariantViolation(
                "MonotonicHighWatermark",
                f"leader {node_id} of epoch {epoch} has high watermark {high_watermark}, below "
                f"{latest} reached by the leader of epoch {latest_epoch}")
        self.leader_high_watermark = (epoch, high_watermark)

    # -- MajorityReachedHighWatermark ------------------------------------------------------

    def check_majority_reached_high_watermark(self) -> None:
        """Re-checked for a leader only when its epoch or high watermark, or some voter's log
        (``_logs_version``, bumped by ``check_node``), changed since its last check."""
        for node in self.nodes.values():
            raft = node.raft
            if raft is None or raft.role != "leader" or not raft.high_watermark:
                continue
            key = (raft.epoch, raft.high_watermark, self._logs_version)
            if self._majority_checked.get(node.node_id) == key:
                continue
            self._check_majority(node, raft.epoch, raft.high_watermark)
            self._majority_checked[node.node_id] = key

    def _note_log(self, node: SimNode) -> None:
        log = node.log
        signature = (log.start_offset, log.end_offset, log.last_fetched_epoch)
        if node.is_voter and self._log_signatures.get(node.node_id) != signature:
            self._log_signatures[node.node_id] = signature
            self._logs_version += 1

    def _voters(self) -> list[SimNode]:
        return [self.nodes[voter_id] for voter_id in self.voter_ids]

    def _check_majority(self, leader: SimNode, epoch: int, high_watermark: int) -> None:
        offset = high_watermark - 1
        entry_epoch = epoch_at(leader.log, offset)
        holders = [voter.node_id for voter in self._voters()
                   if holds(voter.log, offset, entry_epoch)]
        if len(holders) < self.majority:
            raise InvariantViolation(
                "MajorityReachedHighWatermark",
                f"leader {leader.node_id} of epoch {epoch} has high watermark {high_watermark} "
                f"but only voters {holders} hold offset {offset} (epoch {entry_epoch}); "
                f"{self.majority} needed. Logs: {self._log_summary()}")

    def _log_summary(self) -> str:
        return ", ".join(f"{voter.node_id}: [{voter.log.start_offset}, {voter.log.end_offset}) "
                         f"last epoch {voter.log.last_fetched_epoch}" for voter in self._voters())

    # -- SnapshotAtLogStart ----------------------------------------------------------------

    def check_snapshot_at_log_start(self, node: SimNode) -> None:
        log = node.log
        start = log.start_offset
        earliest = log.earliest_snapshot_id()
        if earliest is None:
            if start > 0:
                raise InvariantViolation(
                    "SnapshotAtLogStart",
                    f"node {node.node_id}'s log starts at {start} and has no snapshot")
            return
        if start > earliest.end_offset or (start > 0 and start != earliest.end_offset):
            raise InvariantViolation(
                "SnapshotAtLogStart",
                f"node {node.node_id}'s log starts at {start}, its earliest snapshot is "
                f"{earliest}")


def epoch_at(log: Any, offset: int) -> int | None:
    """The epoch of the batch holding ``offset`` in ``log``; None if the log does not hold it."""
    if offset < log.start_offset or offset >= log.end_offset:
        return None
    # ``read``, not ``batches_from``: the offset may be above the log's high watermark.
    header = read_batch_header(log.read(offset, 1))
    if header.base_offset <= offset <= header.last_offset:
        return header.partition_leader_epoch
    return None


def holds(log: Any, offset: int, epoch: int | None) -> bool:
    """Whether ``log`` holds ``offset`` with ``epoch`` (or has it in a snapshot)."""
    if log.start_offset > offset:
        return True
    if log.end_offset <= offset:
        return False
    return epoch is None or epoch_at(log, offset) == epoch


def check_committed_data(nodes: Mapping[int, SimNode]) -> None:
    """ConsistentCommittedData at the end of a run: every running node's log below its high
    watermark, and its latest snapshot, agree with what was committed (the ledger)."""
    for node in nodes.values():
        raft = node.raft
        if raft is None or raft.high_watermark is None:
            continue
        log, ledger = node.log, node.ledger
        for base_offset, epoch, values, _ in log.batches_from(log.start_offset):
            if base_offset + len(values) > raft.high_watermark:
                break
            for index, value in enumerate(values):
                ledger.check_record(node.node_id, base_offset + index, epoch, value)
        snapshot_id = log.latest_snapshot_id()
        if snapshot_id is not None:
            payload = read_whole_snapshot(log, snapshot_id)
            ledger.check_digest(node.node_id, snapshot_id.end_offset, payload[24:],
                                f"snapshot {snapshot_id}")
