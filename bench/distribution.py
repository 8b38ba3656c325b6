"""Distributions of repeated timings (the cluster bench's failover times): min, median, p90,
p99 and max.

Percentiles are nearest-rank: the p-th percentile of n sorted values is the value at rank
``ceil(p / 100 * n)`` (1-based), always one of the measured values, never an interpolation.
With few samples this is the conservative choice: p99 of 20 failovers is the slowest one, so a
"p99 <= goal" claim never rests on a value between two measurements. The median is the usual
one (the mean of the two middle values for an even count).

Pure functions and frozen values; no state.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], percent: float) -> float:
    """The nearest-rank ``percent``-th percentile (0 < percent <= 100) of ``values``."""
    if not values:
        raise ValueError("a percentile of no values")
    if not 0 < percent <= 100:
        raise ValueError(f"percent must be in (0, 100], not {percent}")
    ordered = sorted(values)
    rank = math.ceil(percent / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


@dataclass(frozen=True)
class Distribution:
    """The shape of some timings (seconds, or whatever unit they were given in)."""

    count: int
    low: float
    median: float
    p90: float
    p99: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Distribution:
        ordered = sorted(values)
        if not ordered:
            raise ValueError("a distribution of no values")
        return cls(len(ordered), ordered[0], statistics.median(ordered),
                   percentile(ordered, 90), percentile(ordered, 99), ordered[-1])

    def to_json(self, digits: int = 3) -> dict[str, float]:
        return {"count": self.count, "min": round(self.low, digits),
                "median": round(self.median, digits), "p90": round(self.p90, digits),
                "p99": round(self.p99, digits), "max": round(self.high, digits)}

    def cells(self, spec: str = ".2f") -> list[str]:
        """min, median, p90, p99, max, each formatted with ``spec``."""
        return [f"{value:{spec}}" for value in
                (self.low, self.median, self.p90, self.p99, self.high)]
