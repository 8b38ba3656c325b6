"""Durability mode: produce throughput with ``flush.messages=1`` (fsync before the answer,
group commit: ``broker.group_commit``) against the default (no fsync on the produce path), on
one node in the same run, in interleaved rounds (``bench.rounds``); plus the machine's limits.

Systems (one Samsa node, started once; each round creates its own topics):

- ``default``: a topic of ``PARTITIONS`` partitions, default flush settings;
- ``durable``: the same with ``flush.messages=1``: every produce is answered after an fsync
  covering it.

The load: ``CONNECTIONS`` connections (Samsa's ``NodeClient``, requests pipelined), each with
``IN_FLIGHT`` Produce requests outstanding (librdkafka's default of 5), each request one
``BATCH_BYTES`` batch (16 records of 1 KiB) for one partition, partitions taken round robin,
``acks=1``. MB are of batch bytes. The issue's goal: durable >= 0.5x default (the median of the
paired per-round ratios).

The machine's limits, in the same interleaved fashion: ``fdatasync`` after each 16 KiB append to
one file (the cost of one sync: what an un-grouped fsync-per-produce would reach), and a group
commit's round done three ways: a 16 KiB append to each of ``PARTITIONS`` files then an
``fdatasync`` of each on as many threads at once (what ``broker.group_commit`` does), the same
one file after the other, and one Linux ``syncfs`` of the file system (through ctypes).
``syncfs`` also writes back every other dirty file on the file system (other brokers, other
jobs) and its errors are reliable only from Linux 5.8: the bench reports all three so the
choice is measured, not assumed.

State: the node belongs to ``run``, stopped before it returns; the limits' files to
``machine_limits``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from bench import cluster_requests, peers, rounds
from bench.cluster_nodes import work_dir
from bench.storage import RESULTS
from protocol.errors import ErrorCode
from protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.messages.create_topics_response import CreateTopicsResponse
from protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from protocol.messages.produce_response import ProduceResponse
from protocol.records import Record, encode_batch

PARTITIONS = 8
CONNECTIONS = 8
IN_FLIGHT = 5
RECORD_BYTES = 1024
RECORDS_PER_BATCH = 16
BATCH_BYTES = RECORD_BYTES * RECORDS_PER_BATCH  # of values; the batch adds its headers
GOAL_RATIO = 0.5
SYSTEMS = ("durable", "default")
CONFIGS = {"durable": {"flush.messages": "1"}, "default": {}}
LIMITS = ("fdatasync_parallel", "fdatasync_per_file", "syncfs", "one_file")


@dataclass(frozen=True)
class ProduceRound:
    """One system in one round: requests answered, batch bytes, wall time, the node's CPU."""

    requests: int
    batch_bytes: int
    seconds: float
    broker_cpu_seconds: float

    @property
    def megabytes(self) -> float:
        return self.requests * self.batch_bytes / 1e6

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "seconds": round(self.seconds, 4),
                "broker_cpu_seconds": round(self.broker_cpu_seconds, 4),
                **{name: round(figure(self), 3) for name, figure in FIGURES.items()}}


FIGURES: dict[str, Callable[[ProduceRound], float]] = {
    "mb_s": lambda done: done.megabytes / done.seconds,
    "requests_s": lambda done: done.requests / done.seconds,
    "broker_cpu_s_per_gb": lambda done: done.broker_cpu_seconds / done.megabytes * 1000,
}


# -- the load ---------------------------------------------------------------------------------


def one_batch() -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([Record(offset=i, timestamp=now, key=None, value=os.urandom(RECORD_BYTES))
                         for i in range(RECORDS_PER_BATCH)])


async def create_topic(port: int, topic: str, configs: dict[str, str]) -> None:
    node = cluster_requests.client(port)
    try:
        request = CreateTopicsRequest(timeout_ms=60_000, topics=[CreatableTopic(
            name=topic, num_partitions=PARTITIONS, replication_factor=1,
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])])
        response = await node.send(request)
        assert isinstance(response, CreateTopicsResponse)
        code = response.topics[0].error_code
        if code:
            raise RuntimeError(f"creating {topic}: {ErrorCode(code).name}")
    finally:
        await node.close()


async def produce_load(port: int, topic: str, requests: int, batch: bytes) -> float:
    """``requests`` Produce requests over ``CONNECTIONS`` connections with ``IN_FLIGHT`` each
    outstanding; the wall time until the last answer."""
    nodes = [cluster_requests.client(port, request_timeout_ms=120_000) for _ in range(CONNECTIONS)]
    per_sender = requests // (CONNECTIONS * IN_FLIGHT)

    async def sender(node: Any, number: int) -> None:
        for sent in range(per_sender):
            partition = (number + sent * CONNECTIONS * IN_FLIGHT) % PARTITIONS
            response = await node.send(ProduceRequest(acks=1, timeout_ms=60_000, topic_data=[
                TopicProduceData(name=topic, partition_data=[
                    PartitionProduceData(index=partition, records=batch)])]))
            assert isinstance(response, ProduceResponse)
            code = response.responses[0].partition_responses[0].error_code
            if code:
                raise RuntimeError(f"produce to {topic}-{partition}: {ErrorCode(code).name}")

    try:
        for node in nodes:  # connected before the clock starts
            await cluster_requests.metadata(node)
        start = time.perf_counter()
        await asyncio.gather(*(sender(node, index * IN_FLIGHT + slot)
                               for index, node in enumerate(nodes) for slot in range(IN_FLIGHT)))
        return time.perf_counter() - start
    finally:
        for node in nodes:
            await node.close()


def measure(broker: peers.BrokerProcess, system: str, round_index: int, requests: int,
            batch: bytes) -> ProduceRound:
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    topic = f"{system}-r{round_index}"
    asyncio.run(create_topic(port, topic, CONFIGS[system]))
    cpu = broker.cpu_seconds()
    seconds = asyncio.run(produce_load(port, topic, requests, batch))
    sent = requests // (CONNECTIONS * IN_FLIGHT) * CONNECTIONS * IN_FLIGHT
    return ProduceRound(sent, len(batch), seconds, broker.cpu_seconds() - cpu)


def run(*, requests: int, rounds_count: int, progress: Progress,
        keep: Path | None = None) -> dict[str, Any]:
    batch = one_batch()
    with work_dir("samsa-bench-durability-", keep) as work:
        broker = peers.start_samsa(work / "node")
        try:
            done = rounds.run_rounds(
                list(SYSTEMS), rounds_count,
                lambda system, index: measure(broker, system, index, requests, batch),
                progress=progress, label="durability: ")
        finally:
            broker.stop()
    return {"requests": requests, "batch_bytes": len(batch), "partitions": PARTITIONS,
            "connections": CONNECTIONS, "in_flight": IN_FLIGHT, "acks": 1,
            "configs": CONFIGS, "goal_ratio": GOAL_RATIO,
            "summary": rounds.summarize(done, FIGURES, ours="durable"),
            "by_round": rounds.rounds_json(done, ProduceRound.to_json)}


# -- the machine's limits ---------------------------------------------------------------------


@dataclass(frozen=True)
class SyncRound:
    """Appends and syncs done in ``seconds``."""

    syncs: int
    appends: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"syncs": self.syncs, "appends": self.appends, "seconds": round(self.seconds, 4),
                **{name: round(figure(self), 2) for name, figure in LIMIT_FIGURES.items()}}


LIMIT_FIGURES: dict[str, Callable[[SyncRound], float]] = {
    "syncs_s": lambda done: done.syncs / done.seconds,
    "mb_s": lambda done: done.appends * BATCH_BYTES / 1e6 / done.seconds,
}


def _syncfs() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    library = ctypes.CDLL(name, use_errno=True) if name else None
    return getattr(library, "syncfs", None)


def single_file(directory: Path, seconds: float) -> SyncRound:
    """16 KiB appended to one file, fdatasync after each: the cost of one sync."""
    data, count = os.urandom(BATCH_BYTES), 0
    fd = os.open(directory / "single", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    try:
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            os.write(fd, data)
            os.fdatasync(fd)
            count += 1
    finally:
        os.close(fd)
    return SyncRound(count, count, elapsed)


def group_round(directory: Path, seconds: float, how: str) -> SyncRound:
    """A 16 KiB append to each of ``PARTITIONS`` files, then a sync of them all (``how``): one
    fdatasync per file in turn, the same on ``PARTITIONS`` threads at once (as
    ``broker.group_commit`` does), or one syncfs. ``syncs`` counts rounds."""
    data, rounds_done = os.urandom(BATCH_BYTES), 0
    fds = [os.open(directory / f"{how}-{index}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                   | os.O_APPEND) for index in range(PARTITIONS)]
    syncfs = _syncfs()
    if how == "syncfs" and syncfs is None:
        raise RuntimeError("no syncfs in this C library")
    threads = ThreadPoolExecutor(PARTITIONS)
    try:
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            for fd in fds:
                os.write(fd, data)
            if how == "syncfs":
                assert syncfs is not None
                if syncfs(fds[0]) != 0:
                    raise OSError(ctypes.get_errno(), "syncfs failed")
            elif how == "fdatasync_parallel":
                list(threads.map(os.fdatasync, fds))
            else:
                for fd in fds:
                    os.fdatasync(fd)
            rounds_done += 1
    finally:
        threads.shutdown()
        for fd in fds:
            os.close(fd)
    return SyncRound(rounds_done, rounds_done * PARTITIONS, elapsed)


def machine_limits(*, seconds: float, rounds_count: int, progress: Progress,
                   keep: Path | None = None) -> dict[str, Any]:
    def limit(how: str, _: int) -> SyncRound:
        return single_file(work, seconds) if how == "one_file" else group_round(work, seconds, how)

    with work_dir("samsa-bench-fsync-", keep) as work:
        done = rounds.run_rounds(list(LIMITS), rounds_count, limit, may_fail=["syncfs"],
                                 progress=progress, label="fsync limits: ")
    return {"seconds_per_round": seconds,
            "summary": rounds.summarize(done, LIMIT_FIGURES, ours="fdatasync_parallel"),
            "by_round": rounds.rounds_json(done, SyncRound.to_json)}


# -- output -----------------------------------------------------------------------------------


def print_tables(result: dict[str, Any], console: Console, caption: str) -> None:
    produce = result["produce"]
    console.print(rounds.comparison_table(
        f"Produce, {CONNECTIONS} connections x {IN_FLIGHT} in flight, {PARTITIONS} partitions, "
        f"{produce['batch_bytes']:,}-byte batches, acks=1",
        produce["summary"],
        [("mb_s", "MB/s", ",.1f"), ("requests_s", "requests/s", ",.0f"),
         ("broker_cpu_s_per_gb", "broker CPU s/GB", ",.1f")],
        caption=caption,
        names={"durable": "flush.messages=1", "default": "default flush"}))
    console.print(rounds.comparison_table(
        "The machine: 16 KiB appends and syncs", result["machine_limits"]["summary"],
        [("syncs_s", "syncs (rounds)/s", ",.0f"), ("mb_s", "MB/s", ",.1f")], label="case",
        names={"fdatasync_parallel": f"{PARTITIONS} files, fdatasyncs on {PARTITIONS} threads",
               "fdatasync_per_file": f"{PARTITIONS} files, an fdatasync each in turn",
               "syncfs": f"{PARTITIONS} files, one syncfs per round",
               "one_file": "one file, fdatasync per append"}))


def headline(result: dict[str, Any]) -> str:
    ratio = result["produce"]["summary"]["ratios"].get("default", {}).get("mb_s")
    if ratio is None:
        return "durable ÷ default: no paired rounds"
    verdict = "meets" if ratio["median"] >= GOAL_RATIO else "misses"
    return (f"durable ÷ default throughput: {rounds.ratio_cell(ratio)} — {verdict} the goal "
            f"of {GOAL_RATIO}x")


def main(*, quick: bool = False, rounds_count: int | None = None, requests: int | None = None,
         keep: Path | None = None, json_path: Path | None = None) -> dict[str, Any]:
    console = rounds.console()
    environment = rounds.environment()
    rounds_count = rounds_count or (3 if quick else rounds.DEFAULT_ROUNDS)
    requests = requests or (2_000 if quick else 20_000)
    with Progress(console=console, transient=True) as progress:
        limits = machine_limits(seconds=1.0 if quick else 3.0, rounds_count=rounds_count,
                                progress=progress, keep=keep and keep / "limits")
        produce = run(requests=requests, rounds_count=rounds_count, progress=progress,
                      keep=keep and keep / "node")
    environment = rounds.finish(environment)
    result = {"bench": "durability", "environment": environment, "produce": produce,
              "machine_limits": limits}
    print_tables(result, console, rounds.caption(environment))
    console.print(headline(result))
    rounds.write_results(result, json_path or RESULTS / "durability.json", console)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 requests, 3 rounds")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 5)")
    parser.add_argument("--requests", type=int, help="Produce requests per system and round")
    parser.add_argument("--keep", type=Path, help="keep the node's data and logs here")
    parser.add_argument("--json", type=Path, help="where the results go")
    arguments = parser.parse_args()
    main(quick=arguments.quick, rounds_count=arguments.rounds, requests=arguments.requests,
         keep=arguments.keep, json_path=arguments.json)
