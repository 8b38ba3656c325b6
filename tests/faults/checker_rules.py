"""The anomaly rules that need the whole history: final reads against acknowledged sends and polls.

Which final read a rule trusts, per partition: the ``read_uncommitted`` one when the history
has it (it holds every record, aborted ones too), else the ``read_committed`` one, where a
record of a transaction not known committed may be absent without loss. Records below a final
read's ``log_start`` are gone by retention, not lost. On a compacted topic (a final line with
``"compacted": true``) an older record of a key may be gone: there ``lost-write`` and an
absent-offset ``truncated-read`` give way to ``compaction-latest-wrong``.

An acknowledged send at or beyond the final high watermark counts as lost: the producers use
``acks=all``, so their acknowledgement came after the high watermark passed the offset, and a
high watermark that later falls below it has lost the write.

Values are unique per run, so a value names its send; tombstones (a null value) are named by
their offset only and are checked by the compaction rule alone.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from tests.faults.checker_history import (
    FAIL,
    OK,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    FinalRead,
    HistoryIndex,
    PolledRecord,
    PollGap,
    Send,
)
from tests.faults.checker_report import Anomalies

Position = tuple[str, int, int]


def check_all(index: HistoryIndex, anomalies: Anomalies) -> None:
    positions = final_positions(index)
    check_sends(index, positions, anomalies)
    check_duplicates(positions, index, anomalies)
    check_nonmonotonic_sends(index, anomalies)
    check_truncated_reads(index, anomalies)
    check_poll_skips(index, anomalies)
    check_aborted_reads(index, anomalies)
    check_transactions(index, positions, anomalies)
    check_compaction(index, anomalies)
    check_leaders(index, anomalies)


def final_positions(index: HistoryIndex) -> dict[Any, set[Position]]:
    """Every (topic, partition, offset) where a final read (either isolation) holds a value."""
    positions: dict[Any, set[Position]] = defaultdict(set)
    for reads in index.finals.values():
        for final in reads.values():
            for offset, (_key, value) in final.records.items():
                if value is not None:
                    positions[value].add((final.topic, final.partition, offset))
    return positions


# -- acknowledged sends ------------------------------------------------------------------------


def check_sends(
    index: HistoryIndex, positions: dict[Any, set[Position]], anomalies: Anomalies
) -> None:
    """``lost-write`` and ``wrong-offset`` for every ``ok`` send of a value. Counts the ``ok``
    sends to a partition with no final read (``send-ok-unread``): nothing could be judged."""
    for send in index.sends.values():
        if send.outcome != OK or send.offset is None or send.partition is None:
            continue
        if (send.topic, send.partition) not in index.finals:
            index.counts["send-ok-unread"] += 1
        found = positions.get(send.value)
        if found and (send.topic, send.partition, send.offset) not in found:
            anomalies.add(
                "wrong-offset", topic=send.topic, partition=send.partition, value=send.value,
                acknowledged=send.offset, found=_listed(found), ops=[send.as_op()],
            )  # fmt: skip
        elif not found and _should_hold(index, send):
            final = index.final_for(send.topic, send.partition)
            assert final is not None
            anomalies.add(
                "lost-write", topic=send.topic, partition=send.partition, offset=send.offset,
                value=send.value, ops=[send.as_op(), final.as_op()],
            )  # fmt: skip


def _listed(positions: set[Position]) -> list[list[Any]]:
    return [list(position) for position in sorted(positions)]


def _should_hold(index: HistoryIndex, send: Send) -> bool:
    """Whether the final read of ``send``'s partition must hold its (acknowledged) value."""
    final = index.final_for(send.topic, send.partition)
    if final is None or final.compacted or send.offset is None or send.offset < final.log_start:
        return False
    return final.isolation == READ_UNCOMMITTED or index.txn_outcome(send) in (None, OK)


def check_duplicates(
    positions: dict[Any, set[Position]], index: HistoryIndex, anomalies: Anomalies
) -> None:
    for value, found in positions.items():
        if len(found) > 1:
            send = index.sends.get(value)
            anomalies.add(
                "duplicate", value=value, found=_listed(found),
                ops=[send.as_op()] if send is not None else [],
            )  # fmt: skip


def check_nonmonotonic_sends(index: HistoryIndex, anomalies: Anomalies) -> None:
    """Per process and partition, acknowledged offsets in the order the sends were invoked."""
    last: dict[tuple[str, str, int], Send] = {}
    acknowledged = (s for s in index.sends.values() if s.outcome == OK and s.offset is not None)
    for send in sorted(acknowledged, key=lambda s: s.line):
        assert send.offset is not None and send.partition is not None
        key = (send.process, send.topic, send.partition)
        previous = last.get(key)
        if previous is not None and previous.offset is not None and send.offset <= previous.offset:
            anomalies.add(
                "nonmonotonic-send", process=send.process, topic=send.topic,
                partition=send.partition, offset=send.offset, previous=previous.offset,
                ops=[previous.as_op(), send.as_op()],
            )  # fmt: skip
        last[key] = send


# -- polls -------------------------------------------------------------------------------------


def check_truncated_reads(index: HistoryIndex, anomalies: Anomalies) -> None:
    """A polled value the final read does not hold at that offset, below its high watermark."""
    for (topic, partition), polled in index.polled.items():
        final = index.final_for(topic, partition)
        if final is None:
            continue
        for record in polled.values():
            _check_polled(index, final, record, anomalies)
    for record in index.polled_conflicts:
        final = index.final_for(record.topic, record.partition)
        if final is not None:
            _check_polled(index, final, record, anomalies)


def _check_polled(
    index: HistoryIndex, final: FinalRead, record: PolledRecord, anomalies: Anomalies
) -> None:
    if not final.log_start <= record.offset < final.high_watermark:
        return
    held = final.records.get(record.offset)
    if held is None and (final.compacted or not _visible_in(index, final, record.value)):
        return
    if held is not None and held[1] == record.value:
        return
    anomalies.add(
        "truncated-read", topic=record.topic, partition=record.partition, offset=record.offset,
        value=record.value, final_value=None if held is None else held[1],
        ops=[record.as_op(), final.as_op()],
    )  # fmt: skip


def _visible_in(index: HistoryIndex, final: FinalRead, value: Any) -> bool:
    """Whether ``final`` must show ``value`` if it survived: a read_committed read hides the
    values of transactions not known committed."""
    return final.isolation != READ_COMMITTED or _visible_in_committed(index, value)


def check_poll_skips(index: HistoryIndex, anomalies: Anomalies) -> None:
    visible: dict[tuple[str, int, str], list[int]] = {}
    for gap in index.gaps:
        final = index.final_for(gap.topic, gap.partition, gap.isolation)
        if final is None:
            continue
        offsets = visible.get((gap.topic, gap.partition, gap.isolation))
        if offsets is None:
            offsets = _visible_offsets(index, final, gap.isolation)
            visible[(gap.topic, gap.partition, gap.isolation)] = offsets
        _check_gap(gap, offsets, final, anomalies)


def _visible_offsets(index: HistoryIndex, final: FinalRead, isolation: str) -> list[int]:
    """Offsets of the records a consumer at ``isolation`` must see, sorted. A read_uncommitted
    final read stands in for a read_committed consumer by leaving out the values of
    transactions not known committed."""
    if isolation == READ_COMMITTED and final.isolation == READ_UNCOMMITTED:
        return sorted(
            offset for offset, (_key, value) in final.records.items()
            if _visible_in_committed(index, value)
        )  # fmt: skip
    return sorted(final.records)


def _visible_in_committed(index: HistoryIndex, value: Any) -> bool:
    """Whether a read_committed reader sees ``value``: not if its transaction is not known
    committed (a value no send wrote is judged visible)."""
    send = index.sends.get(value) if value is not None else None
    return send is None or index.txn_outcome(send) in (None, OK)


def _check_gap(gap: PollGap, offsets: list[int], final: FinalRead, anomalies: Anomalies) -> None:
    first = bisect.bisect_right(offsets, gap.previous)
    end = bisect.bisect_left(offsets, gap.offset)
    if first >= end:
        return
    anomalies.add(
        "poll-skip", process=gap.process, topic=gap.topic, partition=gap.partition,
        previous=gap.previous, offset=gap.offset, skipped=end - first,
        first_skipped=offsets[first],
        ops=[{"line": gap.previous_line, "f": "poll", "offset": gap.previous},
             {"line": gap.line, "f": "poll", "offset": gap.offset}, final.as_op()],
    )  # fmt: skip


# -- transactions ------------------------------------------------------------------------------


def check_aborted_reads(index: HistoryIndex, anomalies: Anomalies) -> None:
    """A read_committed poll or final read that returned a value of an aborted transaction."""
    for record in index.committed_reads_of_txn_values:
        send = index.sends[record.value]
        if index.txn_outcome(send) == FAIL:
            anomalies.add(
                "aborted-read", topic=record.topic, partition=record.partition,
                offset=record.offset, value=record.value, txn=send.txn,
                ops=[send.as_op(), record.as_op()],
            )  # fmt: skip
    for reads in index.finals.values():
        final = reads.get(READ_COMMITTED)
        if final is not None:
            _check_committed_final(index, final, anomalies)


def _check_committed_final(index: HistoryIndex, final: FinalRead, anomalies: Anomalies) -> None:
    for offset, (_key, value) in final.records.items():
        send = index.sends.get(value) if value is not None else None
        if send is not None and index.txn_outcome(send) == FAIL:
            anomalies.add(
                "aborted-read", topic=final.topic, partition=final.partition, offset=offset,
                value=value, txn=send.txn, ops=[send.as_op(), final.as_op()],
            )  # fmt: skip


def check_transactions(
    index: HistoryIndex, positions: dict[Any, set[Position]], anomalies: Anomalies
) -> None:
    """``torn-transaction`` / ``lost-transaction``: a committed transaction's values only partly
    (or not at all) in the final reads of their partitions (the read_committed ones where the
    history has them)."""
    committed = _committed_values(index)
    for txn, outcome in index.txn_outcomes.items():
        if outcome != OK:
            continue
        checked = [s for s in index.txn_sends.get(txn, ()) if _checkable_in_txn(index, s)]
        missing = [s for s in checked if not _present(index, s, committed, positions)]
        if not missing:
            continue
        present = [s.value for s in checked if s not in missing]
        anomalies.add(
            "lost-transaction" if not present else "torn-transaction", txn=txn,
            present=present, missing=[s.value for s in missing],
            ops=[{"f": "txn", "type": OK, "txn": txn}, *(s.as_op() for s in missing)],
        )  # fmt: skip


def _checkable_in_txn(index: HistoryIndex, send: Send) -> bool:
    """A send of a committed transaction whose value a final read must hold."""
    if send.value is None or send.outcome == FAIL or send.topic in index.compacted_topics:
        return False
    if send.partition is None:
        return any(topic == send.topic for topic, _partition in index.finals)
    final = index.final_for(send.topic, send.partition, READ_COMMITTED)
    if final is None:
        return False
    return send.offset is None or final.log_start <= send.offset


def _committed_values(index: HistoryIndex) -> set[Any]:
    return {
        value
        for reads in index.finals.values() if READ_COMMITTED in reads
        for _key, value in reads[READ_COMMITTED].records.values()
    }  # fmt: skip


def _present(
    index: HistoryIndex, send: Send, committed: set[Any], positions: dict[Any, set[Position]]
) -> bool:
    if send.partition is None:
        read_committed = any(
            topic == send.topic and READ_COMMITTED in reads
            for (topic, _partition), reads in index.finals.items()
        )  # fmt: skip
    else:
        read_committed = READ_COMMITTED in index.finals.get((send.topic, send.partition), {})
    return send.value in (committed if read_committed else positions)


# -- compaction and leaders --------------------------------------------------------------------


def check_compaction(index: HistoryIndex, anomalies: Anomalies) -> None:
    """Per key of a compacted partition, the final read's last record is the acknowledged send
    with the highest offset (or, for a tombstone, the key is gone)."""
    if not index.compacted_topics:
        return
    latest: dict[tuple[str, int, Any], Send] = {}
    uncertain: set[tuple[str, Any]] = set()
    for send in _compacted_sends(index):
        key = _key(send.key)
        if send.outcome != OK:
            if send.outcome != FAIL:
                uncertain.add((send.topic, key))
            continue
        if send.offset is None or send.partition is None:
            continue
        slot = (send.topic, send.partition, key)
        if slot not in latest or latest[slot].offset < send.offset:  # type: ignore[operator]
            latest[slot] = send
    last_in_final: dict[tuple[str, int], dict[Any, tuple[int, Any]]] = {}
    for (topic, partition, key), send in latest.items():
        final = index.final_for(topic, partition)
        if final is None or send.offset is None or send.offset < final.log_start:
            continue
        if (topic, partition) not in last_in_final:
            last_in_final[(topic, partition)] = _last_per_key(final)
        last = last_in_final[(topic, partition)].get(key)
        reason = _compaction_problem(send, last, (topic, key) in uncertain)
        if reason is not None:
            anomalies.add(
                "compaction-latest-wrong", topic=topic, partition=partition, key=send.key,
                reason=reason, expected=send.value,
                found=None if last is None else {"offset": last[0], "value": last[1]},
                ops=[send.as_op(), final.as_op()],
            )  # fmt: skip


def _compacted_sends(index: HistoryIndex) -> list[Send]:
    topics = index.compacted_topics
    return [s for s in (*index.sends.values(), *index.tombstones) if s.topic in topics]


def _key(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def _last_per_key(final: FinalRead) -> dict[Any, tuple[int, Any]]:
    last: dict[Any, tuple[int, Any]] = {}
    for offset in sorted(final.records):
        key, value = final.records[offset]
        last[_key(key)] = (offset, value)
    return last


def _compaction_problem(send: Send, last: tuple[int, Any] | None, uncertain: bool) -> str | None:
    """Why the final read's last record of a key (offset, value) contradicts ``send``, the
    acknowledged send of that key with the highest offset; ``uncertain``: a send of the key
    with an unknown outcome may have landed after it."""
    assert send.offset is not None
    if last is None:
        if send.value is None or uncertain:
            return None
        return "the key is gone but its latest acknowledged value is not a tombstone"
    offset, value = last
    if offset < send.offset:
        return "an older record of the key outlived its latest acknowledged one"
    if offset == send.offset and value != send.value:
        return "the latest acknowledged offset holds another value"
    if offset > send.offset and not uncertain:
        return "a record after the latest acknowledged one, from no send that may have happened"
    return None


def check_leaders(index: HistoryIndex, anomalies: Anomalies) -> None:
    """``split-brain``: two nodes announced leadership of one partition in one epoch."""
    for (topic, partition, epoch), nodes in index.leaders.items():
        if len(nodes) > 1:
            anomalies.add(
                "split-brain", topic=topic, partition=partition, epoch=epoch,
                nodes=sorted(nodes, key=repr),
                ops=[{"line": line, "type": "event", "event": "leader", "topic": topic,
                      "partition": partition, "epoch": epoch, "node": node}
                     for node, line in nodes.items()],
            )  # fmt: skip
