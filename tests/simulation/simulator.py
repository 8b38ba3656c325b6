"""The event loop of one simulation run: the clock, the shell around each node, faults, workload.

Events sit in one heap ordered by (time ms, sequence): a message delivered, a node's timers
(``RaftNode.poll`` at ``next_wakeup_ms``), a request's timeout, a proposal, a snapshot, a crash
or stop, a restart, a partition and its healing, the recovery phase (see ``options``). After
every event the invariants are checked (``invariants.Invariants.after_event``).

The shell does what the daemon's does: it sends each ``Send`` (a request remembers its
destination until answered; a response goes back to the requesting incarnation), completes a
request with ``RaftResponse(message=None)`` after ``request_timeout_ms`` if no answer came (a
lost request or answer) or after a connection attempt's delay (the destination is stopped),
and polls a node shortly after it handled a message (0-2 ms later, so a crash can fall in
between and lose an unflushed tail) and whenever its next timer is due.

Every random choice comes from a ``random.Random`` seeded from the run's seed and a purpose
(``f"{seed}/network"``...), so that a seed replays exactly. State: single-threaded, one run.
"""

from __future__ import annotations

import heapq
import random
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.simulation import core
from tests.simulation.cluster import NEVER, InvariantViolation, Ledger, SimNode
from tests.simulation.invariants import Invariants, check_committed_data
from tests.simulation.network import Network, Partition, random_partition
from tests.simulation.options import CATCH_UP_BOUND_MS, ELECTION_BOUND_MS, SimulationOptions

TRACE_LENGTH = 60
CLUSTER_ID = "simulated-cluster"


@dataclass(frozen=True)
class Failure:
    invariant: str
    detail: str
    time_ms: int
    trace: list[str]
    replay: str

    def report(self) -> str:
        lines = [f"INVARIANT VIOLATED: {self.invariant} at {self.time_ms} ms", self.detail,
                 f"last {len(self.trace)} events:", *(f"  {line}" for line in self.trace),
                 f"replay: {self.replay}"]
        return "\n".join(lines)


@dataclass
class SimulationResult:
    options: SimulationOptions
    codec: bool
    events: int = 0
    sim_ms: int = 0
    wall_seconds: float = 0.0
    highest_epoch: int = 0
    committed_offset: int = 0
    crashes: int = 0
    partitions: int = 0
    snapshots_taken: int = 0
    snapshots_loaded: int = 0
    proposals: int = 0
    failure: Failure | None = None
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def summary(self) -> str:
        state = "ok" if self.ok else f"FAILED ({self.failure.invariant})" if self.failure else ""
        return (f"seed {self.options.seed}: {state}, {self.sim_ms / 1000:.1f} simulated s in "
                f"{self.wall_seconds:.2f} s, {self.events} events, epoch {self.highest_epoch}, "
                f"committed {self.committed_offset}, {self.crashes} crashes, "
                f"{self.partitions} partitions, {self.snapshots_taken} snapshots taken, "
                f"{self.snapshots_loaded} loaded{', codec' if self.codec else ''}")


class Simulation:
    def __init__(self, options: SimulationOptions,
                 node_class: Callable[..., Any] | None = None) -> None:
        self.options = options
        seed = options.seed
        self.codec = options.codec if options.codec is not None else \
            random.Random(f"{seed}/codec").random() < 0.25
        self.network = Network(random.Random(f"{seed}/network"), options.faults, codec=self.codec)
        self.shell_rng = random.Random(f"{seed}/shell")
        self.fault_rng = random.Random(f"{seed}/faults")
        self.workload_rng = random.Random(f"{seed}/workload")
        self.crash_point_rate = self.fault_rng.uniform(0.0, 0.3) \
            if "crash" in options.faults else 0.0
        self.config = core.RaftConfig()
        self.voter_ids = list(range(options.voters))
        self.observer_ids = list(range(options.voters, options.voters + options.observers))
        self.ledger = Ledger()
        self.nodes = {node_id: SimNode(node_id, self.voter_ids, self.ledger,
                                       node_class=node_class or core.RaftNode,
                                       config=self.config, cluster_id=CLUSTER_ID)
                      for node_id in [*self.voter_ids, *self.observer_ids]}
        self.invariants = Invariants(self.nodes, self.voter_ids)
        self.result = SimulationResult(options, self.codec)
        self.now_ms = 0
        self._queue: list[tuple[int, int, Callable[..., SimNode | None], tuple[Any, ...]]] = []
        self._sequence = 0
        self.trace: deque[tuple[int, str, tuple[Any, ...]]] = deque(maxlen=TRACE_LENGTH)
        self.next_value = 0
        self.healed_at_ms: int | None = None
        self.post_heal_proposals: dict[int, tuple[int, int]] = {}  # node -> (epoch, last offset)
        self.catch_up_target: int | None = None
        self.done = False

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> SimulationResult:
        started = time.perf_counter()
        try:
            self._setup()
            self._loop()
            check_committed_data(self.nodes)
        except InvariantViolation as violation:
            self._fail(violation.invariant, violation.detail)
        except Exception:
            self._fail("CoreError", traceback.format_exc(limit=12).rstrip())
        self._finish(time.perf_counter() - started)
        return self.result

    def _loop(self) -> None:
        queue, invariants, pop = self._queue, self.invariants, heapq.heappop
        events = 0
        while queue and not self.done:
            at, _, action, args = pop(queue)
            self.now_ms = at
            touched = action(*args)
            events += 1
            if touched is not None:  # events that change no node (stale timers) skip the checks
                invariants.after_event(touched)
            if self.healed_at_ms is not None:
                self._check_liveness()
        self.result.events = events
        if not self.done:
            raise InvariantViolation("Liveness", "the event queue ran dry")

    def push(self, at_ms: int, action: Callable[..., SimNode | None], *args: Any) -> None:
        self._sequence += 1
        heapq.heappush(self._queue, (at_ms, self._sequence, action, args))

    def note(self, kind: str, *details: Any) -> None:
        self.trace.append((self.now_ms, kind, details))

    def _fail(self, invariant: str, detail: str) -> None:
        lines = [f"{at:>8} ms  {kind} {' '.join(_short(item) for item in details)}"
                 for at, kind, details in self.trace]
        self.result.failure = Failure(invariant, detail, self.now_ms, lines,
                                      self.options.replay_command())

    def _finish(self, wall_seconds: float) -> None:
        result = self.result
        result.wall_seconds = wall_seconds
        result.sim_ms = self.now_ms
        result.highest_epoch = max(self.invariants.stored_epochs.values(), default=0)
        result.committed_offset = max(self.ledger.records, default=-1) + 1
        result.snapshots_loaded = sum(node.machine.snapshots_loaded for node in self.nodes.values())

    # -- set-up: nodes, faults, workload ---------------------------------------------------

    def _setup(self) -> None:
        for node in self.nodes.values():
            self.push(0, self._start, node, 0)
        end = self.options.sim_ms
        if "crash" in self.options.faults:
            self._plan(self.fault_rng.uniform(1500, 8000), end, self._crash)
        if "partition" in self.options.faults:
            self._plan(self.fault_rng.uniform(1500, 8000), end, self._partition)
        self._plan(self.workload_rng.uniform(10, 120), None, self._propose)
        if self.options.snapshots:
            self._plan(self.workload_rng.uniform(500, 4000), None, self._snapshot)
        self.push(end, self._heal)

    def _plan(self, mean_gap_ms: float, end_ms: int | None,
              action: Callable[[], SimNode | None]) -> None:
        """``action`` at random times, ``mean_gap_ms`` apart on average, until ``end_ms`` (for
        faults, planned now) or for ever (for the workload, re-armed as it goes)."""
        rng = self.fault_rng if end_ms is not None else self.workload_rng
        if end_ms is None:
            self.push(1 + int(rng.expovariate(1 / mean_gap_ms)), self._repeat, action, mean_gap_ms)
            return
        at = 0.0
        while (at := at + rng.expovariate(1 / mean_gap_ms)) < end_ms:
            self.push(int(at), action)

    def _repeat(self, action: Callable[[], SimNode | None], mean_gap_ms: float) -> SimNode | None:
        self.push(self.now_ms + 1 + int(self.workload_rng.expovariate(1 / mean_gap_ms)),
                  self._repeat, action, mean_gap_ms)
        return action()

    # -- the shell around one node ---------------------------------------------------------

    def _start(self, node: SimNode, down_token: int) -> SimNode | None:
        if node.running or node.incarnation != down_token:
            return None  # already restarted (the recovery phase restarts every node at once)
        rng = random.Random(f"{self.options.seed}/node{node.node_id}/{node.incarnation + 1}")
        self.note("start", node.node_id, f"incarnation {node.incarnation + 1}")
        node.start(self.now_ms, rng)
        self._after(node, poll_soon=False)
        return node

    def _after(self, node: SimNode, *, poll_soon: bool) -> None:
        """After the node handled something: send what it has to send, apply what it
        committed, and have it polled at its next timer, or soon after a message (0-2 ms)."""
        raft = node.raft
        for send in raft.take_sends():
            if send.is_response:
                self._route_response(node, send)
            else:
                self._route_request(node, send)
        node.machine.catch_up(raft.log, raft.high_watermark)
        wakeup = raft.next_wakeup_ms(self.now_ms)
        if poll_soon:
            self._arm(node, max(self.now_ms, min(wakeup, self.now_ms + self.shell_rng.randint(0, 2))))
        else:
            # a core that asks to be woken now again must not stall the simulated clock
            self._arm(node, max(wakeup, self.now_ms + 1))

    def _arm(self, node: SimNode, at_ms: int) -> None:
        if at_ms < node.wakeup_ms:
            node.wakeup_ms = at_ms
            self.push(at_ms, self._poll, node, node.incarnation, at_ms)

    def _poll(self, node: SimNode, incarnation: int, at_ms: int) -> SimNode | None:
        if node.incarnation != incarnation or node.wakeup_ms != at_ms or not node.running:
            return None  # superseded by an earlier wake-up, or the process is gone
        node.wakeup_ms = NEVER
        node.raft.poll(self.now_ms)
        self._after(node, poll_soon=False)
        return node

    def _route_request(self, node: SimNode, send: Any) -> None:
        request_id, destination = send.request_id, send.destination
        node.inflight[request_id] = destination
        self.push(self.now_ms + self.config.request_timeout_ms, self._complete, node,
                  node.incarnation, request_id, None)
        target = self.nodes.get(destination)
        if target is None or not target.running:
            self.push(self.now_ms + self.network.refused_after_ms(), self._complete, node,
                      node.incarnation, request_id, None)
            return
        times = self.network.delivery_times(node.node_id, destination, self.now_ms)
        if times:
            message = self.network.transcode(send.message)
            for at in times:
                self.push(at, self._deliver, target, target.incarnation, node.node_id,
                          node.incarnation, request_id, message)

    def _route_response(self, node: SimNode, send: Any) -> None:
        requester_incarnation = node.pending.pop((send.destination, send.request_id), None)
        requester = self.nodes.get(send.destination)
        if requester_incarnation is None or requester is None:
            return  # the answer to a duplicate: the requester's shell already had one
        times = self.network.delivery_times(node.node_id, send.destination, self.now_ms)
        if times:
            message = self.network.transcode(send.message)
            for at in times:
                self.push(at, self._complete, requester, requester_incarnation, send.request_id,
                          message)

    def _deliver(self, node: SimNode, incarnation: int, source: int, source_incarnation: int,
                 request_id: int, message: Any) -> SimNode | None:
        if node.incarnation != incarnation or not node.running:
            # the process it was sent to is gone: the requester's connection is reset
            self.push(self.now_ms + self.network.refused_after_ms(), self._complete,
                      self.nodes[source], source_incarnation, request_id, None)
            return None
        self.note("request", f"{source}->{node.node_id}", f"#{request_id}", message)
        node.pending[(source, request_id)] = source_incarnation
        stored = node.store.read()
        node.raft.handle_request(self.now_ms, core.RaftRequest(source, request_id, message))
        self._after(node, poll_soon=True)
        self._maybe_crash_point(node, stored)
        return node

    def _complete(self, node: SimNode, incarnation: int, request_id: int,
                  message: Any) -> SimNode | None:
        if node.incarnation != incarnation or not node.running:
            return None
        source = node.inflight.pop(request_id, None)
        if source is None:
            return None  # answered already (this is a late timeout or a duplicate answer)
        self.note("response" if message is not None else "no-response",
                  f"{source}->{node.node_id}", f"#{request_id}", message)
        stored = node.store.read()
        node.raft.handle_response(self.now_ms, core.RaftResponse(source, request_id, message))
        self._after(node, poll_soon=True)
        self._maybe_crash_point(node, stored)
        return node

    # -- faults ----------------------------------------------------------------------------

    def _crash(self) -> SimNode | None:
        running = [node for node in self.nodes.values() if node.running]
        if not running or self.healed_at_ms is not None:
            return None
        node = self.fault_rng.choice(running)
        graceful = self.fault_rng.random() < 0.25
        self._stop(node, graceful=graceful, down_ms=self.fault_rng.randint(100, 6000))
        return node

    def _stop(self, node: SimNode, *, graceful: bool, down_ms: int) -> None:
        self.note("stop" if graceful else "crash", node.node_id, f"epoch {node.raft.epoch}",
                  node.raft.role, f"log [{node.log.start_offset}, {node.log.end_offset}) "
                  f"flushed {node.log.flushed_end_offset}", f"down {down_ms} ms")
        if graceful:
            node.raft.shutdown(self.now_ms)
            for send in node.raft.take_sends():
                if not send.is_response:
                    self._route_request(node, send)
        node.stop(crash=not graceful)
        self.result.crashes += 1
        self.push(self.now_ms + down_ms, self._start, node, node.incarnation)

    def _maybe_crash_point(self, node: SimNode, stored_before: Any) -> None:
        """A crash right after a durable write of the quorum state (a vote, a new epoch), with
        a quick restart: the moment a forgotten or unpersisted decision would show."""
        if self.crash_point_rate and node.store.read() != stored_before \
                and self.healed_at_ms is None and self.fault_rng.random() < self.crash_point_rate:
            self._stop(node, graceful=False, down_ms=self.fault_rng.randint(1, 50))

    def _partition(self) -> SimNode | None:
        if self.healed_at_ms is not None:
            return None
        partition = random_partition(self.fault_rng, self.voter_ids, self.observer_ids)
        self.note("partition", partition.description)
        self.network.block(partition)
        self.result.partitions += 1
        self.push(self.now_ms + self.fault_rng.randint(300, 8000), self._heal_partition, partition)
        return None

    def _heal_partition(self, partition: Partition) -> SimNode | None:
        self.note("heal", partition.description)
        self.network.unblock(partition)
        return None

    def _heal(self) -> SimNode | None:
        """The recovery phase begins: a healthy network, every node running."""
        self.note("recovery phase", "every link up, every node started")
        self.network.heal()
        self.healed_at_ms = self.now_ms
        for node in self.nodes.values():
            if not node.running:
                self._start(node, node.incarnation)
                self.invariants.after_event(node)
        return None

    # -- workload --------------------------------------------------------------------------

    def _propose(self) -> SimNode | None:
        for node in self.nodes.values():
            raft = node.raft
            if raft is None or raft.role != "leader":
                continue
            count = self.workload_rng.randint(1, 3)
            values = [b"value-%d" % (self.next_value + index) for index in range(count)]
            try:
                last_offset = raft.propose(self.now_ms, values)
            except core.NotLeaderError:
                continue
            self.next_value += count
            self.result.proposals += 1
            self.note("propose", node.node_id, f"epoch {raft.epoch}", f"last offset {last_offset}")
            first = self.post_heal_proposals.get(node.node_id)
            if self.healed_at_ms is not None and (first is None or first[0] != raft.epoch):
                self.post_heal_proposals[node.node_id] = (raft.epoch, last_offset)
            self._after(node, poll_soon=True)
            self.invariants.after_event(node)
        return None

    def _snapshot(self) -> SimNode | None:
        for node in self.nodes.values():
            if node.running and node.machine.maybe_snapshot(node.log):
                self.note("snapshot", node.node_id, f"at {node.machine.applied_offset}")
                self.result.snapshots_taken += 1
                self.invariants.after_event(node)
        return None

    # -- liveness --------------------------------------------------------------------------

    def _check_liveness(self) -> None:
        assert self.healed_at_ms is not None
        elapsed = self.now_ms - self.healed_at_ms
        if self.catch_up_target is None:
            self.catch_up_target = self._committed_after_heal()
            if self.catch_up_target is None and elapsed > ELECTION_BOUND_MS:
                raise InvariantViolation(
                    "Liveness", f"no leader committed a new proposal within "
                                f"{ELECTION_BOUND_MS} ms of the recovery phase: {self._roles()}")
            return
        behind = [(node.node_id, node.machine.applied_offset) for node in self.nodes.values()
                  if node.machine.applied_offset < self.catch_up_target]
        if not behind:
            self.done = True
        elif elapsed > CATCH_UP_BOUND_MS:
            raise InvariantViolation(
                "Liveness", f"nodes (id, applied offset) {behind} did not reach offset "
                            f"{self.catch_up_target} within {CATCH_UP_BOUND_MS} ms: "
                            f"{self._roles()}")

    def _committed_after_heal(self) -> int | None:
        for node_id, (epoch, last_offset) in self.post_heal_proposals.items():
            raft = self.nodes[node_id].raft
            if raft is not None and raft.role == "leader" and raft.epoch == epoch \
                    and raft.high_watermark is not None and raft.high_watermark > last_offset:
                return last_offset + 1
        return None

    def _roles(self) -> str:
        return "; ".join(
            f"{node.node_id}: {node.raft.role if node.raft else 'down'} epoch "
            f"{node.raft.epoch if node.raft else '-'} hw "
            f"{node.raft.high_watermark if node.raft else '-'} log end {node.log.end_offset}"
            for node in self.nodes.values())


def run_seed(options: SimulationOptions, node_class: Callable[..., Any] | None = None
             ) -> SimulationResult:
    return Simulation(options, node_class).run()


def _short(item: Any, limit: int = 220) -> str:
    text = item if isinstance(item, str) else repr(item)
    return text if len(text) <= limit else text[:limit] + "…"
