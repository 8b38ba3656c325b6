"""``samsa share-groups`` without a broker: the rows of its describe tables, and the usage
errors (exit 2) it reports before connecting anywhere."""

from __future__ import annotations

import pytest

from samsa.admin import ShareGroupDescription, ShareMemberDescription, SharePartitionOffset
from samsa.share_partitions import InFlightRange, SharePartitionState
from samsa.types import TopicPartition
from tools.cli import main
from tools.share_groups_commands import in_flight_rows, member_rows, offset_rows, state_row


def test_offset_rows_sorted_with_unknowns_as_none() -> None:
    rows = offset_rows("g", {TopicPartition("b", 0): SharePartitionOffset(5, 0, 2),
                             TopicPartition("a", 1): SharePartitionOffset(0, None, None)})
    unknown_window = {"in_flight": None, "acquired": None, "dead_lettering": None, "max_delivery_count": None}
    assert rows == [
        {"group": "g", "topic": "a", "partition": 1, "leader_epoch": None, "start_offset": 0,
         "lag": None, **unknown_window},
        {"group": "g", "topic": "b", "partition": 0, "leader_epoch": 0, "start_offset": 5,
         "lag": 2, **unknown_window}]


def test_offset_rows_with_the_leaders_in_flight_windows() -> None:
    held = InFlightRange(7, 9, "ACQUIRED", 3, "m1", 1_000)
    loaded = SharePartitionState("b", 0, True, 12, 5, 10, 5, 3, 1, 0, 2, 0, (held,))
    not_loaded = SharePartitionState("a", 1, False, 4, -1, -1, 0, 0, 0, 0, 0, 0, ())
    rows = offset_rows("g", {TopicPartition("b", 0): SharePartitionOffset(5, 0, 2),
                             TopicPartition("a", 1): SharePartitionOffset(0, None, None)},
                       {TopicPartition("b", 0): loaded, TopicPartition("a", 1): not_loaded})
    assert [(r["in_flight"], r["acquired"], r["dead_lettering"], r["max_delivery_count"]) for r in rows] == [
        (None, None, None, None), (5, 3, 1, 3)]
    [row] = in_flight_rows("g", {TopicPartition("b", 0): loaded})
    assert (row["first_offset"], row["state"], row["member_id"], row["lock_deadline"]) == (
        7, "ACQUIRED", "m1", "1970-01-01T00:00:01.000+00:00")


def test_member_rows_and_state_row() -> None:
    busy = ShareMemberDescription("m2", "client", "/10.0.0.1", 3, None, ("a", "b"), frozenset({
        TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 0)}))
    idle = ShareMemberDescription("m1", "client", "/10.0.0.2", 3)
    group = ShareGroupDescription("g", "Stable", 4, 4, "simple", 1, (busy, idle))
    assert member_rows(group) == [
        {"group": "g", "consumer_id": "m1", "host": "/10.0.0.2", "client_id": "client",
         "member_epoch": 3, "partitions": 0, "assignment": None},
        {"group": "g", "consumer_id": "m2", "host": "/10.0.0.1", "client_id": "client",
         "member_epoch": 3, "partitions": 3, "assignment": "a:0,2;b:0"}]
    assert state_row(group, "h:9092 (1)") == {
        "group": "g", "coordinator": "h:9092 (1)", "assignment_strategy": "simple",
        "state": "Stable", "group_epoch": 4, "assignment_epoch": 4, "members": 2}


@pytest.mark.parametrize("argv", [
    ["--describe"],  # no --group
    ["--delete-offsets", "--group", "g"],  # no --topic
    ["--delete-offsets", "--group", "g", "--topic", "t:0"],  # whole topics only
    ["--reset-offsets", "--group", "g", "--topic", "t"],  # no --to-*
    ["--reset-offsets", "--group", "g", "--to-earliest"],  # no scope
    ["--reset-offsets", "--group", "g", "--group", "h", "--all-topics", "--to-latest"],
])
def test_usage_errors_exit_2_before_connecting(argv: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["share-groups", "--bootstrap-server", "unused:1", *argv]) == 2
    assert "samsa share-groups: error:" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["--list", "--describe"],
    ["--describe", "--group", "g", "--members", "--state"],
    ["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest"],
    ["--reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "soon"],
])
def test_argparse_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["share-groups", *argv])
    assert caught.value.code == 2
    assert "error:" in capsys.readouterr().err
