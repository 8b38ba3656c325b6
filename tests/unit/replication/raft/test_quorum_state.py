"""The quorum-state stores: Kafka's file text, round trips, damaged files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replication.raft.errors import QuorumStateError
from replication.raft.quorum_state import (
    ElectionState,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
    format_quorum_state,
    parse_quorum_state,
)

# What Kafka 3.x's FileQuorumStateStore writes for leader 1 of epoch 5 (QuorumStateData v0).
GOLDEN = (
    '{"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,'
    '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
)


def test_file_text_is_kafkas(tmp_path: Path) -> None:
    store = FileQuorumStateStore(tmp_path / "quorum-state", voter_ids=(3, 1, 2))
    store.write(ElectionState(5, 1, None))
    assert (tmp_path / "quorum-state").read_text() == GOLDEN
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_kafkas_file_reads_back() -> None:
    assert parse_quorum_state(GOLDEN) == ElectionState(5, 1, None)
    voted = GOLDEN.replace('"leaderId":1', '"leaderId":-1').replace('"votedId":-1', '"votedId":2')
    assert parse_quorum_state(voted) == ElectionState(5, None, 2)


def test_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert FileQuorumStateStore(tmp_path / "quorum-state").read() is None


ids = st.none() | st.integers(0, 2**31 - 1)


@settings(max_examples=50)
@given(epoch=st.integers(0, 2**31 - 1), leader=ids, voted=ids)
def test_round_trip(epoch: int, leader: int | None, voted: int | None) -> None:
    state = ElectionState(epoch, leader, voted)
    assert parse_quorum_state(format_quorum_state(state, voter_ids=(1, 2))) == state


def test_file_round_trip_and_overwrite(tmp_path: Path) -> None:
    store = FileQuorumStateStore(tmp_path / "quorum-state")
    for state in (ElectionState(1, None, 1), ElectionState(2, 3, None), ElectionState(2, 3, 3)):
        store.write(state)
        assert FileQuorumStateStore(tmp_path / "quorum-state").read() == state


@pytest.mark.parametrize(
    "text",
    ["", "{", "[]", GOLDEN.replace('"data_version":0', '"data_version":7'),
     GOLDEN.replace('"leaderEpoch":5', '"leaderEpoch":"5"'),
     GOLDEN.replace('"leaderEpoch":5', '"leaderEpoch":-3'),
     GOLDEN.replace('"votedId":-1,', "")],
)  # fmt: skip
def test_damaged_file_is_a_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "quorum-state"
    path.write_text(text)
    with pytest.raises(QuorumStateError, match="quorum-state"):
        FileQuorumStateStore(path).read()


def test_every_cut_of_the_file_is_an_error_or_whole(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    for cut in range(len(GOLDEN)):
        path.write_text(GOLDEN[:cut])
        with pytest.raises(QuorumStateError):
            FileQuorumStateStore(path).read()


def test_memory_store_counts_writes() -> None:
    store = MemoryQuorumStateStore()
    assert store.read() is None
    store.write(ElectionState(1))
    assert (store.read(), store.writes) == (ElectionState(1), 1)
