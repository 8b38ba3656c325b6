"""kafka-python's pytest runs judged (compat/kafka_python_suite.py): a missing or unreadable
JUnit file, a timeout and an unexplained exit code each fail the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.kafka_python_suite import judge_pytest

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="test.integration.test_producer_integration" name="test_end_to_end[gzip]"
  time="1.5"/>
<testcase classname="test.integration.test_ssl_integration.TestSSLConnection"
  name="test_ssl_handshake" time="0"><skipped message="samsa compat: needs SSL listeners"/>
</testcase>
<testcase classname="test.integration.test_admin_integration" name="test_acls" time="2">
<error message="error at teardown"/></testcase>
<testcase classname="test.integration.test_admin_integration" name="test_acls" time="2"/>
</testsuite></testsuites>"""
ONE_PASS = '<testsuites><testsuite><testcase classname="m" name="t"/></testsuite></testsuites>'


def write(tmp_path: Path, text: str) -> Path:
    junit = tmp_path / "kafka-python.junit.xml"
    junit.write_text(text)
    return junit


def test_outcomes_are_named_by_module_or_class_and_an_error_at_teardown_stays(
        tmp_path: Path) -> None:
    outcomes, problems = judge_pytest("pytest", 1, write(tmp_path, JUNIT))
    assert problems == []  # exit code 1: explained by the failed test
    assert [(o.name, o.status) for o in outcomes] == [
        ("test_producer_integration::test_end_to_end[gzip]", "passed"),
        ("TestSSLConnection::test_ssl_handshake", "skipped"),
        ("test_admin_integration::test_acls", "failed")]
    assert outcomes[1].reason == "samsa compat: needs SSL listeners"


def test_no_junit_file_fails_the_run(tmp_path: Path) -> None:
    assert judge_pytest("pytest", 0, tmp_path / "absent.xml") == (
        [], ["pytest exited 0 and wrote no JUnit file"])


def test_an_unreadable_junit_file_fails_the_run(tmp_path: Path) -> None:
    outcomes, [problem] = judge_pytest("pytest", 0, write(tmp_path, JUNIT[:200]))
    assert outcomes == []
    assert problem.startswith("pytest exited 0 and its JUnit file is unreadable: ")


def test_a_timeout_fails_the_run(tmp_path: Path) -> None:
    assert judge_pytest("pytest", None, write(tmp_path, JUNIT)) == (
        [], ["pytest timed out after 1200s"])


@pytest.mark.parametrize(("code", "junit", "problems"), [
    (0, ONE_PASS, []),
    (1, ONE_PASS, ["pytest exited 1"]),  # "tests failed", but none did
    (2, "<testsuites/>", ["pytest exited 2"]),  # interrupted
    (5, "<testsuites/>", ["pytest exited 5"]),  # no tests collected
])
def test_an_exit_code_its_outcomes_do_not_explain_fails_the_run(
        tmp_path: Path, code: int, junit: str, problems: list[str]) -> None:
    assert judge_pytest("pytest", code, write(tmp_path, junit))[1] == problems
