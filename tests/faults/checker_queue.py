"""The checker's rules for a queue (a share group, KIP-932) — the history of
``tests.faults.workload_queue`` — on top of the sends every workload logs.

History read (see ``workload_queue``): ``share-config`` (ok: group, topic, dead_letter_topic),
``send`` to that topic, ``share-poll`` (ok: process, group, topic, records =
``[[partition, offset, delivery_count, value], ...]``), ``share-ack`` (invoke, then ok / fail /
info: process, group, topic, partition, acks = ``[[offset, type, value], ...]``, type one of
``ACCEPT``/``RELEASE``/``REJECT``), and after the run ``share-offsets`` (ok: group, offsets =
``[[topic, partition, start_offset, lag], ...]``) and ``dead-letters`` (ok: topic, records =
``[[partition, offset, value, source_topic, source_partition, source_offset, reason,
delivery_count], ...]``, the whole dead-letter topic from its log start to its high watermark).

The rules — each one something the broker promises, stated over what the history holds:

- ``queue-lost``: an acknowledged send below its share-partition's final start offset (the
  broker says every record below it is done) with no ACCEPT that is ``ok`` or may have
  happened (``info``, or never answered: a ``fail`` ACCEPT was not applied) and not in the
  dead-letter topic. A record at or above the start offset is not judged: it is counted
  (``queue-unfinished``), as is every record of a partition with no final start offset, and a
  record below it whose only applied-or-maybe ACCEPTs had an unknown outcome (``queue-done-by-unknown-accept``).
- ``queue-accepted-twice``: two ``ok`` ACCEPT acknowledgements of one offset (a record
  accepted is acknowledged for good: persisted before the answer, never delivered again, so a
  second acknowledgement must fail).
- ``queue-dead-lettered-and-accepted``: an offset with an ``ok`` ACCEPT that is also in the
  dead-letter topic.
- ``queue-dead-letter-unrejected``: a dead letter with reason ``rejected`` for an offset no
  member ever sent a REJECT for (no ``share-ack`` invoke with REJECT).
- ``queue-wrong-record``: a delivery or a dead letter whose value is not the value the
  acknowledged send of that offset wrote.

Not a rule: a dead letter appended twice (the broker's dead letters are at least once: a
crash between the append and its confirmation appends it again after the restart) is counted
(``queue-dead-letter-duplicates``); delivery counts are not judged (acquisitions are not
persisted, so a new leader of a share partition counts again from what was persisted, and the
history has no leader epoch per delivery to tell the two apart).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from tests.faults.checker_report import Anomalies

__all__ = ["QUEUE_ANOMALIES", "QueueIndex"]

QUEUE_ANOMALIES = (
    "queue-lost",
    "queue-accepted-twice",
    "queue-dead-lettered-and-accepted",
    "queue-dead-letter-unrejected",
    "queue-wrong-record",
)

Offset = tuple[str, int, int]  # topic, partition, offset


class QueueIndex:
    """Reads a history line by line (``add``), then judges it (``check``)."""

    def __init__(self) -> None:
        self.configs: list[dict[str, Any]] = []
        self.sends: dict[Offset, tuple[str, int]] = {}  # ok send -> (value, line)
        self.deliveries: list[tuple[Offset, str, int, str, int]] = []  # value, count, process, line
        self.ack_invoked: dict[str, dict[Offset, int]] = defaultdict(dict)  # type -> offset -> line
        # ACCEPTs that may have been applied: invoked and not (yet) answered ok or fail
        self.accept_open: Counter[Offset] = Counter()
        self.accept_unknown: set[Offset] = set()
        self.accepted: dict[Offset, list[dict[str, Any]]] = defaultdict(list)
        self.start_offsets: dict[tuple[str, int], int] = {}
        self.dead_letters: dict[str, list[dict[str, Any]]] = {}  # dead-letter topic -> letters
        self.counts: Counter[str] = Counter()
        self._line = 0

    def add(self, line: dict[str, Any]) -> None:
        self._line += 1
        f, kind = line.get("f"), line.get("type")
        if f == "share-config" and kind == "ok":
            self.configs.append(line)
        elif f == "send" and kind == "ok" and None not in (line.get("topic"), line.get("offset")):
            self.sends[(line["topic"], line["partition"], line["offset"])] = (line["value"], self._line)
        elif f == "share-poll" and kind == "ok":
            for partition, offset, count, value in line.get("records", []):
                self.deliveries.append(((line["topic"], partition, offset), value, count,
                                        str(line.get("process")), self._line))
        elif f == "share-ack":
            self._ack(line, str(kind))
        elif f == "share-offsets" and kind == "ok":
            for topic, partition, start_offset, *_lag in line.get("offsets", []):
                if start_offset is not None and start_offset >= 0:
                    self.start_offsets[(topic, partition)] = start_offset
        elif f == "dead-letters" and kind == "ok":
            self.dead_letters[line["topic"]] = [
                {"partition": r[0], "offset": r[1], "value": r[2], "source": (r[3], r[4], r[5]),
                 "reason": r[6], "delivery_count": r[7], "line": self._line}
                for r in line.get("records", [])]

    def _ack(self, line: dict[str, Any], kind: str) -> None:
        topic, partition = line["topic"], line["partition"]
        for offset, type, _value in line.get("acks", []):
            where = (topic, partition, offset)
            if kind == "invoke":
                self.ack_invoked[type].setdefault(where, self._line)
                if type == "ACCEPT":
                    self.accept_open[where] += 1
                continue
            if type == "ACCEPT":
                self.accept_open[where] -= 1
                if kind == "info":
                    self.accept_unknown.add(where)
            if kind == "ok":
                self.counts[f"queue-{type.lower()}-ok"] += 1
                if type == "ACCEPT":
                    self.accepted[where].append({"line": self._line, "process": line.get("process")})
            else:
                self.counts[f"queue-ack-{kind}"] += 1

    def check(self, anomalies: Anomalies) -> Counter[str]:
        """Apply the rules (only when the history has a queue) and return the counts."""
        for config in self.configs:
            self._check_queue(config["topic"], config.get("dead_letter_topic"), anomalies)
        return self.counts

    def _check_queue(self, topic: str, dead_letter_topic: str | None, anomalies: Anomalies) -> None:
        letters = self.dead_letters.get(dead_letter_topic or "", [])
        lettered: dict[Offset, list[dict[str, Any]]] = defaultdict(list)
        for letter in letters:
            lettered[letter["source"]].append(letter)
        self.counts["queue-dead-letters"] += len(letters)
        self.counts["queue-dead-letter-duplicates"] += sum(len(v) - 1 for v in lettered.values())
        self.counts["queue-delivered"] += sum(1 for d in self.deliveries if d[0][0] == topic)
        self.counts["queue-redelivered"] += sum(1 for d in self.deliveries
                                                if d[0][0] == topic and d[2] > 1)
        for where, (value, line) in self.sends.items():
            if where[0] != topic:
                continue
            done = where in self.accepted or where in lettered
            start = self.start_offsets.get((where[0], where[1]))
            if done:
                continue
            if start is None or where[2] >= start:
                self.counts["queue-unfinished"] += 1
            elif where in self.accept_unknown or self.accept_open[where] > 0:
                self.counts["queue-done-by-unknown-accept"] += 1  # an accept of unknown outcome
            else:
                anomalies.add("queue-lost", topic=where[0], partition=where[1], offset=where[2],
                              value=value, start_offset=start,
                              ops=[{"line": line, "f": "send", "type": "ok"}])
        for where, accepts in self.accepted.items():
            if where[0] != topic:
                continue
            if len(accepts) > 1:
                anomalies.add("queue-accepted-twice", topic=where[0], partition=where[1],
                              offset=where[2], ops=[{"f": "share-ack", "type": "ok", **a}
                                                    for a in accepts])
            if where in lettered:
                anomalies.add("queue-dead-lettered-and-accepted", topic=where[0],
                              partition=where[1], offset=where[2],
                              ops=[{"f": "share-ack", "type": "ok", **accepts[0]},
                                   {"f": "dead-letters", "line": lettered[where][0]["line"]}])
        for where, found in lettered.items():
            if where[0] != topic:
                continue
            sent = self.sends.get(where)
            for letter in found:
                if letter["reason"] == "rejected" and where not in self.ack_invoked["REJECT"]:
                    anomalies.add("queue-dead-letter-unrejected", topic=where[0],
                                  partition=where[1], offset=where[2], letter=letter)
                if sent is not None and letter["value"] != sent[0]:
                    anomalies.add("queue-wrong-record", topic=where[0], partition=where[1],
                                  offset=where[2], value=letter["value"], sent=sent[0],
                                  ops=[{"line": sent[1], "f": "send"},
                                       {"line": letter["line"], "f": "dead-letters"}])
        for where, value, _count, process, line in self.deliveries:
            sent = self.sends.get(where)
            if where[0] == topic and sent is not None and value != sent[0]:
                anomalies.add("queue-wrong-record", topic=where[0], partition=where[1],
                              offset=where[2], value=value, sent=sent[0], process=process,
                              ops=[{"line": sent[1], "f": "send"},
                                   {"line": line, "f": "share-poll"}])
