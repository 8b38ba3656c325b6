"""Reading a failover's phases from the nodes' logs.

The daemon logs every change of its metadata quorum state on one line (``broker.quorum``):

    2026-11-26 00:32:00,290 INFO samsa.broker.quorum: metadata quorum epoch 17: leader unknown
    2026-11-26 00:32:00,820 INFO samsa.broker.quorum: metadata quorum epoch 18: leader 1

(``asctime``: local time, milliseconds truncated). After the active controller is killed at
``killed_at_s`` (``time.time()``), the survivors' lines split the failover into:

- detection: until the first survivor is in an epoch above the killed leader's with no leader —
  it stood for election because no fetch was answered within
  ``controller.quorum.fetch.timeout.ms``, or it heard such a candidate's Vote;
- election: from there until the first survivor names a new leader; ``epochs`` is how many
  epochs that took (1: the first vote won; more: split or refused votes, each followed by an
  election backoff of up to ``controller.quorum.election.backoff.max.ms``);
- later elections: epochs begun after that first new leader and before ``until_s`` (when the
  cluster took a write again): the new leader lost its leadership before it served one.

Pure functions over text; no state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

_TIME = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
_LEADER_CHANGE = re.compile(
    _TIME + r" INFO samsa\.broker\.quorum: metadata quorum epoch (\d+): leader (\d+|unknown)$",
    re.MULTILINE)
_UNFENCED = re.compile(_TIME + r" INFO samsa\.broker\.lifecycle: broker (\d+) unfenced$",
                       re.MULTILINE)


def log_time_s(stamp: str) -> float:
    """A log line's ``asctime`` as seconds since the epoch (the local time zone, as logged)."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


@dataclass(frozen=True)
class LeaderChange:
    at_s: float  # time.time() scale
    node_id: int  # whose log says it
    epoch: int
    leader_id: int | None


def leader_changes(node_id: int, text: str) -> list[LeaderChange]:
    return [LeaderChange(log_time_s(stamp), node_id, int(epoch),
                         None if leader == "unknown" else int(leader))
            for stamp, epoch, leader in _LEADER_CHANGE.findall(text)]


def unfenced_times(node_id: int, text: str) -> list[float]:
    """When ``node_id``'s broker logged that it was unfenced, in log order."""
    return [log_time_s(stamp) for stamp, broker in _UNFENCED.findall(text)
            if int(broker) == node_id]


@dataclass(frozen=True)
class FailoverPhases:
    detection_s: float | None  # kill -> a survivor in a newer epoch without a leader
    election_s: float | None  # that -> a survivor names the new leader
    epochs: int | None  # epochs the election went through
    new_leader: int | None
    later_elections: int | None = None  # epochs begun after it, before ``until_s``

    def to_json(self) -> dict[str, float | int | None]:
        return {"detection_s": _rounded(self.detection_s), "election_s": _rounded(self.election_s),
                "epochs": self.epochs, "new_leader": self.new_leader,
                "later_elections": self.later_elections}


def failover_phases(changes: Iterable[LeaderChange], *, killed_at_s: float, old_epoch: int,
                    old_leader: int, until_s: float | None = None) -> FailoverPhases:
    """The phases of the failover that began at ``killed_at_s`` from the survivors' leader
    changes (lines of the killed node and lines before the kill are ignored; the log's
    milliseconds are truncated, so a line may read up to 1 ms before the kill)."""
    after = sorted((change for change in changes if change.node_id != old_leader
                    and change.at_s >= killed_at_s - 0.001 and change.epoch > old_epoch),
                   key=lambda change: change.at_s)
    standing = next((change for change in after if change.leader_id is None), None)
    elected = next((change for change in after if change.leader_id is not None), None)
    detection_s = None if standing is None else max(0.0, standing.at_s - killed_at_s)
    if elected is None:
        return FailoverPhases(detection_s, None, None, None)
    election_s = None if standing is None else max(0.0, elected.at_s - standing.at_s)
    later = None if until_s is None else max(
        (change.epoch for change in after if change.at_s <= until_s), default=elected.epoch
    ) - elected.epoch
    return FailoverPhases(detection_s, election_s, elected.epoch - old_epoch, elected.leader_id,
                          later)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
