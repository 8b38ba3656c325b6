"""The pure parts of the admin commands: the reset-offsets plan, the lag rows of ``groups
describe``, the tables and JSON documents, and the option parsers (no broker, no socket)."""

from __future__ import annotations

import argparse
import json
from datetime import datetime

import pytest

from samsa.admin import ConfigEntry, GroupDescription, MemberDescription, TopicDescription
from samsa.types import OffsetAndMetadata, PartitionInfo, TopicPartition
from tools.admin_support import (
    admin_config,
    config_changes,
    key_value,
    timestamp_ms,
    topic_partitions,
)
from tools.cli import build_parser
from tools.client_options import print_table
from tools.configs_commands import config_rows
from tools.groups_commands import PlannedOffset, ResetSpec, lag_rows, plan_reset
from tools.topics_commands import describe_document, topic_rows

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
EARLIEST = {A0: 10, A1: 0, B0: 5}
LATEST = {A0: 100, A1: 0, B0: 50}
CURRENT = {A0: 40, B0: 45}


def plan(spec: ResetSpec, **kwargs: object) -> list[PlannedOffset]:
    return plan_reset([B0, A1, A0], spec, current=CURRENT, earliest=EARLIEST, latest=LATEST,
                      **kwargs)  # type: ignore[arg-type]


def news(planned: list[PlannedOffset]) -> dict[TopicPartition, int]:
    return {TopicPartition(p.topic, p.partition): p.new for p in planned}


# --- reset-offsets plan ------------------------------------------------------------------------

def test_plan_is_sorted_and_carries_the_current_offsets() -> None:
    planned = plan(ResetSpec("earliest"))
    assert [(p.topic, p.partition, p.current) for p in planned] == [
        ("a", 0, 40), ("a", 1, None), ("b", 0, 45)]


def test_to_earliest_and_to_latest() -> None:
    assert news(plan(ResetSpec("earliest"))) == EARLIEST
    assert news(plan(ResetSpec("latest"))) == LATEST


def test_to_offset_inside_the_log_is_taken_as_is() -> None:
    planned = plan_reset([A0], ResetSpec("offset", 50), current={}, earliest=EARLIEST,
                         latest=LATEST)
    assert planned == [PlannedOffset("a", 0, None, 50)]


def test_to_offset_outside_the_log_goes_to_the_nearer_end_with_a_warning() -> None:
    planned = {(p.topic, p.partition): p for p in plan(ResetSpec("offset", 7))}
    assert planned[("a", 0)].new == 10
    assert "lower than the earliest offset of a-0" in (planned[("a", 0)].warning or "")
    assert planned[("b", 0)].new == 7 and planned[("b", 0)].warning is None
    assert planned[("a", 1)].new == 0
    assert "higher than the latest offset of a-1" in (planned[("a", 1)].warning or "")


def test_shift_by_moves_from_the_committed_offset_within_the_log() -> None:
    planned = plan_reset([A0, B0], ResetSpec("shift", -35), current=CURRENT, earliest=EARLIEST,
                         latest=LATEST)
    assert news(planned) == {A0: 10, B0: 10}  # 40-35=5 is below a-0's start: 10
    assert planned[0].warning and not planned[1].warning
    forward = plan_reset([A0, B0], ResetSpec("shift", 10), current=CURRENT, earliest=EARLIEST,
                         latest=LATEST)
    assert news(forward) == {A0: 50, B0: 50}


def test_shift_by_without_a_committed_offset_is_an_error() -> None:
    with pytest.raises(ValueError, match="partition a-1: the group has no committed offset"):
        plan(ResetSpec("shift", 1))


def test_to_datetime_uses_the_offset_found_else_the_log_end() -> None:
    planned = plan(ResetSpec("datetime", 1_700_000_000_000), by_time={A0: 33, A1: -1})
    assert news(planned) == {A0: 33, A1: 0, B0: 50}


# --- groups describe ---------------------------------------------------------------------------

def group(*members: MemberDescription, state: str = "Stable") -> GroupDescription:
    return GroupDescription("g", state, "consumer", "range", members)


def test_lag_rows_join_offsets_log_ends_and_owners() -> None:
    alice = MemberDescription("m-1", None, "alice", "/10.0.0.1", frozenset({A0, A1}))
    idle = MemberDescription("m-2", "static-2", "bob", "/10.0.0.2", frozenset())
    rows = lag_rows(group(alice, idle), {A0: OffsetAndMetadata(40), B0: OffsetAndMetadata(50)},
                    {A0: 100, A1: 7, B0: None})
    assert rows == [
        {"topic": "a", "partition": 0, "current_offset": 40, "log_end_offset": 100, "lag": 60,
         "consumer_id": "m-1", "host": "/10.0.0.1", "client_id": "alice"},
        {"topic": "a", "partition": 1, "current_offset": None, "log_end_offset": 7, "lag": None,
         "consumer_id": "m-1", "host": "/10.0.0.1", "client_id": "alice"},
        {"topic": "b", "partition": 0, "current_offset": 50, "log_end_offset": None, "lag": None,
         "consumer_id": None, "host": None, "client_id": None},
        {"topic": None, "partition": None, "current_offset": None, "log_end_offset": None,
         "lag": None, "consumer_id": "m-2", "host": "/10.0.0.2", "client_id": "bob"},
    ]


def test_lag_is_zero_when_the_group_is_caught_up() -> None:
    rows = lag_rows(group(state="Empty"), {A0: OffsetAndMetadata(100)}, {A0: 100})
    assert [row["lag"] for row in rows] == [0]


def test_table_aligns_columns_and_shows_none_as_a_dash(capsys: pytest.CaptureFixture[str]) -> None:
    rows = lag_rows(group(state="Empty"), {A0: OffsetAndMetadata(5), B0: OffsetAndMetadata(12345)},
                    {A0: 10, B0: None})
    print_table(rows, ["topic", "partition", "current_offset", "log_end_offset", "lag"])
    assert capsys.readouterr().out.splitlines() == [
        "TOPIC  PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG",
        "a      0          5               10              5",
        "b      0          12345           -               -",
    ]


# --- topics, configs ---------------------------------------------------------------------------

def description(name: str, partitions: int) -> TopicDescription:
    return TopicDescription(name, "id-" + name, False, tuple(
        PartitionInfo(name, i, 1, 0, (1, 2), (2,)) for i in range(partitions)))


def test_topic_rows_and_the_describe_document() -> None:
    descriptions = {"a": description("a", 3), "b": description("b", 0)}
    assert topic_rows(descriptions) == [
        {"name": "a", "partitions": 3, "replicas": 2, "internal": False},
        {"name": "b", "partitions": 0, "replicas": 0, "internal": False}]
    document = describe_document(descriptions["a"], {"retention.ms": "5"})
    assert json.loads(json.dumps(document)) == {
        "name": "a", "topic_id": "id-a", "internal": False, "partition_count": 3,
        "replication_factor": 2, "configs": {"retention.ms": "5"},
        "partitions": [{"partition": i, "leader": 1, "leader_epoch": 0, "replicas": [1, 2],
                        "isr": [2]} for i in range(3)]}


def test_config_rows_show_what_was_set_unless_all_and_hide_secrets() -> None:
    entries = {
        "segment.bytes": ConfigEntry("segment.bytes", "1024", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": ConfigEntry("retention.ms", "604800000", "DEFAULT_CONFIG", True),
        "password": ConfigEntry("password", None, "DYNAMIC_BROKER_CONFIG", sensitive=True),
    }
    assert [r["name"] for r in config_rows(entries, everything=False)] == [
        "password", "segment.bytes"]
    rows = config_rows(entries, everything=True)
    assert [r["name"] for r in rows] == ["password", "retention.ms", "segment.bytes"]
    assert rows[0]["value"] == "(sensitive)"


# --- option parsing ----------------------------------------------------------------------------

def test_option_parsers() -> None:
    assert key_value(" retention.ms = 5 ") == ("retention.ms", "5")
    assert topic_partitions("orders") == ("orders", None)
    assert topic_partitions("orders:2,0,2") == ("orders", [0, 2])
    for bad in ("=5", "novalue"):
        with pytest.raises(argparse.ArgumentTypeError):
            key_value(bad)
    for bad in (":1", "t:x", "t:", "t:-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            topic_partitions(bad)
    assert config_changes([("a", "1")], ["b"]) == {"a": "1", "b": None}
    with pytest.raises(ValueError, match="both set and deleted"):
        config_changes([("a", "1")], ["a"])


def test_datetimes_with_a_zone_and_without_one() -> None:
    assert timestamp_ms("2024-05-01T12:00:00Z") == 1_714_564_800_000
    assert timestamp_ms("2024-05-01T14:00:00.250+02:00") == 1_714_564_800_250
    local = datetime(2024, 5, 1, 12, 0).astimezone()
    assert timestamp_ms("2024-05-01T12:00:00") == int(local.timestamp() * 1000)
    assert timestamp_ms("2024-05-01T12:00:00") != timestamp_ms("2024-05-01T12:00:00+14:00")
    with pytest.raises(argparse.ArgumentTypeError, match="ISO 8601"):
        timestamp_ms("yesterday")


def test_cli_time_limits_apply_unless_the_user_sets_them() -> None:
    parser = build_parser()
    args = parser.parse_args(["topics", "list", "--bootstrap-server", "h:1"])
    config = admin_config(args)
    assert config["request.timeout.ms"] == 10_000
    assert config["bootstrap.servers"] == "h:1"
    args = parser.parse_args(["topics", "list", "-X", "request_timeout_ms=99"])
    config = admin_config(args)
    assert config["request_timeout_ms"] == "99" and "request.timeout.ms" not in config


@pytest.mark.parametrize("argv", [
    ["groups", "reset-offsets", "g", "--topic", "t"],  # no --to-*
    ["groups", "reset-offsets", "g", "--to-earliest"],  # no scope
    ["groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"],
    ["groups", "reset-offsets", "g", "--all-topics", "--to-datetime", "soon"],
    ["groups", "reset-offsets", "g", "--all-topics", "--to-earliest", "--execute", "--dry-run"],
    ["configs", "describe"],
    ["configs", "describe", "--topic", "t", "--broker", "1"],
    ["topics", "create", "t", "--config", "novalue"],
    ["topics", "create", "t", "--partitions", "many"],
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(argv)
    assert caught.value.code == 2
    assert "error:" in capsys.readouterr().err
