"""The ``.keyindex`` file format (storage.key_index): round trip, lookups against a sorted-list
oracle, and every cut or flipped byte detected."""

from __future__ import annotations

import bisect
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.key_index import (
    ActiveKeyMap,
    KeyIndex,
    decode_key_index,
    encode_key_index,
    key_hash,
    key_index_path,
    read_key_index,
    write_key_index,
)

hashes = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**64 - 1, 42]))
entry_lists = st.lists(st.tuples(hashes, st.integers(0, 2**32 - 1)), max_size=60, unique=True)


@given(
    base_offset=st.integers(0, 2**63 - 1),
    covered_bytes=st.integers(0, 2**63 - 1),
    entries=entry_lists,
)
def test_round_trip(base_offset: int, covered_bytes: int, entries: list[tuple[int, int]]) -> None:
    index = KeyIndex.from_entries(base_offset, covered_bytes, entries)
    decoded = decode_key_index(encode_key_index(index))
    assert decoded.base_offset == base_offset
    assert decoded.covered_bytes == covered_bytes
    assert list(decoded.entries()) == sorted(entries)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=entry_lists, probes=st.lists(hashes, min_size=1, max_size=5))
def test_positions_of_matches_a_sorted_list(
    tmp_path_factory: pytest.TempPathFactory, entries: list[tuple[int, int]], probes: list[int]
) -> None:
    built = KeyIndex.from_entries(0, 7, entries)
    path = tmp_path_factory.mktemp("keys") / "00000000000000000000.keyindex"
    write_key_index(path, built)
    in_file = read_key_index(path, base_offset=0, covered_bytes=7)
    assert in_file is not None and in_file.entry_count == len(entries)
    ordered = sorted(entries)
    for probe in [*probes, *(hash_value for hash_value, _ in entries[:3])]:
        low = bisect.bisect_left(ordered, (probe, -1))
        high = bisect.bisect_left(ordered, (probe + 1, -1))
        expected = [position for _, position in ordered[low:high]]
        assert built.positions_of(probe) == expected
        assert decode_key_index(encode_key_index(built)).positions_of(probe) == expected
        assert in_file.positions_of(probe) == expected  # looked up in the file


def test_active_map_seals_to_the_same_lookups() -> None:
    active = ActiveKeyMap(base_offset=7, covered_bytes=300)
    active.add_batch(0, {key_hash(b"a"), key_hash(b"b")})
    active.add_batch(100, {key_hash(b"a")})
    sealed = active.sealed()
    assert sealed.positions_of(key_hash(b"a")) == [0, 100]
    assert sealed.positions_of(key_hash(b"b")) == [0]
    assert sealed.positions_of(key_hash(b"c")) == []
    assert (sealed.base_offset, sealed.covered_bytes) == (7, 300)


@settings(max_examples=30)
@given(entries=entry_lists.filter(bool), data=st.data())
def test_every_cut_or_flipped_byte_is_detected(
    tmp_path_factory: object, entries: list[tuple[int, int]], data: st.DataObject
) -> None:
    encoded = encode_key_index(KeyIndex.from_entries(3, 99, entries))
    where = data.draw(st.integers(0, len(encoded) - 1))
    flipped = bytearray(encoded)
    flipped[where] ^= data.draw(st.integers(1, 255))
    for damaged in (encoded[:where], bytes(flipped), encoded + b"\0"):
        try:
            decode_key_index(damaged)
        except Exception as error:
            assert type(error).__name__ == "CorruptIndexError"
        else:
            raise AssertionError(f"damage at byte {where} went unseen")


def test_file_is_used_only_for_the_segment_it_describes(tmp_path: Path) -> None:
    path = key_index_path(tmp_path / "00000000000000000005.log")
    assert path.name == "00000000000000000005.keyindex"
    write_key_index(path, KeyIndex.from_entries(5, 120, [(key_hash(b"k"), 0)]))
    assert read_key_index(path, base_offset=5, covered_bytes=120) is not None
    assert read_key_index(path, base_offset=5, covered_bytes=121) is None  # cut or grown log
    assert read_key_index(path, base_offset=6, covered_bytes=120) is None
    assert read_key_index(tmp_path / "missing.keyindex", base_offset=5, covered_bytes=120) is None
    assert not list(tmp_path.glob("*.tmp"))


def test_suffixes_are_kept() -> None:
    assert key_index_path(Path("00000000000000000005.log.cleaned")).name == (
        "00000000000000000005.keyindex.cleaned")
