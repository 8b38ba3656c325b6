"""LinkProxies with plain sockets (no broker): what passes, what is black-holed, what is delayed.

Absence is never shown by waiting a fixed time: the test waits until the proxy reports the bytes
discarded (``stats``), after which they can never be forwarded, then finds the receiver empty.
"""

from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.faults.cluster import wait_until
from tests.faults.network import (
    KINDS,
    Link,
    LinkProxies,
    NetworkState,
    isolation_pairs,
    split_pairs,
)

NODES = (1, 2, 3)
TIMEOUT_S = 5.0


class Endpoints:
    """A listening socket per node (the "real port"), and proxies for every directed link."""

    def __init__(self, seed: int = 0) -> None:
        self.servers = {node: socket.create_server(("127.0.0.1", 0)) for node in NODES}
        upstreams = {Link(src, dst, kind): ("127.0.0.1", self.servers[dst].getsockname()[1])
                     for src in NODES for dst in NODES if src != dst for kind in KINDS}
        self.proxies = LinkProxies(upstreams, seed=seed).start()
        self.sockets: list[socket.socket] = []

    def connect(self, src: int, dst: int,
                kind: str = "broker") -> tuple[socket.socket, socket.socket]:
        """(src's client socket, dst's accepted socket) of a connection on link src -> dst."""
        client = socket.create_connection(("127.0.0.1", self.proxies.port(Link(src, dst, kind))),
                                          timeout=TIMEOUT_S)
        self.servers[dst].settimeout(TIMEOUT_S)
        server, _ = self.servers[dst].accept()
        server.settimeout(TIMEOUT_S)
        self.sockets += [client, server]
        return client, server

    def discarded(self, link: Link) -> int:
        return self.proxies.stats().get(link, (0, 0))[1]

    def close(self) -> None:
        self.proxies.stop()
        for sock in [*self.sockets, *self.servers.values()]:
            sock.close()


@pytest.fixture
def endpoints() -> Iterator[Endpoints]:
    made = Endpoints()
    yield made
    made.close()


def receive(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def assert_nothing_to_read(sock: socket.socket) -> None:
    sock.setblocking(False)
    try:
        with pytest.raises(BlockingIOError):
            sock.recv(1)
    finally:
        sock.settimeout(TIMEOUT_S)


def test_bytes_pass_both_ways_intact(endpoints: Endpoints) -> None:
    client, server = endpoints.connect(1, 2)
    payload = random.Random(1).randbytes(1 << 20)
    client.sendall(payload)
    assert receive(server, len(payload)) == payload
    server.sendall(payload[::-1])
    assert receive(client, len(payload)) == payload[::-1]


def test_end_of_stream_is_passed_on(endpoints: Endpoints) -> None:
    client, server = endpoints.connect(2, 3)
    client.sendall(b"last words")
    client.shutdown(socket.SHUT_WR)
    assert receive(server, 100) == b"last words"  # then EOF: receive returns short


def test_one_way_drops_src_to_dst_only(endpoints: Endpoints) -> None:
    forward_client, forward_server = endpoints.connect(1, 2)  # 1 connects to 2
    reverse_client, reverse_server = endpoints.connect(2, 1)  # 2 connects to 1
    change = endpoints.proxies.one_way(1, 2)
    assert change["name"] == "one_way" and change["blocked"] == [[1, 2]]
    # 2 -> 1 passes, on both connections
    forward_server.sendall(b"response to 1")
    assert receive(forward_client, 13) == b"response to 1"
    reverse_client.sendall(b"request to 1")
    assert receive(reverse_server, 12) == b"request to 1"
    # 1 -> 2 vanishes, on both connections; the sender's socket does not error
    forward_client.sendall(b"x" * 1000)
    reverse_server.sendall(b"y" * 500)
    wait_until(lambda: endpoints.discarded(Link(1, 2)) == 1000, TIMEOUT_S, "1000 bytes dropped")
    wait_until(lambda: endpoints.discarded(Link(2, 1)) == 500, TIMEOUT_S, "500 bytes dropped")
    assert_nothing_to_read(forward_server)
    assert_nothing_to_read(reverse_client)
    forward_server.sendall(b"still")  # and 2 -> 1 still passes after the drops
    assert receive(forward_client, 5) == b"still"


def test_isolate_blackholes_new_connections_and_heal_aborts_them(endpoints: Endpoints) -> None:
    change = endpoints.proxies.isolate(3)
    assert sorted(change["blocked"]) == sorted(map(list, isolation_pairs(3, NODES)))
    client, server = endpoints.connect(1, 3)  # accepted, then black-holed
    client.sendall(b"hello")
    server.sendall(b"hi")
    wait_until(lambda: endpoints.discarded(Link(1, 3)) == 7, TIMEOUT_S, "both ways dropped")
    assert_nothing_to_read(server)
    assert_nothing_to_read(client)
    other_client, other_server = endpoints.connect(1, 2)  # not involved: passes
    other_client.sendall(b"ok")
    assert receive(other_server, 2) == b"ok"
    healed = endpoints.proxies.heal()
    assert healed["name"] == "heal" and healed["aborted"] == 1
    assert healed["blocked"] == sorted(map(list, isolation_pairs(3, NODES)))
    assert json.loads(json.dumps(healed)) == healed  # logged as a history event as it is
    # the connection that lost bytes is closed, never resumed mid-stream
    assert receive(client, 1) == b""
    fresh_client, fresh_server = endpoints.connect(1, 3)
    fresh_client.sendall(b"again")
    assert receive(fresh_server, 5) == b"again"
    other_client.sendall(b"untouched")  # a connection that lost nothing survives the heal
    assert receive(other_server, 9) == b"untouched"


def test_isolating_one_kind_of_traffic_leaves_the_other(endpoints: Endpoints) -> None:
    change = endpoints.proxies.isolate(2, kinds=["controller"])
    assert change["kinds"] == ["controller"]
    raft_client, raft_server = endpoints.connect(1, 2, "controller")
    fetch_client, fetch_server = endpoints.connect(1, 2, "broker")
    fetch_client.sendall(b"fetch")
    assert receive(fetch_server, 5) == b"fetch"
    raft_client.sendall(b"vote")
    wait_until(lambda: endpoints.discarded(Link(1, 2, "controller")) == 4, TIMEOUT_S,
               "the controller bytes dropped")
    assert_nothing_to_read(raft_server)


def test_a_down_node_behind_a_blackhole_is_silent_until_the_heal(endpoints: Endpoints) -> None:
    port = endpoints.proxies.port(Link(2, 1))
    endpoints.servers[1].close()
    endpoints.proxies.isolate(1)
    client = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    endpoints.sockets.append(client)
    client.sendall(b"anyone?")
    wait_until(lambda: endpoints.discarded(Link(2, 1)) == 7, TIMEOUT_S, "the bytes dropped")
    assert_nothing_to_read(client)  # neither an answer nor a close
    assert endpoints.proxies.heal()["aborted"] == 1
    client.settimeout(TIMEOUT_S)
    with pytest.raises(ConnectionResetError):
        if client.recv(1) == b"":
            raise ConnectionResetError


def test_split_cuts_between_groups_only(endpoints: Endpoints) -> None:
    change = endpoints.proxies.split([{1, 2}, {3}])
    assert change["groups"] == [[1, 2], [3]]
    inside_client, inside_server = endpoints.connect(2, 1)
    across_client, across_server = endpoints.connect(2, 3)
    inside_client.sendall(b"same side")
    assert receive(inside_server, 9) == b"same side"
    across_client.sendall(b"other side")
    wait_until(lambda: endpoints.discarded(Link(2, 3)) == 10, TIMEOUT_S, "dropped across")
    assert_nothing_to_read(across_server)


def test_flaky_delays_every_chunk_in_order(endpoints: Endpoints) -> None:
    client, server = endpoints.connect(1, 2)
    endpoints.proxies.flaky(1, 2, delay_ms=150, jitter_ms=50)
    started = time.monotonic()
    for index in range(5):
        client.sendall(bytes([index]) * 10)
    assert receive(server, 50) == b"".join(bytes([index]) * 10 for index in range(5))
    assert time.monotonic() - started >= 0.15
    server.sendall(b"back")  # the other direction is not delayed
    started = time.monotonic()
    assert receive(client, 4) == b"back"
    assert time.monotonic() - started < 0.15


def test_flaky_stall_adds_hundreds_of_milliseconds(endpoints: Endpoints) -> None:
    client, server = endpoints.connect(3, 1)
    endpoints.proxies.flaky(3, 1, delay_ms=0, stall_prob=1.0)
    started = time.monotonic()
    client.sendall(b"stalled")
    assert receive(server, 7) == b"stalled"
    assert time.monotonic() - started >= 0.2
    endpoints.proxies.heal()
    started = time.monotonic()
    client.sendall(b"fast")  # delays lose no bytes: the connection survives the heal
    assert receive(server, 4) == b"fast"
    assert time.monotonic() - started < 0.2


def test_a_down_upstream_resets_the_client(endpoints: Endpoints) -> None:
    port = endpoints.proxies.port(Link(2, 1))
    endpoints.servers[1].close()
    client = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    endpoints.sockets.append(client)
    with pytest.raises(ConnectionResetError):
        if client.recv(1) == b"":
            raise ConnectionResetError  # closed, not reset: the same to a node


def test_stop_is_idempotent_and_frees_the_ports() -> None:
    made = Endpoints()
    port = made.proxies.port(Link(1, 2))
    made.close()
    made.proxies.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)


groups_strategy = st.lists(st.integers(0, 3), min_size=len(NODES) + 1, max_size=len(NODES) + 1)


@settings(max_examples=50, deadline=None)
@given(groups_strategy)
def test_split_pairs_block_exactly_the_pairs_in_different_groups(labels: list[int]) -> None:
    nodes = range(len(labels))
    groups = [{node for node in nodes if labels[node] == label} for label in set(labels)]
    blocked = split_pairs(groups)
    for a in nodes:
        for b in nodes:
            assert ((a, b) in blocked) == (labels[a] != labels[b])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), max_size=8), st.integers(1, 4))
def test_blocks_accumulate_until_heal(pairs: list[tuple[int, int]], node: int) -> None:
    state = NetworkState().block(pairs).block(isolation_pairs(node, range(1, 5)))
    for a in range(1, 5):
        for b in range(1, 5):
            expected = a != b and ((a, b) in pairs or node in (a, b))
            assert state.passes(a, b, "broker") is not expected
            assert state.passes(a, b, "controller") is not expected


@settings(max_examples=30, deadline=None)
@given(st.floats(0, 500), st.floats(0, 500), st.floats(0, 1), st.integers(0, 2**32))
def test_delay_is_within_its_bounds(delay_ms: float, jitter_ms: float, stall_prob: float,
                                    seed: int) -> None:
    proxies = LinkProxies({})
    proxies.flaky(1, 2, delay_ms, jitter_ms, stall_prob)
    delay_s = proxies.state.delay_s(1, 2, random.Random(seed))
    assert delay_ms / 1000 <= delay_s <= (delay_ms + jitter_ms + 600) / 1000
    assert proxies.state.delay_s(2, 1, random.Random(seed)) == 0
