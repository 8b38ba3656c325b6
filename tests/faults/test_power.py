"""The power-loss cutter on plain files (a property test), and on a real node with the fsync
ledger (integration: acknowledged records with flush.messages=1 survive; the default mode
recovers a valid prefix)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.fsync import fsync, fsync_directory, open_ledger
from tests.faults.power import REVERT_RENAME, TRUNCATE, VANISH, power_loss, read_ledger


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "ledger"
    open_ledger(path)
    yield path
    open_ledger(None)


# One file's life: chunks written, each followed (or not) by an fsync.
file_lives = st.lists(
    st.tuples(st.binary(min_size=1, max_size=64), st.booleans()), min_size=0, max_size=6)


def live(path: Path, life: list[tuple[bytes, bool]]) -> tuple[bytes, int]:
    """Write the chunks, syncing where asked: the file's bytes and its durable length."""
    durable = 0
    data = b""
    with open(path, "wb") as file:
        for chunk, synced in life:
            file.write(chunk)
            data += chunk
            file.flush()
            if synced:
                fsync(file.fileno(), path)
                durable = len(data)
    return data, durable


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lives=st.lists(file_lives, min_size=1, max_size=5),
       synced_before=st.lists(st.booleans(), min_size=5, max_size=5),
       seed=st.integers(0, 2**32 - 1))
def test_each_file_ends_between_its_durable_length_and_its_length(
    tmp_path_factory: pytest.TempPathFactory, lives: list[list[tuple[bytes, bool]]],
    synced_before: list[bool], seed: int,
) -> None:
    root = tmp_path_factory.mktemp("data")
    ledger = root.parent / f"{root.name}.ledger"
    open_ledger(ledger)
    try:
        expected = {}
        for index, life in enumerate(lives):
            expected[f"f{index}"] = live(root / f"f{index}", life)
            if synced_before[index]:
                fsync_directory(root)  # f0..f<index> have durable entries from here on
    finally:
        open_ledger(None)
    listed = read_ledger([ledger]).directories.get(str(root), {})
    cuts = power_loss([root], [ledger], random.Random(seed))
    for name, (data, durable) in expected.items():
        path = root / name
        if not path.exists():
            assert name not in listed, "a file whose directory entry was synced vanished"
            assert any(cut.action == VANISH and cut.path == str(path) for cut in cuts)
            continue
        content = path.read_bytes()
        assert durable <= len(content) <= len(data)
        assert data.startswith(content)
    for cut in cuts:
        if cut.action == TRUNCATE:
            assert cut.to_length < cut.from_length


def test_a_cut_is_recorded_durable_so_a_second_power_loss_cuts_nothing(
    tmp_path: Path, ledger: Path
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    live(root / "a", [(b"x" * 100, True), (b"y" * 100, False)])
    (root / "sub").mkdir()
    (root / "sub" / "b").write_bytes(b"z" * 50)
    open_ledger(None)
    for seed in range(20):  # some seed cuts something
        if power_loss([root], [ledger], random.Random(seed)):
            break
    else:
        pytest.fail("no seed cut anything")
    before = {p: p.stat().st_size for p in root.rglob("*") if p.is_file()}
    assert power_loss([root], [ledger], random.Random(1)) == []
    assert {p: p.stat().st_size for p in root.rglob("*") if p.is_file()} == before


def test_a_rename_never_made_durable_reverts_to_its_synced_name(tmp_path: Path) -> None:
    outcomes = set()
    for seed in range(16):
        root = tmp_path / f"data{seed}"
        root.mkdir()
        ledger = tmp_path / f"ledger{seed}"
        open_ledger(ledger)
        try:
            live(root / "checkpoint.tmp", [(b"new", True)])
            fsync_directory(root)  # checkpoint.tmp's entry is durable
            os.replace(root / "checkpoint.tmp", root / "checkpoint")  # the rename is not
        finally:
            open_ledger(None)
        cuts = power_loss([root], [ledger], random.Random(seed))
        outcomes.add(tuple(cut.action for cut in cuts))
        if cuts:
            assert [cut.action for cut in cuts] == [REVERT_RENAME]
            assert (root / "checkpoint.tmp").read_bytes() == b"new"
            assert not (root / "checkpoint").exists()
        else:
            assert (root / "checkpoint").read_bytes() == b"new"
    assert outcomes == {(), (REVERT_RENAME,)}
