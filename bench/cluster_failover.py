"""Controller failover: ``kills`` times, kill -9 the active controller of a three-node cluster
and time the cluster's recovery, with the default timeouts
(``controller.quorum.election.timeout.ms`` 1000, ``controller.quorum.fetch.timeout.ms`` 2000,
``controller.quorum.election.backoff.max.ms`` 1000, ``broker.session.timeout.ms`` 9000).

One cluster for every kill (``bench.cluster_nodes``). Each kill:

1. the active controller and its epoch: DescribeQuorum through a live node (forwarded to it);
2. SIGKILL to it; the clock starts just before the signal;
3. concurrently until each succeeds (``bench.polling.first_success``: an attempt every 20 ms,
   each on its own connection, alternating between the two survivors):
   - ``new_leader_s``: DescribeQuorum through a survivor names a leader other than the killed
     one;
   - ``create_s``: CreateTopics of a new topic (1 partition, replication factor 2: two live
     brokers suffice whether or not the killed one is fenced yet) through a survivor answers
     NONE — or TOPIC_ALREADY_EXISTS, when an earlier attempt created it but its answer was
     lost with the dead controller;
4. the killed node is started again on its own data and ports; ``rejoin_s`` runs until its log
   says ``broker N unfenced`` (it caught up with the metadata and the controller let it in);
   only then the next kill.

The nodes' logs then split each failover into detection and election (``bench.quorum_log``).
Reported: min / median / p90 / p99 / max (nearest rank: ``bench.distribution``) of each
figure, with the p99 <= 3 s goal checked on both times.

State: the cluster and its processes belong to ``run``, stopped before it returns.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress

from bench import cluster_requests, quorum_log
from bench.cluster_nodes import BenchCluster, wait_until, work_dir
from bench.cluster_topics import formed_leader
from bench.distribution import Distribution
from bench.polling import first_success
from protocol.errors import ErrorCode

GOAL_P99_S = 3.0
POLL_INTERVAL_S = 0.02
ATTEMPT_TIMEOUT_MS = 5_000
FAILOVER_TIMEOUT_S = 60.0
REJOIN_TIMEOUT_S = 60.0
CREATED = (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)


@dataclass(frozen=True)
class Failover:
    """One kill: the killed controller, and the seconds until each sign of recovery (None:
    not within ``FAILOVER_TIMEOUT_S``)."""

    killed: int
    killed_at_s: float  # time.time(), the clock of the nodes' log lines
    old_epoch: int
    new_leader_s: float | None
    create_s: float | None
    rejoin_s: float
    epoch_after_rejoin: int  # above the election's epoch: the rejoining node forced elections
    phases: quorum_log.FailoverPhases

    def to_json(self) -> dict[str, Any]:
        return {"killed": self.killed, "killed_at_s": round(self.killed_at_s, 3),
                "old_epoch": self.old_epoch,
                "new_leader_s": _rounded(self.new_leader_s), "create_s": _rounded(self.create_s),
                "rejoin_s": round(self.rejoin_s, 3), **self.phases.to_json(),
                "epoch_after_rejoin": self.epoch_after_rejoin,
                "rejoin_elections": self.rejoin_elections}

    @property
    def rejoin_elections(self) -> int | None:
        """Epochs begun while the killed node rejoined (after the failover's election)."""
        if self.phases.epochs is None:
            return None
        return (self.epoch_after_rejoin - self.old_epoch - self.phases.epochs
                - (self.phases.later_elections or 0))


# -- one kill ---------------------------------------------------------------------------------


def current_controller(cluster: BenchCluster) -> tuple[int, int]:
    """The active controller and its epoch, as a live node's DescribeQuorum reports them."""
    async def ask() -> tuple[int, int] | None:
        node = cluster_requests.client(cluster.client_ports[cluster.alive()[0]])
        try:
            state = await cluster_requests.quorum_state(node)
        finally:
            await node.close()
        return (state.leader_id, state.leader_epoch) if state.leader_id >= 0 else None

    return wait_until(lambda: asyncio.run(ask()), what="an active controller")


async def _new_leader_attempt(port: int, old_leader: int) -> bool:
    node = cluster_requests.client(port, request_timeout_ms=ATTEMPT_TIMEOUT_MS)
    try:
        return (await cluster_requests.quorum_leader(node)) not in (None, old_leader)
    finally:
        await node.close()


async def _create_attempt(port: int, topic: str) -> bool:
    node = cluster_requests.client(port, request_timeout_ms=ATTEMPT_TIMEOUT_MS)
    try:
        codes = await cluster_requests.create_topics(node, [topic], replication_factor=2,
                                                     timeout_ms=ATTEMPT_TIMEOUT_MS)
    finally:
        await node.close()
    return codes.get(topic) in CREATED


async def _recovery(ports: list[int], old_leader: int,
                    topic: str) -> tuple[float | None, float | None]:
    def poll(attempt: Any) -> Any:
        return first_success(attempt, interval_s=POLL_INTERVAL_S, timeout_s=FAILOVER_TIMEOUT_S)

    new_leader, create = await asyncio.gather(
        poll(lambda index: _new_leader_attempt(ports[index % len(ports)], old_leader)),
        poll(lambda index: _create_attempt(ports[index % len(ports)], topic)))
    return new_leader, create


def kill_and_recover(cluster: BenchCluster, index: int) -> Failover:
    old_leader, old_epoch = current_controller(cluster)
    survivors = [node_id for node_id in cluster.alive() if node_id != old_leader]
    ports = [cluster.client_ports[node_id] for node_id in survivors]
    killed_at_s = time.time()
    cluster.kill(old_leader)
    new_leader_s, create_s = asyncio.run(_recovery(ports, old_leader, f"failover-{index}"))
    rejoin_s = restart_and_rejoin(cluster, old_leader)
    epoch_after_rejoin = current_controller(cluster)[1]
    changes = [change for node_id in survivors for change in quorum_log.leader_changes(
        node_id, cluster.log_path(node_id).read_text(errors="replace"))]
    phases = quorum_log.failover_phases(
        changes, killed_at_s=killed_at_s, old_epoch=old_epoch, old_leader=old_leader,
        until_s=None if create_s is None else killed_at_s + create_s)
    return Failover(old_leader, killed_at_s, old_epoch, new_leader_s, create_s, rejoin_s,
                    epoch_after_rejoin, phases)


def restart_and_rejoin(cluster: BenchCluster, node_id: int) -> float:
    """Start ``node_id`` again; seconds until its broker logs that it is unfenced."""
    log_path = cluster.log_path(node_id)
    unfenced_before = len(quorum_log.unfenced_times(node_id, log_path.read_text(errors="replace")))
    started = time.monotonic()
    cluster.start(node_id)
    wait_until(lambda: len(quorum_log.unfenced_times(
        node_id, log_path.read_text(errors="replace"))) > unfenced_before,
        timeout_s=REJOIN_TIMEOUT_S, what=f"node {node_id} unfenced again")
    return time.monotonic() - started


# -- the run ----------------------------------------------------------------------------------


def run(*, kills: int, progress: Progress, keep: Path | None = None) -> dict[str, Any]:
    with work_dir("samsa-bench-failover-", keep) as work:
        cluster = BenchCluster(work / "cluster")
        try:
            cluster.start_all()
            wait_until(lambda: formed_leader(cluster), what="a formed cluster")
            task = progress.add_task("controller failover", total=kills)
            failovers = []
            for index in range(kills):
                progress.update(task, description=f"controller failover {index + 1}/{kills}")
                failovers.append(kill_and_recover(cluster, index))
                progress.advance(task)
            progress.remove_task(task)
        finally:
            cluster.stop_all()
    return summarize(failovers)


FIGURES = ("new_leader_s", "create_s", "detection_s", "election_s", "rejoin_s")


def summarize(failovers: list[Failover]) -> dict[str, Any]:
    rows = [failover.to_json() for failover in failovers]
    distributions = {}
    for figure in (*FIGURES, "epochs", "later_elections", "rejoin_elections"):
        values = [row[figure] for row in rows if row[figure] is not None]
        distributions[figure] = Distribution.of(values).to_json() if values else None
    missing = {figure: sum(1 for row in rows if row[figure] is None) for figure in FIGURES}
    return {"kills": len(failovers), "goal_p99_s": GOAL_P99_S, "distributions": distributions,
            "missing": missing, "goal_met": {
                figure: _goal_met(distributions[figure], missing[figure])
                for figure in ("new_leader_s", "create_s")},
            "by_kill": rows}


def _goal_met(distribution: dict[str, float] | None, missing: int) -> bool:
    return distribution is not None and not missing and distribution["p99"] <= GOAL_P99_S


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
