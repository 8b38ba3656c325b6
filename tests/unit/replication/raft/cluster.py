"""A hand-driven cluster of real RaftNodes for unit tests: no sockets, no threads, no sleeps.

The test decides what is delivered: ``deliver()`` moves every queued Send (optionally only
some, or dropping some) to its destination at the current time; ``advance(ms)`` moves the
clock and polls every node; ``run_until(condition)`` alternates both in 1 ms steps.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from replication.raft.config import RaftConfig
from replication.raft.memory_log import MemoryRaftLog
from replication.raft.node import RaftNode, RaftRequest, RaftResponse, Send
from replication.raft.quorum_state import MemoryQuorumStateStore


class Cluster:
    def __init__(
        self, voter_ids: Iterable[int] = (1, 2, 3), *, observer_ids: Iterable[int] = (),
        config: RaftConfig | None = None, seed: int = 0,
    ) -> None:  # fmt: skip
        self.voter_ids = tuple(voter_ids)
        self.config = config or RaftConfig()
        self.now_ms = 0
        self.seed = seed
        self.logs: dict[int, MemoryRaftLog] = {}
        self.stores: dict[int, MemoryQuorumStateStore] = {}
        self.nodes: dict[int, RaftNode] = {}
        self.down: set[int] = set()
        self.isolated: set[int] = set()  # cut off from everyone (requests time out)
        self.in_flight: list[tuple[int, Send]] = []  # (source, send)
        for node_id in (*self.voter_ids, *observer_ids):
            self.logs[node_id] = MemoryRaftLog()
            self.stores[node_id] = MemoryQuorumStateStore()
            self.start(node_id)

    def start(self, node_id: int) -> RaftNode:
        self.down.discard(node_id)
        node = RaftNode(
            node_id=node_id, voter_ids=self.voter_ids, log=self.logs[node_id],
            store=self.stores[node_id], config=self.config,
            rng=random.Random(self.seed * 1000 + node_id), now_ms=self.now_ms,
        )  # fmt: skip
        self.nodes[node_id] = node
        return node

    def crash(self, node_id: int) -> None:
        self.down.add(node_id)
        self.logs[node_id].crash()
        self.in_flight = [
            (s, send) for s, send in self.in_flight if node_id not in (s, send.destination)
        ]

    def collect(self) -> None:
        for node_id, node in self.nodes.items():
            if node_id not in self.down:
                self.in_flight.extend((node_id, send) for send in node.take_sends())

    def deliver(self, keep: Callable[[int, Send], bool] = lambda source, send: True) -> int:
        """Deliver every queued send for which ``keep`` is true; the rest are dropped (a
        dropped request is answered with None, as the shell does). Returns how many."""
        self.collect()
        batch, self.in_flight = self.in_flight, []
        for source, send in batch:
            target = self.nodes[send.destination]
            if send.destination in self.down:
                continue
            cut = source in self.isolated or send.destination in self.isolated
            if cut or not keep(source, send):
                if not send.is_response:
                    self.nodes[source].handle_response(
                        self.now_ms, RaftResponse(send.destination, send.request_id, None)
                    )
                continue
            if send.is_response:
                target.handle_response(
                    self.now_ms, RaftResponse(source, send.request_id, send.message)
                )
            else:
                target.handle_request(
                    self.now_ms, RaftRequest(source, send.request_id, send.message)
                )
        return len(batch)

    def settle(self, rounds: int = 20) -> None:
        """Deliver until nothing is queued (at most ``rounds`` times)."""
        for _ in range(rounds):
            if not self.deliver():
                break

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        for node_id, node in self.nodes.items():
            if node_id not in self.down:
                node.poll(self.now_ms)

    def run_until(self, condition: Callable[[], bool], *, limit_ms: int = 20_000) -> None:
        end = self.now_ms + limit_ms
        while not condition():
            if self.now_ms >= end:
                raise AssertionError(f"condition not reached by {end} ms")
            self.deliver()
            self.advance(1)

    def leader(self) -> RaftNode | None:
        leaders = [n for i, n in self.nodes.items() if n.role == "leader" and i not in self.down]
        return leaders[0] if leaders else None

    def elect(self) -> RaftNode:
        self.run_until(lambda: self.leader() is not None and self._all_follow())
        leader = self.leader()
        assert leader is not None
        return leader

    def _all_follow(self) -> bool:
        leader = self.leader()
        return leader is not None and all(
            n.leader_id == leader.node_id and n.epoch == leader.epoch
            for i, n in self.nodes.items()
            if i not in self.down
        )
