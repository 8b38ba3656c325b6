"""Raft simulation benchmark: simulated cluster-seconds per wall-clock second (goal >= 100x).

The deterministic simulator (``tests.simulation``) runs the real Raft core (``RaftNode`` over
``MemoryRaftLog``) with the invariants checked after every event, on one core. Four cases:
3 and 5 voters, each without faults and with every fault (crashes and crash points, partitions,
drops, duplicates, reordering). Messages are passed as objects (``--codec`` on: every message
is also encoded and decoded, as 1 seed in 4 of the tests do; about a fifth slower). Each round
(``--rounds``, 5) runs every case once, in rotated order, over the same seeds (``--seeds``
seeds of ``--sim-seconds`` of faults each, plus the recovery phase); a case's figure is its
simulated seconds ÷ wall seconds, and its events per wall second. Reported: the median
(min–max) over the rounds (``bench.rounds``). Prints a table (rich) and writes
``bench/results/raft_sim.json`` with every round's figures, the date, the machine and the load.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench import rounds
from tests.simulation.options import FAULTS, SimulationOptions
from tests.simulation.simulator import run_seed

RESULTS = Path(__file__).parent / "results"
GOAL = 100.0
CASES = {
    "3 voters, no faults": (3, ()),
    "3 voters, all faults": (3, FAULTS),
    "5 voters, no faults": (5, ()),
    "5 voters, all faults": (5, FAULTS),
}


@dataclass(frozen=True)
class SimRound:
    simulated_s: float
    wall_s: float
    events: int
    failures: int

    @property
    def compression(self) -> float:
        return self.simulated_s / self.wall_s

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s


FIGURES: dict[str, Callable[[SimRound], float]] = {
    "compression": lambda r: r.compression,
    "events_per_s": lambda r: r.events_per_s,
}


def measure_case(case: str, seeds: range, sim_seconds: float, codec: bool) -> SimRound:
    voters, faults = CASES[case]
    simulated_ms = events = failures = 0
    started = time.perf_counter()
    for seed in seeds:
        result = run_seed(SimulationOptions(seed, voters=voters, sim_seconds=sim_seconds,
                                            faults=faults, codec=codec))
        simulated_ms += result.sim_ms
        events += result.events
        failures += not result.ok
    return SimRound(simulated_ms / 1000, time.perf_counter() - started, events, failures)


def run(*, seeds: range, sim_seconds: float, codec: bool, rounds_count: int,
        console: Console) -> dict[str, Any]:
    def measure(case: str, _: int) -> SimRound:
        return measure_case(case, seeds, sim_seconds, codec)

    with Progress(console=console, transient=True) as progress:
        done = rounds.run_rounds(list(CASES), rounds_count, measure, progress=progress,
                                 label="raft simulation: ")
    summary = rounds.summarize(done, FIGURES, ours="")
    return {"rounds": rounds_count, "seeds": [seeds.start, seeds.stop - 1],
            "sim_seconds_per_seed": sim_seconds, "codec": codec, "goal_compression": GOAL,
            "cases": summary["systems"],
            "failures": {case: sum(r.failures for r in results if r is not None)
                         for case, results in done.results.items()},
            "by_round": rounds.rounds_json(done, lambda r: {
                "simulated_s": round(r.simulated_s, 1), "wall_s": round(r.wall_s, 3),
                "events": r.events, "failures": r.failures})}


def print_table(result: dict[str, Any], console: Console) -> None:
    table = Table(title=f"Raft simulation, {len(range(*result['seeds'])) + 1} seeds × "
                        f"{result['sim_seconds_per_seed']:g} s of faults + recovery"
                        f"{', codec round-trip' if result['codec'] else ''}: median "
                        f"(min–max) of {result['rounds']} rounds",
                  caption=rounds.caption(result["environment"]))
    for column in ("case", "simulated s ÷ wall s", "events / wall s", "goal", "failed seeds"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for case, figures in result["cases"].items():
        table.add_row(case, rounds.cell(figures["compression"], ",.0f", "x"),
                      rounds.cell(figures["events_per_s"], ",.0f"), f">= {GOAL:.0f}x",
                      str(result["failures"][case]))
    console.print(table)


def main(*, quick: bool = False, json_path: Path | None = None,
         rounds_count: int = rounds.DEFAULT_ROUNDS, seeds: int | None = None,
         sim_seconds: float | None = None, codec: bool = False) -> dict[str, Any]:
    console = rounds.console()
    environment = rounds.environment()
    result = run(seeds=range(1, 1 + (seeds or (2 if quick else 5))),
                 sim_seconds=sim_seconds or (20.0 if quick else 60.0), codec=codec,
                 rounds_count=rounds_count, console=console)
    result = {"bench": "raft_sim", "environment": rounds.finish(environment), **result}
    print_table(result, console)
    rounds.write_results(result, json_path or RESULTS / "raft_sim.json", console)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS)
    parser.add_argument("--seeds", type=int, help="seeds per case and round (default 5)")
    parser.add_argument("--sim-seconds", type=float, help="faulty phase per seed (default 60)")
    parser.add_argument("--codec", action="store_true", help="round-trip every message")
    arguments = parser.parse_args()
    main(quick=arguments.quick, rounds_count=arguments.rounds, seeds=arguments.seeds,
         sim_seconds=arguments.sim_seconds, codec=arguments.codec)
