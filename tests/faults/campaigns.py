"""The issue's fault cases (G1-G11; G12, protocol fuzzing, is ``tests.faults.fuzz``) as campaigns:
a real cluster, real clients writing a history, a seeded nemesis, then a final read, the replicas'
bytes and the checker's verdict.

One run (:func:`run_case`):

1. a :class:`FaultCluster` of 3 nodes (Kafka's timeouts scaled down: ``FAST_TIMEOUTS``) with the
   white-box event log on (``SAMSA_FAULT_EVENTS``) and, for power loss, the fsync ledger;
2. the case's topics (RF 3, ``min.insync.replicas=2``) and workloads (an idempotent acks=all
   producer, a consumer group committing offsets, transactions, a compacted topic's writer);
3. the case's faults, one after another, each followed by a wait until every node is back and
   every partition has its full ISR (a cluster that does not recover in time is a finding:
   ``not-recovered``);
4. workloads stopped, one more wait for full ISRs and equal log ends, the final read of every
   partition, the nodes stopped, each replica's batches read from its files, the events merged;
5. the checker over the whole history.

The result (:class:`RunResult`) holds the seed, the faults applied, the checker's counts and
anomalies, and where the run's files are (kept when a run fails, for ``--replay``).
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults.history import History, read_history
from tests.faults.nemesis import FAST_TIMEOUTS, Nemesis
from tests.faults.workload_queue import (
    DEAD_LETTER_TOPIC,
    QUEUE_BROKER_CONFIG,
    QUEUE_GROUP,
    QUEUE_TOPIC,
)
from tests.integration.conftest import stack_dump

__all__ = ["CASES", "Case", "RunResult", "run_case"]

TOPIC = "faults"
TXN_INPUT, TXN_OUTPUT = "faults-txn-in", "faults-txn-out"
COMPACTED = "faults-compacted"


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    kinds: tuple[str, ...]  # the nemesis's fault kinds, drawn by the seed
    faults: int  # how many faults in a full campaign
    smoke_faults: int  # in make test's smoke run
    config: tuple[tuple[str, str], ...] = ()
    workloads: tuple[str, ...] = ("producer", "consumer")
    pass_rule: str = ""
    minutes: float = 0  # > 0: faults until this many minutes passed instead of a count
    power: bool = False
    corruptions: int = 1
    no_client_errors: bool = False  # G7: every send acknowledged, none unknown or failed
    producer_config: tuple[tuple[str, str], ...] = ()  # the control case's acks=1
    # Anomalies the case expects and counts instead of failing on: G4 with Kafka's default
    # flush, where a power loss takes what was acknowledged but never fsynced (Kafka's too).
    tolerated: tuple[str, ...] = ()


CASES: dict[str, Case] = {case.name: case for case in [
    Case("G1", "kill -9 of a random node under load", ("kill",), 100, 3,
         pass_rule="0 acknowledged lost, 0 inconsistent offsets, replicas identical"),
    Case("G2", "kill -9 of every node at once", ("kill-all",), 20, 2,
         pass_rule="0 acknowledged lost (page cache survives a process kill)"),
    Case("G4", "power loss of every node, log.flush.interval.messages=1", ("power",), 10, 1,
         config=(("log.flush.interval.messages", "1"),), power=True,
         pass_rule="each log a valid prefix, 0 acknowledged lost"),
    Case("G4-default", "power loss of every node, Kafka's default flush", ("power",), 10, 1,
         power=True, tolerated=("lost-write", "truncated-read", "offsets-backwards"),
         pass_rule="each log a valid prefix, replicas identical; acknowledged, unflushed "
                   "records may be lost (counted)"),
    Case("G5", "mixed partitions and pauses", ("isolate", "split", "one-way", "flaky", "pause"),
         0, 3, minutes=30,
         pass_rule="G1 holds; one leader per epoch"),
    Case("G6", "paused leader (zombie) resumes", ("pause",), 20, 2,
         pass_rule="no post-pause write acknowledged by the zombie; truncated on rejoin"),
    Case("G7", "rolling SIGTERM restarts under load", ("rolling",), 5, 1,
         no_client_errors=True, pass_rule="0 client errors"),
    Case("G8", "disk corruptions in a stopped node's files", ("disk",), 100, 2, corruptions=10,
         pass_rule="recovered to a valid prefix or reported, healed from the leader"),
    Case("G9", "kill -9 of the group coordinator", ("kill-coordinator",), 50, 2,
         workloads=("producer", "consumer"),
         pass_rule="committed offsets never go backwards"),
    Case("G10", "transactions through coordinator and leader kills",
         ("kill-coordinator", "kill"), 30, 2,
         workloads=("producer", "transactions"),
         pass_rule="no aborted read, no torn or lost committed transaction"),
    Case("G11", "kill -9 during compaction", ("kill",), 30, 2, workloads=("compacted",),
         config=(("log.cleaner.backoff.ms", "500"),),
         pass_rule="latest value per key survives"),
    # The control experiment: acks=1 (no idempotence) through isolated leaders MUST lose
    # acknowledged writes — the harness proving it sees a loss when there is one.
    Case("control-acks1", "acks=1 producers through isolated leaders (must fail)", ("isolate",),
         3, 2, producer_config=(("acks", "1"), ("enable.idempotence", "false")),
         pass_rule="expected to FAIL with lost-write"),
    # Issue 15: a share group (queue) through kill -9 of its coordinators' nodes — the group
    # coordinator (__consumer_offsets) and the share coordinator (__share_group_state) — of a
    # random node and of every node at once; the queue's rules are tests.faults.checker_queue's.
    Case("queue", "a share group through kill -9 of its coordinators and of random nodes",
         ("kill-coordinator", "kill-coordinator", "kill", "kill-all"), 20, 4, workloads=("queue",),
         config=QUEUE_BROKER_CONFIG,
         pass_rule="no record lost, none accepted twice, none both dead-lettered and accepted"),
    Case("mixed", "every fault kind, mixed", ("kill", "kill-coordinator", "pause", "isolate",
                                              "one-way", "flaky", "clock", "replace",
                                              "kill-all", "split", "rolling"), 22, 11,
         pass_rule="as G1"),
]}


@dataclass
class RunResult:
    case: str
    seed: int
    faults: list[dict[str, Any]]
    report: Any  # tests.faults.checker.Report
    root: Path
    seconds: float
    not_recovered: list[str] = field(default_factory=list)
    client_errors: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    # anomaly -> count, the client's epoch-bump duplicates left out (tests.faults.duplicates)
    anomalies: dict[str, int] = field(default_factory=dict)

    tolerated: dict[str, int] = field(default_factory=dict)  # the case's expected anomalies

    @property
    def passed(self) -> bool:
        return not self.anomalies and not self.not_recovered and not self.client_errors

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "seed": self.seed, "passed": self.passed,
                "faults": len(self.faults), "seconds": round(self.seconds, 1),
                "not_recovered": self.not_recovered, "client_errors": self.client_errors,
                "figures": self.figures,
                "anomalies": self.anomalies, "tolerated": self.tolerated, "checker": _trimmed(self.report),
                "root": str(self.root)}


def _trimmed(report: Any, examples: int = 5) -> dict[str, Any]:
    """The checker's report with at most ``examples`` examples of each anomaly."""
    data: dict[str, Any] = json.loads(report.to_json())
    data["anomalies"] = {name: found[:examples] for name, found in data.get("anomalies", {}).items()}
    return data


def replay_command(case: str, seed: int, faults: int | None) -> str:
    count = f" --faults {faults}" if faults is not None else ""
    return f"python -m tests.faults --case {case} --seed {seed}{count}"


@contextmanager
def _cluster(root: Path, case: Case) -> Iterator[Any]:
    from tests.faults.cluster import FaultCluster

    config = {**FAST_TIMEOUTS, "min.insync.replicas": "2", "default.replication.factor": "3",
              "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
              "transaction.state.log.min.isr": "2", "offsets.topic.num.partitions": "4",
              "transaction.state.log.num.partitions": "4", **dict(case.config)}
    env = {"SAMSA_FAULT_EVENTS": str(root / "events-{node}.jsonl")}
    if case.power:
        env["SAMSA_FSYNC_LEDGER"] = str(root / "fsync-{node}.ledger")
    cluster = FaultCluster(root, size=3, config=config, env=env)
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.close()


GROUP = "faults-group"
# Kafka's delivery.timeout.ms default: a producer gives a record two minutes (librdkafka's own
# default is five); shorter, a cluster down for a while times queued records out and librdkafka
# bumps its epoch (tests.faults.duplicates).
DELIVERY_TIMEOUT_MS = 120_000


def _workloads(case: Case, bootstrap: str, history: History, rng: random.Random) -> list[Any]:
    from tests.faults import workloads as w

    specs = [w.TopicSpec(TOPIC, partitions=3, replication_factor=3,
                         configs={"min.insync.replicas": "2"})]
    if "transactions" in case.workloads:
        specs += [w.TopicSpec(name, partitions=2, replication_factor=3,
                              configs={"min.insync.replicas": "2"})
                  for name in (TXN_INPUT, TXN_OUTPUT)]
    if "compacted" in case.workloads:
        specs.append(w.TopicSpec(COMPACTED, partitions=2, replication_factor=3, configs={
            **w.COMPACTED_TOPIC_CONFIGS, "min.insync.replicas": "2"}))
    w.create_topics(bootstrap, specs)

    def seed() -> random.Random:
        return random.Random(rng.getrandbits(64))

    made: list[Any] = []
    if "producer" in case.workloads:
        config = dict(case.producer_config) or None
        made.append(w.IdempotentProducer(bootstrap, history, "producer", TOPIC, seed(),
                                         config=config, rate_per_second=200 if config else 50,
                                         message_timeout_ms=DELIVERY_TIMEOUT_MS))
        if config is None:
            made.append(w.SamsaIdempotentProducer(bootstrap, history, "samsa-producer", TOPIC,
                                                  seed(), rate_per_second=20,
                                                  message_timeout_ms=DELIVERY_TIMEOUT_MS))
    if "consumer" in case.workloads:
        made.append(w.GroupConsumer(bootstrap, history, "consumer", [TOPIC], seed(), group=GROUP,
                                    isolation="read_uncommitted"))
    if "transactions" in case.workloads:
        made.append(w.IdempotentProducer(bootstrap, history, "txn-feed", TXN_INPUT, seed(),
                                         rate_per_second=20))
        made.append(w.Transactions(bootstrap, history, "txn", TXN_INPUT, TXN_OUTPUT, seed(),
                                   group=TXN_GROUP))
    if "compacted" in case.workloads:
        made.append(w.CompactedWriter(bootstrap, history, "compacted", COMPACTED, seed()))
    if "queue" in case.workloads:
        from tests.faults.workload_queue import Queue

        made.append(Queue(bootstrap, history, "queue", seed(),
                          message_timeout_ms=DELIVERY_TIMEOUT_MS))
    return made


TXN_GROUP = "faults-txn-group"
COORDINATORS = (("__consumer_offsets", GROUP), ("__consumer_offsets", TXN_GROUP),
                ("__transaction_state", "txn"))


def _topics(case: Case) -> list[tuple[str, str, bool]]:
    """(topic, isolation of its final read, compacted) of the case."""
    topics = [(TOPIC, "read_uncommitted", False)]
    if "transactions" in case.workloads:
        topics += [(TXN_INPUT, "read_uncommitted", False), (TXN_OUTPUT, "read_committed", False)]
    if "compacted" in case.workloads:
        topics.append((COMPACTED, "read_uncommitted", True))
    if "queue" in case.workloads:
        topics.append((QUEUE_TOPIC, "read_uncommitted", False))
    return topics


def _share_coordinators(cluster: Any) -> tuple[tuple[str, str], ...]:
    """The queue's coordinators for ``kill-coordinator``: its group's (``__consumer_offsets``)
    and each of its share-partitions' share coordinator (``__share_group_state``, by the key
    ``"group:topic id:partition"``)."""
    from broker.share.coordinator_key import kafka_uuid_string

    topic = next(t for t in cluster.metadata([QUEUE_TOPIC]).topics if t.name == QUEUE_TOPIC)
    keys = [f"{QUEUE_GROUP}:{kafka_uuid_string(topic.topic_id)}:{p.partition_index}"
            for p in topic.partitions]
    return (("__consumer_offsets", QUEUE_GROUP), *(("__share_group_state", key) for key in keys))


INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")


def unfenced_since(events_path: Path, since_ms: int) -> bool:
    """The node's event file shows it unfenced at or after ``since_ms`` (its new incarnation
    registered and caught up: ``replication.events``)."""
    if not events_path.exists():
        return False
    for text in events_path.read_text().splitlines():
        if '"unfenced"' in text:
            with contextlib.suppress(json.JSONDecodeError):
                if json.loads(text).get("wall_ms", 0) >= since_ms:
                    return True
    return False


def wait_recovered(cluster: Any, topics: list[str], what: str, timeout_s: float = 120.0,
                   started_ms: dict[int, int] | None = None) -> None:
    """Every node running; each node started at ``started_ms`` unfenced since (its new
    incarnation, not the old session the controller has not expired yet); each node seeing
    every node as an unfenced broker; and every partition of ``topics`` (and of the internal
    topics that exist) with a leader and its full ISR, as every node sees it."""
    from tests.faults.cluster import wait_until

    deadline = time.monotonic() + timeout_s
    for node in cluster.node_ids:
        if cluster.paused(node):
            cluster.resume(node)
        if not cluster.alive(node):
            cluster.start(node)
    try:
        for node, since_ms in (started_ms or {}).items():
            events = cluster.root / f"events-{node}.jsonl"
            wait_until(lambda: unfenced_since(events, since_ms),  # noqa: B023 (called at once)
                       timeout_s=max(1.0, deadline - time.monotonic()),
                       what=f"node {node} unfenced after its restart")
        cluster.wait_ready(timeout_s=max(1.0, deadline - time.monotonic()))
        existing = wait_until(lambda: {t.name for t in cluster.metadata(None).topics},
                              timeout_s=10, what="the topic list")
        for topic in [*topics, *(t for t in INTERNAL_TOPICS if t in existing)]:
            cluster.wait_healthy(topic, timeout_s=max(1.0, deadline - time.monotonic()))
    except AssertionError as error:
        views = _views(cluster)
        with (cluster.root / "not-recovered.jsonl").open("a") as out:
            out.write(json.dumps({"what": what, "error": str(error), "views": views}) + "\n")
        for node in cluster.node_ids:  # where each node's threads were (a stalled loop, ...)
            pid = cluster.pid(node)
            if pid is not None:
                (cluster.root / f"not-recovered-stacks-{node}.txt").write_text(stack_dump(pid))
        raise AssertionError(f"{what}: {error} (each node's view: not-recovered.jsonl)") from None


def _views(cluster: Any) -> dict[str, Any]:
    """What each node answers to Metadata when the recovery wait gives up: its controller, its
    unfenced brokers and its partitions without a leader or a full ISR (the finding is which
    node's view did not converge)."""
    views: dict[str, Any] = {}
    for node in cluster.node_ids:
        try:
            response = cluster.metadata(None, via=node, timeout_s=5.0)
        except Exception as error:  # a node that cannot answer is the answer
            views[str(node)] = {"error": repr(error)}
            continue
        views[str(node)] = {
            "controller": response.controller_id,
            "brokers": sorted(broker.node_id for broker in response.brokers),
            "topic_errors": {t.name: t.error_code for t in response.topics if t.error_code},
            "unhealthy": [
                {"topic": t.name, "partition": p.partition_index, "leader": p.leader_id,
                 "epoch": p.leader_epoch, "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes),
                 "error": p.error_code}
                for t in response.topics for p in t.partitions
                if p.leader_id < 0 or set(p.isr_nodes) != set(p.replica_nodes) or p.error_code]}
    return views


def _merge_events(root: Path, history: History, nodes: list[int]) -> Counter[str]:
    """The nodes' event files into the history; how many of each event there were."""
    count: Counter[str] = Counter()
    for node in nodes:
        path = root / f"events-{node}.jsonl"
        if not path.exists():
            continue
        for text in path.read_text().splitlines():
            try:
                line = json.loads(text)
            except json.JSONDecodeError:  # the line a kill -9 cut short
                continue
            event = line.pop("event")
            history.event(event, **line)
            count[event] += 1
    return count


def run_case(case: Case, seed: int, root: Path, *, faults: int | None = None,
             minutes: float | None = None, progress: Callable[[str], None] = lambda _: None,
             keep: bool = False) -> RunResult:
    """One seeded run of ``case`` in ``root`` (wiped first); see the module docstring."""
    from tests.faults import workloads as w
    from tests.faults.checker import check, high_watermarks, read_replicas
    from tests.faults.duplicates import split_duplicates

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    rng = random.Random(seed)
    history = History(root / "history.jsonl")
    started = time.monotonic()
    count = case.faults if faults is None else faults
    time_bound = case.minutes > 0 and faults is None  # G5: faults until the time is up
    limit_s = 60 * (case.minutes if minutes is None else minutes)
    applied: list[dict[str, Any]] = []
    queue_drained = False
    not_recovered: list[str] = []
    client_errors: list[str] = []
    topics = [topic for topic, _, _ in _topics(case)]
    if "queue" in case.workloads:
        topics.append(DEAD_LETTER_TOPIC)
    with _cluster(root, case) as cluster:
        def recovered(what: str) -> None:
            wait_recovered(cluster, topics, what, started_ms=nemesis.started_ms)
            nemesis.started_ms.clear()

        nemesis = Nemesis(cluster, history, rng, corruptions_per_fault=case.corruptions,
                          coordinators=COORDINATORS, recovered=recovered)
        if case.power:
            from tests.faults.power import power_loss

            nemesis.power_loss = power_loss
            nemesis.ledger = lambda node: root / f"fsync-{node}.ledger"
        if "disk" in case.kinds:
            from tests.faults.disk import corrupt

            nemesis.corrupt = corrupt
        running = _workloads(case, cluster.bootstrap, history, rng)
        if "queue" in case.workloads:
            nemesis.coordinators = _share_coordinators(cluster)
        for workload in running:
            workload.start()
        try:
            number, order = 0, list(case.kinds)
            while (time.monotonic() - started < limit_s) if time_bound else (number < count):
                if number % len(case.kinds) == 0:  # each kind once per round, in seeded order
                    order = rng.sample(case.kinds, len(case.kinds))
                kind = order[number % len(case.kinds)]
                progress(f"{case.name} seed {seed}: fault {number + 1} {kind}")
                nemesis.apply(kind)
                applied.append({"number": number, "kind": kind})
                number += 1
                try:
                    recovered(f"recovery after fault {number} ({kind})")
                except AssertionError as error:
                    not_recovered.append(str(error))
                    break
        finally:
            progress(f"{case.name} seed {seed}: stopping the clients")
            for workload in running:
                try:
                    workload.stop()
                except (RuntimeError, TimeoutError) as error:  # a client gave up: a finding
                    client_errors.append(repr(error))
        progress(f"{case.name} seed {seed}: final read")
        recovered("full ISRs before the final read")
        for topic, isolation, compacted in _topics(case):
            w.final_read(cluster.bootstrap, history, [topic], isolation,
                         compacted=[topic] if compacted else [])
        if "queue" in case.workloads:
            from tests.faults.workload_queue import final_queue_read

            final_queue_read(cluster.bootstrap, history)
            queue_drained = all(getattr(one, "drained", True) for one in running)
        nodes = list(cluster.node_ids)
        for node in nodes:
            cluster.stop(node)
        data_dirs = {node: cluster.data_dir(node) for node in nodes}
    events = _merge_events(root, history, nodes)
    history.close()
    replicas = read_replicas(data_dirs, high_watermarks(read_history(root / "history.jsonl")))
    report = check(read_history(root / "history.jsonl"), replicas, examples=1_000_000)
    broker_duplicates, client_duplicates = split_duplicates(
        report.anomalies.get("duplicate", []), replicas)
    seconds = time.monotonic() - started
    counts = report.counts
    result = RunResult(case.name, seed, applied, report, root, seconds, not_recovered,
                       client_errors, figures={
                           "events": sum(events.values()), "elections": events["leader"],
                           "truncations": events["truncate"], "fencings": events["fenced"],
                           "acknowledged": counts.get("send-ok", 0),
                           "unknown": counts.get("send-info", 0),
                           "failed": counts.get("send-fail", 0),
                           "duplicates_after_client_epoch_bump": len(client_duplicates)})
    if "queue" in case.workloads:
        result.figures.update({name: count for name, count in counts.items()
                               if name.startswith("queue-")}, queue_drained=queue_drained)
    result.anomalies = {name: len(found) for name, found in report.anomalies.items() if found}
    if client_duplicates:  # librdkafka's epoch bump (see tests.faults.duplicates): reported apart
        result.anomalies["duplicate"] = len(broker_duplicates)
        if not broker_duplicates:
            del result.anomalies["duplicate"]
    for name in case.tolerated:
        if name in result.anomalies:
            result.tolerated[name] = result.anomalies.pop(name)
    if case.no_client_errors and (result.figures["unknown"] or result.figures["failed"]):
        result.client_errors.append(
            f"{result.figures['unknown']} sends with an unknown outcome and "
            f"{result.figures['failed']} failed sends: this case allows none")
    if result.passed and not keep:
        shutil.rmtree(root, ignore_errors=True)
    return result
