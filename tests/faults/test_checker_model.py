"""The history checker against a brute-force model: histories generated from model logs are
valid, and each one-place corruption of them is reported as the anomaly it is.

The model: per partition a log (offset -> value) and the next offset. Producers send in
flights (several sends in flight, completed in any order, acknowledged at offsets increasing
in invoke order); ``info`` sends land or not; a flight may be a transaction, committed or
aborted, whose end marker takes an offset of each partition it wrote. Consumers, one per
partition and isolation, poll the visible records in order and commit the next offset;
offsets read back return the model's committed offset. The final reads are the model's logs:
read_uncommitted all of it, read_committed without the aborted values.

The performance tests check big histories of the same shape, made without hypothesis.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.faults.checker import check
from tests.faults.test_checker import RC, RU, Builder

SEND = st.tuples(
    st.integers(0, 2),  # partition (modulo the partition count)
    st.sampled_from(["ok", "ok", "ok", "info", "fail"]),
    st.booleans(),  # an info send landed
    st.integers(0, 1),  # a gap before it (a control batch of another producer, say)
)
FLIGHT = st.tuples(
    st.integers(0, 2),  # producer
    st.lists(SEND, min_size=1, max_size=4),
    st.sampled_from([None, None, "ok", "fail"]),  # a transaction's outcome
)


@dataclass
class Model:
    partitions: int
    logs: dict[int, dict[int, str]] = field(default_factory=dict)
    next_offsets: dict[int, int] = field(default_factory=dict)
    aborted: set[str] = field(default_factory=set)
    txns: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)  # committed

    def __post_init__(self) -> None:
        for partition in range(self.partitions):
            self.logs[partition], self.next_offsets[partition] = {}, 0

    def append(self, partition: int, value: str, gap: int) -> int:
        offset = self.next_offsets[partition] + gap
        self.logs[partition][offset] = value
        self.next_offsets[partition] = offset + 1
        return offset

    def visible(self, partition: int, isolation: str) -> dict[int, str]:
        log = self.logs[partition]
        if isolation == RU:
            return dict(log)
        return {offset: value for offset, value in log.items() if value not in self.aborted}


Generated = tuple[Builder, Model]


@st.composite
def model_histories(draw: st.DrawFn) -> Generated:
    model = Model(draw(st.integers(1, 3)))
    history = Builder()
    for number, flight in enumerate(draw(st.lists(FLIGHT, max_size=12))):
        _flight(history, model, draw, number, flight)
    for partition in range(model.partitions):
        for isolation in (RU, RC):
            _consume(history, model, draw, partition, isolation)
    for partition in range(model.partitions):
        for isolation in (RU, RC):
            history.final(model.visible(partition, isolation), partition=partition,
                          isolation=isolation, high_watermark=model.next_offsets[partition])
    return history, model


def _flight(history: Builder, model: Model, draw: st.DrawFn, number: int,
            flight: tuple[int, list[tuple[int, str, bool, int]], str | None]) -> None:
    producer, sends, txn_outcome = flight
    process, txn = f"p{producer}", (f"T{number}" if txn_outcome else None)
    completions: list[dict[str, Any]] = []
    written: list[tuple[str, int, int]] = []
    for index, (partition, outcome, lands, gap) in enumerate(sends):
        value, partition = f"v{number}-{index}", partition % model.partitions
        outcome = "ok" if txn else outcome
        history.invoke_send(value, process=process, txn=txn)
        completion: dict[str, Any] = {"process": process, "value": value, "type": outcome}
        if outcome == "ok" or (outcome == "info" and lands):
            offset = model.append(partition, value, gap)
            written.append((value, partition, offset))
            completion |= {"partition": partition, "offset": offset} if outcome == "ok" else {}
        completions.append(completion)
    for completion in draw(st.permutations(completions)):
        history.add(completion.pop("type"), "send", **completion)
    if txn is not None and txn_outcome is not None:
        _end_transaction(history, model, process, txn, txn_outcome, written)


def _end_transaction(history: Builder, model: Model, process: str, txn: str, outcome: str,
                     written: list[tuple[str, int, int]]) -> None:
    history.txn(txn, outcome, process=process)
    for partition in sorted({partition for _value, partition, _offset in written}):
        model.next_offsets[partition] += 1  # the commit or abort marker
    if outcome == "ok":
        model.txns[txn] = written
    else:
        model.aborted |= {value for value, _partition, _offset in written}


def _consume(history: Builder, model: Model, draw: st.DrawFn, partition: int,
             isolation: str) -> None:
    """A consumer polling the partition in order, committing after each poll and now and then
    reading its group's committed offset back."""
    process, group = f"c{partition}-{isolation}", f"g-{isolation}"
    records = sorted(model.visible(partition, isolation).items())
    position = 0
    while position < len(records):
        size = draw(st.integers(1, 4))
        polled = records[position : position + size]
        history.poll(polled, partition=partition, process=process, isolation=isolation)
        offsets = [["t", partition, polled[-1][0] + 1]]
        history.add("invoke", "commit", process=process, group=group, offsets=offsets)
        history.add("ok", "commit", process=process, group=group, offsets=offsets)
        if draw(st.booleans()):
            history.add("invoke", "offsets", process=process, group=group)
            history.add("ok", "offsets", process=process, group=group, offsets=offsets)
        position += size


@settings(max_examples=50, deadline=None)
@given(model_histories())
def test_model_histories_are_valid(generated: Generated) -> None:
    history, _model = generated
    report = check(history.lines)
    assert report.valid, report.summary()


def acknowledged(history: Builder) -> list[tuple[str, int, int]]:
    return [(line["value"], line["partition"], line["offset"])
            for line in history.lines if line["type"] == "ok" and line.get("f") == "send"]


def drop_from_finals(history: Builder, partition: int, offset: int,
                     isolations: tuple[str, ...] = (RU, RC)) -> None:
    for line in history.lines:
        if (line.get("f") == "final" and line["partition"] == partition
                and line["isolation"] in isolations):
            line["records"] = [row for row in line["records"] if row[2] != offset]


@settings(max_examples=50, deadline=None)
@given(model_histories(), st.data())
def test_a_deleted_acknowledged_record_is_a_lost_write(
    generated: Generated, data: st.DataObject
) -> None:
    history, _model = generated
    candidates = acknowledged(history)
    if not candidates:
        return
    value, partition, offset = data.draw(st.sampled_from(candidates))
    drop_from_finals(history, partition, offset)
    report = check(history.lines)
    assert [(e["value"], e["offset"]) for e in report.anomalies["lost-write"]] == [(value, offset)]


@settings(max_examples=50, deadline=None)
@given(model_histories(), st.data())
def test_a_committed_record_missing_from_read_committed_tears_its_transaction(
    generated: Generated, data: st.DataObject
) -> None:
    history, model = generated
    txns = sorted(txn for txn, written in model.txns.items() if written)
    if not txns:
        return
    txn = data.draw(st.sampled_from(txns))
    value, partition, offset = data.draw(st.sampled_from(model.txns[txn]))
    drop_from_finals(history, partition, offset, isolations=(RC,))
    report = check(history.lines)
    expected = "torn-transaction" if len(model.txns[txn]) > 1 else "lost-transaction"
    assert set(report.anomalies) == {expected}, report.summary()
    assert value in report.anomalies[expected][0]["missing"]


@settings(max_examples=50, deadline=None)
@given(model_histories(), st.data())
def test_committed_offsets_read_back_lower_go_backwards(
    generated: Generated, data: st.DataObject
) -> None:
    history, _model = generated
    reads = [line for line in history.lines if line.get("f") == "offsets" and line["type"] == "ok"]
    if not reads:
        return
    read = data.draw(st.sampled_from(reads))
    topic, partition, offset = read["offsets"][0]
    read["offsets"] = [[topic, partition, offset - 1]]
    report = check(history.lines)
    assert set(report.anomalies) == {"offsets-backwards"}, report.summary()
    assert report.counts["offsets-backwards"] == 1


# -- performance -------------------------------------------------------------------------------


def big_history(sends: int, *, partitions: int = 8) -> list[dict[str, Any]]:
    """``sends`` acknowledged sends from 4 producers, one poll per 10 records, a final read."""
    lines: list[dict[str, Any]] = []
    logs: list[list[list[Any]]] = [[] for _ in range(partitions)]
    for number in range(sends):
        partition, process, value = number % partitions, f"p{number % 4}", f"v{number}"
        lines.append({"type": "invoke", "f": "send", "process": process, "topic": "t",
                      "key": None, "value": value})
        offset = len(logs[partition])
        logs[partition].append(["t", partition, offset, None, value])
        lines.append({"type": "ok", "f": "send", "process": process, "value": value,
                      "partition": partition, "offset": offset})
    for partition, log in enumerate(logs):
        for start in range(0, len(log), 10):
            lines.append({"type": "ok", "f": "poll", "process": f"c{partition}",
                          "isolation": RU, "records": log[start : start + 10]})
        lines.append({"type": "ok", "f": "final", "topic": "t", "partition": partition,
                      "log_start": 0, "high_watermark": len(log), "isolation": RU,
                      "records": log})
    return lines


def test_performance_100_000_ops() -> None:
    lines = big_history(50_000)
    started = time.monotonic()
    report = check(lines)
    assert report.valid and report.counts["send-ok"] == 50_000
    assert time.monotonic() - started < 10


@pytest.mark.slow
def test_performance_a_million_ops() -> None:
    lines = big_history(500_000)
    started = time.monotonic()
    report = check(lines)
    elapsed = time.monotonic() - started
    assert report.valid and report.counts["send-ok"] == 500_000
    assert elapsed < 60, elapsed
