"""``bench.fixtures``: the paired kafka ÷ samsa ratio of time to first produce, and a real
measurement of the one-node fixture."""

from __future__ import annotations

import pytest

from bench import rounds
from bench.fixtures import KAFKA_ONE, SAMSA_ONE, SAMSA_THREE, SYSTEMS, Measured, measure, summary


def test_the_summary_pairs_kafka_with_each_samsa_fixture_round_by_round() -> None:
    first = {SAMSA_ONE: [0.5, 1.0], SAMSA_THREE: [3.0, 4.0], KAFKA_ONE: [3.0, 3.0]}
    done = rounds.Rounds[Measured](list(SYSTEMS), {
        system: [Measured(system, value / 2, value) for value in values]
        for system, values in first.items()})
    result = summary(done)
    assert result["first_produce_s"][SAMSA_ONE]["median"] == 0.75
    ratios = {pair["system"]: pair["ratio"] for pair in result["kafka_over_samsa"]}
    assert ratios[SAMSA_ONE] == {"median": 4.5, "min": 3.0, "max": 6.0, "rounds": 2}
    assert ratios[SAMSA_THREE]["median"] == pytest.approx(0.875)


def test_kafka_left_out_leaves_no_ratio() -> None:
    done = rounds.Rounds[Measured](list(SYSTEMS), {
        SAMSA_ONE: [Measured(SAMSA_ONE, 0.4, 0.5)], SAMSA_THREE: [Measured(SAMSA_THREE, 2, 3)],
        KAFKA_ONE: [None]}, failures={KAFKA_ONE: "round 1: no Java"})
    result = summary(done)
    assert result["kafka_over_samsa"] == []
    assert KAFKA_ONE not in result["first_produce_s"]


@pytest.mark.integration
def test_measuring_the_one_node_fixture_starts_produces_and_stops_it() -> None:
    measured = measure(SAMSA_ONE)
    assert 0 < measured.ready_s < measured.first_produce_s
