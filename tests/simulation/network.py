"""The simulated network between the nodes: seeded delay, drop, duplicate, reorder, partitions.

A message from ``source`` to ``destination`` is delivered zero, one or two times, each after a
seeded delay. Without the ``reorder`` fault a link is FIFO (as a TCP connection is): a message
is never delivered before the one sent earlier on the same link. A partition is a set of
blocked directed links (``(source, destination)`` pairs); partitions overlap freely (a count
per link) and each heals on its own. What happens to the sender of a message that is not
delivered is the simulator's business (the shell's request timeout).

With ``codec`` on, every message goes through the real codec (``protocol.messages``: encode
then decode at the message's latest version), as the daemon's shell would send it.

State: owned by the one ``Simulation`` that drives it (single-threaded).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from protocol.codec import Message

Link = tuple[int, int]
REORDER_EXTRA_MS = 60  # a reordered message is late by up to this much


@dataclass(frozen=True)
class Partition:
    """A set of blocked directed links, with a description for the trace."""

    description: str
    links: frozenset[Link]


class Network:
    def __init__(self, rng: random.Random, faults: Sequence[str], *, codec: bool) -> None:
        self.rng = rng
        self.codec = codec
        self.max_delay_ms = rng.randint(2, 15)
        self.drop_rate = rng.uniform(0.005, 0.08) if "drop" in faults else 0.0
        self.duplicate_rate = rng.uniform(0.005, 0.05) if "duplicate" in faults else 0.0
        self.reorder_rate = rng.uniform(0.05, 0.3) if "reorder" in faults else 0.0
        self._blocked: Counter[Link] = Counter()
        self._last_delivery_ms: dict[Link, int] = {}

    def block(self, partition: Partition) -> None:
        self._blocked.update(partition.links)

    def unblock(self, partition: Partition) -> None:
        self._blocked.subtract(partition.links)
        self._blocked = +self._blocked  # drop the links whose count fell to 0

    def heal(self) -> None:
        """The recovery phase: every link up, nothing dropped, duplicated or reordered."""
        self._blocked.clear()
        self.drop_rate = self.duplicate_rate = self.reorder_rate = 0.0

    def connected(self, source: int, destination: int) -> bool:
        return not self._blocked or (source, destination) not in self._blocked

    def delivery_times(self, source: int, destination: int, now_ms: int) -> list[int]:
        """When the message just sent on this link arrives: [] if lost, two times if duplicated."""
        if not self.connected(source, destination):
            return []
        rng = self.rng
        if self.drop_rate and rng.random() < self.drop_rate:
            return []
        copies = 2 if self.duplicate_rate and rng.random() < self.duplicate_rate else 1
        return [self._arrival(source, destination, now_ms) for _ in range(copies)]

    def refused_after_ms(self) -> int:
        """How long a connection attempt to a stopped node takes to fail."""
        return self.rng.randint(1, self.max_delay_ms)

    def transcode(self, message: Message) -> Message:
        """The message as the other side decodes it (a no-op unless ``codec`` is on)."""
        if not self.codec:
            return message
        version = type(message).MAX_VERSION
        return type(message).decode(message.encode(version), version)

    def _arrival(self, source: int, destination: int, now_ms: int) -> int:
        rng = self.rng
        arrival = now_ms + rng.randint(1, self.max_delay_ms)
        if self.reorder_rate and rng.random() < self.reorder_rate:
            return arrival + rng.randint(1, REORDER_EXTRA_MS)  # may overtake or be overtaken
        link = (source, destination)
        arrival = max(arrival, self._last_delivery_ms.get(link, 0))
        self._last_delivery_ms[link] = arrival
        return arrival


def random_partition(rng: random.Random, voter_ids: Sequence[int],
                     observer_ids: Sequence[int]) -> Partition:
    """One of: a node isolated, the nodes split in two groups, or a one-way link failure."""
    nodes = [*voter_ids, *observer_ids]
    kind = rng.choice(("isolate", "split", "one-way"))
    if kind == "isolate":
        node = rng.choice(nodes)
        return Partition(f"isolate {node}", frozenset(_between([node], _others(nodes, [node]))))
    if kind == "split":
        shuffled = list(voter_ids)
        rng.shuffle(shuffled)
        size = rng.randint(1, max(1, len(shuffled) - 1))
        side = shuffled[:size] + [node for node in observer_ids if rng.random() < 0.5]
        other = _others(nodes, side)
        return Partition(f"split {sorted(side)} | {sorted(other)}",
                         frozenset(_between(side, other)))
    source = rng.choice(nodes)
    destinations = rng.sample(_others(nodes, [source]), rng.randint(1, len(nodes) - 1))
    return Partition(f"one-way {source} -/-> {sorted(destinations)}",
                     frozenset((source, destination) for destination in destinations))


def _others(nodes: Sequence[int], excluded: Iterable[int]) -> list[int]:
    left_out = set(excluded)
    return [node for node in nodes if node not in left_out]


def _between(side: Sequence[int], other: Sequence[int]) -> list[Link]:
    return [link for a in side for b in other for link in ((a, b), (b, a))]
