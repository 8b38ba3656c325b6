"""Follower: ``leader_id`` leads ``epoch``; this node (voter or observer) fetches from it.

One Fetch (or FetchSnapshot) is in flight at a time (``fetch_in_flight``). A successful
answer appends, flushes and moves the fetch timer (``fetch_deadline_ms``) forward; when no
successful Fetch arrives within fetch_timeout_ms a voter stands for election and an observer
goes back to looking for the leader. EndQuorumEpoch from the leader shortens the timer.

A voter's timer is fetch_timeout_ms plus ``stagger_ms``, drawn once per epoch from
[0, election_timeout_ms / 2): Kafka's follower stands exactly at the fetch timeout, so two
followers that last fetched together (held fetches are answered together) stand in the same
millisecond and split the vote — 18 of 20 controller failovers did in the bench, each costing a
randomized election timeout more. The stagger is Raft's own remedy (randomized election
timeouts), applied where KRaft's followers start elections.
``high_watermark`` is None until the leader has told one in this epoch, then only grows; it
is never above the local log end. ``snapshot_id``/``snapshot_buffer`` hold a snapshot being
downloaded (the leader answered Fetch with a snapshot id).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replication.raft.log import SnapshotId


@dataclass(slots=True)
class FollowerState:
    epoch: int
    leader_id: int
    voted_id: int | None
    fetch_deadline_ms: int
    stagger_ms: int = 0  # added to fetch_timeout_ms for a voter (see the module docstring)
    high_watermark: int | None = None
    fetch_in_flight: int | None = None
    next_fetch_ms: int = 0
    snapshot_id: SnapshotId | None = None
    snapshot_buffer: bytearray = field(default_factory=bytearray)
    name: str = "follower"

    def start_snapshot(self, snapshot_id: SnapshotId) -> None:
        self.snapshot_id = snapshot_id
        self.snapshot_buffer = bytearray()

    def stop_snapshot(self) -> None:
        self.snapshot_id = None
        self.snapshot_buffer = bytearray()
