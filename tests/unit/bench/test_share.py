"""``bench.share``'s pure parts: the weighted percentile, the summary's paired ratios and the
table, on fixed figures."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from bench import rounds
from bench.share import (
    ACCEPT,
    CLASSIC,
    KAFKA,
    MODES,
    REJECT,
    Drained,
    pairs,
    percentile,
    print_table,
    share_mode,
    summary,
)


def test_percentile_weighs_each_value_by_its_records() -> None:
    samples = [(0.010, 90), (0.050, 9), (0.200, 1)]
    assert percentile(samples, 0.5) == 0.010
    assert percentile(samples, 0.99) == 0.050
    assert percentile(samples, 1.0) == 0.200
    with pytest.raises(ValueError):
        percentile([], 0.5)


def drained(mode: str, seconds: float, p50_s: float = 0.01) -> Drained:
    return Drained(mode, 1000, seconds, p50_s, p50_s * 2, 0.5, 0.25)


def test_the_summary_pairs_share_with_classic_and_reject_with_accept_round_by_round() -> None:
    seconds = {CLASSIC: [1.0, 2.0], share_mode(1): [2.0, 2.0], share_mode(4): [1.0, 1.0],
               share_mode(16): [4.0, 2.0], ACCEPT: [1.0, 1.0], REJECT: [2.0, 4.0]}
    done = rounds.Rounds[Drained](list(MODES), {
        mode: [drained(mode, value) for value in values] for mode, values in seconds.items()})
    result = summary(done)
    assert result["modes"][CLASSIC]["records_per_s"] == {
        "median": 750.0, "min": 500.0, "max": 1000.0, "rounds": 2}
    assert result["modes"][CLASSIC]["broker_cpu_ms_per_1000_records"]["median"] == 500.0
    ratios = {(pair["mode"], pair["against"]): pair for pair in result["ratios"]}
    assert ratios[(share_mode(1), CLASSIC)]["records_per_s"] == {
        "median": 0.75, "min": 0.5, "max": 1.0, "rounds": 2}
    assert ratios[(share_mode(16), CLASSIC)]["records_per_s"]["median"] == 0.625
    assert ratios[(REJECT, ACCEPT)]["records_per_s"] == {
        "median": 0.375, "min": 0.25, "max": 0.5, "rounds": 2}
    assert ratios[(REJECT, ACCEPT)]["ack_p50_ms"]["median"] == 1.0

    document = {"num_records": 1000, "rounds": 2, "summary": result,
                "environment": {"date": "2026-11-26T23:59:00+00:00", "nproc": 2, "cpu_model": "x",
                                "load_average_before": [1.0, 1.0, 1.0]}}
    out = io.StringIO()
    print_table(document, Console(file=out, width=200))
    text = out.getvalue()
    assert "dead-letter reject ÷ dead-letter accept (paired)" in text
    assert "0.38x (0.25–0.50)" in text


def test_kafka_modes_are_paired_with_kafka_classic_and_with_samsa() -> None:
    systems = [*MODES, KAFKA + CLASSIC, KAFKA + share_mode(4)]
    found = {(mode, against) for mode, against, _ in pairs(systems)}
    assert (KAFKA + share_mode(4), KAFKA + CLASSIC) in found
    assert (share_mode(4), KAFKA + share_mode(4)) in found and (CLASSIC, KAFKA + CLASSIC) in found
    assert (share_mode(16), KAFKA + share_mode(16)) not in found  # not run on Kafka
    assert (REJECT, ACCEPT) in found
    assert {against for _, against, _ in pairs(MODES)} == {CLASSIC, ACCEPT}
