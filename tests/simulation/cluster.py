"""A simulated node: the real RaftNode over a MemoryRaftLog and a MemoryQuorumStateStore, the
state machine it feeds, and the shell's bookkeeping (in-flight requests, the next wake-up).

The log and the quorum-state store outlive the node: a crash drops the RaftNode and the log's
unflushed tail (``MemoryRaftLog.crash()``), keeps the store, and bumps ``incarnation``; a
restart builds a new RaftNode over the same log and store. Messages addressed to an earlier
incarnation are dropped (a new process has new connections).

The state machine applies committed batches (``log.batches_from`` below the node's high
watermark) and folds each one into a running digest; every applied record and every digest is
checked against the ``Ledger``, the one record of what was committed at each offset (the first
node to apply an offset writes it, every other node must agree: ConsistentCommittedData). A
snapshot's payload is the state at its end offset: ``end_offset, epoch, record count`` and
the digest. A state machine whose log now starts above what it applied (a snapshot installed
by FetchSnapshot) reloads from the latest snapshot.

State: owned by the one ``Simulation`` (single-threaded).
"""

from __future__ import annotations

import hashlib
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.simulation import core

NEVER = 1 << 62
_SNAPSHOT = struct.Struct(">qqq")
_BATCH = struct.Struct(">qqq")
MIN_SNAPSHOT_GAP = 20  # offsets applied since the last snapshot before taking another


class InvariantViolation(AssertionError):
    """An invariant broke; ``invariant`` is its name (Kafka's), ``detail`` what was seen."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


@dataclass
class Ledger:
    """What was committed, as first applied by any node: the oracle of ConsistentCommittedData."""

    records: dict[int, tuple[int, bytes | None]] = field(default_factory=dict)
    digests: dict[int, bytes] = field(default_factory=dict)  # end offset -> state digest

    def check_record(self, node_id: int, offset: int, epoch: int, value: bytes | None) -> None:
        seen = self.records.setdefault(offset, (epoch, value))
        if seen != (epoch, value):
            raise InvariantViolation(
                "ConsistentCommittedData",
                f"node {node_id} committed (epoch {epoch}, {value!r}) at offset {offset}, "
                f"another node committed (epoch {seen[0]}, {seen[1]!r})")

    def check_digest(self, node_id: int, end_offset: int, digest: bytes, what: str) -> None:
        seen = self.digests.setdefault(end_offset, digest)
        if seen != digest:
            raise InvariantViolation(
                "ConsistentCommittedData",
                f"node {node_id}: the state below offset {end_offset} ({what}) differs from "
                "another node's")


class StateMachine:
    """One node's replicated state: what it applied, as a count and a running digest."""

    def __init__(self, node_id: int, ledger: Ledger) -> None:
        self.node_id = node_id
        self.ledger = ledger
        self.applied_offset = 0   # the next offset to apply
        self.applied_epoch = 0    # the epoch of the last batch applied
        self.record_count = 0
        self.digest = b""
        self.snapshots_loaded = 0

    def catch_up(self, log: Any, high_watermark: int | None) -> None:
        """Apply every whole batch below ``high_watermark`` not applied yet."""
        if high_watermark is None or high_watermark <= self.applied_offset:
            return
        if self.applied_offset < log.start_offset:
            self.load_latest_snapshot(log)
        for base_offset, epoch, values, is_control in log.batches_from(self.applied_offset):
            if base_offset + len(values) > high_watermark:
                break
            self._apply(base_offset, epoch, values, is_control)

    def _apply(self, base_offset: int, epoch: int, values: list[bytes | None],
               is_control: bool) -> None:
        if base_offset != self.applied_offset:
            raise InvariantViolation(
                "ConsistentCommittedData",
                f"node {self.node_id}: the committed batch after offset {self.applied_offset} "
                f"starts at {base_offset}")
        hasher = hashlib.blake2b(self.digest, digest_size=16)
        hasher.update(_BATCH.pack(base_offset, epoch, int(is_control)))
        for index, value in enumerate(values):
            self.ledger.check_record(self.node_id, base_offset + index, epoch, value)
            hasher.update(b"\xff" if value is None else len(value).to_bytes(4, "big") + value)
        self.digest = hasher.digest()
        self.applied_offset = base_offset + len(values)
        self.applied_epoch = epoch
        self.record_count += 0 if is_control else len(values)
        self.ledger.check_digest(self.node_id, self.applied_offset, self.digest, "applied")

    def snapshot_payload(self) -> bytes:
        return _SNAPSHOT.pack(self.applied_offset, self.applied_epoch, self.record_count) \
            + self.digest

    def maybe_snapshot(self, log: Any) -> bool:
        """Snapshot what was applied and delete the log before it, if enough is new."""
        latest = log.latest_snapshot_id()
        since = latest.end_offset if latest is not None else 0
        if self.applied_offset < max(since, log.start_offset) + MIN_SNAPSHOT_GAP:
            return False
        snapshot_id = core.SnapshotId(self.applied_offset, self.applied_epoch)
        log.create_snapshot(snapshot_id, self.snapshot_payload())
        log.delete_before_snapshot(snapshot_id)
        return True

    def load_latest_snapshot(self, log: Any) -> None:
        snapshot_id = log.latest_snapshot_id()
        if snapshot_id is None:
            raise InvariantViolation(
                "SnapshotAtLogStart",
                f"node {self.node_id}: log starts at {log.start_offset}, no snapshot")
        payload = read_whole_snapshot(log, snapshot_id)
        end_offset, epoch, count = _SNAPSHOT.unpack_from(payload)
        digest = payload[_SNAPSHOT.size:]
        if (end_offset, epoch) != (snapshot_id.end_offset, snapshot_id.epoch):
            raise InvariantViolation(
                "SnapshotAtLogStart",
                f"node {self.node_id}: snapshot {snapshot_id} holds the state at "
                f"(offset {end_offset}, epoch {epoch})")
        self.ledger.check_digest(self.node_id, end_offset, digest, f"snapshot {snapshot_id}")
        self.applied_offset, self.applied_epoch, self.record_count = end_offset, epoch, count
        self.digest = digest
        self.snapshots_loaded += 1


def read_whole_snapshot(log: Any, snapshot_id: Any) -> bytes:
    chunks: list[bytes] = []
    position = 0
    while True:
        chunk, total = log.read_snapshot(snapshot_id, position, 1 << 20)
        chunks.append(bytes(chunk))
        position += len(chunk)
        if position >= total or not chunk:
            return b"".join(chunks)


class Listener:
    """The RaftListener the simulator registers: notes what the invariants need to know."""

    def __init__(self, sim_node: SimNode) -> None:
        self.sim_node = sim_node

    def on_leader_change(self, epoch: int, leader_id: int | None) -> None:
        pass

    def on_high_watermark(self, high_watermark: int) -> None:
        pass

    def on_snapshot_installed(self, snapshot_id: Any) -> None:
        raft = self.sim_node.raft
        if raft is not None and raft.role == "leader":
            raise InvariantViolation(
                "LeaderNeverLoadSnapshot",
                f"node {self.sim_node.node_id} installed snapshot {snapshot_id} as leader of "
                f"epoch {raft.epoch}")


class SimNode:
    """One simulated process, across its crashes and restarts."""

    def __init__(self, node_id: int, voter_ids: list[int], ledger: Ledger, *,
                 node_class: Callable[..., Any], config: Any, cluster_id: str) -> None:
        self.node_id = node_id
        self.voter_ids = voter_ids
        self.is_voter = node_id in voter_ids
        self.node_class = node_class
        self.config = config
        self.cluster_id = cluster_id
        self.ledger = ledger
        self.log = core.MemoryRaftLog()
        self.store = core.MemoryQuorumStateStore()
        self.raft: Any = None
        self.incarnation = 0
        self.machine = StateMachine(node_id, ledger)
        self.inflight: dict[int, int] = {}               # request id -> destination
        self.pending: dict[tuple[int, int], int] = {}    # (source, request id) -> its incarnation
        self.wakeup_ms = NEVER
        self.last_high_watermark: int | None = None      # within this incarnation
        self.down_until_ms = 0

    @property
    def running(self) -> bool:
        return self.raft is not None

    def start(self, now_ms: int, rng: random.Random) -> None:
        self.incarnation += 1
        self.raft = self.node_class(
            node_id=self.node_id, voter_ids=self.voter_ids, log=self.log, store=self.store,
            config=self.config, rng=rng, now_ms=now_ms, cluster_id=self.cluster_id)
        self.raft.listeners.append(Listener(self))
        self.machine = StateMachine(self.node_id, self.ledger)
        if self.log.start_offset > 0:
            self.machine.load_latest_snapshot(self.log)
        self.last_high_watermark = None
        self.wakeup_ms = NEVER

    def stop(self, *, crash: bool) -> None:
        """The process ends: a crash loses the log's unflushed tail, a clean stop flushes."""
        self.raft = None
        if crash:
            self.log.crash()
        else:
            self.log.flush()
        self.inflight.clear()
        self.pending.clear()
        self.wakeup_ms = NEVER
