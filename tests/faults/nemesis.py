"""The nemesis: seeded faults applied to a :class:`~tests.faults.cluster.FaultCluster`, each logged
to the history as a ``fault`` event (and its end as ``heal``).

Every choice (which node, how long, where a file is cut) comes from the run's ``random.Random``,
so a seed replays the same schedule (the cluster's own timing still varies from run to run: the
seed fixes what is done, not what the brokers race to do). Holds are in wall seconds, scaled to
the cluster's timeouts (``FAST_TIMEOUTS``): a pause lasts longer than the session and election
timeouts, so the paused node is fenced and, if it led, replaced — the zombie-leader case.

Fault kinds (``KINDS``): ``kill`` (kill -9 one node, restart it), ``kill-all`` (every node at
once), ``pause`` (SIGSTOP past the timeouts, SIGCONT), ``isolate`` (every link to and from one
node black-holed), ``split`` (a minority and a majority), ``one-way`` (one direction of one link
dropped), ``flaky`` (a link delayed and stalling), ``clock`` (a node restarted with its wall clock
skewed), ``rolling`` (SIGTERM restarts of every node in turn), ``replace`` (a node's data wiped,
it rejoins empty), ``power`` (every node killed, files cut to what was fsynced — needs the
fsync ledger), ``disk`` (corruptions in one stopped node's files).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.faults.history import History

if TYPE_CHECKING:
    from tests.faults.cluster import FaultCluster

__all__ = ["FAST_TIMEOUTS", "KINDS", "Nemesis"]

# Kafka's timeouts scaled down so a fault cycle takes seconds, not minutes.
FAST_TIMEOUTS = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "replica.lag.time.max.ms": "4000",
    "replica.socket.timeout.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
}
SESSION_S = 3.0

KINDS = ("kill", "kill-coordinator", "kill-all", "pause", "isolate", "split", "one-way", "flaky", "clock", "rolling",
         "replace", "power", "disk")


@dataclass
class Nemesis:
    cluster: FaultCluster
    history: History
    rng: random.Random
    # Filled in by the campaign when the fault kinds need them.
    power_loss: Callable[..., Any] | None = None
    corrupt: Callable[..., Any] | None = None
    ledger: Callable[[int], Path] | None = None
    corruptions_per_fault: int = 1
    # (internal topic, group or transactional id) whose coordinator ``kill-coordinator`` kills.
    coordinators: tuple[tuple[str, str], ...] = ()
    # Waits until the cluster is whole again (the rolling restart waits between nodes).
    recovered: Callable[[str], None] = lambda what: None
    internal_partitions: int = 4
    started_ms: dict[int, int] = field(default_factory=dict)  # node -> wall ms of its last start

    @property
    def nodes(self) -> list[int]:
        return sorted(self.cluster.node_ids)

    def _start(self, node: int) -> None:
        """Start ``node``; the campaign's recovery wait then wants this incarnation unfenced
        (``started_ms``), not just the old registration's full ISRs: a node back within the
        session timeout is still "in the ISR" until the controller fences its old session."""
        self.started_ms[node] = int(time.time() * 1000)
        self.cluster.start(node)

    def _fault(self, name: str, **fields: Any) -> None:
        self.history.event("fault", name=name, **fields)

    def _heal(self, name: str, **fields: Any) -> None:
        self.history.event("heal", name=name, **fields)

    def _hold(self, low: float, high: float) -> float:
        seconds = self.rng.uniform(low, high)
        time.sleep(seconds)  # the fault's duration is the experiment: nothing to await
        return seconds

    def apply(self, kind: str) -> None:
        """One fault of ``kind``, held, then healed (the caller awaits recovery)."""
        getattr(self, "_" + kind.replace("-", "_"))()

    # -- processes ------------------------------------------------------------------------------

    def _kill(self) -> None:
        node = self.rng.choice(self.nodes)
        self._fault("kill", nodes=[node])
        self.cluster.kill(node)
        held = self._hold(0.5, 2 * SESSION_S)
        self._start(node)
        self._heal("kill", nodes=[node], held_s=round(held, 2))

    def _kill_coordinator(self) -> None:
        """kill -9 the node leading the coordinator partition of a group or transactional id
        (``abs(hashCode(id)) % partitions`` of ``__consumer_offsets`` / ``__transaction_state``)."""
        from broker.group.offsets import partition_for

        topic, key = self.rng.choice(self.coordinators)
        partition = partition_for(key, self.internal_partitions)
        state = self.cluster.describe(topic).get(partition)
        leader = -1 if state is None else state.leader
        if leader < 0:
            leader = self.rng.choice(self.nodes)  # no leader known now: any node will do
        self._fault("kill-coordinator", nodes=[leader], coordinator=[topic, partition, key])
        self.cluster.kill(leader)
        held = self._hold(0.5, 2 * SESSION_S)
        self._start(leader)
        self._heal("kill-coordinator", nodes=[leader], held_s=round(held, 2))

    def _kill_all(self) -> None:
        self._fault("kill-all", nodes=self.nodes)
        for node in self.nodes:
            self.cluster.kill(node)
        held = self._hold(0.2, 2.0)
        for node in self.nodes:
            self._start(node)
        self._heal("kill-all", nodes=self.nodes, held_s=round(held, 2))

    def _pause(self) -> None:
        node = self.rng.choice(self.nodes)
        self._fault("pause", nodes=[node])
        self.cluster.pause(node)
        held = self._hold(SESSION_S + 1, 3 * SESSION_S)
        self.cluster.resume(node)
        self._heal("pause", nodes=[node], held_s=round(held, 2))

    def _rolling(self) -> None:
        self._fault("rolling", nodes=self.nodes)
        for node in self.nodes:
            code = self.cluster.stop(node)
            self.history.event("stopped", nodes=[node], exit_code=code)
            self._start(node)
            self.recovered(f"node {node} back in every ISR after its restart")
        self._heal("rolling", nodes=self.nodes)

    def _replace(self) -> None:
        node = self.rng.choice(self.nodes)
        self._fault("replace", nodes=[node])
        self.cluster.kill(node)
        self.cluster.wipe(node)
        self._start(node)
        self._heal("replace", nodes=[node])

    def _clock(self) -> None:
        node = self.rng.choice(self.nodes)
        skew_ms = self.rng.choice([-1, 1]) * self.rng.randint(60_000, 3_600_000)
        self._fault("clock", nodes=[node], skew_ms=skew_ms)
        self.cluster.stop(node)
        self.cluster.set_env(node, "SAMSA_CLOCK_OFFSET_MS", str(skew_ms))
        self._start(node)
        held = self._hold(2.0, 2 * SESSION_S)
        self.cluster.stop(node)
        self.cluster.set_env(node, "SAMSA_CLOCK_OFFSET_MS", "0")
        self._start(node)
        self._heal("clock", nodes=[node], held_s=round(held, 2))

    # -- network --------------------------------------------------------------------------------

    def _isolate(self) -> None:
        node = self.rng.choice(self.nodes)
        self._fault("isolate", nodes=[node], change=self.cluster.network.isolate(node))
        held = self._hold(SESSION_S + 1, 3 * SESSION_S)
        self.cluster.network.heal()
        self._heal("isolate", nodes=[node], held_s=round(held, 2))

    def _split(self) -> None:
        nodes = self.nodes[:]
        self.rng.shuffle(nodes)
        minority = set(nodes[: (len(nodes) - 1) // 2])
        groups = [minority, set(nodes) - minority]
        self._fault("split", groups=[sorted(g) for g in groups],
                    change=self.cluster.network.split(groups))
        held = self._hold(SESSION_S + 1, 3 * SESSION_S)
        self.cluster.network.heal()
        self._heal("split", held_s=round(held, 2))

    def _one_way(self) -> None:
        source, target = self.rng.sample(self.nodes, 2)
        self._fault("one-way", nodes=[source, target],
                    change=self.cluster.network.one_way(source, target))
        held = self._hold(SESSION_S + 1, 3 * SESSION_S)
        self.cluster.network.heal()
        self._heal("one-way", nodes=[source, target], held_s=round(held, 2))

    def _flaky(self) -> None:
        source, target = self.rng.sample(self.nodes, 2)
        delay_ms, jitter_ms = self.rng.randint(5, 100), self.rng.randint(0, 50)
        stall = self.rng.uniform(0.01, 0.1)
        change = self.cluster.network.flaky(source, target, delay_ms, jitter_ms, stall)
        self._fault("flaky", nodes=[source, target], change=change)
        held = self._hold(2.0, 3 * SESSION_S)
        self.cluster.network.heal()
        self._heal("flaky", nodes=[source, target], held_s=round(held, 2))

    # -- storage --------------------------------------------------------------------------------

    def _power(self) -> None:
        if self.power_loss is None or self.ledger is None:
            raise RuntimeError("the power fault needs the fsync ledger (SAMSA_FSYNC_LEDGER)")
        self._fault("power", nodes=self.nodes)
        for node in self.nodes:
            self.cluster.kill(node)
        cuts = self.power_loss([self.cluster.data_dir(n) for n in self.nodes],
                               [self.ledger(n) for n in self.nodes], self.rng)
        for node in self.nodes:
            self._start(node)
        self._heal("power", nodes=self.nodes, cuts=[cut.as_fields() for cut in cuts][:200],
                   files_cut=len(cuts))

    def _disk(self) -> None:
        if self.corrupt is None:
            raise RuntimeError("the disk fault needs tests.faults.disk")
        node = self.rng.choice(self.nodes)
        self.cluster.kill(node)
        made = (self.corrupt(self.cluster.data_dir(node), self.rng)
                for _ in range(self.corruptions_per_fault))
        done = [corruption.as_event() for corruption in made if corruption is not None]
        self._fault("disk", nodes=[node], corruptions=done)
        self._start(node)
        self._heal("disk", nodes=[node])
