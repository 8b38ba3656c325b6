"""Topic creations per second through the quorum, against a single node's local limit.

Systems, in interleaved rounds (``bench.rounds``):

- ``cluster``: three combined nodes (``bench.cluster_nodes``); the requests go to a node that
  is NOT the active controller, which forwards each to the controller; a topic is created once
  the quorum commits its records (a majority of the three fsynced them).
- ``single``: one node with ``process.roles`` unset: its LocalController appends to its own
  metadata log with an fsync per commit.

Each round starts each system afresh on new directories (formed, leader known, every broker
unfenced) before its clock starts, and stops it afterwards: a round's thousands of partitions
(three files each, all open) never pile up into the next round, and no round inherits another's
page cache or delayed deletions. A system's round has two cases, their order alternating by
round: ``per_topic`` — one CreateTopics request per topic, ``IN_FLIGHT`` unanswered at most on
one connection; ``one_request`` — a single CreateTopics request naming every topic. Topics have
1 partition and replication factor 3 on the cluster, 1 on the single node.

The clock stops at the last answer (the controller answers once the records are committed);
then the node's Metadata is polled until it lists every topic (the node applies committed
records on its own time: ``visible_s`` is when it listed them all, at most
``VISIBLE_TIMEOUT_S`` later), and a topic counts as created only if it is listed then. A
forwarded request that outlived a leader change may be retried by the forwarding node and then
answer TOPIC_ALREADY_EXISTS for a topic its first attempt created: such answers are kept in
the error codes, and the topic is still counted by Metadata. Also kept per case: the answers' error codes and
the quorum epochs the case went through (DescribeQuorum's leader epoch before and after:
every new epoch is an election, a sign the leader stopped answering the followers' fetches
within ``controller.quorum.fetch.timeout.ms``).

State: the processes started for a round are stopped by the end of that round's measurement.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress

from bench import cluster_requests, rounds
from bench.cluster_nodes import BenchCluster, start_single, wait_until, work_dir
from broker.node_client import NodeClient
from protocol.errors import ErrorCode

SYSTEMS = ("cluster", "single")
CASES = ("per_topic", "one_request")
IN_FLIGHT = 16
VISIBLE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Target:
    """Where a round's requests go: a node's client port, the replication factor to ask for,
    and the node whose DescribeQuorum tells the epoch (None: no quorum)."""

    port: int
    replication_factor: int
    quorum_port: int | None


@dataclass(frozen=True)
class Creation:
    """One case of one round: ``topics`` asked for, in ``seconds``."""

    topics: int
    seconds: float
    existing: int  # listed by the node's Metadata afterwards
    visible_s: float  # from the first request until the node's Metadata listed them all
    error_codes: dict[str, int]  # error name -> how many answers had it (NONE included)
    elections: int  # quorum epochs gone through

    @property
    def per_second(self) -> float:
        return self.existing / self.seconds

    def to_json(self) -> dict[str, Any]:
        return {"topics": self.topics, "seconds": round(self.seconds, 3),
                "existing": self.existing, "visible_s": round(self.visible_s, 3),
                "per_second": round(self.per_second, 1),
                "error_codes": self.error_codes, "elections": self.elections}


TopicRound = dict[str, Creation]  # by case


def names_for(system: str, round_index: int, case: str, count: int) -> list[str]:
    return [f"bench-{system}-r{round_index}-{case}-{index}" for index in range(count)]


def case_order(round_index: int) -> tuple[str, ...]:
    return CASES if round_index % 2 == 0 else CASES[::-1]


# -- the requests -----------------------------------------------------------------------------


async def _timed_case(target: Target, case: str, names: list[str]) -> Creation:
    node = cluster_requests.client(target.port, request_timeout_ms=300_000)
    try:
        epoch_before = await _epoch(target)
        codes: Counter[str] = Counter()
        started = time.perf_counter()
        if case == "per_topic":
            await _per_topic(node, names, target.replication_factor, codes)
        else:
            answers = await cluster_requests.create_topics(
                node, names, replication_factor=target.replication_factor)
            codes.update(ErrorCode(code).name for code in answers.values())
        seconds = time.perf_counter() - started
        existing = await _visible(node, names)
        visible_s = time.perf_counter() - started
        elections = (await _epoch(target)) - epoch_before
    finally:
        await node.close()
    return Creation(len(names), seconds, existing, visible_s, dict(codes), elections)


async def _per_topic(node: NodeClient, names: list[str], replication_factor: int,
                     codes: Counter[str]) -> None:
    window = asyncio.Semaphore(IN_FLIGHT)

    async def one(name: str) -> None:
        async with window:
            answers = await cluster_requests.create_topics(
                node, [name], replication_factor=replication_factor)
        codes.update(ErrorCode(code).name for code in answers.values())

    await asyncio.gather(*(one(name) for name in names))


async def _visible(node: NodeClient, names: list[str]) -> int:
    """How many of ``names`` the node's Metadata lists, once it lists them all or after
    ``VISIBLE_TIMEOUT_S``."""
    deadline = time.monotonic() + VISIBLE_TIMEOUT_S
    while True:
        response = await cluster_requests.metadata_for(node, names)
        existing = sum(1 for topic in response.topics if topic.error_code == 0)
        if existing == len(names) or time.monotonic() > deadline:
            return existing
        await asyncio.sleep(0.02)


async def _epoch(target: Target) -> int:
    if target.quorum_port is None:
        return 0
    node = cluster_requests.client(target.quorum_port)
    try:
        return (await cluster_requests.quorum_state(node)).leader_epoch
    finally:
        await node.close()


# -- the systems ------------------------------------------------------------------------------


@contextmanager
def started(system: str, work: Path) -> Iterator[Target]:
    """The system on new directories under ``work``, ready; stopped when the block ends."""
    if system == "single":
        single = start_single(work)
        try:
            yield Target(int(single.bootstrap.rsplit(":", 1)[1]), 1, None)
        finally:
            single.stop()
        return
    cluster = BenchCluster(work)
    try:
        cluster.start_all()
        yield _follower_target(cluster)
    finally:
        cluster.stop_all()


def _follower_target(cluster: BenchCluster) -> Target:
    leader = wait_until(lambda: formed_leader(cluster), what="a formed cluster")
    follower = next(node_id for node_id in cluster.node_ids if node_id != leader)
    port = cluster.client_ports[follower]
    return Target(port, 3, port)


def formed_leader(cluster: BenchCluster) -> int | None:
    """The quorum leader once every node is a live broker (as node 1 sees it), else None."""
    async def ask() -> int | None:
        node = cluster_requests.client(cluster.client_ports[cluster.node_ids[0]])
        try:
            if await cluster_requests.live_brokers(node) != set(cluster.node_ids):
                return None
            return await cluster_requests.quorum_leader(node)
        finally:
            await node.close()

    return asyncio.run(ask())


# -- the rounds -------------------------------------------------------------------------------


def run(*, topics: int, rounds_count: int, progress: Progress,
        keep: Path | None = None) -> dict[str, Any]:
    with work_dir("samsa-bench-topics-", keep) as work:
        def measure(system: str, round_index: int) -> TopicRound:
            with started(system, work / f"{system}-{round_index}") as target:
                return {case: asyncio.run(_timed_case(
                    target, case, names_for(system, round_index, case, topics)))
                    for case in case_order(round_index)}

        done = rounds.run_rounds(list(SYSTEMS), rounds_count, measure, progress=progress,
                                 label="topic creations: ")
    figures: dict[str, Callable[[TopicRound], float]] = {
        case: (lambda measured, case=case: measured[case].per_second)  # type: ignore[misc]
        for case in CASES}
    return {"topics": topics, "in_flight": IN_FLIGHT, "rounds": rounds_count,
            "summary": rounds.summarize(done, figures, ours="cluster"),
            "by_round": rounds.rounds_json(done, lambda measured: {
                case: creation.to_json() for case, creation in measured.items()}),
            "elections": {system: sum(result[case].elections for result in results
                                      if result is not None for case in CASES)
                          for system, results in done.results.items()}}
