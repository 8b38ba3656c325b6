"""The white-box event log the fault harness reads (``SAMSA_FAULT_EVENTS``)."""

from __future__ import annotations

import json
from pathlib import Path

from replication.events import EventLog


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_off_without_a_path_writes_nothing(tmp_path: Path) -> None:
    events = EventLog(None)
    events.emit("leader", topic="t", partition=0, epoch=1)
    events.leader_append("t", 0, 1, 0)
    assert not events.enabled and list(tmp_path.iterdir()) == []


def test_each_event_is_one_json_line_naming_the_node(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    events = EventLog(str(path))
    events.node_id = 3
    events.emit("leader", topic="t", partition=0, epoch=4, isr=[1, 3])
    events.emit("fenced")
    written = lines(path)
    assert [line["event"] for line in written] == ["leader", "fenced"]
    assert written[0]["node"] == 3 and written[0]["isr"] == [1, 3] and written[0]["epoch"] == 4
    assert all(isinstance(line["wall_ms"], int) for line in written)


def test_only_the_first_append_of_each_leader_epoch_is_written(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    events = EventLog(str(path))
    for epoch, offset in [(1, 0), (1, 5), (2, 9), (1, 12), (2, 20)]:
        events.leader_append("t", 0, epoch, offset)
    events.leader_append("t", 1, 1, 0)
    assert [(line["partition"], line["epoch"], line["offset"]) for line in lines(path)] == [
        (0, 1, 0), (0, 2, 9), (1, 1, 0)]


def test_high_watermark_lines_are_at_most_one_per_interval_per_partition(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    events = EventLog(str(path))
    for offset in range(100):  # well within one interval
        events.high_watermark("t", 0, offset)
    events.high_watermark("t", 1, 7)
    assert [(line["partition"], line["offset"]) for line in lines(path)] == [(0, 0), (1, 7)]
