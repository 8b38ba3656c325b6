"""A share consumer's acknowledgement bookkeeping (sans-IO): which delivered records still
need an acknowledgement, which acknowledgements wait to be sent, and their wire form.

Life of a record (KIP-932, as Kafka's KafkaShareConsumer treats it):

1. ``poll()`` hands it to the application: ``deliver()`` records it as *in flight* (no type
   yet). Offsets the broker acquired for this member but that hold no record (compacted away,
   or control records) are *gaps*: acknowledged at once with type 0 (``GAP``).
2. The application acknowledges it (``acknowledge()``; explicit mode) or the next ``poll()`` /
   ``commit`` acknowledges every in-flight record ACCEPT (``acknowledge_all()``; implicit
   mode). An acknowledgement may be changed until it is sent.
3. The next ``poll()`` or commit moves acknowledged records to *pending* (``settle()``), keyed
   by the broker that delivered them (the partition's leader then): the next ShareFetch to that
   broker carries them, or a ShareAcknowledge (commit, close) does. ``take()`` empties them.

Wire form (``acknowledgement_batches``): ShareFetch/ShareAcknowledge v1 carry, per partition,
batches of ``first_offset``, ``last_offset`` and ``acknowledge_types``: one type for the whole
range, or one per offset. Samsa sends maximal runs of consecutive offsets with the same type,
each as a range with a single type (Kafka's client mixes per-offset arrays in when types
alternate; the broker accepts both forms).

State: one ``InFlightRecords`` per share consumer, used from its event loop only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from samsa.errors import IllegalStateError
from samsa.types import TopicPartition

__all__ = ["GAP", "AcknowledgeType", "AcknowledgementBatch", "InFlightRecords",
           "acknowledgement_batches"]

GAP = 0  # an acquired offset with no record: acknowledged as a gap (Kafka's type 0)


class AcknowledgeType(IntEnum):
    """How a record was processed (Kafka's AcknowledgeType ids on the wire)."""

    ACCEPT = 1   # processed: never delivered again
    RELEASE = 2  # not processed: deliver it again (its delivery count grows)
    REJECT = 3   # unprocessable: archive it, never deliver it again


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """Offsets ``first_offset``..``last_offset`` (inclusive), all acknowledged with the one
    type of ``acknowledge_types``, or each with its own (one type per offset)."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


def acknowledgement_batches(acknowledgements: Mapping[int, int]) -> list[AcknowledgementBatch]:
    """``{offset: type}`` as batches: each maximal run of consecutive offsets of one type is a
    range with a single type, in offset order."""
    batches: list[AcknowledgementBatch] = []
    first = last = kind = None
    for offset in sorted(acknowledgements):
        current = acknowledgements[offset]
        if last is not None and offset == last + 1 and current == kind:
            last = offset
            continue
        if first is not None:
            batches.append(AcknowledgementBatch(first, last, (kind,)))  # type: ignore[arg-type]
        first = last = offset
        kind = current
    if first is not None:
        batches.append(AcknowledgementBatch(first, last, (kind,)))  # type: ignore[arg-type]
    return batches


def expand_batches(batches: Iterable[AcknowledgementBatch]) -> dict[int, int]:
    """The ``{offset: type}`` that ``batches`` stand for (the inverse of
    ``acknowledgement_batches``, for either form of ``acknowledge_types``)."""
    result: dict[int, int] = {}
    for batch in batches:
        count = batch.last_offset - batch.first_offset + 1
        types = batch.acknowledge_types
        for index in range(count):
            result[batch.first_offset + index] = types[0] if len(types) == 1 else types[index]
    return result


class InFlightRecords:
    """The records the latest ``poll()`` delivered and the acknowledgements waiting to be
    sent (see the module docstring)."""

    def __init__(self) -> None:
        # (tp, offset) -> (node that delivered it, type or None while unacknowledged)
        self._in_flight: dict[tuple[TopicPartition, int], tuple[int, int | None]] = {}
        # node -> tp -> offset -> type: acknowledged, not yet sent
        self._pending: dict[int, dict[TopicPartition, dict[int, int]]] = {}

    # --- delivery ------------------------------------------------------------------------

    def deliver(self, tp: TopicPartition, node_id: int, offsets: Iterable[int],
                gaps: Iterable[int] = ()) -> None:
        """Records at ``offsets`` of ``tp`` (from broker ``node_id``) were handed to the
        application; ``gaps``: acquired offsets without a record, acknowledged as gaps."""
        for offset in offsets:
            self._in_flight[(tp, offset)] = (node_id, None)
        for offset in gaps:
            self._in_flight[(tp, offset)] = (node_id, GAP)

    # --- acknowledging -------------------------------------------------------------------

    def acknowledge(self, tp: TopicPartition, offset: int, kind: AcknowledgeType) -> None:
        """Acknowledge one delivered record (again: the newest type wins until it is sent)."""
        key = (tp, offset)
        entry = self._in_flight.get(key)
        if entry is None or entry[1] == GAP:
            raise IllegalStateError(
                f"the record at offset {offset} of {tp.topic}-{tp.partition} is not one the "
                f"latest poll() delivered, or its acknowledgement was already sent")
        self._in_flight[key] = (entry[0], int(AcknowledgeType(kind)))

    def acknowledge_all(self, kind: AcknowledgeType) -> None:
        """Acknowledge every delivered record not acknowledged yet (implicit mode)."""
        for key, (node_id, current) in self._in_flight.items():
            if current is None:
                self._in_flight[key] = (node_id, int(kind))

    @property
    def unacknowledged(self) -> int:
        """How many delivered records have no acknowledgement yet."""
        return sum(1 for _, kind in self._in_flight.values() if kind is None)

    def settle(self) -> None:
        """Move every acknowledged in-flight record to the pending acknowledgements of the
        broker that delivered it; unacknowledged ones stay in flight."""
        for key in [k for k, (_, kind) in self._in_flight.items() if kind is not None]:
            node_id, kind = self._in_flight.pop(key)
            tp, offset = key
            assert kind is not None
            self._pending.setdefault(node_id, {}).setdefault(tp, {})[offset] = kind

    # --- sending -------------------------------------------------------------------------

    def pending_nodes(self) -> list[int]:
        return sorted(self._pending)

    def take(self, node_id: int) -> dict[TopicPartition, dict[int, int]]:
        """The pending acknowledgements for broker ``node_id``, removed."""
        return self._pending.pop(node_id, {})

    def take_all(self) -> dict[int, dict[TopicPartition, dict[int, int]]]:
        taken, self._pending = self._pending, {}
        return taken

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Drop in-flight records of ``tps`` (their acquisition locks lapse at the broker)."""
        gone = set(tps)
        for key in [k for k in self._in_flight if k[0] in gone]:
            del self._in_flight[key]
