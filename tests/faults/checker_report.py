"""The checker's verdict: which anomalies a history shows, with a few examples of each.

An example is a JSON-able dict: what is wrong (``topic``, ``partition``, ``offset``, ``value``,
...) and ``ops``, the offending operations as they appear in the history, each with its
``line`` (the 1-based index of the history entry) so it can be found in the file.

Owner: :class:`Anomalies` is filled by one ``check`` call and frozen into a :class:`Report`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ANOMALIES", "Anomalies", "Report"]

# Jepsen's names for its Kafka workload where one exists.
ANOMALIES = (
    "lost-write",
    "duplicate",
    "wrong-offset",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
    "truncated-read",
    "aborted-read",
    "torn-transaction",
    "lost-transaction",
    "offsets-backwards",
    "compaction-latest-wrong",
    "split-brain",
    "replica-divergence",
    # a queue (share group): tests.faults.checker_queue
    "queue-lost",
    "queue-accepted-twice",
    "queue-dead-lettered-and-accepted",
    "queue-dead-letter-unrejected",
    "queue-wrong-record",
)

DEFAULT_EXAMPLES = 10


class Anomalies:
    """Counts every anomaly found and keeps the first ``examples`` of each kind."""

    def __init__(self, examples: int = DEFAULT_EXAMPLES) -> None:
        self.examples = examples
        self.found: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, name: str, **example: Any) -> None:
        if name not in ANOMALIES:
            raise ValueError(f"unknown anomaly {name!r}")
        self.counts[name] += 1
        if len(self.found[name]) < self.examples:
            self.found[name].append(example)

    def report(self, counts: Mapping[str, int]) -> Report:
        return Report(
            valid=not self.counts,
            anomalies={name: list(self.found[name]) for name in ANOMALIES if name in self.found},
            counts={**dict(sorted(counts.items())),
                    **{name: self.counts[name] for name in ANOMALIES if name in self.counts}},
        )  # fmt: skip


@dataclass(frozen=True)
class Report:
    """``anomalies``: name -> up to N examples; ``counts``: the operations checked (``send-ok``,
    ``poll-ok``, ``polled-record``, ``txn-ok``, ``final-record``, ...) and, under each anomaly's
    name, how many of it were found (all of them, not only the examples kept)."""

    valid: bool
    anomalies: dict[str, list[dict[str, Any]]]
    counts: dict[str, int]

    def to_json(self) -> str:
        return json.dumps(
            {"valid": self.valid, "anomalies": self.anomalies, "counts": self.counts},
            indent=1, default=_jsonable,
        )  # fmt: skip

    def summary(self) -> str:
        """One line per anomaly kind (its count and first example), then the counts checked."""
        lines = ["valid" if self.valid else "INVALID"]
        for name, examples in self.anomalies.items():
            first = json.dumps(examples[0], default=_jsonable, separators=(",", ":"))
            lines.append(f"  {name}: {self.counts.get(name, len(examples))}  e.g. {first}")
        checked = ", ".join(
            f"{name} {count}" for name, count in self.counts.items() if name not in ANOMALIES
        )
        lines.append(f"  checked: {checked}")
        return "\n".join(lines)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value, key=repr) if not isinstance(value, tuple) else list(value)
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)
