"""The election state a voter must never forget: Kafka's ``QuorumStateStore``.

``ElectionState(epoch, leader_id, voted_id)`` is written BEFORE the node acts on it (grants a
vote, answers as a follower of a new epoch, starts an election), so a restarted node never
votes twice in an epoch nor goes back to an older one.

``FileQuorumStateStore`` keeps it in Kafka's ``quorum-state`` file (``FileQuorumStateStore``,
``QuorumStateData`` version 0), one JSON object on one line, absent ids written as -1::

    {"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}

A write goes to ``quorum-state.tmp``, is fsynced, renamed over the file, and the directory is
fsynced (``storage.fsync.fsync_directory``): the file is always whole. A file that does
not parse, or lacks a field, raises ``QuorumStateError`` naming the file and the reason.
Owned by the one node task that steps the ``RaftNode``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from replication.raft.errors import QuorumStateError
from storage.fsync import fsync, fsync_directory

__all__ = [
    "ElectionState",
    "FileQuorumStateStore",
    "MemoryQuorumStateStore",
    "QuorumStateStore",
]

_NO_ID = -1
_DATA_VERSION = 0


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int
    leader_id: int | None = None
    voted_id: int | None = None


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...


class MemoryQuorumStateStore:
    """Survives a simulated crash: it stands for the fsynced file. Counts writes for tests."""

    def __init__(self, state: ElectionState | None = None) -> None:
        self._state = state
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self._state

    def write(self, state: ElectionState) -> None:
        self._state = state
        self.writes += 1


class FileQuorumStateStore:
    """Kafka's ``quorum-state`` JSON file at ``path`` (the metadata log's directory)."""

    def __init__(
        self, path: str | os.PathLike[str], *, voter_ids: Collection[int] = (), cluster_id: str = ""
    ) -> None:
        self.path = Path(path)
        self._voter_ids = sorted(voter_ids)
        self._cluster_id = cluster_id

    def read(self) -> ElectionState | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return parse_quorum_state(text, str(self.path))

    def write(self, state: ElectionState) -> None:
        text = format_quorum_state(state, voter_ids=self._voter_ids, cluster_id=self._cluster_id)
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            fsync(file.fileno(), temporary)
        os.replace(temporary, self.path)
        fsync_directory(self.path.parent)


def format_quorum_state(
    state: ElectionState, *, voter_ids: Collection[int] = (), cluster_id: str = ""
) -> str:
    """The file's text, fields in Kafka's order (QuorumStateData, then data_version)."""
    document = {
        "clusterId": cluster_id,
        "leaderId": _NO_ID if state.leader_id is None else state.leader_id,
        "leaderEpoch": state.epoch,
        "votedId": _NO_ID if state.voted_id is None else state.voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": voter} for voter in sorted(voter_ids)],
        "data_version": _DATA_VERSION,
    }
    return json.dumps(document, separators=(",", ":"))


def parse_quorum_state(text: str, where: str = "quorum-state") -> ElectionState:
    try:
        document = json.loads(text)
    except ValueError as error:
        raise QuorumStateError(f"{where}: not JSON: {error}") from None
    if not isinstance(document, dict):
        raise QuorumStateError(f"{where}: not a JSON object")
    version = document.get("data_version")
    if version not in (0, 1):
        raise QuorumStateError(f"{where}: unsupported data_version {version!r}")
    values = {}
    for key in ("leaderId", "leaderEpoch", "votedId"):
        value = document.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise QuorumStateError(f"{where}: {key} is {value!r}, not an integer")
        values[key] = value
    if values["leaderEpoch"] < 0:
        raise QuorumStateError(f"{where}: negative leaderEpoch {values['leaderEpoch']}")
    return ElectionState(
        epoch=values["leaderEpoch"],
        leader_id=None if values["leaderId"] < 0 else values["leaderId"],
        voted_id=None if values["votedId"] < 0 else values["votedId"],
    )
