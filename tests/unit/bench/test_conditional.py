"""``bench.conditional``'s summary: each mode's records/s and the paired ratios it names."""

from __future__ import annotations

from bench import rounds
from bench.conditional import (
    BATCHED,
    MODES,
    ONE_CONDITIONAL,
    ONE_KEYED,
    ONE_PLAIN,
    PIPELINED,
    Measured,
    summary,
)


def test_the_summary_pairs_conditional_with_plain_round_by_round() -> None:
    seconds = {ONE_CONDITIONAL: [1.0, 2.0], ONE_KEYED: [1.0, 1.0], PIPELINED: [0.5, 0.5],
               ONE_PLAIN: [0.5, 1.0],
               BATCHED: [0.1, 0.1]}
    done = rounds.Rounds[Measured](list(MODES), {
        mode: [Measured(mode, 1000, value) for value in values] for mode, values in seconds.items()})
    result = summary(done)
    assert result["records_per_s"][ONE_CONDITIONAL] == {
        "median": 750.0, "min": 500.0, "max": 1000.0, "rounds": 2}
    ratios = {(pair["mode"], pair["against"]): pair["ratio"] for pair in result["ratios"]}
    assert ratios[(ONE_CONDITIONAL, ONE_PLAIN)] == {"median": 0.5, "min": 0.5, "max": 0.5, "rounds": 2}
    assert ratios[(PIPELINED, BATCHED)]["median"] == 0.2
    assert ratios[(ONE_KEYED, ONE_PLAIN)]["median"] == 0.75
