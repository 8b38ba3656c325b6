"""The share consumer's acknowledgement bookkeeping without sockets: acknowledgements as wire
batches (checked against the offset -> type map they stand for), and the life of delivered
records in implicit and explicit modes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa._share_acks import (
    GAP,
    AcknowledgementBatch,
    AcknowledgeType,
    InFlightRecords,
    acknowledgement_batches,
    expand_batches,
)
from samsa.errors import IllegalStateError
from samsa.types import TopicPartition

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)
ACCEPT, RELEASE, REJECT = (int(t) for t in AcknowledgeType)

acknowledgements = st.dictionaries(st.integers(0, 60), st.sampled_from([GAP, ACCEPT, RELEASE, REJECT]),
                                   max_size=40)


def test_batches_are_runs_of_one_type() -> None:
    acks = {0: ACCEPT, 1: ACCEPT, 2: RELEASE, 3: ACCEPT, 5: ACCEPT, 6: GAP, 7: GAP}
    assert acknowledgement_batches(acks) == [
        AcknowledgementBatch(0, 1, (ACCEPT,)), AcknowledgementBatch(2, 2, (RELEASE,)),
        AcknowledgementBatch(3, 3, (ACCEPT,)), AcknowledgementBatch(5, 5, (ACCEPT,)),
        AcknowledgementBatch(6, 7, (GAP,))]
    assert acknowledgement_batches({}) == []


@given(acknowledgements)
def test_batches_stand_for_exactly_the_acknowledgements(acks: dict[int, int]) -> None:
    batches = acknowledgement_batches(acks)
    assert expand_batches(batches) == acks
    for batch in batches:
        assert batch.first_offset <= batch.last_offset and len(batch.acknowledge_types) == 1
    for before, after in itertools.pairwise(batches):
        assert before.last_offset < after.first_offset  # ordered, no overlap
        # maximal: a neighbour that touches has another type
        if before.last_offset + 1 == after.first_offset:
            assert before.acknowledge_types != after.acknowledge_types


def test_expand_reads_one_type_per_offset_too() -> None:
    assert expand_batches([AcknowledgementBatch(4, 6, (ACCEPT, GAP, REJECT))]) == {
        4: ACCEPT, 5: GAP, 6: REJECT}


def test_implicit_mode_accepts_everything_delivered_and_sends_it_to_its_broker() -> None:
    records = InFlightRecords()
    records.deliver(TP, 1, [10, 11, 13], gaps=[12])
    records.deliver(OTHER, 2, [0])
    records.acknowledge_all(AcknowledgeType.ACCEPT)
    records.settle()
    assert records.unacknowledged == 0 and records.pending_nodes() == [1, 2]
    assert records.take(1) == {TP: {10: ACCEPT, 11: ACCEPT, 12: GAP, 13: ACCEPT}}
    assert records.take(1) == {}
    assert records.take_all() == {2: {OTHER: {0: ACCEPT}}}


def test_explicit_mode_keeps_unacknowledged_records_in_flight() -> None:
    records = InFlightRecords()
    records.deliver(TP, 1, [0, 1, 2])
    records.acknowledge(TP, 0, AcknowledgeType.ACCEPT)
    records.acknowledge(TP, 2, AcknowledgeType.REJECT)
    records.acknowledge(TP, 2, AcknowledgeType.RELEASE)  # the newest type wins until sent
    assert records.unacknowledged == 1
    records.settle()
    assert records.take_all() == {1: {TP: {0: ACCEPT, 2: RELEASE}}}
    assert records.unacknowledged == 1
    records.acknowledge(TP, 1, AcknowledgeType.ACCEPT)
    records.settle()
    assert records.take_all() == {1: {TP: {1: ACCEPT}}}


@pytest.mark.parametrize("offset", [5, 3])
def test_only_delivered_records_can_be_acknowledged(offset: int) -> None:
    records = InFlightRecords()
    records.deliver(TP, 1, [0], gaps=[3])  # 5: never delivered; 3: a gap
    with pytest.raises(IllegalStateError):
        records.acknowledge(TP, offset, AcknowledgeType.ACCEPT)


def test_a_sent_acknowledgement_cannot_be_changed() -> None:
    records = InFlightRecords()
    records.deliver(TP, 1, [0])
    records.acknowledge(TP, 0, AcknowledgeType.ACCEPT)
    records.settle()
    with pytest.raises(IllegalStateError):
        records.acknowledge(TP, 0, AcknowledgeType.REJECT)


def test_forget_drops_in_flight_records_of_partitions() -> None:
    records = InFlightRecords()
    records.deliver(TP, 1, [0, 1])
    records.deliver(OTHER, 1, [0])
    records.forget([TP])
    assert records.unacknowledged == 1


@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from(list(AcknowledgeType))),
                max_size=50),
       st.sets(st.integers(0, 30), max_size=20))
def test_every_delivered_record_is_sent_once_with_its_last_type(
        actions: list[tuple[int, AcknowledgeType]], delivered: set[int]) -> None:
    """Explicit acknowledgements of delivered records, then an implicit ACCEPT of the rest:
    each delivered offset is sent exactly once, with the last type given (ACCEPT if none)."""
    records = InFlightRecords()
    records.deliver(TP, 7, sorted(delivered))
    expected = dict.fromkeys(delivered, ACCEPT)
    for offset, kind in actions:
        if offset in delivered:
            records.acknowledge(TP, offset, kind)
            expected[offset] = int(kind)
    records.acknowledge_all(AcknowledgeType.ACCEPT)
    records.settle()
    sent = records.take_all()
    assert sent.get(7, {}).get(TP, {}) == expected
    assert records.unacknowledged == 0 and records.take_all() == {}
