"""The checker's index of a history: one pass over its lines, in order, into dicts the anomaly
rules look up by value, by (topic, partition, offset) or by process.

Pairing. A completion (``ok``/``fail``/``info``) belongs to an earlier ``invoke`` of the same
``process`` and ``f``. Producers keep many sends in flight, so a completion names its invoke when
it can: a send's completion by its ``value`` (or, for a tombstone, its ``key``), a txn's by its
``txn``; a completion that names nothing takes the process's oldest pending invoke of that
``f``. A completion with no (such) pending invoke (``final``, ``assign``, a harness that logs only outcomes) stands alone and is its
own invoke. An invoke never completed counts as ``info`` (it may have happened).

Positions are numbered by line: ``line`` is the 1-based index of a history entry, so an example
in a report points back into the file.

What is checked while reading (it needs the history's order): a consumer's polled offsets per
partition (``nonmonotonic-poll``; the gaps are kept for ``poll-skip``, which needs the final
reads), and committed offsets read back (``offsets-backwards``, which needs what had completed
when the read was invoked). Everything else waits for the whole history.

Owner: one :class:`HistoryIndex` per ``check`` call, filled by :meth:`HistoryIndex.add` and then
only read; nothing here is thread-safe.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict, deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from tests.faults.checker_report import Anomalies

OK, FAIL, INFO = "ok", "fail", "info"
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class Send:
    """One ``send``: its invoke's fields and, once known, its outcome and where it landed."""

    line: int
    process: str
    topic: str
    key: Any
    value: str | None
    txn: str | None
    partition: int | None
    outcome: str = INFO
    offset: int | None = None

    def as_op(self) -> dict[str, Any]:
        op: dict[str, Any] = {
            "line": self.line, "f": "send", "type": self.outcome, "process": self.process,
            "topic": self.topic, "key": self.key, "value": self.value,
        }  # fmt: skip
        if self.partition is not None:
            op["partition"] = self.partition
        if self.offset is not None:
            op["offset"] = self.offset
        if self.txn is not None:
            op["txn"] = self.txn
        return op


@dataclass(slots=True)
class FinalRead:
    """One ``final`` read of a partition: ``records`` maps offset -> (key, value)."""

    line: int
    topic: str
    partition: int
    log_start: int
    high_watermark: int
    isolation: str
    compacted: bool
    records: dict[int, tuple[Any, Any]]

    def as_op(self) -> dict[str, Any]:
        return {
            "line": self.line, "f": "final", "topic": self.topic, "partition": self.partition,
            "log_start": self.log_start, "high_watermark": self.high_watermark,
            "isolation": self.isolation,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class PollGap:
    """A consumer's poll that jumped from ``previous`` to ``offset`` (> previous + 1)."""

    line: int
    process: str
    topic: str
    partition: int
    isolation: str
    previous: int
    previous_line: int
    offset: int


@dataclass(frozen=True, slots=True)
class PolledRecord:
    line: int
    process: str
    isolation: str
    topic: str
    partition: int
    offset: int
    value: Any

    def as_op(self) -> dict[str, Any]:
        return {
            "line": self.line, "f": "poll", "type": OK, "process": self.process,
            "isolation": self.isolation,
            "record": [self.topic, self.partition, self.offset, self.value],
        }  # fmt: skip


@dataclass(slots=True)
class _Commit:
    invoke_line: int
    offset: int


@dataclass(slots=True)
class _GroupPartition:
    """Commits seen for one (group, topic, partition): the highest completed one, and the last
    invoke line of a commit of each offset (a later commit may lower the offset on purpose)."""

    highest: _Commit | None = None
    last_invoke_of_offset: dict[int, int] = field(default_factory=dict)


class HistoryIndex:
    def __init__(self, anomalies: Anomalies) -> None:
        self.anomalies = anomalies
        self.counts: dict[str, int] = defaultdict(int)
        self.sends: dict[str, Send] = {}  # by value
        self.tombstones: list[Send] = []  # sends of a null value
        self.txn_outcomes: dict[str, str] = {}
        self.txn_sends: dict[str, list[Send]] = defaultdict(list)
        self.finals: dict[TopicPartition, dict[str, FinalRead]] = defaultdict(dict)
        self.compacted_topics: set[str] = set()
        self.polled: dict[TopicPartition, dict[int, PolledRecord]] = defaultdict(dict)
        self.polled_conflicts: list[PolledRecord] = []  # a second value polled at one offset
        self.committed_reads_of_txn_values: list[PolledRecord] = []
        self.gaps: list[PollGap] = []
        self.leaders: dict[tuple[str, int, int], dict[Any, int]] = defaultdict(dict)
        self._pending = _Pending()
        self._positions: dict[str, dict[TopicPartition, tuple[int, int]]] = defaultdict(dict)
        self._groups: dict[str, dict[TopicPartition, _GroupPartition]] = defaultdict(
            lambda: defaultdict(_GroupPartition)
        )
        self._line = 0

    # -- reading -------------------------------------------------------------------------------

    def add(self, entry: dict[str, Any]) -> None:
        self._line += 1
        kind = entry.get("type")
        if kind == "event":
            self._event(entry)
        elif kind == "invoke":
            self._invoke(entry)
        elif kind in (OK, FAIL, INFO):
            self._complete(entry, kind)
        else:
            raise ValueError(f"line {self._line}: unknown history line type {kind!r}")

    def finish(self) -> None:
        """Invokes never completed are ``info``: sends already are; count the rest."""
        for pending in self._pending.drain():
            if isinstance(pending, Send):
                self.counts["send-info"] += 1
            elif pending[1].get("f") == "txn" and pending[1].get("txn") is not None:
                self.txn_outcomes.setdefault(pending[1]["txn"], INFO)
                self.counts["txn-info"] += 1

    def _event(self, entry: dict[str, Any]) -> None:
        self.counts["event"] += 1
        if entry.get("event") == "leader":
            leader_key = (entry["topic"], entry["partition"], entry["epoch"])
            self.leaders[leader_key].setdefault(entry.get("node"), self._line)

    def _invoke(self, entry: dict[str, Any]) -> None:
        f = entry.get("f", "")
        process = str(entry.get("process"))
        if f == "offsets":
            entry = {**entry, "_highest": self._highest_commits(str(entry.get("group")))}
        elif f == "commit":
            self._commit_invoked(entry, self._line)
        item: Any = self._new_send(entry, process) if f == "send" else (self._line, entry)
        self._pending.add(process, f, _identity(f, entry), item)

    def _complete(self, entry: dict[str, Any], outcome: str) -> None:
        f = entry.get("f", "")
        process = str(entry.get("process"))
        item = self._pending.take(process, f, _identity(f, entry))
        if f == "send":
            send = item if isinstance(item, Send) else self._new_send(entry, process)
            self._send_completed(send, entry, outcome)
            return
        if item is None and f == "commit":
            self._commit_invoked(entry, self._line)
        line, invoke = item if item is not None else (self._line, entry)
        merged = {**invoke, **entry} if invoke is not entry else entry
        handler = _HANDLERS.get(f)
        if handler is not None:
            handler(self, merged, outcome, line)
        else:
            self.counts[f"{f}-{outcome}"] += 1

    # -- sends and transactions ----------------------------------------------------------------

    def _new_send(self, entry: dict[str, Any], process: str) -> Send:
        send = Send(
            line=self._line, process=process, topic=entry.get("topic", ""),
            key=entry.get("key"), value=entry.get("value"), txn=entry.get("txn"),
            partition=entry.get("partition"),
        )  # fmt: skip
        if send.value is None:
            self.tombstones.append(send)
        else:
            self.sends.setdefault(send.value, send)
        if send.txn is not None:
            self.txn_sends[send.txn].append(send)
        return send

    def _send_completed(self, send: Send, entry: dict[str, Any], outcome: str) -> None:
        send.outcome = outcome
        self.counts[f"send-{outcome}"] += 1
        if outcome == OK:
            send.partition = entry.get("partition", send.partition)
            send.offset = entry.get("offset")

    def _txn(self, op: dict[str, Any], outcome: str, line: int) -> None:
        self.counts[f"txn-{outcome}"] += 1
        if op.get("txn") is not None:
            self.txn_outcomes[op["txn"]] = outcome

    def txn_outcome(self, send: Send) -> str | None:
        """The outcome of ``send``'s transaction (``None`` outside one; unknown -> ``info``)."""
        if send.txn is None:
            return None
        return self.txn_outcomes.get(send.txn, INFO)

    # -- consumers -----------------------------------------------------------------------------

    def _assign(self, op: dict[str, Any], outcome: str, line: int) -> None:
        # A consumer assigned anew (or seeked) may legitimately resume anywhere: forget every
        # position it had, not only the listed partitions (a partition it lost and regained
        # resumes from the group's committed offset).
        self.counts[f"assign-{outcome}"] += 1
        if outcome == OK:
            self._positions.pop(str(op.get("process")), None)

    def _poll(self, op: dict[str, Any], outcome: str, line: int) -> None:
        self.counts[f"poll-{outcome}"] += 1
        if outcome != OK:
            return
        process = str(op.get("process"))
        isolation = op.get("isolation") or READ_UNCOMMITTED
        positions = self._positions[process]
        for topic, partition, offset, _key, value in op.get("records") or ():
            self.counts["polled-record"] += 1
            record = PolledRecord(self._line, process, isolation, topic, partition, offset, value)
            self._check_order(record, positions.get((topic, partition)))
            positions[(topic, partition)] = (offset, self._line)
            self._remember_poll(record)

    def _check_order(self, record: PolledRecord, previous: tuple[int, int] | None) -> None:
        if previous is None:
            return
        previous_offset, previous_line = previous
        if record.offset <= previous_offset:
            self.anomalies.add(
                "nonmonotonic-poll", process=record.process, topic=record.topic,
                partition=record.partition, offset=record.offset, previous=previous_offset,
                ops=[{"line": previous_line, "f": "poll", "offset": previous_offset},
                     record.as_op()],
            )  # fmt: skip
        elif record.offset > previous_offset + 1:
            self.gaps.append(PollGap(
                record.line, record.process, record.topic, record.partition, record.isolation,
                previous_offset, previous_line, record.offset,
            ))  # fmt: skip

    def _remember_poll(self, record: PolledRecord) -> None:
        at = self.polled[(record.topic, record.partition)]
        first = at.setdefault(record.offset, record)
        if first is not record and first.value != record.value:
            self.polled_conflicts.append(record)
        send = self.sends.get(record.value) if record.value is not None else None
        if record.isolation == READ_COMMITTED and send is not None and send.txn is not None:
            self.committed_reads_of_txn_values.append(record)

    # -- committed offsets ---------------------------------------------------------------------

    def _commit_invoked(self, entry: dict[str, Any], line: int) -> None:
        group = str(entry.get("group"))
        for topic, partition, offset in entry.get("offsets") or ():
            self._groups[group][(topic, partition)].last_invoke_of_offset[offset] = line

    def _commit(self, op: dict[str, Any], outcome: str, line: int) -> None:
        self.counts[f"commit-{outcome}"] += 1
        if outcome != OK:
            return
        group = str(op.get("group"))
        for topic, partition, offset in op.get("offsets") or ():
            state = self._groups[group][(topic, partition)]
            if state.highest is None or offset >= state.highest.offset:
                state.highest = _Commit(line, offset)

    def _highest_commits(self, group: str) -> dict[TopicPartition, _Commit]:
        """What an ``offsets`` read must not go below: the commits completed before its invoke."""
        return {
            partition: state.highest
            for partition, state in self._groups[group].items()
            if state.highest is not None
        }

    def _offsets(self, op: dict[str, Any], outcome: str, line: int) -> None:
        self.counts[f"offsets-{outcome}"] += 1
        if outcome != OK:
            return
        group = str(op.get("group"))
        highest: dict[TopicPartition, _Commit] = op.get("_highest", {})
        for topic, partition, offset in op.get("offsets") or ():
            commit = highest.get((topic, partition))
            if commit is None or offset >= commit.offset:
                continue
            state = self._groups[group][(topic, partition)]
            if state.last_invoke_of_offset.get(offset, -1) > commit.invoke_line:
                continue  # a later commit of this very offset may have lowered it
            self.anomalies.add(
                "offsets-backwards", group=group, topic=topic, partition=partition,
                offset=offset, committed=commit.offset,
                ops=[{"line": commit.invoke_line, "f": "commit", "type": OK, "group": group,
                      "offsets": [[topic, partition, commit.offset]]},
                     {"line": line, "f": "offsets", "type": OK, "group": group,
                      "offsets": [[topic, partition, offset]]}],
            )  # fmt: skip

    # -- final reads ---------------------------------------------------------------------------

    def _final(self, op: dict[str, Any], outcome: str, line: int) -> None:
        self.counts[f"final-{outcome}"] += 1
        if outcome != OK:
            return
        records = {offset: (key, value) for _t, _p, offset, key, value in op.get("records") or ()}
        self.counts["final-record"] += len(records)
        final = FinalRead(
            line=line, topic=op["topic"], partition=op["partition"],
            log_start=op.get("log_start", 0), high_watermark=op["high_watermark"],
            isolation=op.get("isolation") or READ_UNCOMMITTED,
            compacted=bool(op.get("compacted")), records=records,
        )  # fmt: skip
        self.finals[(final.topic, final.partition)][final.isolation] = final
        if final.compacted:
            self.compacted_topics.add(final.topic)

    def final_for(self, topic: str, partition: int | None,
                  isolation: str = READ_UNCOMMITTED) -> FinalRead | None:
        """The final read of a partition at ``isolation``, else the one at the other isolation."""
        if partition is None:
            return None
        reads = self.finals.get((topic, partition))
        if not reads:
            return None
        return reads.get(isolation) or next(iter(reads.values()))


class _Pending:
    """Invokes not yet completed, per (process, f) in invoke order, and by identity."""

    def __init__(self) -> None:
        self._queues: dict[tuple[str, str], OrderedDict[int, tuple[Hashable, Any]]] = (
            defaultdict(OrderedDict)
        )
        self._named: dict[tuple[str, str, Hashable], deque[int]] = defaultdict(deque)
        self._counter = 0

    def add(self, process: str, f: str, identity: Hashable | None, item: Any) -> None:
        self._counter += 1
        self._queues[(process, f)][self._counter] = (identity, item)
        if identity is not None:
            self._named[(process, f, identity)].append(self._counter)

    def take(self, process: str, f: str, identity: Hashable | None) -> Any:
        """The oldest pending invoke named ``identity`` (``None`` if there is none), or with no
        identity the oldest of them all."""
        queue = self._queues.get((process, f))
        if not queue:
            return None
        if identity is None:
            number, (named, item) = queue.popitem(last=False)
            if named is not None:
                self._forget(process, f, named, number)
            return item
        numbers = self._named.get((process, f, identity))
        if not numbers:
            return None
        number = numbers.popleft()
        if not numbers:
            del self._named[(process, f, identity)]
        return queue.pop(number)[1]

    def _forget(self, process: str, f: str, identity: Hashable, number: int) -> None:
        numbers = self._named[(process, f, identity)]
        numbers.remove(number)
        if not numbers:
            del self._named[(process, f, identity)]

    def drain(self) -> list[Any]:
        items = [item for queue in self._queues.values() for _identity, item in queue.values()]
        self._queues.clear()
        self._named.clear()
        return items


def _identity(f: str, entry: dict[str, Any]) -> Hashable | None:
    """What names an invoke in its completion, when the completion carries it."""
    if f == "send":
        if entry.get("value") is not None:
            return ("value", entry["value"])
        if "key" in entry:
            return ("key", _hashable(entry["key"]))
        return None
    if f == "txn" and entry.get("txn") is not None:
        return ("txn", entry["txn"])
    return None


def _hashable(value: Any) -> Hashable:
    return tuple(value) if isinstance(value, list) else value


_HANDLERS = {
    "txn": HistoryIndex._txn,
    "assign": HistoryIndex._assign,
    "poll": HistoryIndex._poll,
    "commit": HistoryIndex._commit,
    "offsets": HistoryIndex._offsets,
    "final": HistoryIndex._final,
}
