"""KIP-951 leader hints: who leads a partition now, for a client told it asked the wrong broker.

When a partition answers NOT_LEADER_OR_FOLLOWER (Produce v10+) or NOT_LEADER_OR_FOLLOWER /
FENCED_LEADER_EPOCH (Fetch v16+), Kafka puts the partition's current leader and leader epoch in
the partition's answer (``current_leader``) and the leaders' endpoints at the request's listener
in the response (``node_endpoints``), so the client moves without a Metadata round trip.

Where the answer comes from (Kafka's ``KafkaApis.getCurrentLeader``): the partition hosted here
when there is one (its leader and leader epoch follow the image), else the metadata image; a
partition neither knows is (-1, -1). An endpoint is given only for a leader clients may use:
Kafka's alive brokers, which are ``Broker.live_brokers`` — registered and unfenced in KRaft,
this node on a single node — at the listener the request came in on. A leader with no such
endpoint still gets its id and epoch.

State: none kept; a ``LeaderHints`` lives for one response, on the broker's event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.broker import Broker

__all__ = ["CurrentLeader", "Endpoint", "LeaderHints"]

Endpoint = tuple[int, str, int, "str | None"]  # (node id, host, port, rack)


@dataclass(frozen=True, slots=True)
class CurrentLeader:
    leader_id: int
    leader_epoch: int


class LeaderHints:
    """The current leaders of the partitions one response names, and their endpoints."""

    def __init__(self, broker: Broker, listener_name: str) -> None:
        self._broker = broker
        self._listener_name = listener_name
        self._live: dict[int, Endpoint] | None = None  # looked up at the first hint
        self.endpoints: dict[int, Endpoint] = {}  # the hinted leaders', by node id

    def current_leader(self, topic: str, index: int) -> CurrentLeader:
        """The leader and leader epoch of ``topic``-``index``, its endpoint remembered."""
        leader = self._lookup(topic, index)
        if leader.leader_id >= 0:
            endpoint = self._live_endpoints().get(leader.leader_id)
            if endpoint is not None:
                self.endpoints[leader.leader_id] = endpoint
        return leader

    def hinted_endpoints(self) -> list[Endpoint]:
        """The endpoints of the leaders hinted so far, by node id."""
        return [self.endpoints[node_id] for node_id in sorted(self.endpoints)]

    def _lookup(self, topic: str, index: int) -> CurrentLeader:
        manager = self._broker.replica_manager
        partition = manager.partition(topic, index)
        if partition is not None:
            return CurrentLeader(partition.leader_id, partition.leader_epoch)
        if manager.metadata_log is None:
            return CurrentLeader(-1, -1)
        image_topic = manager.image.topics_by_name.get(topic)
        registration = None if image_topic is None else image_topic.partitions.get(index)
        if registration is None:
            return CurrentLeader(-1, -1)
        return CurrentLeader(registration.leader, registration.leader_epoch)

    def _live_endpoints(self) -> dict[int, Endpoint]:
        if self._live is None:
            self._live = {entry[0]: entry for entry in self._broker.live_brokers(self._listener_name)}
        return self._live
