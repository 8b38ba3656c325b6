"""Per-test outcomes of one suite, the summary table, and the JSON written to compat/results/."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATUSES = ("passed", "failed", "skipped")


@dataclass
class Outcome:
    name: str
    status: str  # passed | failed | skipped
    duration_seconds: float = 0.0
    reason: str = ""
    category: str = ""  # for failures: "missing API: ..." or "unexplained: possible Samsa bug"


@dataclass
class SuiteResult:
    suite: str
    version: str
    duration_seconds: float
    outcomes: list[Outcome]
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counter = Counter(outcome.status for outcome in self.outcomes)
        return {status: counter.get(status, 0) for status in STATUSES}

    def unexplained_failures(self) -> list[Outcome]:
        return [o for o in self.outcomes
                if o.status == "failed" and not o.category.startswith("missing API")]

    def write_json(self, directory: Path) -> Path:
        path = directory / f"{self.suite}.json"
        document = {"suite": self.suite, "version": self.version,
                    "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "duration_seconds": round(self.duration_seconds, 1),
                    "counts": self.counts(), "notes": self.notes,
                    "tests": [asdict(outcome) for outcome in self.outcomes]}
        path.write_text(json.dumps(document, indent=2) + "\n")
        return path


def print_summary(results: list[SuiteResult]) -> None:
    print()
    print(f"{'suite':<22} {'passed':>7} {'failed':>7} {'skipped':>8} {'seconds':>8}")
    for result in results:
        counts = result.counts()
        print(f"{result.suite + ' ' + result.version:<22} {counts['passed']:>7} "
              f"{counts['failed']:>7} {counts['skipped']:>8} {result.duration_seconds:>8.0f}")
    for result in results:
        failures: dict[str, list[str]] = {}
        for outcome in result.outcomes:
            if outcome.status == "failed":
                failures.setdefault(outcome.category or "failed", []).append(outcome.name)
        for category, names in sorted(failures.items()):
            print(f"\n{result.suite} failed, {category} ({len(names)}):")
            for name in names:
                print(f"  {name}")
    total = Counter()
    for result in results:
        total.update(result.counts())
    # The plain closing line CI tooling reads.
    print(f"\ncompat: {total['passed']} passed, {total['failed']} failed, "
          f"{total['skipped']} skipped")
