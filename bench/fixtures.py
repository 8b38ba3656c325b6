"""How long a test waits for its broker: ``python -m bench.fixtures``.

What ``samsa.testing``'s fixtures cost a test beside the broker a Python team would otherwise
start, in one run:

- ``samsa, 1 node``: ``samsa.testing.Broker(tmp).start()`` (what ``samsa_broker`` does);
- ``samsa, 3 nodes``: ``samsa.testing.Cluster(tmp).start()`` (``samsa_cluster``: returns once
  every broker is registered and unfenced with a controller elected);
- ``kafka, 1 node``: Apache Kafka from the yardstick harness (``compat.apache_kafka``): one
  combined KRaft node, storage formatted in a fresh directory (``kafka-storage format``, as
  every test container does) and the JVM started until its log says "Kafka Server started".

Each is measured from nothing to the first record acknowledged: *ready* (the start call
returns), then a one-partition topic created (every partition led) and one record produced
with acks=all through Samsa's client — *first produce*. Then it is stopped (SIGTERM) and its
directory removed. Rounds are interleaved, the order rotated each round (``bench.rounds``).
Reported: seconds, median (min–max) over the rounds, and the paired per-round ratio
kafka ÷ samsa of time to first produce (how many times sooner the Samsa fixture is ready).
Writes ``bench/results/fixtures.json`` with every round's figures and the environment.
Apache Kafka needs Java 17 and the harness's Maven fetch; without them its column is left out
and the reason printed.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress
from rich.table import Table

from bench import rounds

RESULTS = Path(__file__).parent / "results"
SAMSA_ONE = "samsa, 1 node"
SAMSA_THREE = "samsa, 3 nodes"
KAFKA_ONE = "kafka, 1 node"
SYSTEMS = (SAMSA_ONE, SAMSA_THREE, KAFKA_ONE)
TOPIC = "first"


@dataclass(frozen=True)
class Measured:
    system: str
    ready_s: float
    first_produce_s: float

    def row(self) -> dict[str, Any]:
        return {"system": self.system, "ready_s": round(self.ready_s, 3),
                "first_produce_s": round(self.first_produce_s, 3)}


def _first_produce(bootstrap: str) -> None:
    from samsa.testing import create_topic, produce

    create_topic(bootstrap, TOPIC, 1)  # the default replication factor: 1, or 3 in the cluster
    assert produce(bootstrap, TOPIC, [b"hello"]) == [0]


class _Started:
    """A started system: its bootstrap string and how to stop it."""

    def __init__(self, bootstrap: str, stop: Callable[[], object]) -> None:
        self.bootstrap = bootstrap
        self.stop = stop


def _samsa_one(directory: Path) -> _Started:
    from samsa.testing import Broker

    broker = Broker(directory).start()
    return _Started(broker.bootstrap, broker.stop)


def _samsa_three(directory: Path) -> _Started:
    from samsa.testing import Cluster

    cluster = Cluster(directory).start()
    return _Started(cluster.bootstrap, cluster.stop)


def _kafka_one(directory: Path) -> _Started:
    from compat.apache_kafka import ApacheKafka

    node = ApacheKafka(directory / "kafka").start()
    return _Started(node.bootstrap, node.stop)


STARTS: dict[str, Callable[[Path], _Started]] = {
    SAMSA_ONE: _samsa_one, SAMSA_THREE: _samsa_three, KAFKA_ONE: _kafka_one}


def measure(system: str) -> Measured:
    """One start of ``system`` in a fresh directory: ready, first produce; then stopped."""
    directory = Path(tempfile.mkdtemp(prefix="samsa-fixtures-bench-"))
    try:
        began = time.perf_counter()
        started = STARTS[system](directory)
        ready_s = time.perf_counter() - began
        try:
            _first_produce(started.bootstrap)
            first_produce_s = time.perf_counter() - began
        finally:
            started.stop()
        return Measured(system, ready_s, first_produce_s)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def summary(done: rounds.Rounds[Measured]) -> dict[str, Any]:
    def ready(result: Measured) -> float:
        return result.ready_s

    def first(result: Measured) -> float:
        return result.first_produce_s

    ratios = [{"system": system, "against": KAFKA_ONE,
               "ratio": rounds.spread_json(done.ratio(KAFKA_ONE, system, first))}
              for system in (SAMSA_ONE, SAMSA_THREE)
              if KAFKA_ONE in done.systems and done.ok(system) and done.ok(KAFKA_ONE)]
    return {"ready_s": {system: rounds.spread_json(done.spread(system, ready))
                        for system in done.systems if done.ok(system)},
            "first_produce_s": {system: rounds.spread_json(done.spread(system, first))
                                for system in done.systems if done.ok(system)},
            "kafka_over_samsa": ratios, "failures": done.failures}


def table(result: dict[str, Any], title: str, caption: str) -> Table:
    output = Table(title=title, caption=caption)
    output.add_column("system")
    output.add_column("ready, s", justify="right")
    output.add_column("first produce, s", justify="right")
    for system, spread in result["first_produce_s"].items():
        output.add_row(system, rounds.cell(result["ready_s"][system], ".2f"),
                       rounds.cell(spread, ".2f"))
    for pair in result["kafka_over_samsa"]:
        output.add_row(f"{pair['against']} ÷ {pair['system']} (paired, first produce)", "",
                       rounds.ratio_cell(pair["ratio"]))
    return output


def main(*, rounds_count: int = rounds.DEFAULT_ROUNDS, json_path: Path | None = None,
         systems: tuple[str, ...] = SYSTEMS) -> None:
    console = rounds.console()
    environment = rounds.environment()
    with Progress(console=console, transient=True) as progress:
        done = rounds.run_rounds(systems, rounds_count, lambda system, _: measure(system),
                                 may_fail=(KAFKA_ONE,), progress=progress, label="fixtures: ")
    environment = rounds.finish(environment)
    result = summary(done)
    console.print(table(result, caption=rounds.caption(environment), title=(
        f"From nothing to the first acknowledged record: median (min–max) of {rounds_count} "
        f"interleaved rounds")))
    for system, reason in done.failures.items():
        console.print(f"{system} left out: {reason}")
    document = {"bench": "fixtures", "environment": environment, "rounds": rounds_count,
                **result, "by_round": rounds.rounds_json(done, Measured.row)}
    rounds.write_results(document, json_path or RESULTS / "fixtures.json", console)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.fixtures",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS,
                        help="interleaved rounds (default 5)")
    parser.add_argument("--no-kafka", action="store_true", help="leave Apache Kafka out")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    main(rounds_count=arguments.rounds, json_path=arguments.json,
         systems=SYSTEMS[:2] if arguments.no_kafka else SYSTEMS)
