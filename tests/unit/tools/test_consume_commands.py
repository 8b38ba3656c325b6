"""``samsa consume``'s output: --format placeholders and escapes, --json documents, usage
checks (no broker: the records are built here)."""

from __future__ import annotations

import argparse

import pytest

from samsa.types import ConsumerRecord
from tools.cli import build_parser
from tools.consume_commands import _check_usage, _unescape, format_record, record_document

RECORD = ConsumerRecord(topic="t", partition=2, offset=7, timestamp=1_700_000_000_000,
                        timestamp_type=0, key=b"k\xff", value=b"v\xc3\xa9",
                        headers=(("a", b"1"), ("b", None)))


def test_format_fills_every_placeholder() -> None:
    template = _unescape("{topic}\\t{partition}\\t{offset}\\t{timestamp}\\t{key}\\t{value}\\t"
                         "{headers}\\n")
    assert format_record(template, RECORD) == (
        "t\t2\t7\t1700000000000\tk\\xff\tvé\ta:1,b:null\n")


def test_absent_key_and_value_print_null() -> None:
    record = ConsumerRecord("t", 0, 0, 0, 0, None, None)
    assert format_record("{key}|{value}|{headers}", record) == "null|null|"


def test_json_document_keeps_nulls_and_header_order() -> None:
    assert record_document(RECORD) == {
        "topic": "t", "partition": 2, "offset": 7, "timestamp": 1_700_000_000_000,
        "timestamp_type": 0, "key": "k\\xff", "value": "vé",
        "headers": [["a", "1"], ["b", None]]}


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["consume", *argv])


@pytest.mark.parametrize(("argv", "problem"), [
    (("t", "--offset", "5"), "--offset N needs --partition"),
    (("t", "--offset", "soon", "--partition", "0"), "must be a number"),
    (("t", "--group", "g", "--partition", "0"), "--group cannot be combined"),
    (("t", "--max-messages", "0"), "at least 1"),
    (("t", "--format", "{nope}"), "bad --format"),
])
def test_usage_problems(argv: tuple[str, ...], problem: str) -> None:
    found = _check_usage(parse(*argv))
    assert found is not None and problem in found


def test_good_usage_passes() -> None:
    assert _check_usage(parse("t", "--partition", "1", "--offset", "3", "--format",
                              "{offset:>6} {value}")) is None
    args = parse("t", "--group", "g", "--from-beginning")
    assert args.group_id == "g" and args.group == "consume"
