"""Where each record of a batch's records section starts, mostly without a Python loop.

A record is ``length varint | length bytes``, so record k+1 starts where record k ends: a
chain that a Python loop walks at a few hundred nanoseconds a record, the largest cost of a
read. Instead, for all the batches of a chunk at once, with numpy:

1. Guess: each batch's records all have the size of its first one, so record k of a batch
   starts at ``section_start + k * first_size``.
2. Check every guess at once: ``guess[k] + size_at(guess[k]) == guess[k + 1]`` (the
   section's end after the last record). Record 0 starts at the section's start for sure,
   so by induction every record up to the first failed check is where the guess says.
3. Repair: at a batch's first failure f, record f+1 truly starts at ``guess[f] +
   size_at(guess[f])``; the batch's later records are guessed anew from there, all of the
   size of record f+1 (a size change, e.g. the offset delta varint growing from one byte to
   two at record 64, holds for the records that follow). Back to 2.

Producers write batches of records of equal or nearly equal size, which take one to three
rounds. After ``MAX_ROUNDS`` the batches still unresolved are walked in Python from their
first unverified record, so the result is always exact, whatever the sizes: guesses only
decide how much is checked at once, never what is accepted.

Pure functions: no I/O, no state.
"""

from __future__ import annotations

import numpy as np

from protocol.errors import CorruptMessageError

__all__ = ["PADDING", "record_starts"]

MAX_ROUNDS = 4
PADDING = 16  # zero bytes the caller appends after the sections: reads past a guess stay inside
_UNKNOWN = -(1 << 40)  # the size at a guess whose length varint is longer than 3 bytes


def record_starts(buffer: np.ndarray, size: int, section_starts: np.ndarray,
                  counts: np.ndarray) -> np.ndarray:
    """The start of every record (its length varint) of the batches whose records sections
    lie back to back in ``buffer[:size]`` (``buffer`` has ``PADDING`` more bytes)."""
    section_ends = np.append(section_starts[1:], size)
    if (counts <= 0).any() or (section_ends <= section_starts).any():
        raise CorruptMessageError("a record batch declares records but has none")
    first_index = np.cumsum(counts) - counts
    batch_of = np.repeat(np.arange(len(counts)), counts)
    index_in_batch = np.arange(int(counts.sum()), dtype=np.int64) - first_index[batch_of]
    first_size = _sizes(buffer, section_starts)
    if (first_size <= 0).any():  # the only check on a sure position: fall back to exact code
        return _walk_all(buffer, size, section_starts, counts)
    guess = section_starts[batch_of] + index_in_batch * first_size[batch_of]
    last_of_batch = first_index + counts - 1
    for round_number in range(MAX_ROUNDS + 1):
        # no record starts in the last byte, so a guess moved there fails its check
        np.clip(guess, 0, size - 1, out=guess)
        ends = guess + _sizes(buffer, guess)
        expected = np.empty_like(guess)
        expected[:-1] = guess[1:]
        expected[last_of_batch] = section_ends
        failed = np.flatnonzero(ends != expected)
        if failed.size == 0:
            return guess
        first_failure = _first_per_batch(failed, batch_of, len(counts))
        broken = np.flatnonzero(first_failure >= 0)
        at = first_failure[broken]
        if (round_number == MAX_ROUNDS or (at == last_of_batch[broken]).any()
                or (ends[at] <= guess[at]).any()):
            return _finish(buffer, size, guess, first_failure, section_ends, counts, first_index)
        restart = ends[at]  # where record at+1 truly starts
        stride = _sizes(buffer, np.minimum(restart, size - 1))
        if (stride <= 0).any():
            return _finish(buffer, size, guess, first_failure, section_ends, counts, first_index)
        _reguess(guess, broken, at, restart, stride, counts, first_index)
    raise AssertionError("unreachable: the last round finishes in Python")


def _reguess(guess: np.ndarray, broken: np.ndarray, at: np.ndarray, restart: np.ndarray,
             stride: np.ndarray, counts: np.ndarray, first_index: np.ndarray) -> None:
    """In each broken batch, records after ``at`` are guessed anew from ``restart`` on, all of
    the size of the record there."""
    after = first_index[broken] + counts[broken] - at - 1  # records to re-guess per batch
    owner = np.repeat(np.arange(len(broken)), after)
    step = np.arange(int(after.sum()), dtype=np.int64) - np.repeat(np.cumsum(after) - after, after)
    guess[np.repeat(at + 1, after) + step] = restart[owner] + step * stride[owner]


def _sizes(buffer: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``varint size + length`` of the records at ``positions`` (1-3 byte length varints;
    ``_UNKNOWN`` for longer ones), as int64; a negative length gives a size <= 0."""
    first = buffer[positions].astype(np.int64)
    second = buffer[positions + 1].astype(np.int64)
    one = first < 0x80
    two = ~one & (second < 0x80)
    if one.all():  # records of up to 63 bytes
        return 1 + ((first >> 1) ^ -(first & 1))
    raw = (first & 0x7F) | ((second & 0x7F) << 7)
    if two.all():  # 64 to 8191 bytes: most records
        return 2 + ((raw >> 1) ^ -(raw & 1))
    third = buffer[positions + 2].astype(np.int64)
    three = ~one & ~two & (third < 0x80)
    raw = np.where(one, first, np.where(three, raw | (third << 14), raw))
    sizes = np.where(one, 1, np.where(two, 2, 3)) + ((raw >> 1) ^ -(raw & 1))
    sizes[~(one | two | three)] = _UNKNOWN
    return sizes


def _first_per_batch(failed: np.ndarray, batch_of: np.ndarray, batches: int) -> np.ndarray:
    """For each batch, the index of its first failed check, or -1."""
    first = np.full(batches, -1, dtype=np.int64)
    owners = batch_of[failed]
    # failed is sorted, so each owner's first entry is where the owner changes
    starts = np.flatnonzero(np.diff(owners, prepend=-1))
    first[owners[starts]] = failed[starts]
    return first


def _finish(buffer: np.ndarray, size: int, guess: np.ndarray, first_failure: np.ndarray,
            section_ends: np.ndarray, counts: np.ndarray, first_index: np.ndarray) -> np.ndarray:
    """Walk, in Python, each unresolved batch from its first unverified record."""
    data = buffer[:size + 8].tobytes()
    result = guess.copy()
    for batch in np.flatnonzero(first_failure >= 0).tolist():
        failure = int(first_failure[batch])  # records up to here are verified
        start = int(guess[failure])
        stop = int(section_ends[batch])
        positions = _walk(data, start, stop)
        expected = int(first_index[batch] + counts[batch]) - failure
        if len(positions) != expected:
            raise CorruptMessageError(
                f"a record batch declares {int(counts[batch])} records, its records section "
                f"holds {int(counts[batch]) - expected + len(positions)}")
        result[failure:failure + expected] = positions
    return result


def _walk_all(buffer: np.ndarray, size: int, section_starts: np.ndarray,
              counts: np.ndarray) -> np.ndarray:
    data = buffer[:size + 8].tobytes()
    section_ends = np.append(section_starts[1:], size)
    result: list[int] = []
    for start, stop, count in zip(section_starts.tolist(), section_ends.tolist(),
                                  counts.tolist(), strict=True):
        positions = _walk(data, start, stop)
        if len(positions) != count:
            raise CorruptMessageError(f"a record batch declares {count} records, its records "
                                      f"section holds {len(positions)}")
        result.extend(positions)
    return np.array(result, dtype=np.int64)


def _walk(data: bytes, position: int, stop: int) -> list[int]:
    """Record starts from ``position`` to ``stop``, one length varint at a time."""
    positions: list[int] = []
    while position < stop:
        positions.append(position)
        value, shift, index = 0, 0, position
        while True:
            if index - position == 5 or index >= stop:
                raise CorruptMessageError(f"the record length varint at byte {position} of a "
                                          "records section is malformed")
            byte = data[index]
            value |= (byte & 0x7F) << shift
            index += 1
            if byte < 0x80:
                break
            shift += 7
        value &= 0xFFFFFFFF
        length = (value >> 1) ^ -(value & 1)
        if length < 0:
            raise CorruptMessageError(f"negative record length {length} at byte {position} of "
                                      "a records section")
        position = index + length
    if position != stop:
        raise CorruptMessageError("a record runs past the end of its batch's records section")
    return positions
