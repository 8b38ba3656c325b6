"""Partition leader failover: ``kills`` times, kill -9 the leader of a replicated partition
while an idempotent ``acks=all`` producer writes to it, and time until a write sent after the
kill is acknowledged.

One cluster per configuration (``bench.cluster_nodes``: combined nodes), its
``broker.session.timeout.ms`` set on every node (the controllers fence a broker whose
heartbeats stop for that long, which is what moves the partition's leadership off a dead
broker; ``broker.heartbeat.interval.ms`` stays 2000). The topic ``failover-N``: 1 partition,
replication factor 3, ``min.insync.replicas=2``. Each kill:

1. the partition's leader (Metadata through a live node) and the active controller
   (DescribeQuorum): a kill of the controller measures a controller failover too;
2. ``Writer``: a confluent-kafka producer (``enable.idempotence=true``, so ``acks=all``;
   ``linger.ms=0``; ``message.timeout.ms`` 120 s) started in its own thread, one record every
   ``WRITE_INTERVAL_S`` to partition 0, each delivery report kept with the record's send time;
   the kill waits for a first acknowledged write;
3. SIGKILL to the leader; the clock (``time.monotonic``) starts just before the signal;
4. ``failover_s``: until the first delivery report of success for a record *sent* after the
   kill (reports are polled every ``WRITE_INTERVAL_S``: that is the resolution). Meanwhile
   ``new_leader_s``: until a survivor's Metadata names another leader (polled every 20 ms,
   ``bench.polling``). Either is None if not within ``FAILOVER_TIMEOUT_S``.
5. the killed node is started again on its data and ports; ``rejoin_isr_s``: until Metadata
   lists it in the partition's ISR again. If it does not within ``REJOIN_TIMEOUT_S`` (60 s;
   15 s with ``--quick``; a broker whose followers do not fetch never rejoins), the next kill
   gets a new topic, so that each kill starts from a full ISR; such kills say
   ``new_topic_after: true``.

Reported per configuration: min / median / p90 / p99 / max (nearest rank:
``bench.distribution``) of ``failover_s``, ``new_leader_s`` and ``rejoin_isr_s``, the p99 <= 10 s
goal checked on ``failover_s``, and every kill.

State: the clusters and their processes belong to ``run``; a ``Writer``'s lists belong to its
thread until ``Writer.stop`` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.progress import Progress

from bench import cluster_requests
from bench.cluster_failover import current_controller
from bench.cluster_nodes import BenchCluster, wait_until, work_dir
from bench.cluster_topics import formed_leader
from bench.distribution import Distribution
from bench.polling import first_success

GOAL_P99_S = 10.0
SESSION_TIMEOUTS_MS = (9000, 3000)  # Kafka's default, and a shorter one
WRITE_INTERVAL_S = 0.01
FAILOVER_TIMEOUT_S = 60.0
REJOIN_TIMEOUT_S = 60.0
QUIET = {"log_level": 0}  # librdkafka logs nothing: a dead broker is expected here
FIGURES = ("failover_s", "new_leader_s", "rejoin_isr_s")


# -- the writer -------------------------------------------------------------------------------


@dataclass
class Writer:
    """A producer writing one record every ``WRITE_INTERVAL_S`` to partition 0 of ``topic``
    from its own thread; ``acked`` holds (sent_at, acked_at) of every success (monotonic)."""

    servers: str
    topic: str
    acked: list[tuple[float, float]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Writer:
        self._thread = threading.Thread(target=self._run, daemon=True, name="failover-writer")
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.servers, "enable.idempotence": True,
                             "acks": "all", "linger.ms": 0, "message.timeout.ms": 120_000,
                             **QUIET})
        try:
            while not self._stop.is_set():
                sent_at = time.monotonic()
                with contextlib.suppress(BufferError):
                    producer.produce(self.topic, b"x" * 100, partition=0,
                                     on_delivery=functools.partial(self._delivered, sent_at))
                producer.poll(WRITE_INTERVAL_S)
        finally:
            producer.flush(5)
            producer.close()

    def _delivered(self, sent_at: float, error: Any, _message: Any) -> None:
        if error is None:
            self.acked.append((sent_at, time.monotonic()))
        else:
            self.errors[error.name()] += 1

    def first_ack_sent_after(self, moment: float) -> float | None:
        """When the first record sent after ``moment`` was acknowledged (None: none yet)."""
        return min((acked for sent, acked in list(self.acked) if sent > moment), default=None)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


# -- one kill ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    killed: int  # the partition leader killed
    was_controller: bool  # it was also the active controller
    topic: str
    failover_s: float | None
    new_leader_s: float | None
    new_leader: int | None
    rejoin_isr_s: float | None
    new_topic_after: bool
    writer_errors: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"killed": self.killed, "was_controller": self.was_controller,
                "topic": self.topic, "failover_s": _rounded(self.failover_s),
                "new_leader_s": _rounded(self.new_leader_s), "new_leader": self.new_leader,
                "rejoin_isr_s": _rounded(self.rejoin_isr_s),
                "new_topic_after": self.new_topic_after, "writer_errors": self.writer_errors}


def servers(cluster: BenchCluster) -> str:
    return ",".join(f"127.0.0.1:{port}" for port in cluster.client_ports.values())


async def partition_state(port: int, topic: str) -> tuple[int, list[int]] | None:
    """Partition 0's (leader, isr) as the node on ``port`` reports it; None if unknown."""
    node = cluster_requests.client(port, request_timeout_ms=5_000)
    try:
        response = await cluster_requests.metadata_for(node, [topic])
    finally:
        await node.close()
    for described in response.topics:
        for partition in described.partitions:
            if described.error_code == 0 and partition.partition_index == 0:
                return partition.leader_id, list(partition.isr_nodes)
    return None


def leader_of(cluster: BenchCluster, topic: str) -> int:
    def ask() -> int | None:
        state = asyncio.run(partition_state(cluster.client_ports[cluster.alive()[0]], topic))
        return state[0] if state is not None and state[0] >= 0 else None
    return wait_until(ask, what=f"a leader for {topic}")


def create_topic(cluster: BenchCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers(cluster), "log_level": 3})
    new = NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})
    for future in admin.create_topics([new]).values():
        future.result(60)
    wait_until(lambda: _full_isr(cluster, topic), what=f"{topic} with every replica in sync")


def _full_isr(cluster: BenchCluster, topic: str) -> bool:
    state = asyncio.run(partition_state(cluster.client_ports[cluster.alive()[0]], topic))
    return state is not None and state[0] >= 0 and sorted(state[1]) == cluster.node_ids


async def _new_leader(ports: list[int], topic: str, old: int) -> tuple[float | None, int | None]:
    seen: list[int] = []

    async def attempt(index: int) -> bool:
        state = await partition_state(ports[index % len(ports)], topic)
        if state is not None and state[0] not in (-1, old):
            seen.append(state[0])
            return True
        return False

    seconds = await first_success(attempt, interval_s=0.02, timeout_s=FAILOVER_TIMEOUT_S)
    return seconds, (seen[0] if seen else None)


def kill_leader(cluster: BenchCluster, topic: str, rejoin_timeout_s: float) -> Kill:
    leader = leader_of(cluster, topic)
    controller, _ = current_controller(cluster)
    survivors = [cluster.client_ports[node] for node in cluster.alive() if node != leader]
    writer = Writer(servers(cluster), topic).start()
    try:
        wait_until(lambda: writer.acked, timeout_s=30, what=f"a first write to {topic}")
        killed_at = time.monotonic()
        cluster.kill(leader)
        new_leader_s, new_leader = asyncio.run(_new_leader(survivors, topic, leader))
        acked_at = _first_ack_after(writer, killed_at)
    finally:
        writer.stop()
    rejoin_isr_s = restart_and_rejoin(cluster, leader, topic, rejoin_timeout_s)
    return Kill(leader, leader == controller, topic,
                None if acked_at is None else acked_at - killed_at, new_leader_s, new_leader,
                rejoin_isr_s, rejoin_isr_s is None, dict(writer.errors))


def _first_ack_after(writer: Writer, killed_at: float) -> float | None:
    left_s = FAILOVER_TIMEOUT_S - (time.monotonic() - killed_at)
    try:
        return wait_until(lambda: writer.first_ack_sent_after(killed_at),
                          timeout_s=max(left_s, 0.1), what="an acknowledged write")
    except TimeoutError:
        return None


def restart_and_rejoin(cluster: BenchCluster, node_id: int, topic: str,
                       timeout_s: float) -> float | None:
    """Start ``node_id`` again; seconds until Metadata lists it in the ISR (None: not within
    ``timeout_s``)."""
    started = time.monotonic()
    cluster.start(node_id)

    def in_isr() -> bool:
        state = asyncio.run(partition_state(cluster.client_ports[node_id], topic))
        return state is not None and node_id in state[1]

    try:
        wait_until(in_isr, timeout_s=timeout_s, interval_s=0.1,
                   what=f"node {node_id} in the ISR of {topic}")
    except TimeoutError:
        wait_until(lambda: formed_leader(cluster), what="every node a live broker again")
        return None
    return time.monotonic() - started


# -- the run ----------------------------------------------------------------------------------


def run_configuration(session_timeout_ms: int, *, kills: int, progress: Progress,
                      work: Path, rejoin_timeout_s: float) -> dict[str, Any]:
    cluster = BenchCluster(work / f"session-{session_timeout_ms}",
                           extra={"broker.session.timeout.ms": str(session_timeout_ms)})
    done: list[Kill] = []
    task = progress.add_task("", total=kills)
    try:
        cluster.start_all()
        wait_until(lambda: formed_leader(cluster), what="a formed cluster")
        topic_index = 0
        create_topic(cluster, topic := f"failover-{topic_index}")
        for index in range(kills):
            progress.update(task, description=f"leader failover, session "
                                              f"{session_timeout_ms} ms: {index + 1}/{kills}")
            done.append(kill_leader(cluster, topic, rejoin_timeout_s))
            if done[-1].new_topic_after and index + 1 < kills:
                topic_index += 1
                create_topic(cluster, topic := f"failover-{topic_index}")
            progress.advance(task)
    finally:
        progress.remove_task(task)
        cluster.stop_all()
    return summarize(session_timeout_ms, done)


def run(*, kills: int, progress: Progress, keep: Path | None = None,
        session_timeouts_ms: tuple[int, ...] = SESSION_TIMEOUTS_MS,
        rejoin_timeout_s: float = REJOIN_TIMEOUT_S) -> dict[str, Any]:
    with work_dir("samsa-bench-leader-failover-", keep) as work:
        return {"goal_p99_s": GOAL_P99_S, "write_interval_s": WRITE_INTERVAL_S,
                "timeout_s": FAILOVER_TIMEOUT_S, "rejoin_timeout_s": rejoin_timeout_s,
                "configurations": [
                    run_configuration(timeout, kills=kills, progress=progress, work=work,
                                      rejoin_timeout_s=rejoin_timeout_s)
                    for timeout in session_timeouts_ms]}


def summarize(session_timeout_ms: int, kills: list[Kill]) -> dict[str, Any]:
    rows = [kill.to_json() for kill in kills]
    distributions = {}
    for figure in FIGURES:
        values = [row[figure] for row in rows if row[figure] is not None]
        distributions[figure] = Distribution.of(values).to_json() if values else None
    missing = {figure: sum(1 for row in rows if row[figure] is None) for figure in FIGURES}
    failover = distributions["failover_s"]
    return {"broker_session_timeout_ms": session_timeout_ms, "kills": len(kills),
            "controller_kills": sum(1 for kill in kills if kill.was_controller),
            "distributions": distributions, "missing": missing,
            "goal_met": failover is not None and not missing["failover_s"]
            and failover["p99"] <= GOAL_P99_S,
            "by_kill": rows}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
