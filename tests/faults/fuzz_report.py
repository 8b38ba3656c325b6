"""The protocol fuzzer's (G12) judgments and report: memory bounded or growing, tracebacks the
nodes logged, the summary table. Pure functions of what ``tests.faults.fuzz`` measured (apart
from reading ``/proc`` and the nodes' log files)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["MemoryVerdict", "by_minute", "judge_memory", "logged_tracebacks", "print_summary",
           "rss_kb"]


def rss_kb(pid: int) -> int:
    """A process's resident set size in KiB (``VmRSS`` of ``/proc/<pid>/status``), 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


@dataclass(frozen=True)
class MemoryVerdict:
    ok: bool
    reason: str
    samples: int
    max_kb: int
    start_kb: int  # the median of the first quarter after warm-up
    end_kb: int  # the median of the last quarter
    growth_kb: int


WARM_UP_FRACTION = 0.2
GROWTH_LIMIT_KB = 16 * 1024  # a leak of 46 MiB in 10 min (a 2^27-partition plan) went unflagged at 64


def judge_memory(samples: list[tuple[float, int]], *, max_rss_kb: int,
                 growth_limit_kb: int = GROWTH_LIMIT_KB) -> MemoryVerdict:
    """RSS samples ``(seconds, KiB)`` judged: over ``max_rss_kb`` anywhere fails, and so does
    steady growth: after the warm-up (the first fifth of the samples: caches, the JIT-less
    interpreter's arenas, the group coordinator's first load), the remaining samples' quarters
    each have a higher median than the one before and the last exceeds the first by more
    than ``growth_limit_kb``. A plateau, or a rise then a fall, is not growth."""
    values = [kb for _, kb in samples]
    peak = max(values, default=0)
    settled = values[int(len(values) * WARM_UP_FRACTION):]
    quarters = [sorted(part)[len(part) // 2] for part in _quarters(settled)]
    start, end = (quarters[0], quarters[-1]) if quarters else (0, 0)
    rising = len(quarters) == 4 and all(a < b for a, b in itertools.pairwise(quarters))
    reason = "bounded"
    if peak > max_rss_kb:
        reason = f"RSS {peak} KiB exceeds {max_rss_kb} KiB"
    elif rising and end - start > growth_limit_kb:
        reason = f"RSS grows steadily: {start} -> {end} KiB by quarter medians {quarters}"
    return MemoryVerdict(reason == "bounded", reason, len(values), peak, start, end, end - start)


def _quarters(values: list[int]) -> list[list[int]]:
    if len(values) < 4:
        return [values] if values else []
    size = len(values) / 4
    return [values[int(i * size):int((i + 1) * size)] for i in range(4)]


def by_minute(samples: list[tuple[float, int]]) -> list[int]:
    """The last RSS sample of each minute of the run (KiB)."""
    minutes: dict[int, int] = {}
    for seconds, kb in samples:
        minutes[int(seconds // 60)] = kb
    return [minutes[minute] for minute in sorted(minutes)]


def logged_tracebacks(logs: Iterable[str]) -> dict[str, int]:
    """How often each distinct exception (a traceback's last line) was logged by the nodes:
    not a failure of G12 (the broker answered UNKNOWN_SERVER_ERROR or closed the connection)
    but a handler that could not cope with its input."""
    found: Counter[str] = Counter()
    for log in logs:
        lines = log.splitlines()
        for index, line in enumerate(lines):
            if line.startswith("Traceback"):
                end = next((j for j in range(index + 1, len(lines))
                            if lines[j] and not lines[j].startswith((" ", "Traceback", "During",
                                                                     "The above"))), index)
                found[lines[end][:200]] += 1
    return dict(found.most_common())


COLUMNS = ("cases", "frames", "answered", "closed", "silent", "late", "stall", "reset",
           "error answers", "unknown server errors", "undecodable")


def print_summary(summary: dict[str, Any], console: Console) -> None:
    table = Table(title=f"G12 protocol fuzzing, seed {summary['seed']}: {summary['cases']} "
                        f"cases, {summary['frames']} frames in {summary['seconds']} s")
    table.add_column("API")
    for column in COLUMNS:
        table.add_column(column, justify="right")
    for name, row in summary["by_api"].items():
        table.add_row(name.removesuffix("Request"), *(str(row.get(c, 0)) for c in COLUMNS))
    console.print(table)
    console.print(f"slowest liveness probe (ApiVersions + Metadata on a fresh connection): "
                  f"{summary['slowest_probe_s'] * 1000:.0f} ms ({summary['late_probes']} needed "
                  f"their second chance)")
    for name, verdict in summary["memory"].items():
        console.print(f"{name}: RSS max {verdict['max_kb'] / 1024:.1f} MiB, growth after "
                      f"warm-up {verdict['growth_kb'] / 1024:+.1f} MiB "
                      f"({verdict['samples']} samples): {'ok' if verdict['ok'] else 'FAIL'}")
    for text, count in summary["logged_tracebacks"].items():
        console.print(f"[yellow]logged {count}x[/yellow]: {text}")
    for failure in summary["failures"][:30]:
        console.print(f"[red]{failure['kind']}[/red]: {failure['reason']} {failure.get('file', '')}")
    console.print("[green]PASS[/green]" if summary["ok"] else "[red]FAIL[/red]")
