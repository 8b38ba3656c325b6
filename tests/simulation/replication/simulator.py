"""The event loop of one replication simulation run: clock, network, controller, brokers,
client, faults, the recovery phase and the checks.

Events sit in one heap ordered by (time ms, sequence). A broker's events (timers, requests
delivered to it, answers to its requests) run only in the incarnation they were made for, and a
paused broker's wait until the pause ends. After every event that touched a broker the
invariants are checked (``invariants.Invariants.after_event``).

Requests (``call``): the requester's answer callback runs once, with the answer or with None
when nothing came back within ``request.timeout.ms`` or the destination's process was gone
(connection refused / reset after a short delay). Messages go through the Raft simulation's
lossy network (``tests.simulation.network``: seeded delay, drop, duplicate, reorder,
partitions); the controller is a node of the network (it can be cut off), the client is not.

Every random choice comes from a ``random.Random`` seeded with the run's seed and a purpose
(``f"{seed}/network"``...), so a seed replays exactly (``trace_digest`` hashes every trace
line). Logs live in a per-run directory under /dev/shm when it exists, removed at the end.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import random
import shutil
import tempfile
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from protocol.errors import ErrorCode
from tests.simulation.cluster import InvariantViolation
from tests.simulation.network import Network, random_partition
from tests.simulation.network import Partition as NetworkPartition
from tests.simulation.replication import broken
from tests.simulation.replication.broker import SimBroker, SimClock
from tests.simulation.replication.client import Client
from tests.simulation.replication.controller import ControllerModel
from tests.simulation.replication.invariants import Invariants
from tests.simulation.replication.options import (
    METADATA_WAIT_MAX_MS,
    RECOVERY_BOUND_MS,
    REQUEST_TIMEOUT_MS,
    ReplicationOptions,
)
from tests.simulation.replication.shell import CONTROLLER, BrokerShell
from tests.simulation.simulator import Failure

TRACE_LENGTH = 80
FENCE_CHECK_INTERVAL_MS = 10
WARM_UP_MS = 500  # no fault before the topic exists


@dataclass
class SimulationResult:
    options: ReplicationOptions
    events: int = 0
    sim_ms: int = 0
    wall_seconds: float = 0.0
    acknowledged: int = 0
    given_up: int = 0
    highest_leader_epoch: int = 0
    crashes: int = 0
    lossy_crashes: int = 0
    pauses: int = 0
    partitions: int = 0
    elections: int = 0
    trace_digest: str = ""
    failure: Failure | None = None
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def summary(self) -> str:
        state = "ok" if self.failure is None else f"FAILED ({self.failure.invariant})"
        return (f"seed {self.options.seed}: {state}, {self.sim_ms / 1000:.1f} simulated s in "
                f"{self.wall_seconds:.2f} s, {self.events} events, {self.acknowledged} records "
                f"acknowledged ({self.given_up} batches given up), leader epoch up to "
                f"{self.highest_leader_epoch}, {self.crashes} crashes ({self.lossy_crashes} "
                f"lossy), {self.pauses} pauses, {self.partitions} partitions, "
                f"{self.elections} preferred elections, trace {self.trace_digest[:12]}")


class Simulation:
    def __init__(self, options: ReplicationOptions) -> None:
        self.options = options
        seed = options.seed
        self.network = Network(random.Random(f"{seed}/network"), options.faults, codec=False)
        self.shell_rng = random.Random(f"{seed}/shell")
        self.fault_rng = random.Random(f"{seed}/faults")
        self.workload_rng = random.Random(f"{seed}/workload")
        self.clock = SimClock()
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.root = Path(tempfile.mkdtemp(prefix=f"samsa-rsim-{seed}-", dir=shm))
        partition_class = broken.partition_class(options.variant)
        self.brokers = {broker_id: SimBroker(broker_id, self.root, self.clock, partition_class)
                        for broker_id in range(options.brokers)}
        self.controller = ControllerModel(list(self.brokers), options.partitions,
                                          random.Random(f"{seed}/controller"))
        self.invariants = Invariants(options.partitions)
        self.shell = BrokerShell(self, forget_pending_isr=broken.forgets_pending_isr(options.variant))
        self.client = Client(self, options.partitions)
        self.result = SimulationResult(options)
        self._queue: list[tuple[int, int, Callable[..., bool | None], tuple[Any, ...]]] = []
        self._sequence = 0
        self._request_ids = 0
        self._in_flight: dict[int, tuple[int, int, Callable[[Any], None]]] = {}
        self._metadata_waiters: list[tuple[int, Callable[[Any], None]]] = []
        self._metadata_length = 0
        self.trace: deque[str] = deque(maxlen=TRACE_LENGTH)
        self._digest = hashlib.sha256()
        self.healed_at_ms: int | None = None
        self.done = False
        self.handlers: dict[str, Callable[[int, Any, Callable[[Any], None]], None]] = {
            "register": self._handle_register, "heartbeat": self._handle_heartbeat,
            "alter_partition": self._handle_alter_partition, "metadata_log": self._handle_metadata_log,
            "fetch": self._on_broker_handler(self.shell.serve_fetch),
            "produce": self._on_broker_handler(self.shell.serve_produce),
            "metadata": self._on_broker_handler(self._handle_client_metadata),
        }

    @property
    def now_ms(self) -> int:
        return self.clock.now_ms

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> SimulationResult:
        started = time.perf_counter()
        try:
            self._setup()
            self._loop()
            self._final_checks()
        except InvariantViolation as violation:
            self._fail(violation.invariant, violation.detail)
        except Exception:
            self._fail("CoreError", traceback.format_exc(limit=14).rstrip())
        finally:
            for broker in self.brokers.values():
                broker.close()
            shutil.rmtree(self.root, ignore_errors=True)
        self._finish(time.perf_counter() - started)
        return self.result

    def _loop(self) -> None:
        queue, pop, invariants = self._queue, heapq.heappop, self.invariants
        brokers = list(self.brokers.values())
        events = 0
        while queue and not self.done:
            at, _, action, args = pop(queue)
            self.clock.now_ms = at
            touched = action(*args)
            events += 1
            if touched:
                invariants.after_event(brokers)
        self.result.events = events
        if not self.done:
            raise InvariantViolation("Liveness", "the event queue ran dry")

    def push(self, at_ms: int, action: Callable[..., bool | None], *args: Any) -> None:
        self._sequence += 1
        heapq.heappush(self._queue, (at_ms, self._sequence, action, args))

    def on_broker(self, at_ms: int, broker: SimBroker, action: Callable[..., None], *args: Any) -> None:
        """``action(broker, *args)`` at ``at_ms`` if this incarnation still runs then."""
        self.push(at_ms, self._broker_event, broker, broker.incarnation, action, args)

    def _broker_event(self, broker: SimBroker, incarnation: int, action: Callable[..., None],
                      args: tuple[Any, ...]) -> bool:
        if broker.process is None or broker.incarnation != incarnation:
            return False
        if self.now_ms < broker.paused_until:
            self.push(broker.paused_until, self._broker_event, broker, incarnation, action, args)
            return False
        action(broker, *args)
        return True

    def note(self, kind: str, *details: Any) -> None:
        line = f"{self.now_ms:>7} ms  {kind} {' '.join(_short(item) for item in details)}"
        self.trace.append(line)
        self._digest.update(line.encode())

    def _fail(self, invariant: str, detail: str) -> None:
        self.result.failure = Failure(invariant, detail, self.now_ms, list(self.trace),
                                      self.options.replay_command())

    def _finish(self, wall_seconds: float) -> None:
        result = self.result
        result.wall_seconds = wall_seconds
        result.sim_ms = self.now_ms
        result.acknowledged = self.client.acknowledged
        result.given_up = self.client.given_up
        result.lossy_crashes = sum(broker.lossy_crashes for broker in self.brokers.values())
        result.highest_leader_epoch = max((epoch for _, epoch in self.invariants.leaders),
                                          default=0)
        result.trace_digest = self._digest.hexdigest()

    # -- requests -----------------------------------------------------------------------------

    def call(self, source: int, destination: int, kind: str, payload: Any,
             on_answer: Callable[[Any], None], *, timeout_ms: int = REQUEST_TIMEOUT_MS) -> None:
        self._request_ids += 1
        request_id = self._request_ids
        self._in_flight[request_id] = (source, self._incarnation(source), on_answer)
        self.push(self.now_ms + timeout_ms, self._answer, request_id, None)
        if not self._up(destination):
            self.push(self.now_ms + self.network.refused_after_ms(), self._answer, request_id, None)
            return
        incarnation = self._incarnation(destination)
        for at in self.network.delivery_times(source, destination, self.now_ms):
            self.push(at, self._deliver, request_id, source, destination, incarnation, kind,
                      payload)

    def _up(self, node: int) -> bool:
        broker = self.brokers.get(node)
        return broker is None or broker.process is not None

    def _incarnation(self, node: int) -> int:
        broker = self.brokers.get(node)
        return 0 if broker is None else broker.incarnation

    def _deliver(self, request_id: int, source: int, destination: int, incarnation: int,
                 kind: str, payload: Any) -> bool:
        if not self._up(destination) or self._incarnation(destination) != incarnation:
            self.push(self.now_ms + self.network.refused_after_ms(), self._answer, request_id, None)
            return False
        broker = self.brokers.get(destination)
        if broker is not None and self.now_ms < broker.paused_until:
            self.push(broker.paused_until, self._deliver, request_id, source, destination,
                      incarnation, kind, payload)
            return False
        reply = partial(self._reply, request_id, source, destination, incarnation)
        self.handlers[kind](destination, payload, reply)
        return True

    def _reply(self, request_id: int, requester: int, responder: int, incarnation: int,
               answer: Any) -> None:
        if not self._up(responder) or self._incarnation(responder) != incarnation:
            return  # the process that would have answered is gone
        for at in self.network.delivery_times(responder, requester, self.now_ms):
            self.push(at, self._answer, request_id, answer)

    def _answer(self, request_id: int, answer: Any) -> bool:
        entry = self._in_flight.get(request_id)
        if entry is None:
            return False  # answered already: a late timeout or a duplicate
        source, incarnation, on_answer = entry
        if not self._up(source) or self._incarnation(source) != incarnation:
            del self._in_flight[request_id]
            return False
        broker = self.brokers.get(source)
        if broker is not None and self.now_ms < broker.paused_until:
            self.push(broker.paused_until, self._answer, request_id, answer)
            return False
        del self._in_flight[request_id]
        on_answer(answer)
        return True

    def _on_broker_handler(self, handler: Callable[..., None]
                           ) -> Callable[[int, Any, Callable[[Any], None]], None]:
        def handle(destination: int, payload: Any, reply: Callable[[Any], None]) -> None:
            handler(self.brokers[destination], payload, reply)
        return handle

    def _handle_client_metadata(self, broker: SimBroker, index: int, reply: Callable[[Any], None]) -> None:
        assert broker.process is not None
        reply(self.client.answer_metadata(broker.process.image, index))

    # -- the controller -----------------------------------------------------------------------

    def _handle_register(self, _: int, payload: tuple[int, uuid.UUID], reply: Callable[[Any], None]) -> None:
        broker_id, incarnation_id = payload
        answer = self.controller.register(broker_id, incarnation_id, self.now_ms)
        if answer[0] != ErrorCode.NONE:
            self.note("register-refused", broker_id, ErrorCode(answer[0]).name)
        reply(answer)
        self._metadata_committed()

    def _handle_heartbeat(self, _: int, payload: tuple[int, int, int], reply: Callable[[Any], None]) -> None:
        reply(self.controller.heartbeat(*payload, self.now_ms))
        self._metadata_committed()

    def _handle_alter_partition(self, _: int, request: Any, reply: Callable[[Any], None]) -> None:
        reply(self.controller.alter_partition(request, self.now_ms))
        self._metadata_committed()

    def _handle_metadata_log(self, _: int, from_offset: int, reply: Callable[[Any], None]) -> None:
        records = self.controller.records
        if from_offset < len(records):
            reply([(offset, records[offset]) for offset in range(from_offset, len(records))])
            return
        waiter = (from_offset, reply)
        self._metadata_waiters.append(waiter)
        self.push(self.now_ms + METADATA_WAIT_MAX_MS, self._metadata_wait_over, waiter)

    def _metadata_wait_over(self, waiter: tuple[int, Callable[[Any], None]]) -> bool:
        if waiter in self._metadata_waiters:
            self._metadata_waiters.remove(waiter)
            waiter[1]([])
        return False

    def _metadata_committed(self) -> None:
        """Trace what the controller committed, and answer the waiting metadata fetches."""
        records = self.controller.records
        if len(records) == self._metadata_length:
            return
        for record in records[self._metadata_length:]:
            self.note("commit", record)
        self._metadata_length = len(records)
        waiters, self._metadata_waiters = self._metadata_waiters, []
        for from_offset, reply in waiters:
            reply([(offset, records[offset]) for offset in range(from_offset, len(records))])

    def _fence_check(self) -> bool:
        for broker_id in self.controller.fence_stale_brokers(self.now_ms):
            self.note("fenced", broker_id, "session expired")
        self._metadata_committed()
        self.push(self.now_ms + FENCE_CHECK_INTERVAL_MS, self._fence_check)
        return False

    # -- set-up and faults ------------------------------------------------------------------

    def _setup(self) -> None:
        for broker in self.brokers.values():
            self.push(0, self._start, broker)
        self.push(FENCE_CHECK_INTERVAL_MS, self._fence_check)
        self.client.start()
        end, faults = self.options.sim_ms, self.options.faults
        plans: list[tuple[str, float, Callable[[], bool]]] = [
            ("crash", 3000, self._crash), ("pause", 4000, self._pause),
            ("partition", 3000, self._partition), ("elect", 1500, self._elect)]
        for name, mean_gap_ms, action in plans:
            if name in faults:  # each fault's rate: seeded, from a third to twice the mean's
                gap_ms = mean_gap_ms / self.fault_rng.uniform(0.33, 2.0)
                at = float(WARM_UP_MS)
                while (at := at + self.fault_rng.expovariate(1 / gap_ms)) < end:
                    self.push(int(at), action)
        self.push(end, self._heal)

    def _start(self, broker: SimBroker) -> bool:
        if broker.process is not None:
            return False
        process = broker.start(uuid.UUID(int=self.fault_rng.getrandbits(128)))
        self.note("start", broker.broker_id, f"incarnation {process.number}")
        self.shell.started(broker)
        return True

    def _crash(self) -> bool:
        running = [b for b in self.brokers.values() if b.process is not None]
        if self.healed_at_ms is not None or not running:
            return False
        broker = self.fault_rng.choice(running)
        lossy = ("lossy" in self.options.faults and self.fault_rng.random() < 0.4
                 and len(running) == len(self.brokers) and self.controller.all_replicas_in_sync())
        down_ms = self.fault_rng.randint(20, 1200)
        self.note("lossy-crash" if lossy else "crash", broker.broker_id, f"down {down_ms} ms",
                  *(p for p in broker.process.partitions.values()))  # type: ignore[union-attr]
        broker.crash(lossy=lossy)
        broker.paused_until = 0
        self.result.crashes += 1
        self.push(self.now_ms + down_ms, self._start, broker)
        return True

    def _pause(self) -> bool:
        running = [b for b in self.brokers.values() if b.process is not None]
        if self.healed_at_ms is not None or not running:
            return False
        broker = self.fault_rng.choice(running)
        pause_ms = self.fault_rng.randint(20, 700)
        broker.paused_until = max(broker.paused_until, self.now_ms + pause_ms)
        self.note("pause", broker.broker_id, f"{pause_ms} ms")
        self.result.pauses += 1
        return False

    def _partition(self) -> bool:
        if self.healed_at_ms is not None:
            return False
        cut = random_partition(self.fault_rng, [*self.brokers, CONTROLLER], [])
        self.note("partition", cut.description)
        self.network.block(cut)
        self.result.partitions += 1
        self.push(self.now_ms + self.fault_rng.randint(50, 1500), self._heal_partition, cut)
        return False

    def _heal_partition(self, cut: NetworkPartition) -> bool:
        if self.healed_at_ms is None:
            self.note("heal", cut.description)
            self.network.unblock(cut)
        return False

    def _elect(self) -> bool:
        index = self.fault_rng.randrange(self.options.partitions)
        if self.healed_at_ms is None and self.controller.elect_preferred(index, self.now_ms):
            self.note("preferred-election", index)
            self.result.elections += 1
            self._metadata_committed()
        return False

    # -- recovery and the end ---------------------------------------------------------------

    def _heal(self) -> bool:
        self.note("recovery phase", "every link up, every broker started")
        self.network.heal()
        self.healed_at_ms = self.now_ms
        for broker in self.brokers.values():
            broker.paused_until = min(broker.paused_until, self.now_ms)
            self._start(broker)
        self.push(self.now_ms + 50, self._check_recovered)
        return True

    def _check_recovered(self) -> bool:
        assert self.healed_at_ms is not None
        if not self.client.stopped and all(p.acked_after_heal for p in self.client.partitions):
            self.client.stopped = True
        if self.client.stopped and self._caught_up():
            self.done = True
            return False
        if self.now_ms - self.healed_at_ms > RECOVERY_BOUND_MS:
            raise InvariantViolation("Liveness", f"not recovered within {RECOVERY_BOUND_MS} ms "
                                                 f"of healing: {self._states()}")
        self.push(self.now_ms + 50, self._check_recovered)
        return False

    def _caught_up(self) -> bool:
        """Every batch acknowledged or given up; every replica in the ISR, at the leader's end."""
        if any(p.values is not None for p in self.client.partitions):
            return False
        for index in range(self.options.partitions):
            registration = self.controller.partition(index)
            if registration is None or set(registration.isr) != set(registration.replicas):
                return False
            ends = set()
            for replica in registration.replicas:
                process = self.brokers[replica].process
                partition = None if process is None else process.partitions.get(index)
                if partition is None or partition.leader_epoch != registration.leader_epoch:
                    return False
                ends.add((partition.log_end_offset, partition.high_watermark))
            if len(ends) != 1 or len({offset for pair in ends for offset in pair}) != 1:
                return False
        return True

    def _final_checks(self) -> None:
        self.invariants.after_event(list(self.brokers.values()))
        for index in range(self.options.partitions):
            registration = self.controller.partition(index)
            assert registration is not None
            process = self.brokers[registration.leader].process
            assert process is not None
            self.invariants.leader_holds_acks(index, process.partitions[index],
                                              f"the final leader {registration.leader}",
                                              below_high_watermark=True)

    def _states(self) -> str:
        lines = []
        for index in range(self.options.partitions):
            lines.append(f"controller: {self.controller.partition(index)}")
        for broker in self.brokers.values():
            process = broker.process
            lines.append(f"broker {broker.broker_id}: " + (
                "down" if process is None else f"epoch {process.broker_epoch} metadata "
                f"{process.metadata_offset} " + "; ".join(
                    repr(p) for p in process.partitions.values())))
        return "\n".join(lines)


def run_seed(options: ReplicationOptions) -> SimulationResult:
    """Run one seed; ``options.variant`` picks a broken partition or shell (``broken``)."""
    return Simulation(options).run()


def _short(item: Any, limit: int = 200) -> str:
    text = item if isinstance(item, str) else repr(item)
    return text if len(text) <= limit else text[:limit] + "…"
