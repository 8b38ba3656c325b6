"""The queue rules (``tests.faults.checker_queue``) on crafted share-group histories: a clean
history passes, and each rule catches the anomaly it names. No socket, no broker."""

from __future__ import annotations

from typing import Any

from tests.faults.checker import check

TOPIC, DLQ, GROUP = "q", "q.dlq", "g"


class Queue:
    """A queue history as ``tests.faults.workload_queue`` writes it."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.add("ok", "share-config", group=GROUP, topic=TOPIC, dead_letter_topic=DLQ)

    def add(self, type: str, f: str, **fields: Any) -> None:
        self.lines.append({"type": type, "time": len(self.lines), "f": f, **fields})

    def send(self, value: str, offset: int, partition: int = 0) -> None:
        fields = {"process": "producer-0", "topic": TOPIC, "key": value, "value": value}
        self.add("invoke", "send", **fields)
        self.add("ok", "send", **fields, partition=partition, offset=offset)

    def deliver(self, *records: tuple[int, int, int, str], process: str = "c1") -> None:
        self.add("ok", "share-poll", process=process, group=GROUP, topic=TOPIC,
                 records=[list(r) for r in records])

    def ack(self, partition: int, *acks: tuple[int, str, str], outcome: str = "ok",
            process: str = "c1") -> None:
        fields = {"process": process, "group": GROUP, "topic": TOPIC, "partition": partition,
                  "acks": [list(a) for a in acks]}
        self.add("invoke", "share-ack", **fields)
        self.add(outcome, "share-ack", **fields, **({"error": "x"} if outcome != "ok" else {}))

    def end(self, start_offsets: dict[int, int], letters: list[tuple[Any, ...]]) -> None:
        self.add("ok", "share-offsets", group=GROUP,
                 offsets=[[TOPIC, p, o] for p, o in start_offsets.items()])
        self.add("ok", "dead-letters", topic=DLQ, records=[list(r) for r in letters])


def clean() -> Queue:
    """a accepted, b released then accepted by another member, c rejected and dead-lettered,
    d still available past the start offset when the run ended."""
    q = Queue()
    for offset, value in enumerate("abcd"):
        q.send(value, offset)
    q.deliver((0, 0, 1, "a"), (0, 1, 1, "b"), (0, 2, 1, "c"))
    q.ack(0, (0, "ACCEPT", "a"), (1, "RELEASE", "b"), (2, "REJECT", "c"))
    q.deliver((0, 1, 2, "b"), process="c2")
    q.ack(0, (1, "ACCEPT", "b"), process="c2")
    q.end({0: 3}, [(0, 0, "c", TOPIC, 0, 2, "rejected", 1)])
    return q


def anomalies(q: Queue) -> dict[str, int]:
    report = check(q.lines)
    return {name: len(found) for name, found in report.anomalies.items()}


def test_a_clean_queue_history_passes_and_counts() -> None:
    report = check(clean().lines)
    assert report.valid, report.summary()
    assert report.counts["queue-unfinished"] == 1  # d, at the start offset
    assert report.counts["queue-accept-ok"] == 2
    assert report.counts["queue-redelivered"] == 1
    assert report.counts["queue-dead-letters"] == 1


def test_a_record_below_the_start_offset_neither_accepted_nor_dead_lettered_is_lost() -> None:
    q = clean()
    q.lines[-2]["offsets"] = [[TOPIC, 0, 4]]  # d is now below the start offset: done, but how?
    assert anomalies(q) == {"queue-lost": 1}


def test_an_accept_of_unknown_outcome_may_have_finished_the_record() -> None:
    q = clean()
    q.lines[-2]["offsets"] = [[TOPIC, 0, 4]]
    q.lines[-2:-2] = []
    end = q.lines[-2:]
    del q.lines[-2:]
    q.deliver((0, 3, 1, "d"))
    q.ack(0, (3, "ACCEPT", "d"), outcome="info")
    q.lines += end
    assert anomalies(q) == {}


def test_a_record_whose_only_accept_failed_is_lost_below_the_start_offset() -> None:
    q = clean()
    q.lines[-2]["offsets"] = [[TOPIC, 0, 4]]
    end = q.lines[-2:]
    del q.lines[-2:]
    q.deliver((0, 3, 1, "d"))
    q.ack(0, (3, "ACCEPT", "d"), outcome="fail")
    q.lines += end
    assert anomalies(q) == {"queue-lost": 1}


def test_a_dead_lettered_record_is_not_lost_and_a_duplicate_letter_is_counted() -> None:
    q = clean()
    q.lines[-1]["records"].append([0, 1, "c", TOPIC, 0, 2, "rejected", 1])
    report = check(q.lines)
    assert report.valid and report.counts["queue-dead-letter-duplicates"] == 1


def test_two_accepted_acknowledgements_of_one_offset() -> None:
    q = clean()
    end = q.lines[-2:]
    del q.lines[-2:]
    q.deliver((0, 0, 2, "a"), process="c2")
    q.ack(0, (0, "ACCEPT", "a"), process="c2")
    q.lines += end
    assert anomalies(q) == {"queue-accepted-twice": 1}


def test_a_failed_second_accept_is_no_anomaly() -> None:
    q = clean()
    end = q.lines[-2:]
    del q.lines[-2:]
    q.deliver((0, 0, 2, "a"), process="c2")
    q.ack(0, (0, "ACCEPT", "a"), process="c2", outcome="fail")
    q.lines += end
    assert anomalies(q) == {}


def test_a_record_both_accepted_and_dead_lettered() -> None:
    q = clean()
    q.lines[-1]["records"].append([0, 1, "a", TOPIC, 0, 0, "delivery-limit", 5])
    assert anomalies(q) == {"queue-dead-lettered-and-accepted": 1}


def test_a_letter_rejected_that_no_member_rejected() -> None:
    q = clean()
    end = q.lines[-2:]
    del q.lines[-2:]
    q.deliver((0, 3, 1, "d"))
    q.ack(0, (3, "RELEASE", "d"))
    q.lines += end
    q.lines[-1]["records"].append([0, 1, "d", TOPIC, 0, 3, "rejected", 1])
    assert anomalies(q) == {"queue-dead-letter-unrejected": 1}


def test_a_delivery_or_a_letter_of_another_value_than_was_sent() -> None:
    q = clean()
    q.lines[-1]["records"][0][2] = "x"  # the letter of offset 2 holds another value
    end = q.lines[-2:]
    del q.lines[-2:]
    q.deliver((0, 3, 1, "y"))
    q.ack(0, (3, "RELEASE", "y"))
    q.lines += end
    assert anomalies(q) == {"queue-wrong-record": 2}


def test_without_a_final_start_offset_nothing_is_judged_lost() -> None:
    q = clean()
    q.lines[-2]["offsets"] = []
    report = check(q.lines)
    assert report.valid and report.counts["queue-unfinished"] == 1


def test_a_history_without_a_queue_has_no_queue_counts() -> None:
    q = clean()
    del q.lines[0]
    report = check(q.lines)
    assert report.valid and "queue-lost" not in report.counts
    assert "queue-dead-letters" not in report.counts
