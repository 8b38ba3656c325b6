"""``python -m tests.faults``: run fault campaigns against real Samsa clusters and judge them.

    python -m tests.faults --case G1                 # the full G1 campaign (100 kills), seed 1
    python -m tests.faults --case G1 --seed 7 --faults 5   # replay seed 7, 5 faults
    python -m tests.faults --all --seed 1 --minutes 10     # every case (make faults)
    python -m tests.faults --case G5 --json          # machine-readable result on stdout

Each run prints its seed and, when it fails, the command that replays it and where its files
(history, node logs, data) were kept. ``--results FILE`` appends every run's JSON to FILE.
The exit status is 1 when any run failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from tests.faults.campaigns import CASES, RunResult, replay_command, run_case


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--case", action="append", choices=sorted(CASES), help="a case (repeatable)")
    which.add_argument("--all", action="store_true", help="every case")
    parser.add_argument("--seed", type=int, default=1, help="the first run's seed (default 1)")
    parser.add_argument("--runs", type=int, default=1, help="runs per case, seeds seed, seed+1, ...")
    parser.add_argument("--faults", type=int, help="faults per run (default: the case's count)")
    parser.add_argument("--minutes", type=float, help="time-bound cases: minutes per run")
    parser.add_argument("--root", type=Path, help="where runs keep their files (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the files of passing runs too")
    parser.add_argument("--results", type=Path, help="append each run's JSON line to this file")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    return parser.parse_args(argv)


def _table(results: list[RunResult]) -> Table:
    table = Table(title="Samsa fault campaigns")
    for column in ("case", "seed", "faults", "acked", "result", "anomalies", "time"):
        table.add_column(column)
    for result in results:
        anomalies = dict(result.anomalies)
        anomalies.update({f"(tolerated {name})": count for name, count in result.tolerated.items()})
        if result.figures.get("duplicates_after_client_epoch_bump"):
            anomalies["(client epoch-bump duplicates)"] = result.figures[
                "duplicates_after_client_epoch_bump"]
        table.add_row(result.case, str(result.seed), str(len(result.faults)),
                      str(result.report.counts.get("send-ok", "")),
                      "[green]pass[/]" if result.passed else "[red]FAIL[/]",
                      ", ".join(f"{k} {n}" for k, n in anomalies.items())
                      + ("; not recovered" if result.not_recovered else "")
                      + ("; client errors" if result.client_errors else ""),
                      f"{result.seconds:.0f} s")
    return table


def main(argv: list[str] | None = None) -> int:
    arguments = _arguments(argv)
    # Clients log every refused connection while nodes are down: that is the experiment, not news.
    for name in ("tests.faults", "samsa", "kafka"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    names = sorted(CASES) if arguments.all else arguments.case
    root = arguments.root or Path(tempfile.mkdtemp(prefix="samsa-faults-"))
    console = Console(stderr=arguments.json)
    results: list[RunResult] = []
    crashed: list[dict[str, object]] = []
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task("starting", total=None)
        for name in names:
            for run in range(arguments.runs):
                seed = arguments.seed + run
                try:
                    result = run_case(CASES[name], seed, root / f"{name}-seed{seed}",
                                      faults=arguments.faults, minutes=arguments.minutes,
                                      progress=lambda text: progress.update(task, description=text),
                                      keep=arguments.keep)
                except Exception as error:  # the harness or a node failed outright: a failed run
                    console.print(f"[red]{name} seed {seed} FAILED[/]: {error!r}\n  replay: "
                                  f"{replay_command(name, seed, arguments.faults)}\n"
                                  f"  files: {root / f'{name}-seed{seed}'}")
                    crashed.append({"case": name, "seed": seed, "passed": False,
                                    "error": repr(error)})
                    if arguments.results:
                        with arguments.results.open("a") as file:
                            file.write(json.dumps(crashed[-1]) + "\n")
                    continue
                results.append(result)
                if arguments.results:
                    with arguments.results.open("a") as file:
                        file.write(json.dumps(result.to_json()) + "\n")
                if not result.passed:
                    console.print(f"[red]{name} seed {seed} FAILED[/]: {result.report.summary()}"
                                  f"{' '.join(result.not_recovered)} "
                                  f"{' '.join(result.client_errors)}\n  replay: "
                                  f"{replay_command(name, seed, arguments.faults)}\n"
                                  f"  files: {result.root}")
    if arguments.json:
        print(json.dumps([result.to_json() for result in results] + crashed, indent=2))
    else:
        console.print(_table(results))
    return 0 if all(result.passed for result in results) and not crashed else 1


if __name__ == "__main__":
    sys.exit(main())
