"""Network faults between Samsa nodes: a userspace TCP proxy per directed link.

No netem, no iptables, no namespaces: every node-to-node connection of a ``FaultCluster`` goes
through a proxy the harness owns, one per directed link ``(src, dst)`` and traffic kind
(``broker``: replica fetches and transaction markers; ``controller``: Raft, forwarding,
heartbeats, AlterPartition). ``src`` is the node that connects, ``dst`` the node it connects
to; the connection's bytes flow both ways: ``src -> dst`` (requests) and ``dst -> src``
(responses).

What a fault does is decided per *direction of bytes* between two nodes (``NetworkState``, an
immutable value; ``LinkProxies`` swaps it atomically under a lock, its pumps read it per chunk):

- blocked ``(a, b, kind)``: bytes from ``a`` to ``b`` on links of ``kind`` are read and discarded (the sender's socket
  never errors, as when packets vanish in a real partition); a new connection is still
  accepted and relayed, and its blocked direction discards from the first byte;
- flaky ``(a, b)``: each chunk from ``a`` to ``b`` waits ``delay_ms`` + uniform(0,
  ``jitter_ms``), and with probability ``stall_prob`` a further retransmit-like stall of
  ``STALL_MS`` (TCP has no loss to emulate in user space: a stall is what loss looks like to
  the application). Chunks keep their order (a chunk is never sent before the one before it).

Invariant: a TCP stream is never corrupted. Once a direction of a connection has discarded a
byte it forwards nothing more, even after the link heals; ``heal()`` aborts every such
connection (both sockets closed: like a connection that timed out), so both nodes reconnect
onto a healed, clean stream. The other direction keeps its own rule until then.

Threads: the proxies run on one asyncio loop in a thread of their own. ``isolate`` /
``split`` / ``one_way`` / ``flaky`` / ``heal`` may be called from any thread; each returns a
dict describing the change (the lead logs it as a ``fault`` event). Listening sockets are bound
at construction, so the nodes can be configured with the proxies' ports before anything starts.
"""

from __future__ import annotations

import asyncio
import random
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

__all__ = ["Flaky", "Link", "LinkProxies", "NetworkState"]

READ_BYTES = 65536
QUEUED_CHUNKS = 64  # per direction of a connection: at most 4 MiB held by the proxy
STALL_MS = (200.0, 600.0)
KINDS = ("broker", "controller")


@dataclass(frozen=True, slots=True, order=True)
class Link:
    """The connections node ``src`` opens to node ``dst`` for traffic of ``kind``."""

    src: int
    dst: int
    kind: str = "broker"


@dataclass(frozen=True, slots=True)
class Flaky:
    """Delay for each chunk of one direction (milliseconds)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    stall_prob: float = 0.0


@dataclass(frozen=True, slots=True)
class NetworkState:
    """The faults in force, per direction of bytes ``(from_node, to_node)``."""

    blocked: frozenset[tuple[int, int, str]] = frozenset()  # (from_node, to_node, kind)
    flaky: Mapping[tuple[int, int], Flaky] = field(default_factory=dict)

    def passes(self, from_node: int, to_node: int, kind: str) -> bool:
        return (from_node, to_node, kind) not in self.blocked

    def block(self, pairs: Iterable[tuple[int, int]],
              kinds: Iterable[str] = KINDS) -> NetworkState:
        added = {(a, b, kind) for a, b in pairs if a != b for kind in kinds}
        return replace(self, blocked=self.blocked | added)

    def delay_s(self, from_node: int, to_node: int, rng: random.Random) -> float:
        """How long a chunk from ``from_node`` to ``to_node`` waits (seconds)."""
        rule = self.flaky.get((from_node, to_node))
        if rule is None:
            return 0.0
        delay_ms = rule.delay_ms + rng.uniform(0, rule.jitter_ms)
        if rule.stall_prob and rng.random() < rule.stall_prob:
            delay_ms += rng.uniform(*STALL_MS)
        return delay_ms / 1000


def isolation_pairs(node: int, nodes: Iterable[int]) -> set[tuple[int, int]]:
    """Both directions between ``node`` and every other node."""
    others = [other for other in nodes if other != node]
    return {(node, other) for other in others} | {(other, node) for other in others}


def split_pairs(groups: list[set[int]]) -> set[tuple[int, int]]:
    """Both directions between every two nodes of different groups."""
    pairs = set()
    for index, group in enumerate(groups):
        for other in groups[index + 1:]:
            for a in group:
                for b in other:
                    pairs |= {(a, b), (b, a)}
    return pairs


class _Connection:
    """One relayed connection; ``dropped`` names the directions that discarded bytes."""

    def __init__(self, link: Link, totals: list[int]) -> None:
        self.link = link
        self.dropped: set[tuple[int, int]] = set()
        self.writers: list[asyncio.StreamWriter] = []
        self._totals = totals  # the link's [forwarded, discarded], shared by its connections

    def count(self, *, forwarded: int = 0, discarded: int = 0) -> None:
        self._totals[0] += forwarded
        self._totals[1] += discarded

    def abort(self) -> None:
        for writer in self.writers:
            transport = writer.transport
            if not transport.is_closing():
                transport.abort()


class LinkProxies:
    """One listening socket per ``Link`` (127.0.0.1, port bound at construction), relaying to
    the link's upstream ``(host, port)``. ``start()`` / ``stop()``; the fault methods are
    thread-safe. ``seed`` seeds the flaky links' delays."""

    def __init__(self, upstreams: Mapping[Link, tuple[str, int]], *, seed: int = 0) -> None:
        self.upstreams = dict(upstreams)
        self.nodes = sorted({link.src for link in upstreams} | {link.dst for link in upstreams})
        self.state = NetworkState()
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._sockets: dict[Link, socket.socket] = {}
        for link in self.upstreams:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            self._sockets[link] = sock
        self._connections: set[_Connection] = set()
        self._totals: dict[Link, list[int]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[asyncio.Server] = []

    def port(self, link: Link) -> int:
        port: int = self._sockets[link].getsockname()[1]
        return port

    def address(self, link: Link) -> str:
        return f"127.0.0.1:{self.port(link)}"

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> LinkProxies:
        if self._thread is not None:
            return self
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, daemon=True, name="link-proxies")
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), loop).result()
        return self

    async def _serve(self) -> None:
        for link, sock in self._sockets.items():
            sock.listen(64)
            sock.setblocking(False)
            server = await asyncio.start_server(partial(self._relay, link), sock=sock)
            self._servers.append(server)

    def stop(self) -> None:
        """Close every listener and connection; idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            for sock in self._sockets.values():
                sock.close()
            return
        self._loop = self._thread = None
        asyncio.run_coroutine_threadsafe(self._shut(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()

    async def _shut(self) -> None:
        for server in self._servers:
            server.close()
        for connection in list(self._connections):
            connection.abort()
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- faults (any thread) --------------------------------------------------------------------

    def isolate(self, node: int, kinds: Iterable[str] = KINDS) -> dict[str, Any]:
        """Blackhole every link to and from ``node`` (of the traffic ``kinds``)."""
        return self._block("isolate", isolation_pairs(node, self.nodes), kinds, nodes=[node])

    def split(self, groups: list[set[int]], kinds: Iterable[str] = KINDS) -> dict[str, Any]:
        """Blackhole the links between nodes of different groups (a node in no group forms a
        group of its own)."""
        placed = set().union(*groups) if groups else set()
        everyone = [set(group) for group in groups] + [{node} for node in self.nodes
                                                        if node not in placed]
        return self._block("split", split_pairs(everyone), kinds, nodes=sorted(
            set().union(*everyone)), groups=[sorted(group) for group in everyone])

    def one_way(self, src: int, dst: int, kinds: Iterable[str] = KINDS) -> dict[str, Any]:
        """Drop the bytes ``src`` sends to ``dst``; ``dst`` -> ``src`` still passes."""
        return self._block("one_way", {(src, dst)}, kinds, nodes=[src, dst])

    def flaky(self, src: int, dst: int, delay_ms: float, jitter_ms: float = 0.0,
              stall_prob: float = 0.0) -> dict[str, Any]:
        """Delay every chunk ``src`` sends to ``dst`` (see the module docstring)."""
        rule = Flaky(delay_ms, jitter_ms, stall_prob)
        with self._lock:
            self.state = replace(self.state, flaky={**self.state.flaky, (src, dst): rule})
        return {"name": "flaky", "nodes": [src, dst], "delay_ms": delay_ms,
                "jitter_ms": jitter_ms, "stall_prob": stall_prob}

    def heal(self) -> dict[str, Any]:
        """Every link passes again; connections that lost bytes are aborted."""
        with self._lock:
            before = self.state
            self.state = NetworkState()
        aborted = self._call(self._abort_dropped)
        return {"name": "heal", "nodes": list(self.nodes),
                "blocked": [list(pair) for pair in sorted({(a, b) for a, b, _ in before.blocked})],
                "flaky": [list(pair) for pair in sorted(before.flaky)], "aborted": aborted}

    def _block(self, name: str, pairs: set[tuple[int, int]], kinds: Iterable[str],
               **what: Any) -> dict[str, Any]:
        kinds = tuple(kinds)
        assert set(kinds) <= set(KINDS), f"traffic kinds are {KINDS}, not {kinds}"
        with self._lock:
            self.state = self.state.block(pairs, kinds)
        return {"name": name, **what, "kinds": list(kinds),
                "blocked": sorted([a, b] for a, b in pairs)}

    def _call(self, function: Any) -> Any:
        loop = self._loop
        if loop is None:
            return function()
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(function), loop)
        return future.result(timeout=10)

    def _abort_dropped(self) -> int:
        dropped = [connection for connection in self._connections if connection.dropped]
        for connection in dropped:
            connection.abort()
        return len(dropped)

    def stats(self) -> dict[Link, tuple[int, int]]:
        """(bytes forwarded, bytes discarded) per link since the start, both directions."""
        return {link: (counts[0], counts[1]) for link, counts in list(self._totals.items())}

    # -- relaying (the loop's thread) -----------------------------------------------------------

    async def _relay(self, link: Link, client_reader: asyncio.StreamReader,
                     client_writer: asyncio.StreamWriter) -> None:
        connection = _Connection(link, self._totals.setdefault(link, [0, 0]))
        connection.writers.append(client_writer)
        self._connections.add(connection)
        try:
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(
                    *self.upstreams[link])
            except OSError:
                await self._refused(connection, client_reader)
                return
            connection.writers.append(upstream_writer)
            pumps = [asyncio.create_task(self._pump(connection, client_reader, upstream_writer,
                                                    link.src, link.dst)),
                     asyncio.create_task(self._pump(connection, upstream_reader, client_writer,
                                                    link.dst, link.src))]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self._connections.discard(connection)
            connection.abort()

    async def _refused(self, connection: _Connection, client: asyncio.StreamReader) -> None:
        """The node is down. Over a passing link the client sees the connection closed, as
        without a proxy; over a black-holed one it sees nothing at all until the heal."""
        link = connection.link
        if self.state.passes(link.src, link.dst, link.kind) and self.state.passes(
                link.dst, link.src, link.kind):
            return
        connection.dropped.add((link.src, link.dst))
        while data := await client.read(READ_BYTES):
            connection.count(discarded=len(data))

    async def _pump(self, connection: _Connection, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter, from_node: int, to_node: int) -> None:
        """Move bytes ``from_node`` -> ``to_node``, by the state in force as each chunk arrives;
        a sender task writes them when due, so delays do not limit throughput (the queue is
        bounded: a receiver that stops reading stops this reader too, as TCP would)."""
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(QUEUED_CHUNKS)
        sender = asyncio.create_task(self._send(queue, writer))
        direction = (from_node, to_node)
        last_due = 0.0
        try:
            while data := await reader.read(READ_BYTES):
                state = self.state
                if direction in connection.dropped or not state.passes(
                        from_node, to_node, connection.link.kind):
                    connection.dropped.add(direction)
                    connection.count(discarded=len(data))
                    continue
                last_due = max(time.monotonic() + state.delay_s(from_node, to_node, self._rng),
                               last_due)
                connection.count(forwarded=len(data))
                if sender.done():
                    sender.result()  # raises what stopped it
                await queue.put((last_due, data))
            if direction in connection.dropped:
                return  # the end of a black-holed stream does not reach the other side either
            await queue.put(None)  # end of stream: half-close once the queue is sent
            await sender
        finally:
            sender.cancel()

    @staticmethod
    async def _send(queue: asyncio.Queue[tuple[float, bytes] | None],
                    writer: asyncio.StreamWriter) -> None:
        while (item := await queue.get()) is not None:
            due, data = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


async def _as_coroutine(function: Any) -> Any:
    return function()
