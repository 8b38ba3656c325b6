"""Per-test outcomes of one suite, the verdict on them, the summary table, and the JSON written
to compat/results/.

A suite run passes only if every test passed or was skipped with a reason the reviewed table
(``compat/skips.py``) tolerates now, and nothing went wrong around the tests (``problems``: a
missing JUnit file, an unexpected exit code, a timeout, a used-up time budget, a broker that
died or did not stop cleanly, a table entry that matches no test).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATUSES = ("passed", "failed", "skipped")


@dataclass
class Outcome:
    name: str
    status: str  # passed | failed | skipped
    duration_seconds: float = 0.0
    reason: str = ""
    tolerated: bool = False  # a skip the reviewed table accepts on this run


@dataclass
class SuiteResult:
    suite: str
    version: str
    duration_seconds: float
    outcomes: list[Outcome]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counter = Counter(outcome.status for outcome in self.outcomes)
        return {status: counter.get(status, 0) for status in STATUSES}

    def failures(self) -> list[str]:
        """Every reason this run fails, one line each; empty when it passes."""
        lines = list(self.problems)
        for outcome in self.outcomes:
            if outcome.status == "failed":
                lines.append(f"{outcome.name}: failed: {outcome.reason}")
            elif outcome.status == "skipped" and not outcome.tolerated:
                lines.append(f"{outcome.name}: skipped, not tolerated by compat/skips.py now: "
                             f"{outcome.reason}")
        return lines

    def write_json(self, directory: Path) -> Path:
        path = directory / f"{self.suite}.json"
        document = {"suite": self.suite, "version": self.version,
                    "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "duration_seconds": round(self.duration_seconds, 1),
                    "counts": self.counts(), "failures": self.failures(), "notes": self.notes,
                    "tests": [asdict(outcome) for outcome in self.outcomes]}
        path.write_text(json.dumps(document, indent=2) + "\n")
        return path


def judge_skips(outcomes: list[Outcome], tolerated: Mapping[str, str]) -> list[Outcome]:
    """Mark the skips the table tolerates now (``{test: reason}``); a skip of any other test
    stays untolerated, and so fails the run."""
    for outcome in outcomes:
        if outcome.status == "skipped" and outcome.name in tolerated:
            outcome.tolerated = True
            if tolerated[outcome.name] not in outcome.reason:
                outcome.reason = f"{outcome.reason} (tolerated: {tolerated[outcome.name]})"
    return outcomes


def unmatched_entries(entries: list[str], outcomes: list[Outcome]) -> list[str]:
    """A problem per table entry that names no test of a whole-suite run (renamed or gone)."""
    names = {outcome.name for outcome in outcomes}
    return [f"compat/skips.py names {entry}, which this suite does not have"
            for entry in entries if entry not in names]


def exit_problem(what: str, code: int | None) -> list[str]:
    """A problem unless a process exited 0 (``None``: it had to be killed)."""
    if code == 0:
        return []
    return [f"{what} {'had to be killed' if code is None else f'exited {code}'}"]


def print_summary(results: list[SuiteResult]) -> None:
    print()
    print(f"{'suite':<26} {'passed':>7} {'failed':>7} {'skipped':>8} {'seconds':>8}  verdict")
    for result in results:
        counts = result.counts()
        failures = result.failures()
        verdict = f"FAIL ({len(failures)})" if failures else "ok"
        print(f"{result.suite + ' ' + result.version:<26} {counts['passed']:>7} "
              f"{counts['failed']:>7} {counts['skipped']:>8} {result.duration_seconds:>8.0f}  "
              f"{verdict}")
    for result in results:
        failures = result.failures()
        if failures:
            print(f"\n{result.suite}: the run fails ({len(failures)}):")
            for line in failures:
                print(f"  {line}")
    passed = sum(result.counts()["passed"] for result in results)
    skipped = sum(1 for result in results for outcome in result.outcomes
                  if outcome.status == "skipped" and outcome.tolerated)
    failed = sum(len(result.failures()) for result in results)
    # The plain closing line CI tooling reads: "failed" counts every reason the run fails
    # (failed tests, untolerated skips, problems around the tests); "skipped" tolerated skips.
    print(f"\ncompat: {passed} passed, {failed} failed, {skipped} skipped")
