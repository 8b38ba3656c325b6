"""``DiskWork``: jobs on the same partitions run in order, ``settled`` resolves once the jobs on
a topic are done, and a waiter that goes away (its client disconnected) does not break them."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from replication.disk_work import DiskWork


def test_a_cancelled_waiter_leaves_the_job_and_later_waiters_alone() -> None:
    async def scenario() -> list[str]:
        release = threading.Event()
        done: list[str] = []
        with ThreadPoolExecutor(1) as executor:
            work = DiskWork(executor, asyncio.get_running_loop())
            work.submit([("t", 0)], release.wait, lambda _: done.append("first"))
            settled = work.settled(["t"])
            assert settled is not None
            waiter = asyncio.ensure_future(settled)
            await asyncio.sleep(0)
            waiter.cancel()  # the request waiting on it is dropped
            later = work.settled(["t"])
            assert later is not None and work.pending_on("t") and not work.pending_on("u")
            release.set()
            await later
            assert not work.pending_on("t")
            work.submit([("t", 0)], lambda: None, lambda _: done.append("second"))
            await work.drain()
            assert work.settled(["t"]) is None
        return done

    assert asyncio.run(scenario()) == ["first", "second"]


def test_jobs_on_one_partition_run_in_order_and_others_do_not_wait() -> None:
    async def scenario() -> list[str]:
        order: list[str] = []
        with ThreadPoolExecutor(3) as executor:
            work = DiskWork(executor, asyncio.get_running_loop())
            gate = threading.Event()

            def first() -> None:
                gate.wait()
                order.append("a-1")

            work.submit([("a", 0)], first, lambda _: None)
            work.submit([("a", 0)], lambda: order.append("a-2"), lambda _: None)
            other = asyncio.Event()
            work.submit([("b", 0)], lambda: order.append("b"), lambda _: other.set())
            await other.wait()
            gate.set()
            await work.drain()
        return order

    assert asyncio.run(scenario()) == ["b", "a-1", "a-2"]
