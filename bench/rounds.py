"""Rounds, medians and paired ratios: how every bench compares one system with another.

A comparison runs ``rounds`` rounds (5 by default, ``--rounds``). Each round runs every
system once, in an order rotated by one from the round before (A B C, B C A, C A B, …; two
systems simply alternate), so that a drift over the run — page-cache write-back, another job
on the machine starting or ending, a CPU clocking up — falls on each system alike and no
system always runs first or just after the same neighbour.

What is reported, never the best run (on a shared machine the best run measures the luck of
the draw, and two systems' best runs need not have happened under the same load):

- per system and figure: the median of its rounds and their spread, min–max (``Spread``);
- per comparison: the median of the per-round ratios ``A[r] ÷ B[r]`` with their min–max.
  A and B ran back to back in round r, under the same load, so the ratio of a round is much
  steadier than either figure; rounds where one side has no figure are left out of the pairs.

A system allowed to fail (a peer broker that crashes) is reported with the reason and left
out of the later rounds; the others carry on. Every bench's JSON also carries
``environment()``: the date, the machine (CPUs, CPU model, kernel), Python, Samsa's commit, and
the load average before and after the run, plus the 1-minute load at the start of each round.

State: a ``Rounds`` is filled by ``run_rounds`` in the calling thread and read afterwards.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

T = TypeVar("T")
DEFAULT_ROUNDS = 5
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Spread:
    """The median of some figures and their range."""

    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        ordered = sorted(values)
        if not ordered:
            raise ValueError("a spread of no values")
        return cls(statistics.median(ordered), ordered[0], ordered[-1], len(ordered))

    def to_json(self, digits: int = 3) -> dict[str, float]:
        return {"median": round(self.median, digits), "min": round(self.low, digits),
                "max": round(self.high, digits), "rounds": self.count}

    def text(self, spec: str = ",.0f", suffix: str = "") -> str:
        """``median (min–max)``, each number formatted with ``spec``."""
        return (f"{self.median:{spec}}{suffix} "
                f"({self.low:{spec}}–{self.high:{spec}})")


def paired_ratios(numerators: Sequence[float | None],
                  denominators: Sequence[float | None]) -> list[float]:
    """``numerators[r] ÷ denominators[r]`` for every round r where both are known (and the
    denominator is not 0). Both sequences are indexed by round."""
    if len(numerators) != len(denominators):
        raise ValueError(f"{len(numerators)} rounds against {len(denominators)}")
    return [mine / theirs for mine, theirs in zip(numerators, denominators, strict=True)
            if mine is not None and theirs]


def ratio_spread(numerators: Sequence[float | None],
                 denominators: Sequence[float | None]) -> Spread | None:
    """The median of the paired per-round ratios and their min–max; None without a pair."""
    ratios = paired_ratios(numerators, denominators)
    return Spread.of(ratios) if ratios else None


def spread_of(values: Sequence[float | None]) -> Spread | None:
    known = [value for value in values if value is not None]
    return Spread.of(known) if known else None


def round_order(systems: Sequence[str], round_index: int) -> list[str]:
    """The systems in the order round ``round_index`` runs them: rotated by one each round."""
    shift = round_index % len(systems)
    return [*systems[shift:], *systems[:shift]]


@dataclass
class Rounds(Generic[T]):
    """Every round's measurement of every system (None: failed or left out that round)."""

    systems: list[str]
    results: dict[str, list[T | None]] = field(default_factory=dict)
    orders: list[list[str]] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)  # 1-minute load at each round's start

    def values(self, system: str, figure: Callable[[T], float]) -> list[float | None]:
        return [None if result is None else figure(result) for result in self.results[system]]

    def spread(self, system: str, figure: Callable[[T], float]) -> Spread | None:
        return spread_of(self.values(system, figure))

    def ratio(self, system: str, other: str, figure: Callable[[T], float]) -> Spread | None:
        """``system`` ÷ ``other`` on ``figure``: the median of the paired per-round ratios."""
        return ratio_spread(self.values(system, figure), self.values(other, figure))

    def ok(self, system: str) -> bool:
        return any(result is not None for result in self.results[system])


def run_rounds(systems: Sequence[str], rounds: int, measure: Callable[[str, int], T], *,
               may_fail: Iterable[str] = (), progress: Progress | None = None,
               label: str = "") -> Rounds[T]:
    """``measure(system, round_index)`` for every system in every round, in rotated order.

    An exception from a system in ``may_fail`` is kept as its failure and the system sits out
    the later rounds; any other exception propagates."""
    if rounds < 1:
        raise ValueError("at least one round")
    tolerated = set(may_fail)
    done = Rounds[T](list(systems), {system: [] for system in systems})
    task = progress.add_task(label, total=rounds * len(systems)) if progress else None
    for round_index in range(rounds):
        done.orders.append(order := round_order(systems, round_index))
        done.loads.append(os.getloadavg()[0])
        for system in order:
            if progress is not None and task is not None:
                progress.update(task, description=f"{label}{system}, round "
                                                  f"{round_index + 1}/{rounds}")
            done.results[system].append(_measure_one(done, system, round_index, measure,
                                                     tolerated))
            if progress is not None and task is not None:
                progress.advance(task)
    if progress is not None and task is not None:
        progress.remove_task(task)
    return done


def _measure_one(done: Rounds[T], system: str, round_index: int,
                 measure: Callable[[str, int], T], tolerated: set[str]) -> T | None:
    if system in done.failures:
        return None
    try:
        return measure(system, round_index)
    except Exception as error:
        if system not in tolerated:
            raise
        done.failures[system] = f"round {round_index + 1}: {error}"
        return None


def spread_json(spread: Spread | None, digits: int = 3) -> dict[str, float] | None:
    return None if spread is None else spread.to_json(digits)


def summarize(done: Rounds[T], figures: dict[str, Callable[[T], float]], *,
              ours: str = "samsa") -> dict[str, Any]:
    """Each system's median (min–max) of every figure, and ``ours`` ÷ every other system that
    ran: the median (min–max) of the paired per-round ratios."""
    systems = {name: {figure: spread_json(done.spread(name, value))
                      for figure, value in figures.items()} for name in done.systems}
    others = [name for name in done.systems if name != ours and done.ok(name)]
    ratios = {other: {figure: spread_json(done.ratio(ours, other, value))
                      for figure, value in figures.items()}
              for other in others if ours in done.systems}
    return {"ours": ours, "systems": systems, "ratios": ratios, "failures": done.failures}


def versus_row(case: str, baseline: str, done: Rounds[T], figure: Callable[[T], float], *,
               ours: str = "samsa", theirs: str = "baseline") -> dict[str, Any]:
    """One line of a comparison with a machine limit: each side's median (min–max) of
    ``figure`` and the median (min–max) of the paired per-round ratios ours ÷ theirs."""
    return {"case": case, "baseline": baseline,
            "samsa": spread_json(done.spread(ours, figure), 1),
            "raw": spread_json(done.spread(theirs, figure), 1),
            "ratio": spread_json(done.ratio(ours, theirs, figure))}


def rounds_json(rounds: Rounds[Any], row: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """Every round's raw figures, by system, with the order and load of each round."""
    return {"orders": rounds.orders, "load_1min_at_start": [round(load, 2) for load in rounds.loads],
            "failures": rounds.failures,
            "by_system": {system: [None if result is None else row(result) for result in results]
                          for system, results in rounds.results.items()}}


# -- output -----------------------------------------------------------------------------------


def cell(spread: dict[str, float] | None, spec: str = ",.0f", suffix: str = "") -> str:
    """A spread's JSON (``Spread.to_json``) as ``median (min–max)``; ``-`` when missing."""
    if spread is None:
        return "-"
    return Spread(spread["median"], spread["min"], spread["max"], int(spread["rounds"])).text(
        spec, suffix)


def ratio_cell(spread: dict[str, float] | None) -> str:
    return cell(spread, ".2f", "x")


def comparison_table(title: str, summary: dict[str, Any], columns: Sequence[tuple[str, str, str]],
                     *, label: str = "system", caption: str = "",
                     names: dict[str, str] | None = None) -> Table:
    """A ``summarize`` result as a table: a row per system, then a row per paired ratio.
    ``columns``: (figure, header, format spec) each."""
    table = Table(title=title, caption=caption or None)
    table.add_column(label)
    for _, header, _ in columns:
        table.add_column(header, justify="right")
    for name, figures in summary["systems"].items():
        table.add_row((names or {}).get(name, name),
                      *(cell(figures.get(figure), spec) for figure, _, spec in columns))
    for other, ratios in summary["ratios"].items():
        table.add_row(f"{summary['ours']} ÷ {other} (paired)",
                      *(ratio_cell(ratios.get(figure)) for figure, _, _ in columns))
    return table


def versus_table(title: str, rows: Sequence[dict[str, Any]], caption: str,
                 unit: str = "MB/s") -> Table:
    """``versus_row`` lines as a table; a ``broker_cpu_s_per_gb`` column if rows have one."""
    table = Table(title=title, caption=caption)
    cpu = any("broker_cpu_s_per_gb" in row for row in rows)
    for column in ("case", f"Samsa {unit}", "baseline", f"baseline {unit}",
                   "Samsa ÷ baseline (paired)", *(["broker CPU s/GB"] if cpu else [])):
        table.add_column(column, justify="left" if column in ("case", "baseline") else "right")
    for row in rows:
        cells = [row["case"], cell(row["samsa"]), row["baseline"], cell(row["raw"]),
                 ratio_cell(row["ratio"])]
        if cpu:
            cells.append(cell(row.get("broker_cpu_s_per_gb"), ".2f"))
        table.add_row(*cells)
    return table


# -- where and when ---------------------------------------------------------------------------


def environment() -> dict[str, Any]:
    """The date, the machine and the load now; ``finish`` adds the load at the end."""
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"),
            "nproc": os.cpu_count(), "cpu_model": _cpu_model(), "kernel": platform.release(),
            "python": platform.python_version(), "samsa_commit": _commit(),
            "load_average_before": [round(load, 2) for load in os.getloadavg()]}


def finish(env: dict[str, Any]) -> dict[str, Any]:
    return {**env, "load_average_after": [round(load, 2) for load in os.getloadavg()]}


def caption(env: dict[str, Any]) -> str:
    """One line for a table: the date and the load (1, 5, 15 minutes) before and after."""
    after = env.get("load_average_after")
    load = " / ".join(f"{value:.2f}" for value in env["load_average_before"])
    if after:
        load += " before, " + " / ".join(f"{value:.2f}" for value in after) + " after"
    return (f"{env['date'][:16].replace('T', ' ')} UTC, {env['nproc']} CPUs ({env['cpu_model']}), "
            f"load average (1 / 5 / 15 min) {load}")


def console() -> Console:
    """A console for the tables: as wide as the terminal, or 150 columns into a file."""
    return Console(width=None if sys.stdout.isatty() else 150)


def write_results(document: dict[str, Any], target: Path, console: Console) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document, indent=2))
    console.print(f"results written to {target}")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit() -> str:
    """Samsa's commit, with ``+changes`` when the work tree differs from it (read only)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain",
                                "--untracked-files=no"],
                               cwd=ROOT, text=True, capture_output=True, check=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+changes" if dirty else "")
