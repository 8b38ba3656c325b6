"""The aborted-transaction index (``.txnindex``): Kafka's 34-byte entries, lookups as Kafka's
``collectAbortedTxns``, truncation, and a file cut at any byte."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.errors import CorruptIndexError
from storage.transaction_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    decode_entries,
)

ENTRIES = [
    AbortedTxn(producer_id=7, first_offset=0, last_offset=10, last_stable_offset=11),
    AbortedTxn(producer_id=8, first_offset=5, last_offset=20, last_stable_offset=12),
    AbortedTxn(producer_id=9, first_offset=12, last_offset=30, last_stable_offset=31),
]


def index_with(tmp_path: Path, entries: list[AbortedTxn], base_offset: int = 0) -> TransactionIndex:
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", base_offset)
    for entry in entries:
        index.append(entry)
    return index


def test_entry_bytes_are_kafkas_aborted_txn() -> None:
    entry = AbortedTxn(producer_id=0x0102030405060708, first_offset=3, last_offset=9,
                       last_stable_offset=10)
    data = entry.encode()
    assert len(data) == ENTRY_SIZE == 34
    assert data == struct.pack(">hqqqq", 0, 0x0102030405060708, 3, 9, 10)


def test_the_file_is_created_at_the_first_append_and_reads_back(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert index.entries == [] and not index.path.exists()
    index = index_with(tmp_path, ENTRIES)
    assert index.path.read_bytes() == b"".join(entry.encode() for entry in ENTRIES)
    assert TransactionIndex(index.path, 0).entries == ENTRIES


def test_last_offsets_must_increase(tmp_path: Path) -> None:
    index = index_with(tmp_path, ENTRIES)
    with pytest.raises(ValueError, match="does not follow"):
        index.append(AbortedTxn(1, 0, 30, 31))


@pytest.mark.parametrize(
    ("fetch_offset", "upper_bound", "expected", "complete"),
    [
        (0, 5, [0], True),  # entry 0 reaches LSO 11 >= 5: nothing later can matter
        (0, 12, [0, 1], True),  # entry 1's LSO 12 reaches the bound
        (11, 12, [1], True),  # entry 0 ended at 10, before the fetch
        (21, 40, [2], False),  # no entry's LSO reaches 40: the next segment may add more
        (31, 40, [], False),
    ],
)
def test_collect_matches_kafkas_rules(
    tmp_path: Path, fetch_offset: int, upper_bound: int, expected: list[int], complete: bool
) -> None:
    result = index_with(tmp_path, ENTRIES).collect(fetch_offset, upper_bound)
    assert result.aborted == [ENTRIES[i] for i in expected]
    assert result.complete is complete


@pytest.mark.parametrize(("offset", "kept"), [(0, 0), (10, 0), (11, 1), (20, 1), (21, 2), (31, 3)])
def test_truncate_to_drops_markers_at_and_above(tmp_path: Path, offset: int, kept: int) -> None:
    index = index_with(tmp_path, ENTRIES)
    index.truncate_to(offset)
    assert index.entries == ENTRIES[:kept]
    assert TransactionIndex(index.path, 0).entries == ENTRIES[:kept]


def test_sanity_check_rejects_entries_below_the_base_or_out_of_order(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    path.write_bytes(AbortedTxn(1, 0, 50, 51).encode())
    with pytest.raises(CorruptIndexError, match="below the base offset"):
        TransactionIndex(path, 100).sanity_check()
    path.write_bytes(AbortedTxn(1, 100, 150, 151).encode() + AbortedTxn(2, 100, 120, 151).encode())
    with pytest.raises(CorruptIndexError, match="do not increase"):
        TransactionIndex(path, 100).sanity_check()
    path.write_bytes(struct.pack(">hqqqq", 1, 1, 100, 101, 102))
    with pytest.raises(CorruptIndexError, match="version 1"):
        TransactionIndex(path, 100).sanity_check()
    TransactionIndex(tmp_path / "absent.txnindex", 100).sanity_check()  # no file: nothing wrong


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=0, max_value=len(ENTRIES) * ENTRY_SIZE))
def test_a_file_cut_at_any_byte_reads_its_whole_entries_and_appends_cleanly(
    tmp_path_factory: pytest.TempPathFactory, cut: int
) -> None:
    directory = tmp_path_factory.mktemp("txnindex")
    index = index_with(directory, ENTRIES)
    data = index.path.read_bytes()
    index.path.write_bytes(data[:cut])  # a crash in the middle of an append
    whole = cut // ENTRY_SIZE
    reopened = TransactionIndex(index.path, 0)
    assert reopened.entries == ENTRIES[:whole] == decode_entries(data[:cut])
    extra = AbortedTxn(42, 40, 50, 51)
    reopened.append(extra)  # the partial entry is cut off first
    assert TransactionIndex(index.path, 0).entries == [*ENTRIES[:whole], extra]
    assert index.path.stat().st_size == (whole + 1) * ENTRY_SIZE


def test_rename_follows_the_file_and_a_missing_one(tmp_path: Path) -> None:
    index = index_with(tmp_path, ENTRIES[:1])
    index.rename_to(tmp_path / "renamed.txnindex")
    assert (tmp_path / "renamed.txnindex").exists() and not (tmp_path / "00000000000000000000.txnindex").exists()
    empty = TransactionIndex(tmp_path / "none.txnindex", 0)
    empty.rename_to(tmp_path / "other.txnindex")  # nothing to move
    assert empty.path == tmp_path / "other.txnindex"
    empty.reset()
    assert not empty.path.exists()
