"""The history checker on crafted histories: each anomaly caught, and the same shape clean passes.

Histories are built in memory as the harness writes them (``tests/faults/history.py``); a few
tests write one to a file for the CLI; hypothesis properties check histories generated from a
brute-force model log (``test_checker_model.py``). Nothing here opens a socket or starts a broker.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from protocol.records import Record, decode_batch
from storage.checkpoint import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from tests.faults.checker import ReplicaLog, check, main, read_replica
from tests.faults.checker_report import ANOMALIES
from tests.unit.storage.helpers import client_batch

RU, RC = "read_uncommitted", "read_committed"


class Builder:
    """History lines as the harness writes them (``time`` is the line number)."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def add(self, type: str, f: str | None = None, **fields: Any) -> dict[str, Any]:
        line: dict[str, Any] = {"type": type, "time": len(self.lines)}
        if f is not None:
            line["f"] = f
        line.update(fields)
        self.lines.append(line)
        return line

    def invoke_send(self, value: str | None, *, process: str = "p1", topic: str = "t",
                    key: Any = None, txn: str | None = None) -> None:
        extra = {"txn": txn} if txn is not None else {}
        self.add("invoke", "send", process=process, topic=topic,
                 key=value if key is None else key, value=value, **extra)

    def ack(self, value: str | None, offset: int, *, process: str = "p1",
            partition: int = 0) -> None:
        self.add("ok", "send", process=process, value=value, partition=partition, offset=offset)

    def send(self, value: str | None, offset: int | None = None, *, outcome: str = "ok",
             process: str = "p1", topic: str = "t", partition: int = 0, key: Any = None,
             txn: str | None = None) -> None:
        self.invoke_send(value, process=process, topic=topic, key=key, txn=txn)
        if outcome == "ok":
            assert offset is not None
            self.ack(value, offset, process=process, partition=partition)
        elif outcome in ("fail", "info"):
            self.add(outcome, "send", process=process, value=value)

    def txn(self, txn: str, outcome: str, *, process: str = "p1") -> None:
        self.add("invoke", "txn", process=process, txn=txn)
        self.add(outcome, "txn", process=process, txn=txn)

    def poll(self, offsets_values: list[tuple[int, Any]], *, process: str = "c1",
             topic: str = "t", partition: int = 0, isolation: str = RU) -> None:
        records = [[topic, partition, offset, value, value] for offset, value in offsets_values]
        self.add("invoke", "poll", process=process, group="g", isolation=isolation)
        self.add("ok", "poll", process=process, group="g", isolation=isolation, records=records)

    def assign(self, *, process: str = "c1", partitions: list[list[Any]] | None = None) -> None:
        self.add("ok", "assign", process=process, partitions=partitions or [["t", 0]])

    def commit(self, offset: int, *, outcome: str = "ok", process: str = "c1",
               partition: int = 0) -> None:
        offsets = [["t", partition, offset]]
        self.add("invoke", "commit", process=process, group="g", offsets=offsets)
        self.add(outcome, "commit", process=process, group="g", offsets=offsets)

    def read_offsets(self, offset: int, *, process: str = "c1") -> None:
        self.add("invoke", "offsets", process=process, group="g")
        self.add("ok", "offsets", process=process, group="g", offsets=[["t", 0, offset]])

    def final(self, records: dict[int, Any], *, topic: str = "t", partition: int = 0,
              high_watermark: int | None = None, log_start: int = 0, isolation: str = RU,
              compacted: bool = False, keys: dict[int, Any] | None = None) -> None:
        keys = keys or {}
        rows = [[topic, partition, offset, keys.get(offset, value), value]
                for offset, value in sorted(records.items())]
        if high_watermark is None:
            high_watermark = max(records, default=-1) + 1
        extra = {"compacted": True} if compacted else {}
        self.add("ok", "final", process="final", topic=topic, partition=partition,
                 log_start=log_start, high_watermark=high_watermark, isolation=isolation,
                 records=rows, **extra)

    def leader(self, epoch: int, node: int, *, partition: int = 0) -> None:
        self.add("event", event="leader", topic="t", partition=partition, epoch=epoch, node=node)


def produced(count: int, *, process: str = "p1") -> tuple[Builder, dict[int, str]]:
    """``count`` acknowledged sends at offsets 0.. and the log they make."""
    history = Builder()
    log = {offset: f"v{offset}" for offset in range(count)}
    for offset, value in log.items():
        history.send(value, offset, process=process)
    return history, log


def anomalies_of(history: Builder, **kwargs: Any) -> set[str]:
    return set(check(history.lines, **kwargs).anomalies)


# -- lost writes, duplicates, offsets ----------------------------------------------------------


def test_clean_history_is_valid() -> None:
    history, log = produced(4)
    history.final(log)
    report = check(history.lines)
    assert report.valid and report.anomalies == {}
    assert report.counts["send-ok"] == 4 and report.counts["final-record"] == 4


def test_lost_write_an_acknowledged_send_missing_from_the_final_read() -> None:
    history, log = produced(4)
    del log[2]
    history.final(log, high_watermark=4)
    report = check(history.lines)
    assert not report.valid
    assert set(report.anomalies) == {"lost-write"}
    (example,) = report.anomalies["lost-write"]
    assert (example["offset"], example["value"]) == (2, "v2")
    assert [op["f"] for op in example["ops"]] == ["send", "final"]


def test_lost_write_beyond_the_final_high_watermark() -> None:
    history, log = produced(4)
    del log[3]
    history.final(log)  # high watermark 3: the acks=all ack of offset 3 came after it passed 3
    assert anomalies_of(history) == {"lost-write"}


def test_no_lost_write_below_the_log_start_or_for_sends_not_acknowledged() -> None:
    history, log = produced(4)
    history.send("maybe", outcome="info")
    history.send("failed", outcome="fail")
    history.send("pending", outcome="none")  # never completed: info
    history.final({2: log[2], 3: log[3]}, log_start=2)
    report = check(history.lines)
    assert report.valid, report.summary()
    assert report.counts["send-info"] == 2 and report.counts["send-fail"] == 1


def test_duplicate_a_value_at_two_offsets() -> None:
    history, log = produced(3)
    history.final({**log, 3: "v1"})
    assert anomalies_of(history) == {"duplicate"}
    clean, log = produced(3)
    clean.send("v3", outcome="info")  # an unknown send that landed once is fine
    clean.final({**log, 3: "v3"})
    assert anomalies_of(clean) == set()


def test_duplicate_of_an_info_send() -> None:
    history, log = produced(2)
    history.send("retried", outcome="info")
    history.final({**log, 2: "retried", 3: "retried"})
    report = check(history.lines)
    assert set(report.anomalies) == {"duplicate"}
    assert report.anomalies["duplicate"][0]["found"] == [["t", 0, 2], ["t", 0, 3]]


def test_wrong_offset_a_value_elsewhere_than_acknowledged() -> None:
    history = Builder()
    history.send("a", 0)
    history.send("b", 1)
    history.final({0: "b", 1: "a"})
    report = check(history.lines)
    assert set(report.anomalies) == {"wrong-offset"}
    assert report.counts["wrong-offset"] == 2


def test_nonmonotonic_send_offsets_not_increasing_in_invoke_order() -> None:
    history = Builder()
    history.invoke_send("a")
    history.invoke_send("b")
    history.ack("b", 0)  # completions out of order are fine; the offsets are not
    history.ack("a", 1)
    history.final({0: "b", 1: "a"})
    report = check(history.lines)
    assert set(report.anomalies) == {"nonmonotonic-send"}
    example = report.anomalies["nonmonotonic-send"][0]
    assert (example["previous"], example["offset"]) == (1, 0)


def test_interleaved_producers_are_monotonic_each() -> None:
    history = Builder()
    history.invoke_send("a", process="p1")
    history.invoke_send("b", process="p2")
    history.ack("b", 0, process="p2")
    history.ack("a", 1, process="p1")
    history.final({0: "b", 1: "a"})
    assert anomalies_of(history) == set()


def test_completions_pair_by_value_and_fall_back_to_the_oldest_invoke() -> None:
    history = Builder()
    history.invoke_send("a")
    history.invoke_send("b")
    history.add("ok", "send", process="p1", partition=0, offset=0)  # no value: the oldest, "a"
    history.add("ok", "send", process="p1", partition=0, offset=1)
    history.final({0: "a", 1: "b"})
    assert anomalies_of(history) == set()


def test_a_completion_naming_no_pending_invoke_stands_alone() -> None:
    history = Builder()
    history.invoke_send("a")
    history.add("ok", "send", process="p1", topic="t", value="b", partition=0, offset=0)
    history.final({0: "b"})
    report = check(history.lines)  # "b" was never invoked: its ok does not complete "a"
    assert report.valid, report.summary()
    assert (report.counts["send-ok"], report.counts["send-info"]) == (1, 1)


def test_two_tombstones_of_one_key_in_flight_complete_in_order() -> None:
    history = Builder()
    history.invoke_send(None, key="k")
    history.invoke_send(None, key="k")
    history.add("ok", "send", process="p1", key="k", value=None, partition=0, offset=0)
    history.add("ok", "send", process="p1", key="k", value=None, partition=0, offset=1)
    history.final({0: None, 1: None}, keys={0: "k", 1: "k"}, compacted=True)
    report = check(history.lines)
    assert report.valid and report.counts["send-ok"] == 2 and "send-info" not in report.counts


def test_sends_to_a_partition_never_read_are_counted_unread() -> None:
    history, log = produced(2)
    history.send("elsewhere", 0, partition=1)
    history.final(log)
    report = check(history.lines)
    assert report.valid and report.counts["send-ok-unread"] == 1


def test_an_unknown_line_type_is_an_error() -> None:
    with pytest.raises(ValueError, match="line 2: unknown history line type 'okay'"):
        check([{"type": "event", "event": "heal"}, {"type": "okay", "f": "send"}])


# -- polls -------------------------------------------------------------------------------------


def test_nonmonotonic_poll_and_assign_between() -> None:
    history, log = produced(3)
    history.poll([(0, "v0"), (1, "v1")])
    history.poll([(1, "v1"), (2, "v2")])
    history.final(log)
    assert anomalies_of(history) == {"nonmonotonic-poll"}
    clean, log = produced(3)
    clean.poll([(0, "v0"), (1, "v1")])
    clean.assign()
    clean.poll([(1, "v1"), (2, "v2")])
    clean.final(log)
    assert anomalies_of(clean) == set()


def test_poll_skip_over_a_record_of_the_final_read() -> None:
    history, log = produced(5)
    history.poll([(0, "v0"), (1, "v1")])
    history.poll([(3, "v3"), (4, "v4")])
    history.final(log)
    report = check(history.lines)
    assert set(report.anomalies) == {"poll-skip"}
    example = report.anomalies["poll-skip"][0]
    assert (example["first_skipped"], example["skipped"]) == (2, 1)


def test_poll_jump_over_a_gap_is_not_a_skip() -> None:
    history = Builder()
    history.send("a", 0)
    history.send("b", 2)  # offset 1 is a control batch, say
    history.poll([(0, "a")])
    history.poll([(2, "b")])
    history.final({0: "a", 2: "b"})
    assert anomalies_of(history) == set()


def test_read_committed_poll_skips_aborted_records() -> None:
    def history(isolation: str) -> Builder:
        built = Builder()
        built.send("a", 0)
        built.send("x", 1, process="p2", txn="T1")
        built.txn("T1", "fail", process="p2")
        built.send("b", 3)  # 2: the abort marker
        built.poll([(0, "a")], isolation=isolation)
        built.poll([(3, "b")], isolation=isolation)
        built.final({0: "a", 1: "x", 3: "b"})  # read_uncommitted: the aborted record is there
        return built

    assert anomalies_of(history(RC)) == set()
    assert anomalies_of(history(RU)) == {"poll-skip"}


def test_truncated_read_a_polled_value_the_final_read_does_not_hold() -> None:
    history, log = produced(3)
    history.send("ghost", outcome="info")
    history.poll([(0, "v0"), (1, "v1"), (2, "v2"), (3, "ghost")])
    history.final({**log, 3: "v3-other"}, high_watermark=4)
    report = check(history.lines)
    assert set(report.anomalies) == {"truncated-read"}
    assert report.anomalies["truncated-read"][0]["final_value"] == "v3-other"


def test_truncated_read_two_polls_saw_different_values_at_one_offset() -> None:
    history, log = produced(3)
    history.send("ghost", outcome="info")
    history.poll([(0, "v0"), (1, "v1"), (2, "ghost")])
    history.assign()
    history.poll([(2, "v2")])
    history.final(log)
    report = check(history.lines)
    assert set(report.anomalies) == {"truncated-read"}
    assert [e["value"] for e in report.anomalies["truncated-read"]] == ["ghost"]


def test_read_above_the_final_high_watermark_is_not_judged() -> None:
    history, log = produced(3)
    history.send("ghost", outcome="info")
    history.poll([(0, "v0"), (1, "v1"), (2, "v2"), (3, "ghost")])
    history.final(log)
    assert anomalies_of(history) == set()


# -- transactions ------------------------------------------------------------------------------


def transactional(outcome: str, *, final_values: list[str], isolation: str = RC) -> Builder:
    history = Builder()
    history.send("x", 0, txn="T1")
    history.send("y", 1, txn="T1")
    history.txn("T1", outcome)
    offsets = {"x": 0, "y": 1}
    history.final({offsets[value]: value for value in final_values}, high_watermark=3,
                  isolation=isolation)
    return history


def test_aborted_read_in_a_read_committed_poll() -> None:
    history = transactional("fail", final_values=[])
    history.poll([(0, "x")], isolation=RC)
    assert anomalies_of(history) == {"aborted-read"}
    clean = transactional("fail", final_values=[])
    clean.poll([(0, "x")], isolation=RU)  # read_uncommitted may see it
    assert anomalies_of(clean) == set()


def test_aborted_read_in_the_read_committed_final_read() -> None:
    assert anomalies_of(transactional("fail", final_values=["x"])) == {"aborted-read"}


def test_torn_and_lost_committed_transactions() -> None:
    assert anomalies_of(transactional("ok", final_values=["x", "y"])) == set()
    torn = check(transactional("ok", final_values=["x"]).lines)
    assert set(torn.anomalies) == {"torn-transaction", "lost-write"}
    assert torn.anomalies["torn-transaction"][0]["missing"] == ["y"]
    lost = anomalies_of(transactional("ok", final_values=[]))
    assert lost == {"lost-transaction", "lost-write"}


def test_unknown_transaction_outcome_is_neither_torn_nor_aborted() -> None:
    history = transactional("info", final_values=["x"])
    history.poll([(0, "x")], isolation=RC)
    assert anomalies_of(history) == set()


# -- committed offsets -------------------------------------------------------------------------


def test_offsets_backwards_below_a_completed_commit() -> None:
    history = Builder()
    history.commit(10)
    history.read_offsets(5)
    report = check(history.lines)
    assert set(report.anomalies) == {"offsets-backwards"}
    assert report.anomalies["offsets-backwards"][0]["committed"] == 10
    clean = Builder()
    clean.commit(10)
    clean.read_offsets(10)
    clean.commit(12, outcome="info")
    clean.read_offsets(12)
    assert anomalies_of(clean) == set()


def test_offsets_lowered_by_a_later_commit_or_read_before_the_commit_completed() -> None:
    history = Builder()
    history.commit(10)
    history.commit(4)  # a consumer may commit a lower offset on purpose
    history.read_offsets(4)
    history.add("invoke", "offsets", process="c2", group="g")
    history.commit(20)
    history.add("ok", "offsets", process="c2", group="g", offsets=[["t", 0, 4]])
    assert anomalies_of(history) == set()


# -- compaction --------------------------------------------------------------------------------


def compacted(final: dict[int, Any], *, last_outcome: str = "ok",
              last_value: str | None = "k-3") -> Builder:
    history = Builder()
    history.send("k-1", 0, key="k")
    history.send("j-1", 1, key="j")
    history.send("k-2", 2, key="k")
    history.send(last_value, 3, key="k", outcome=last_outcome)
    keys = dict.fromkeys(range(4), "k") | {1: "j"}
    history.final(final, high_watermark=4, compacted=True, keys=keys)
    return history


def test_compaction_keeps_the_latest_value_per_key() -> None:
    assert anomalies_of(compacted({1: "j-1", 3: "k-3"})) == set()
    old = check(compacted({1: "j-1", 2: "k-2"}).lines)
    assert set(old.anomalies) == {"compaction-latest-wrong"}
    assert old.anomalies["compaction-latest-wrong"][0]["key"] == "k"
    gone = anomalies_of(compacted({1: "j-1"}))
    assert gone == {"compaction-latest-wrong"}


def test_compaction_tombstone_and_unknown_latest() -> None:
    assert anomalies_of(compacted({1: "j-1"}, last_value=None)) == set()
    assert anomalies_of(compacted({1: "j-1", 3: None}, last_value=None)) == set()
    assert anomalies_of(compacted({1: "j-1", 2: "k-2"}, last_value=None)) == {
        "compaction-latest-wrong"
    }
    assert anomalies_of(compacted({1: "j-1"}, last_outcome="info")) == set()
    assert anomalies_of(compacted({1: "j-1", 2: "k-2"}, last_outcome="info")) == set()


# -- leaders and replicas ----------------------------------------------------------------------


def test_split_brain_two_leaders_in_one_epoch() -> None:
    history = Builder()
    history.leader(1, node=1)
    history.leader(2, node=2)
    history.leader(2, node=2)
    history.leader(1, node=1, partition=1)
    assert anomalies_of(history) == set()
    history.leader(2, node=3)
    report = check(history.lines)
    assert set(report.anomalies) == {"split-brain"}
    assert report.anomalies["split-brain"][0]["nodes"] == [2, 3]


def test_replica_divergence_below_the_smallest_high_watermark() -> None:
    same = [(0, b"a"), (1, b"b"), (2, b"c")]
    clean = {1: {("t", 0): ReplicaLog(0, 3, same)},
             2: {("t", 0): ReplicaLog(1, 2, [*same[:2], (2, b"other")])}}
    report = check([], clean)
    assert report.valid and report.counts["replica-partition"] == 1
    diverged = {**clean, 3: {("t", 0): ReplicaLog(0, 3, [(0, b"a"), (1, b"B"), (2, b"c")])}}
    report = check([], diverged)
    assert set(report.anomalies) == {"replica-divergence"}
    (example,) = report.anomalies["replica-divergence"]
    assert (example["nodes"], example["offset"], example["compared"]) == ([1, 3], 1, [1, 2])
    missing = {**clean, 3: {("t", 0): (0, 3, [same[0], same[2]])}}  # a plain tuple will do
    assert anomalies_of(Builder(), replicas=missing) == {"replica-divergence"}


def test_compacted_topics_replicas_are_not_compared() -> None:
    history = Builder()
    history.final({}, compacted=True, high_watermark=0)
    replicas = {1: {("t", 0): ReplicaLog(0, 3, [(0, b"a")])},
                2: {("t", 0): ReplicaLog(0, 3, [(0, b"b")])}}
    assert check(history.lines, replicas).valid


def write_log(directory: Path, values: list[bytes]) -> Log:
    config = dataclasses.replace(LogConfig(), segment_bytes=200)  # a few segments
    log = Log.open(directory, config, clock=ManualClock(1_700_000_000_000))
    for value in values:
        log.append_as_leader(client_batch([value], timestamp=1_700_000_000_000))
    log.flush()
    return log


def test_read_replica_reads_a_partition_directory(tmp_path: Path) -> None:
    log = write_log(tmp_path / "t-0", [b"value-%d" % n for n in range(12)])
    try:
        replica = read_replica(tmp_path / "t-0", high_watermark=10)
    finally:
        log.close()
    assert len(list((tmp_path / "t-0").glob("*.log"))) > 1
    assert replica.log_start == 0 and replica.high_watermark == 10
    assert [offset for offset, _ in replica.batches] == list(range(10))
    decoded = [decode_batch(data).records for _, data in replica.batches]
    assert [records[0].value for records in decoded] == [b"value-%d" % n for n in range(10)]
    assert all(isinstance(records[0], Record) for records in decoded)


def test_read_replica_log_start_from_the_checkpoint(tmp_path: Path) -> None:
    log = write_log(tmp_path / "t-0", [b"v"] * 3)
    log.close()
    OffsetCheckpointFile(tmp_path / LOG_START_OFFSET_CHECKPOINT).write({("t", 0): 2})
    assert read_replica(tmp_path / "t-0", high_watermark=3).log_start == 2


def test_cli_replicas_from_log_directories(tmp_path: Path) -> None:
    for node in ("1", "2"):
        write_log(tmp_path / node / "t-0", [b"a", b"b", b"c"]).close()
    history, log = produced(3)
    history.final(log)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in history.lines))
    dirs = [f"--replica={node}={tmp_path / node}" for node in ("1", "2")]
    assert main([str(path), *dirs]) == 0
    (tmp_path / "2" / "t-0" / "00000000000000000000.log").write_bytes(b"")
    assert main([str(path), *dirs, "--json"]) == 1


# -- report and CLI ----------------------------------------------------------------------------


def test_report_summary_and_json() -> None:
    history, log = produced(4)
    history.poll([(0, "v0"), (2, "v2")])
    del log[3]
    history.final(log, high_watermark=4)
    report = check(history.lines, examples=1)
    lines = report.summary().splitlines()
    assert lines[0] == "INVALID"
    assert [line.split(":")[0].strip() for line in lines[1:-1]] == ["lost-write", "poll-skip"]
    assert lines[-1].startswith("  checked: ")
    decoded = json.loads(report.to_json())
    assert decoded["valid"] is False and decoded["counts"]["lost-write"] == 1
    assert set(decoded["anomalies"]) <= set(ANOMALIES)


def test_cli_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history, log = produced(2)
    history.final(log)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in history.lines))
    assert main([str(path)]) == 0
    assert capsys.readouterr().out.startswith("valid")
    history.final({0: "v0"}, high_watermark=2, partition=0)
    path.write_text("".join(json.dumps(line) + "\n" for line in history.lines))
    assert main([str(path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["counts"]["lost-write"] == 1


def test_cli_as_a_module(tmp_path: Path) -> None:
    history, _log = produced(2)
    history.final({0: "v0"}, high_watermark=2)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in history.lines))
    result = subprocess.run([sys.executable, "-m", "tests.faults.checker", str(path)],
                            capture_output=True, text=True, check=False,
                            cwd=Path(__file__).parents[2])
    assert result.returncode == 1, result.stderr
    assert "lost-write: 1" in result.stdout
