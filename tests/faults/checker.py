"""The fault-history checker: does a history (``tests/faults/history.py``) show an anomaly?

``check(lines, replicas)`` reads the history once, in order, then applies the rules that need
all of it; it opens no socket and starts no broker. The anomalies (Jepsen's Kafka-workload names
where one exists; rules in ``checker_history``, ``checker_rules``, ``checker_replicas``):

- ``lost-write``: an ``ok`` send absent from the final read of its partition (at or above its
  log start);
- ``duplicate``: a value at two positions in the final reads (the producers are idempotent);
- ``wrong-offset``: a value in the final read elsewhere than its ``ok`` said;
- ``nonmonotonic-send``: one process's acknowledged offsets of a partition not increasing in
  the order its sends were invoked;
- ``nonmonotonic-poll`` / ``poll-skip``: one consumer's polled offsets of a partition going
  back, or jumping over records visible (at its isolation) in the final read, with no
  ``assign`` between;
- ``truncated-read``: a polled value the final read does not hold at that offset, below the
  final high watermark;
- ``aborted-read``: a read_committed poll or final read returning a value of an aborted txn;
- ``torn-transaction`` / ``lost-transaction``: a committed txn's values partly / not at all in
  the final reads;
- ``offsets-backwards``: committed offsets read back below a commit completed before the read;
- ``compaction-latest-wrong``: on a compacted topic, a key's last record in the final read is
  not its acknowledged send with the highest offset;
- ``split-brain``: two nodes announced leader of one partition in one epoch;
- ``replica-divergence``: two replicas' batches differ below the smallest high watermark;
- ``queue-*``: a share group's records lost, accepted twice, both dead-lettered and accepted,
  dead-lettered as rejected with no REJECT, or delivered as another record (``checker_queue``).

``info`` ops may have happened: a loss needs an ``ok``, a duplicate is one regardless.

CLI: ``python -m tests.faults.checker HISTORY.jsonl [...] [--json] [--replica NODE=LOG_DIR]``
prints the summary (or the report as JSON) and exits 1 when the history is invalid.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from storage.inspect import partition_directories
from tests.faults.checker_history import HistoryIndex, TopicPartition
from tests.faults.checker_queue import QueueIndex
from tests.faults.checker_replicas import ReplicaBytes, ReplicaLog, check_replicas, read_replica
from tests.faults.checker_report import DEFAULT_EXAMPLES, Anomalies, Report
from tests.faults.checker_rules import check_all
from tests.faults.history import read_history

__all__ = [
    "ReplicaBytes",
    "ReplicaLog",
    "Report",
    "check",
    "high_watermarks",
    "main",
    "read_replica",
    "read_replicas",
]


def check(
    lines: Iterable[dict[str, Any]],
    replicas: ReplicaBytes | None = None,
    *,
    examples: int = DEFAULT_EXAMPLES,
) -> Report:
    """Every anomaly ``lines`` (and, when given, the replicas' bytes) show; ``examples``: how
    many of each kind the report keeps."""
    anomalies = Anomalies(examples)
    index = HistoryIndex(anomalies)
    queue = QueueIndex()
    for line in lines:
        index.add(line)
        queue.add(line)
    index.finish()
    check_all(index, anomalies)
    index.counts.update(queue.check(anomalies))
    if replicas is not None:
        skip = frozenset(index.compacted_topics)
        index.counts["replica-partition"] = check_replicas(replicas, anomalies, skip_topics=skip)
    return anomalies.report(index.counts)


def high_watermarks(lines: Iterable[dict[str, Any]]) -> dict[TopicPartition, int]:
    """Each partition's high watermark as its final read saw it (the smallest if read twice)."""
    found: dict[TopicPartition, int] = {}
    for line in lines:
        if line.get("f") == "final" and line.get("type") == "ok":
            partition = (line["topic"], line["partition"])
            found[partition] = min(found.get(partition, line["high_watermark"]),
                                   line["high_watermark"])  # fmt: skip
    return found


def read_replicas(
    log_dirs: dict[str, Path], watermarks: dict[TopicPartition, int]
) -> dict[str, dict[TopicPartition, ReplicaLog]]:
    """The replicas of every partition with a final read, from each node's log directory."""
    replicas: dict[str, dict[TopicPartition, ReplicaLog]] = {}
    for node, log_dir in log_dirs.items():
        replicas[node] = {}
        for directory in partition_directories(log_dir):
            topic, _, partition = directory.name.rpartition("-")
            if partition.isdigit() and (topic, int(partition)) in watermarks:
                watermark = watermarks[(topic, int(partition))]
                replicas[node][(topic, int(partition))] = read_replica(directory, watermark)
    return replicas


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.checker", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("history", nargs="+", type=Path, help="history JSON-lines file(s)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES,
                        help="examples kept per anomaly kind")
    parser.add_argument("--replica", action="append", default=[], metavar="NODE=LOG_DIR",
                        help="a node's log directory, to compare replicas byte for byte")
    args = parser.parse_args(argv)
    replicas = None
    if args.replica:
        log_dirs = dict(_node_and_dir(text) for text in args.replica)
        replicas = read_replicas(log_dirs, high_watermarks(read_history(args.history)))
    report = check(read_history(args.history), replicas, examples=args.examples)
    print(report.to_json() if args.json else report.summary())
    return 0 if report.valid else 1


def _node_and_dir(text: str) -> tuple[str, Path]:
    node, separator, directory = text.partition("=")
    if not separator or not directory:
        raise SystemExit(f"--replica wants NODE=LOG_DIR, not {text!r}")
    return node, Path(directory)


if __name__ == "__main__":
    sys.exit(main())
