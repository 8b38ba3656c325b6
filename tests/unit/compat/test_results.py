"""The verdict on a suite run (compat/results.py): only passes and tolerated skips pass it."""

from __future__ import annotations

import pytest

from compat.results import (
    Outcome,
    SuiteResult,
    exit_problem,
    judge_skips,
    print_summary,
    unmatched_entries,
)


def result(outcomes: list[Outcome], problems: list[str] | None = None) -> SuiteResult:
    return SuiteResult("suite", "1.0", 1.0, outcomes, problems or [])


def test_passes_and_tolerated_skips_pass_the_run() -> None:
    outcomes = judge_skips([Outcome("a", "passed"), Outcome("b", "skipped", reason="no SSL")],
                           {"b": "needs SSL listeners"})
    assert result(outcomes).failures() == []
    assert outcomes[1].tolerated
    assert outcomes[1].reason == "no SSL (tolerated: needs SSL listeners)"


@pytest.mark.parametrize(("outcome", "expected"), [
    (Outcome("t", "failed", reason="assert 1 == 2"), "t: failed: assert 1 == 2"),
    (Outcome("t", "skipped", reason="needs a cluster"),
     "t: skipped, not tolerated by compat/skips.py now: needs a cluster"),
])
def test_a_failure_or_an_unexpected_skip_fails_the_run(outcome: Outcome, expected: str) -> None:
    assert result(judge_skips([outcome], {"other": "reason"})).failures() == [expected]


def test_a_table_entry_does_not_excuse_a_failure() -> None:
    outcomes = judge_skips([Outcome("t", "failed", reason="boom")], {"t": "needs API 45"})
    assert result(outcomes).failures() == ["t: failed: boom"]


def test_problems_around_the_tests_fail_the_run() -> None:
    run = result([Outcome("a", "passed")], ["pytest (kafka-python) exited 3"])
    assert run.failures() == ["pytest (kafka-python) exited 3"]


def test_an_entry_that_names_no_test_is_a_problem() -> None:
    assert unmatched_entries(["a", "gone"], [Outcome("a", "passed")]) == [
        "compat/skips.py names gone, which this suite does not have"]


@pytest.mark.parametrize(("code", "problems"), [
    (0, []), (1, ["broker exited 1"]), (-9, ["broker exited -9"]),
    (None, ["broker had to be killed"]),
])
def test_exit_problem(code: int | None, problems: list[str]) -> None:
    assert exit_problem("broker", code) == problems


def test_the_summary_lists_every_failure_and_counts_it_in_the_closing_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    good = judge_skips([Outcome("a", "passed"), Outcome("b", "skipped")], {"b": "why"})
    bad = result([Outcome("c", "failed", reason="boom")], ["the Samsa broker died during the run"])
    print_summary([result(good), bad])
    printed = capsys.readouterr().out
    assert "suite: the run fails (2):\n  the Samsa broker died during the run\n  c: failed: boom" \
        in printed
    assert printed.rstrip().endswith("compat: 1 passed, 2 failed, 1 skipped")
