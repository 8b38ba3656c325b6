"""Polling a cluster for the first success, at a fixed interval, without one slow attempt
holding up the next: ``first_success``.

A node answers the requests of one connection in order, and a request forwarded to a
controller that was just killed can hang until the forwarding node gives up; polled on one
connection, such a request would delay every later poll and the measured time would be the
hang's, not the cluster's. So each attempt here runs on its own (the caller opens a connection
per attempt), a new one starts every ``interval_s`` while fewer than ``max_outstanding`` are
unanswered, and the time reported is when the first attempt that succeeds gets its answer.

Invariants: attempts start in index order, at least ``interval_s`` apart; at most
``max_outstanding`` run at once; every attempt still running when the result is known is
cancelled before ``first_success`` returns. An attempt that raises counts as a failure.

State: none kept between calls; everything runs on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable


async def first_success(attempt: Callable[[int], Awaitable[bool]], *, interval_s: float,
                        timeout_s: float, max_outstanding: int = 8) -> float | None:
    """Seconds from the call until the first ``attempt(index)`` that returns True answered;
    None if none did within ``timeout_s``."""
    started = time.monotonic()
    running: set[asyncio.Task[bool]] = set()
    index, next_start = 0, started
    try:
        while (now := time.monotonic()) - started < timeout_s:
            if now >= next_start and len(running) < max_outstanding:
                running.add(asyncio.ensure_future(_quietly(attempt, index)))
                index, next_start = index + 1, now + interval_s
            remaining = started + timeout_s - now
            full = len(running) >= max_outstanding
            wait_s = remaining if full else min(max(next_start - now, 0.0), remaining)
            if not running:
                await asyncio.sleep(wait_s)
                continue
            done, _ = await asyncio.wait(running, timeout=wait_s,
                                         return_when=asyncio.FIRST_COMPLETED)
            running -= done
            if any(task.result() for task in done):
                return time.monotonic() - started
        return None
    finally:
        for task in running:
            task.cancel()
        for task in running:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _quietly(attempt: Callable[[int], Awaitable[bool]], index: int) -> bool:
    try:
        return await attempt(index)
    except Exception:  # a refused connection, a timeout, an error answer: not yet
        return False
