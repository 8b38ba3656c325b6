"""``bench.distribution``: nearest-rank percentiles and the min/median/p90/p99/max summary,
checked against a brute-force model (the smallest value with at least p % of the values at or
below it)."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.distribution import Distribution, percentile

values_lists = st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1,
                        max_size=60)
percents = st.floats(min_value=0.01, max_value=100)


def model_percentile(values: list[float], percent: float) -> float:
    """The smallest value v such that at least ``percent`` % of the values are <= v."""
    return min(v for v in values
               if sum(1 for other in values if other <= v) >= percent / 100 * len(values))


@settings(max_examples=200, deadline=None)
@given(values_lists, percents)
def test_percentile_is_the_nearest_rank_model(values: list[float], percent: float) -> None:
    assert percentile(values, percent) == model_percentile(values, percent)


@settings(max_examples=100, deadline=None)
@given(values_lists)
def test_a_distribution_is_ordered_and_made_of_measured_values(values: list[float]) -> None:
    shape = Distribution.of(values)
    assert shape.count == len(values)
    assert shape.low <= shape.median <= shape.p90 <= shape.p99 <= shape.high
    assert {shape.low, shape.p90, shape.p99, shape.high} <= set(values)
    assert shape.median == statistics.median(values)


def test_p99_of_twenty_timings_is_the_slowest() -> None:
    timings = [1.0 + index / 10 for index in range(20)]  # 1.0 .. 2.9
    shape = Distribution.of(reversed(timings))
    assert (shape.low, shape.high, shape.p99) == (1.0, 2.9, 2.9)
    assert shape.p90 == pytest.approx(2.7)  # rank ceil(18) = 18th of 20
    assert shape.median == pytest.approx(1.95)


@pytest.mark.parametrize(("values", "percent", "expected"), [
    ([5.0], 50, 5.0), ([5.0], 99, 5.0), ([1.0, 2.0], 50, 1.0), ([1.0, 2.0], 51, 2.0),
    ([3.0, 1.0, 2.0, 4.0], 25, 1.0), ([3.0, 1.0, 2.0, 4.0], 75, 3.0),
    ([3.0, 1.0, 2.0, 4.0], 100, 4.0),
])
def test_percentile_table(values: list[float], percent: float, expected: float) -> None:
    assert percentile(values, percent) == expected


@pytest.mark.parametrize("percent", [0, -1, 100.5])
def test_percent_out_of_range_is_an_error(percent: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0], percent)


def test_nothing_has_no_percentile() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        Distribution.of([])


def test_json_and_cells() -> None:
    shape = Distribution.of([1.23456, 2.0, 3.0])
    assert shape.to_json() == {"count": 3, "min": 1.235, "median": 2.0, "p90": 3.0,
                               "p99": 3.0, "max": 3.0}
    assert shape.cells(".1f") == ["1.2", "2.0", "3.0", "3.0", "3.0"]
