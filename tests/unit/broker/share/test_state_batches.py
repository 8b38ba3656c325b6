"""Combining state batches: table-driven cases of the overlaps Kafka's combiner handles, and
hypothesis against a per-offset model (every offset takes its highest-priority batch)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.share.state_batches import combine_state_batches, priority
from broker.share.values import DEAD_LETTERING_BASE_CODE, StateBatch

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
DEAD_LETTERING = DEAD_LETTERING_BASE_CODE


def b(first: int, last: int, state: int, count: int) -> StateBatch:
    return StateBatch(first, last, state, count)


CASES = [
    # name, current, new, start offset, result
    ("empty", [], [], -1, []),
    ("disjoint stay apart", [b(0, 4, AVAILABLE, 1)], [b(6, 9, AVAILABLE, 1)], -1,
     [b(0, 4, AVAILABLE, 1), b(6, 9, AVAILABLE, 1)]),
    ("touching with one state join", [b(0, 4, AVAILABLE, 1)], [b(5, 9, AVAILABLE, 1)], -1,
     [b(0, 9, AVAILABLE, 1)]),
    ("touching with two states stay apart", [b(0, 4, AVAILABLE, 1)], [b(5, 9, AVAILABLE, 2)], -1,
     [b(0, 4, AVAILABLE, 1), b(5, 9, AVAILABLE, 2)]),
    ("a higher count inside splits", [b(0, 9, AVAILABLE, 1)], [b(3, 5, AVAILABLE, 2)], -1,
     [b(0, 2, AVAILABLE, 1), b(3, 5, AVAILABLE, 2), b(6, 9, AVAILABLE, 1)]),
    ("a lower count inside is swallowed", [b(0, 9, AVAILABLE, 2)], [b(3, 5, AVAILABLE, 1)], -1,
     [b(0, 9, AVAILABLE, 2)]),
    ("same count: the later state wins", [b(0, 9, ACKNOWLEDGED, 1)], [b(5, 14, AVAILABLE, 1)], -1,
     [b(0, 9, ACKNOWLEDGED, 1), b(10, 14, AVAILABLE, 1)]),
    ("aligned first offsets, longer and higher", [b(0, 4, AVAILABLE, 1)], [b(0, 9, ARCHIVED, 1)], -1,
     [b(0, 9, ARCHIVED, 1)]),
    ("the start offset cuts and drops", [b(0, 4, AVAILABLE, 1), b(5, 9, ACKNOWLEDGED, 1)],
     [b(12, 12, ARCHIVED, 3)], 7, [b(7, 9, ACKNOWLEDGED, 1), b(12, 12, ARCHIVED, 3)]),
    ("dead-lettering gives way to archived", [b(0, 4, DEAD_LETTERING + 1, 5)],
     [b(0, 4, ARCHIVED, 5)], -1, [b(0, 4, ARCHIVED, 5)]),
    ("dead-lettering beats available and acknowledged", [b(0, 4, AVAILABLE, 2), b(5, 9, ACKNOWLEDGED, 2)],
     [b(0, 9, DEAD_LETTERING, 2)], -1, [b(0, 9, DEAD_LETTERING, 2)]),
]


@pytest.mark.parametrize(("current", "new", "start_offset", "result"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_combining(current: list[StateBatch], new: list[StateBatch], start_offset: int,
                   result: list[StateBatch]) -> None:
    assert combine_state_batches(current, new, start_offset=start_offset) == tuple(result)
    assert combine_state_batches(new, current, start_offset=start_offset) == tuple(result)


def per_offset(batches: list[StateBatch], start_offset: int) -> dict[int, tuple[int, int]]:
    """The model: each offset at or after the start offset takes its highest-priority batch."""
    best: dict[int, StateBatch] = {}
    for batch in batches:
        for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
            if offset not in best or priority(batch) > priority(best[offset]):
                best[offset] = batch
    return {offset: (batch.delivery_state, batch.delivery_count) for offset, batch in best.items()}


def expand(batches: tuple[StateBatch, ...]) -> dict[int, tuple[int, int]]:
    return {offset: (batch.delivery_state, batch.delivery_count)
            for batch in batches for offset in range(batch.first_offset, batch.last_offset + 1)}


states = st.sampled_from([AVAILABLE, ACKNOWLEDGED, ARCHIVED, DEAD_LETTERING, DEAD_LETTERING + 2])
batches = st.builds(lambda first, length, state, count: b(first, first + length, state, count),
                    st.integers(0, 40), st.integers(0, 8), states, st.integers(0, 3))
batch_lists = st.lists(batches, max_size=6)
start_offsets = st.one_of(st.just(-1), st.integers(0, 45))


@given(batch_lists, batch_lists, start_offsets)
def test_every_offset_takes_its_highest_priority_batch(
    current: list[StateBatch], new: list[StateBatch], start_offset: int
) -> None:
    result = combine_state_batches(current, new, start_offset=start_offset)
    assert expand(result) == per_offset(current + new, start_offset)
    for left, right in pairwise(result):  # sorted, apart, maximal
        assert left.first_offset <= left.last_offset < right.first_offset
        assert left.last_offset + 1 < right.first_offset or \
            (left.delivery_state, left.delivery_count) != (right.delivery_state, right.delivery_count)


@given(batch_lists, batch_lists, batch_lists)
def test_combining_is_a_join(first: list[StateBatch], second: list[StateBatch], third: list[StateBatch]) -> None:
    def join(x: tuple[StateBatch, ...] | list[StateBatch], y: tuple[StateBatch, ...] | list[StateBatch]
             ) -> tuple[StateBatch, ...]:
        return combine_state_batches(x, y, start_offset=-1)

    assert join(join(first, second), third) == join(first, join(second, third))
    assert join(first, second) == join(second, first)
    assert join(join(first, second), second) == join(first, second)
