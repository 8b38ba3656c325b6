"""A leader's view of its followers and of the in-sync replica set (Kafka's ``Replica``,
``ReplicaState`` and ``PartitionState`` of ``cluster.Partition``), sans-IO: time is passed in.

Followers (``FollowerReplica``): each follower's log end offset as its last Fetch said
(``fetch_offset``: it has everything below it), and when it was last *caught up*. Kafka's rule
(``Replica.updateFetchStateOrThrow``): a fetch at or above the leader's log end offset catches
the follower up now; a fetch at or above the leader's log end offset *as of the previous
fetch* means the follower was caught up at the time of that previous fetch. A follower whose
``last_caught_up_ms`` is more than ``replica.lag.time.max.ms`` ago is out of sync.

The ISR (``IsrState``): the last committed ISR (from the metadata image or an AlterPartition
answer) and at most one change in flight to the controller (KIP-497). While a change is in
flight no other is proposed, and the *maximal* ISR is what the high watermark must wait for:

- expanding (a follower joining): the committed ISR plus the joiner — the high watermark may
  already count on it, since the controller may have committed the change;
- shrinking (followers leaving): the committed ISR, leavers included — the high watermark never
  counts on the smaller set before the controller says it is the ISR (the pending-ISR rule:
  an acknowledged write is never counted on a replica that is leaving only in the leader's
  mind... and never *not* counted on one still in the committed ISR).

``min.insync.replicas`` is checked against the committed ISR (``isr``), as Kafka does.

Invariants: the leader is in every ISR it proposes; a follower joins only once its log end
offset reaches the high watermark and the start of the leader's current epoch (Kafka's
``isFollowerInSync``), so an ISR member always holds every record below the high watermark;
the high watermark is the minimum log end offset over the maximal ISR (the leader's own
included) and never moves back.

State: owned by the partition's leader on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["UNKNOWN_OFFSET", "FollowerReplica", "IsrChange", "IsrState"]

UNKNOWN_OFFSET = -1


class FollowerReplica:
    """What the leader knows of one follower (Kafka's ``Replica``)."""

    __slots__ = ("broker_id", "last_caught_up_ms", "last_fetch_leader_end_offset",
                 "last_fetch_ms", "log_end_offset", "log_start_offset")

    def __init__(self, broker_id: int, *, now_ms: int, in_isr: bool) -> None:
        self.broker_id = broker_id
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        self.last_fetch_leader_end_offset = UNKNOWN_OFFSET
        self.last_fetch_ms = 0
        # Kafka's resetReplicaState on becoming leader: an ISR member counts as caught up now,
        # so it is not dropped before it had replica.lag.time.max.ms to fetch; others never were.
        self.last_caught_up_ms = now_ms if in_isr else 0

    def fetched(self, *, fetch_offset: int, log_start_offset: int, leader_end_offset: int,
                now_ms: int) -> None:
        """A Fetch from this follower at ``fetch_offset``, read when the leader's log ended at
        ``leader_end_offset`` (Kafka's ``updateFetchStateOrThrow``)."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_end_offset >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_ms = now_ms

    def caught_up_within(self, now_ms: int, lag_max_ms: int, leader_end_offset: int) -> bool:
        """Not lagging (Kafka's ``isCaughtUp``): at the leader's end, or caught up recently."""
        return (self.log_end_offset == leader_end_offset
                or now_ms - self.last_caught_up_ms <= lag_max_ms)

    def __repr__(self) -> str:
        return (f"FollowerReplica({self.broker_id}, leo={self.log_end_offset}, "
                f"caught_up={self.last_caught_up_ms})")


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An ISR change to propose to the controller (AlterPartition)."""

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    expanding: bool


class IsrState:
    """The committed ISR and the change in flight, if any (see the module docstring)."""

    __slots__ = ("isr", "partition_epoch", "pending")

    def __init__(self, isr: Iterable[int], partition_epoch: int) -> None:
        self.isr: tuple[int, ...] = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending: IsrChange | None = None

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """Who the high watermark waits for: the committed ISR plus any joiner in flight."""
        if self.pending is not None and self.pending.expanding:
            return tuple(dict.fromkeys((*self.isr, *self.pending.new_isr)))
        return self.isr

    def propose(self, new_isr: tuple[int, ...], leader_epoch: int) -> IsrChange | None:
        """The change to send, now pending; None when one is already in flight or nothing
        changes."""
        if self.pending is not None or set(new_isr) == set(self.isr):
            return None
        change = IsrChange(new_isr, leader_epoch, self.partition_epoch,
                           expanding=len(set(new_isr) - set(self.isr)) > 0)
        self.pending = change
        return change

    def committed(self, isr: Iterable[int], partition_epoch: int) -> None:
        """The controller committed an ISR (its AlterPartition answer, or the image): adopt it
        unless it is older than what we have; a pending change ends either way when the epoch
        moved past the one it was proposed against."""
        if partition_epoch < self.partition_epoch:
            return
        self.isr, self.partition_epoch = tuple(isr), partition_epoch
        if self.pending is not None and partition_epoch > self.pending.partition_epoch:
            self.pending = None

    def failed(self, change: IsrChange | None = None) -> None:
        """``change`` was refused: forget it; the next check proposes again. Only that change:
        a refusal of an older proposal (of an earlier leader epoch) says nothing of the one in
        flight now, which the controller may still commit — forgetting it would drop a joiner
        from the maximal ISR while the controller may already count it in. None: whatever is
        pending."""
        if change is None or change == self.pending:
            self.pending = None

    def __repr__(self) -> str:
        return f"IsrState(isr={self.isr}, epoch={self.partition_epoch}, pending={self.pending})"
