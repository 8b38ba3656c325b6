"""``bench.polling.first_success``: the first successful attempt's time, attempts spaced and
bounded, a hung attempt not delaying the next, every leftover attempt cancelled."""

from __future__ import annotations

import asyncio

from bench.polling import first_success


def test_succeeds_at_the_first_attempt_that_says_so() -> None:
    seen: list[int] = []

    async def attempt(index: int) -> bool:
        seen.append(index)
        return index == 3

    elapsed = asyncio.run(first_success(attempt, interval_s=0.01, timeout_s=5))
    assert elapsed is not None and 0.025 <= elapsed < 1
    assert seen == [0, 1, 2, 3]


def test_a_hung_attempt_does_not_hold_up_the_next_and_is_cancelled() -> None:
    cancelled: list[int] = []

    async def attempt(index: int) -> bool:
        if index == 0:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(index)
                raise
        return index == 2

    elapsed = asyncio.run(first_success(attempt, interval_s=0.01, timeout_s=5))
    assert elapsed is not None and elapsed < 1
    assert cancelled == [0]


def test_errors_are_failures_and_the_deadline_gives_none() -> None:
    async def attempt(index: int) -> bool:
        raise ConnectionRefusedError

    assert asyncio.run(first_success(attempt, interval_s=0.01, timeout_s=0.1)) is None


def test_at_most_max_outstanding_attempts_run_at_once() -> None:
    running, most = 0, 0

    async def attempt(index: int) -> bool:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            await asyncio.sleep(0.05)
        finally:
            running -= 1
        return index >= 6

    elapsed = asyncio.run(first_success(attempt, interval_s=0.001, timeout_s=5,
                                        max_outstanding=3))
    assert elapsed is not None
    assert most == 3
