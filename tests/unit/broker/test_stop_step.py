"""A clean stop's bounded steps (``broker.daemon.stop_step``): a step that never ends is cut at
its bound, named in a WARNING with where the loop's tasks wait, and the stop goes on."""

from __future__ import annotations

import asyncio
import logging

import pytest

from broker.daemon import stop_step


async def _waits_forever(started: asyncio.Event) -> None:
    started.set()
    await asyncio.Event().wait()


def test_a_step_that_never_ends_is_cut_and_named(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> bool:
        started = asyncio.Event()
        helper = asyncio.get_running_loop().create_task(_waits_forever(started), name="helper")
        await started.wait()
        ended = await stop_step("a stuck step", asyncio.Event().wait(), 0.05)
        helper.cancel()
        return ended

    with caplog.at_level(logging.WARNING, logger="samsa.broker"):
        assert asyncio.run(main()) is False
    [record] = [r for r in caplog.records if "a stuck step" in r.getMessage()]
    assert "did not end within 0 s; going on without it" in record.getMessage()
    assert "_waits_forever" in record.getMessage()  # where the other task waits


def test_a_step_that_ends_in_time_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> bool:
        return await stop_step("a quick step", asyncio.sleep(0), 5.0)

    with caplog.at_level(logging.WARNING, logger="samsa.broker"):
        assert asyncio.run(main()) is True
    assert not caplog.records
