"""Ports for broker processes that start later: ``free_ports(count)``.

Each was free a moment ago (bound and released); another process taking one before the broker
binds it fails that broker's start loudly, never silently. Taken below the kernel's ephemeral
range, where only an explicit bind can take a port (see ``free_ports``).
"""

from __future__ import annotations

import os
import random
import socket


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free a moment ago, for processes started later to listen on.

    Taken below the kernel's ephemeral range (``ip_local_port_range``): a port chosen by binding
    port 0 and then released is an ephemeral one, which the kernel may hand out again — to a
    proxy binding port 0 or to a client's outgoing connection — before the node binds it (the
    fault harness's mixed smoke run once lost a node's start to that). Below the range only an
    explicit bind can take it. Falls back to port 0 when the range leaves no room below it."""
    low = _ephemeral_low()
    if low - PORTS_BELOW_FROM < count:
        return _kernel_chosen_ports(count)
    ports: list[int] = []
    first, span = _worker_share(PORTS_BELOW_FROM, low - PORTS_BELOW_FROM)
    start = random.randrange(span)
    for step in range(span):
        port = first + (start + step) % span
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == count:
            return ports
    return _kernel_chosen_ports(count)


PORTS_BELOW_FROM = 10_000  # free_ports picks in [this, the ephemeral range's low end)


def _worker_share(first: int, span: int) -> tuple[int, int]:
    """Under pytest-xdist, worker ``gwN`` of M takes the N-th of M equal slices of the range, so
    two workers never pick the same port between probing it and their broker binding it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        index, workers = int(worker.removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    except (KeyError, ValueError):
        return first, span
    if not 0 <= index < workers or span // workers < 64:
        return first, span
    share = span // workers
    return first + index * share, share


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 49_152  # IANA's dynamic range, the BSDs' and macOS's default


def _kernel_chosen_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
