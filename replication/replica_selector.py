"""Fetch from the closest replica (KIP-392): which replica the leader tells a consumer to read
(the Fetch response's ``preferred_read_replica``), sans-IO.

Kafka's rules (``ReplicaManager.findPreferredReadReplica``, ``RackAwareReplicaSelector``):

- only the leader answers it, only to consumers (a follower's Fetch never gets one), only from
  Fetch v11 (which brought ``rack_id``) and only with ``replica.selector.class`` set;
- the candidates are the leader and each follower that is in the ISR, holds the fetch offset
  (``log_start_offset <= fetch_offset <= log_end_offset``, as the leader last heard from it)
  and is a live broker with an endpoint on the client's listener (``racks``);
- the rack-aware selector picks the leader when the client gave no rack, when no candidate is
  in the client's rack, or when the leader is; else the most caught-up candidate of that rack:
  the largest log end offset, then the shortest time since it was last caught up, then the
  largest broker id (``ReplicaView.comparator``);
- the leader chosen means no preferred read replica (None; -1 on the wire).

Values only: the caller passes the partition (read, never changed), the racks and the time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from replication.partition import Partition

__all__ = [
    "RACK_AWARE_REPLICA_SELECTOR", "REPLICA_SELECTOR_CLASSES", "ReplicaView",
    "preferred_read_replica", "rack_aware_select",
]

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
# replica.selector.class values Samsa accepts: Kafka's class name, or empty (leader only).
REPLICA_SELECTOR_CLASSES = ("", RACK_AWARE_REPLICA_SELECTOR)


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica as the leader sees it (Kafka's ``ReplicaView``)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int

    @property
    def caught_up_order(self) -> tuple[int, int, int]:
        """Larger is more caught up (Kafka's ``ReplicaView.comparator``)."""
        return (self.log_end_offset, -self.time_since_last_caught_up_ms, self.broker_id)


def rack_aware_select(client_rack: str | None, replicas: Sequence[ReplicaView],
                      leader: ReplicaView) -> ReplicaView:
    """Kafka's ``RackAwareReplicaSelector.select``: ``replicas`` includes ``leader``."""
    if not client_rack:
        return leader
    same_rack = [replica for replica in replicas if replica.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=lambda replica: replica.caught_up_order)


def preferred_read_replica(partition: Partition, *, client_rack: str | None,
                           racks: Mapping[int, str | None], fetch_offset: int,
                           now_ms: int) -> int | None:
    """The replica a consumer fetching ``fetch_offset`` should read instead of this leader, or
    None (this node does not lead, or the leader is the pick). ``racks``: the live brokers
    with an endpoint on the client's listener, by id, with their ``broker.rack``."""
    if not partition.is_leader:
        return None
    leader = ReplicaView(partition.node_id, racks.get(partition.node_id),
                         partition.log_end_offset, 0)
    candidates = [leader, *_in_sync_followers(partition, racks, fetch_offset, now_ms)]
    chosen = rack_aware_select(client_rack, candidates, leader)
    return None if chosen == leader else chosen.broker_id


def _in_sync_followers(partition: Partition, racks: Mapping[int, str | None],
                       fetch_offset: int, now_ms: int) -> list[ReplicaView]:
    """The followers a consumer may be sent to: in the ISR (a lagging one could keep the
    consumer behind the producers for ever), holding ``fetch_offset``, reachable."""
    isr = partition.isr
    return [
        ReplicaView(broker_id, racks[broker_id], follower.log_end_offset,
                    now_ms - follower.last_caught_up_ms)
        for broker_id, follower in sorted(partition.followers.items())
        if broker_id in isr and broker_id in racks
        and follower.log_start_offset <= fetch_offset <= follower.log_end_offset
    ]
