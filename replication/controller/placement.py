"""Replica placement for new partitions: the semantics of Kafka's ``StripedReplicaPlacer``.

Which brokers may hold a new replica (``usable_brokers``): every registered broker that is not
in controlled shutdown, fenced or not (Kafka's ``BrokerHeartbeatManager.usableBrokers``).

Constraints (a placement that cannot meet them raises INVALID_REPLICATION_FACTOR, with Kafka's
messages, checked in Kafka's order):
- the replication factor is positive;
- at least one usable broker is unfenced: a leader is always an unfenced broker;
- the replication factor is at most the number of usable brokers: the replicas of a partition
  are distinct brokers.

Goals, in priority order (each partition's replica list is its leader first):
1. spread a partition's replicas over racks: a partition spans min(RF, racks) racks (brokers
   without a rack form one rack);
2. prefer unfenced brokers to fenced ones (a fenced follower is chosen only when the unfenced
   brokers of the racks it may use are taken; it joins the ISR once it catches up);
3. spread leaders evenly: leaders are taken in turn from a cycle over the unfenced brokers,
   racks interleaved, so over one placement no unfenced broker leads more than one partition
   more than another;
4. spread all replicas evenly: a follower is the eligible broker with the fewest replicas placed
   so far, ties broken by a rotating order (greedy, so near-even: without racks or fencing the
   property tests find replica counts within 2 of each other).
The randomness (which broker the cycle starts at, the order within racks) comes from the ``rng``
passed in, so a seeded ``random.Random`` gives a reproducible placement. This is our own
algorithm for Kafka's goals, not a port of Kafka's code: Kafka's striped walk can favour a
broker when rack sizes and the replication factor share a divisor, which goal 3 rules out.

Pure functions; no state between calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from random import Random

from protocol.errors import InvalidReplicationFactorError
from replication.metadata.image import MetadataImage

__all__ = ["UsableBroker", "place_replicas", "usable_brokers"]


@dataclass(frozen=True, slots=True)
class UsableBroker:
    broker_id: int
    rack: str | None = None
    fenced: bool = False


def usable_brokers(image: MetadataImage) -> list[UsableBroker]:
    """The registered brokers not in controlled shutdown, by id."""
    return [
        UsableBroker(registration.broker_id, registration.rack, registration.fenced)
        for registration in sorted(image.brokers.by_id.values(), key=lambda r: r.broker_id)
        if not registration.in_controlled_shutdown
    ]


def place_replicas(
    brokers: Sequence[UsableBroker], num_partitions: int, replication_factor: int, rng: Random
) -> list[list[int]]:
    """``num_partitions`` replica lists of ``replication_factor`` brokers, leader first."""
    _check(brokers, replication_factor)
    leaders = _leader_cycle(brokers, rng)
    start = rng.randrange(len(leaders))
    order = list(brokers)
    rng.shuffle(order)
    position = {broker.broker_id: index for index, broker in enumerate(order)}
    counts: Counter[int] = Counter()
    placements = []
    for partition in range(num_partitions):
        leader = leaders[(start + partition) % len(leaders)]
        replicas = [leader]
        counts[leader.broker_id] += 1
        for _ in range(1, replication_factor):
            follower = _next_follower(order, replicas, counts, position, partition)
            replicas.append(follower)
            counts[follower.broker_id] += 1
        placements.append([broker.broker_id for broker in replicas])
    return placements


def _check(brokers: Sequence[UsableBroker], replication_factor: int) -> None:
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Invalid replication factor {replication_factor}: the replication factor must be "
            "positive.")
    if all(broker.fenced for broker in brokers):
        raise InvalidReplicationFactorError("All brokers are currently fenced.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"The target replication factor of {replication_factor} cannot be reached because "
            f"only {len(brokers)} broker(s) are registered.")


def _leader_cycle(brokers: Sequence[UsableBroker], rng: Random) -> list[UsableBroker]:
    """The unfenced brokers with the racks interleaved: the i-th of every rack, then the
    (i+1)-th, ... (racks and the brokers within them in a random order)."""
    by_rack: dict[str | None, list[UsableBroker]] = {}
    for broker in brokers:
        if not broker.fenced:
            by_rack.setdefault(broker.rack, []).append(broker)
    racks = list(by_rack.values())
    rng.shuffle(racks)
    for rack in racks:
        rng.shuffle(rack)
    depth = max(len(rack) for rack in racks)
    return [rack[index] for index in range(depth) for rack in racks if index < len(rack)]


def _next_follower(
    order: list[UsableBroker], chosen: list[UsableBroker], counts: Counter[int],
    position: dict[int, int], partition: int,
) -> UsableBroker:
    taken = {broker.broker_id for broker in chosen}
    racks_used = Counter(broker.rack for broker in chosen)

    def preference(broker: UsableBroker) -> tuple[int, bool, int, int]:
        rotation = (position[broker.broker_id] - partition) % len(order)
        return racks_used[broker.rack], broker.fenced, counts[broker.broker_id], rotation

    return min((broker for broker in order if broker.broker_id not in taken), key=preference)
