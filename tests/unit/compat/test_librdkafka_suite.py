"""librdkafka's runner output read into outcomes (compat/librdkafka_suite.py): every way a test
number can go wrong is a failure, and only table entries are left unrun."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compat import librdkafka_suite as suite
from compat.librdkafka_suite import QUICK, Run, Target
from compat.results import Outcome
from compat.samsa_broker import SamsaBroker

PASSED_RUN = """\
[0001_multiobj / 1.2s] ================= Test 0001_multiobj PASSED =================
|  <MAIN>                                   |     PASSED |   1.300s |
|  0001_multiobj                            |     PASSED |   1.200s |
"""
FAILED_RUN = """\
### Test "0012_produce_consume (do_test:130)" failed at 0012-produce_consume.c:130 ###
Expected 100 messages, got 99
|  0012_produce_consume                     |     FAILED |   9.000s | failed
"""
SKIPPED_RUN = """\
|  0097_ssl_verify                          |    SKIPPED |   0.001s | Test requires SSL\n"""


def test_a_passed_summary_line_is_a_pass() -> None:
    [outcome] = suite._outcomes(["0001_multiobj"], PASSED_RUN, 0, False, 2.0, 150)
    assert (outcome.status, outcome.duration_seconds) == ("passed", 1.2)


def test_a_failed_test_carries_the_runners_first_failure_line() -> None:
    [outcome] = suite._outcomes(["0012_produce_consume"], FAILED_RUN, 1, False, 9.5, 150)
    assert outcome.status == "failed"
    assert outcome.reason.startswith('### Test "0012_produce_consume (do_test:130)" failed at')
    assert "Expected 100 messages, got 99" in outcome.reason


def test_a_self_skip_is_read_as_a_skip_for_the_table_to_judge() -> None:
    [outcome] = suite._outcomes(["0097_ssl_verify"], SKIPPED_RUN, 0, False, 0.1, 150)
    assert (outcome.status, outcome.reason) == ("skipped", "Test requires SSL")


def test_a_timeout_is_a_failure() -> None:
    [outcome] = suite._outcomes(["0113_cooperative_rebalance"], "[0113 / 149s] still going\n",
                                -9, True, 150.0, 150)
    assert outcome.status == "failed"
    assert outcome.reason.startswith("timed out after 150s: ")


def test_a_crash_without_a_summary_is_a_failure_of_each_test_of_the_number() -> None:
    names = ["0045_subscribe_update", "0045_subscribe_many_updates"]
    outcomes = suite._outcomes(names, "Segmentation fault\n", -11, False, 3.0, 150)
    assert [(o.name, o.status) for o in outcomes] == [(name, "failed") for name in names]
    assert outcomes[0].reason == "test-runner exited -11 without a summary: Segmentation fault"


@pytest.mark.parametrize(("status", "code", "problems"), [
    ("passed", 0, []), ("failed", 1, []),
    ("passed", 139, ["0001: test-runner exited 139 though no test failed"]),
])
def test_a_runner_exit_code_that_its_tests_do_not_explain_is_a_problem(
        status: str, code: int, problems: list[str]) -> None:
    assert suite.runner_problem("0001", [Outcome("0001_multiobj", status)], code) == problems


def test_a_number_is_left_unrun_only_when_the_table_tolerates_all_its_tests() -> None:
    numbers = {"0045": ["0045_a", "0045_b"], "0097": ["0097_ssl_verify"], "0001": ["0001_x"]}
    tolerated = {"0045_a": "needs API 45", "0097_ssl_verify": "needs SSL listeners"}
    outcomes, runnable = suite._plan(numbers, ["0001", "0045", "0097"], tolerated)
    assert runnable == ["0001", "0045"]
    assert [(o.name, o.status, o.reason) for o in outcomes] == [
        ("0097_ssl_verify", "skipped", "samsa compat: needs SSL listeners")]


def test_a_number_not_run_because_the_budget_is_used_up_fails(tmp_path: Path) -> None:
    shared = Run(tmp_path, {"0001": ["0001_multiobj"]}, tmp_path, tmp_path, QUICK,
                 deadline=time.monotonic() - 1)
    target = Target("broker", SamsaBroker(tmp_path / "broker.log"), "127.0.0.1:9", tmp_path)
    [outcome], _ = suite._run_number(shared, "0001", target, (4, 0))
    assert outcome.status == "failed"
    assert outcome.reason == "not run: the suite's time budget of 1500s was used up"


def test_quick_and_full_mode_flags() -> None:
    assert QUICK.runner_flags("0001") == ["-Q", "-E", "-K", "-L"]
    assert QUICK.runner_flags("0142") == ["-E", "-K", "-L"]
    full = suite.full_mode(sockem=True)
    assert (full.quick, full.sockem, full.suite) == (False, True, "librdkafka-full")
    assert full.runner_flags("0001") == ["-K", "-L"]
    assert suite.full_mode(sockem=False).runner_flags("0001") == ["-E", "-K", "-L"]


def test_socket_emulation_tests_are_listed_only_when_the_mode_runs_them(tmp_path: Path) -> None:
    (tmp_path / "test.c").write_text(
        "struct test tests[] = {\n"
        "    _TEST(0001_multiobj, 0),\n"
        "    _TEST(0049_consume_conn_close, TEST_F_SOCKEM, TEST_BRKVER(0, 9, 0, 0)),\n"
        "    _TEST(0072_headers_ut, TEST_F_LOCAL),\n"
        "    _TEST(0100_thread_interceptors, TEST_F_KNOWN_ISSUE),\n"
        "};\n")
    assert suite.list_tests(tmp_path) == {"0001": ["0001_multiobj"]}
    assert suite.list_tests(tmp_path, sockem=True) == {
        "0001": ["0001_multiobj"], "0049": ["0049_consume_conn_close"]}


def test_built_with_sockem_reads_makefile_config(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tmp_path / "Makefile.config").write_text("WITH_SOCKEM=\ty\n")
    assert suite.built_with_sockem(tests)
    (tmp_path / "Makefile.config").write_text("WITH_RAPIDJSON=\ty\n")
    assert not suite.built_with_sockem(tests)
