"""``bench.rounds``: rotated round order, medians with their spread, paired per-round ratios."""

from __future__ import annotations

import pytest

from bench import rounds
from bench.rounds import Spread, paired_ratios, ratio_spread, round_order, run_rounds


@pytest.mark.parametrize(("values", "median", "low", "high"), [
    ([3.0], 3.0, 3.0, 3.0),
    ([5.0, 1.0, 3.0], 3.0, 1.0, 5.0),
    ([4.0, 1.0, 3.0, 2.0], 2.5, 1.0, 4.0),
    ([7.0, 7.0, 1.0, 9.0, 8.0], 7.0, 1.0, 9.0),
])
def test_spread_is_the_median_and_the_range(values: list[float], median: float, low: float,
                                            high: float) -> None:
    assert Spread.of(values) == Spread(median, low, high, len(values))


def test_spread_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        Spread.of([])


def test_paired_ratios_divide_round_by_round() -> None:
    # Round 2 was slow for both (load): its pair still says 2x, as rounds 1 and 3 do.
    ours, theirs = [100.0, 40.0, 120.0], [50.0, 20.0, 60.0]
    assert paired_ratios(ours, theirs) == [2.0, 2.0, 2.0]
    assert ratio_spread(ours, theirs) == Spread(2.0, 2.0, 2.0, 3)


def test_median_of_paired_ratios_is_not_the_ratio_of_medians_nor_of_bests() -> None:
    ours, theirs = [10.0, 20.0, 30.0], [5.0, 40.0, 15.0]
    assert ratio_spread(ours, theirs) == Spread(2.0, 0.5, 2.0, 3)
    assert Spread.of(ours).median / Spread.of(theirs).median == pytest.approx(20 / 15)
    assert max(ours) / max(theirs) == pytest.approx(0.75)


def test_rounds_missing_on_either_side_are_left_out_of_the_pairs() -> None:
    assert paired_ratios([10.0, None, 30.0, 8.0], [5.0, 4.0, None, 0.0]) == [2.0]
    assert ratio_spread([None, 1.0], [1.0, None]) is None


def test_pairs_need_as_many_rounds_on_each_side() -> None:
    with pytest.raises(ValueError):
        paired_ratios([1.0, 2.0], [1.0])


def test_round_order_rotates_so_each_system_takes_each_place_once() -> None:
    systems = ["a", "b", "c"]
    orders = [round_order(systems, index) for index in range(3)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    for place in range(3):
        assert sorted(order[place] for order in orders) == systems
    assert [round_order(["x", "y"], index) for index in range(4)] == [
        ["x", "y"], ["y", "x"], ["x", "y"], ["y", "x"]]


def test_run_rounds_measures_every_system_in_the_rotated_order() -> None:
    calls: list[tuple[str, int]] = []

    def measure(system: str, round_index: int) -> float:
        calls.append((system, round_index))
        return {"samsa": 10.0, "peer": 5.0}[system] * (round_index + 1)

    done = run_rounds(["samsa", "peer"], 3, measure)
    assert calls == [("samsa", 0), ("peer", 0), ("peer", 1), ("samsa", 1),
                     ("samsa", 2), ("peer", 2)]
    assert done.orders == [["samsa", "peer"], ["peer", "samsa"], ["samsa", "peer"]]
    assert done.results == {"samsa": [10.0, 20.0, 30.0], "peer": [5.0, 10.0, 15.0]}
    assert len(done.loads) == 3
    assert done.spread("samsa", float) == Spread(20.0, 10.0, 30.0, 3)
    assert done.ratio("samsa", "peer", float) == Spread(2.0, 2.0, 2.0, 3)


def test_a_system_allowed_to_fail_sits_out_the_later_rounds() -> None:
    calls: list[tuple[str, int]] = []

    def measure(system: str, round_index: int) -> float:
        calls.append((system, round_index))
        if system == "peer" and round_index == 1:
            raise RuntimeError("crashed")
        return 1.0

    done = run_rounds(["samsa", "peer"], 3, measure, may_fail=["peer"])
    assert ("peer", 2) not in calls
    assert done.results["peer"] == [1.0, None, None]
    assert done.failures == {"peer": "round 2: crashed"}
    assert done.ok("peer")
    assert done.ratio("samsa", "peer", float) == Spread(1.0, 1.0, 1.0, 1)


def test_a_failure_of_any_other_system_propagates() -> None:
    def measure(system: str, round_index: int) -> float:
        raise RuntimeError("samsa broke")

    with pytest.raises(RuntimeError, match="samsa broke"):
        run_rounds(["samsa", "peer"], 2, measure, may_fail=["peer"])


def test_summarize_pairs_ours_with_every_other_system_and_json_keeps_every_round() -> None:
    values = {"samsa": [10.0, 30.0, 20.0], "tansu": [10.0, 10.0, 10.0], "gone": [1.0, 1.0, 1.0]}

    def measure(system: str, round_index: int) -> float:
        if system == "gone":
            raise RuntimeError("did not start")
        return values[system][round_index]

    done = run_rounds(["samsa", "tansu", "gone"], 3, measure, may_fail=["gone"])
    summary = rounds.summarize(done, {"msgs_s": float})
    assert summary["systems"]["samsa"]["msgs_s"] == {"median": 20.0, "min": 10.0, "max": 30.0,
                                                     "rounds": 3}
    assert summary["ratios"] == {"tansu": {"msgs_s": {"median": 2.0, "min": 1.0, "max": 3.0,
                                                      "rounds": 3}}}
    assert summary["systems"]["gone"]["msgs_s"] is None
    raw = rounds.rounds_json(done, lambda value: {"msgs_s": value})
    assert raw["by_system"]["samsa"] == [{"msgs_s": 10.0}, {"msgs_s": 30.0}, {"msgs_s": 20.0}]
    assert raw["by_system"]["gone"] == [None, None, None]
    assert raw["orders"][1] == ["tansu", "gone", "samsa"]


def test_cells_print_the_median_then_the_range() -> None:
    spread = Spread(476_012.4, 322_100.0, 898_000.0, 5)
    assert spread.text() == "476,012 (322,100–898,000)"
    assert rounds.ratio_cell(Spread(1.5, 0.91, 2.0, 5).to_json()) == "1.50x (0.91–2.00)"
    assert rounds.cell(None) == "-"


def test_environment_names_the_date_the_machine_and_the_load_before_and_after() -> None:
    environment = rounds.finish(rounds.environment())
    assert environment["nproc"] >= 1
    assert len(environment["load_average_before"]) == 3
    assert len(environment["load_average_after"]) == 3
    assert environment["date"].endswith("+00:00")
    assert "load average" in rounds.caption(environment)
