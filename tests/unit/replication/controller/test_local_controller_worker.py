"""The local controller once it has a storage worker (``use_executor``, as the daemon sets it):
large operations (here: every one, ``inline_records_max=0``) are planned, written and staged on
the worker one at a time and committed on the loop, so proposals come back pending and resolve
in order, each plan seeing the ones before it; the result on disk is the same image as the
synchronous path's. Small operations with nothing queued are still committed inline."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from protocol.errors import TopicAlreadyExistsError
from replication.controller.interface import NewPartitions, NewTopic, TopicToDelete
from replication.controller.proposal import Proposal
from replication.raft.log import RaftLogError
from storage.clock import ManualClock
from tests.unit.replication.controller.node import Node

T = TypeVar("T")


def on_worker(tmp_path: Path, scenario: Callable[[Node], Awaitable[T]],
              *, inline_records_max: int = 0) -> T:
    """Run ``scenario`` on a started node whose controller and replica manager use a worker."""
    node = Node.start(tmp_path, ManualClock(1000))

    async def run() -> T:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(1) as executor:
            node.controller.use_executor(executor, loop, inline_records_max=inline_records_max)
            node.replica_manager.use_executor(executor, loop)
            try:
                return await scenario(node)
            finally:
                await node.controller.drain()
                await node.replica_manager.drain()

    try:
        return asyncio.run(run())
    finally:
        node.shutdown()


def test_proposals_resolve_later_in_order_and_each_plan_sees_the_ones_before(tmp_path: Path) -> None:
    async def scenario(node: Node) -> list[Any]:
        first, again = node.controller.create_topics([NewTopic("t", num_partitions=3),
                                                      NewTopic("t", num_partitions=1)])
        grow = node.controller.create_partitions([NewPartitions("t", 5)])[0]
        assert not first.done() and "t" not in node.controller.image.topics_by_name
        plan = await first
        assert plan.num_partitions == 3
        await grow
        assert isinstance(again.exception(), TopicAlreadyExistsError)
        disk_work = node.replica_manager.settled(["t"])
        if disk_work is not None:
            await disk_work
        return sorted(node.replica_manager.partitions)

    hosted = on_worker(tmp_path, scenario)
    assert hosted == [("t", index) for index in range(5)]
    restarted = Node.start(tmp_path, ManualClock(2000))  # the log replays to the same image
    assert sorted(restarted.controller.image.topics_by_name["t"].partitions) == list(range(5))
    restarted.shutdown()


def test_a_failed_write_refuses_only_its_proposal(tmp_path: Path) -> None:
    async def scenario(node: Node) -> tuple[BaseException | None, int]:
        empty = node.controller.propose([])  # an empty batch cannot be written
        created = node.controller.create_topics([NewTopic("t")])[0]
        await created
        assert empty.done()
        return empty.exception(), len(node.controller.image.topics_by_name["t"].partitions)

    error, partitions = on_worker(tmp_path, scenario)
    assert isinstance(error, RaftLogError) and partitions == 1


def test_validate_only_answers_at_once_from_the_committed_image(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        created = node.controller.create_topics([NewTopic("t")])[0]
        check = node.controller.create_topics([NewTopic("t")], validate_only=True)[0]
        assert check.done() and check.exception() is None  # "t" is not committed yet
        await created
        again = node.controller.create_topics([NewTopic("t")], validate_only=True)[0]
        assert isinstance(again.exception(), TopicAlreadyExistsError)

    on_worker(tmp_path, scenario)


def test_drain_waits_for_every_queued_operation(tmp_path: Path) -> None:
    async def scenario(node: Node) -> list[bool]:
        proposals: list[Proposal[Any]] = [
            *node.controller.create_topics([NewTopic(f"t{index}") for index in range(5)]),
            *node.controller.delete_topics([TopicToDelete(name="t0")])]
        await node.controller.drain()
        return [proposal.done() and proposal.exception() is None for proposal in proposals]

    assert on_worker(tmp_path, scenario) == [True] * 6


def test_a_small_operation_is_committed_inline_unless_another_is_queued(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        small = node.controller.create_topics([NewTopic("small", num_partitions=2)])[0]
        assert small.done() and "small" in node.controller.image.topics_by_name
        large, after = node.controller.create_topics([NewTopic("large", num_partitions=5),
                                                      NewTopic("after", num_partitions=1)])
        assert not large.done() and not after.done()  # queued behind the large one
        await after
        assert large.done() and list(node.controller.image.topics_by_name) == [
            "small", "large", "after"]
        empty = node.controller.propose([])  # small: planned and refused inline
        assert empty.done() and empty.exception() is not None

    on_worker(tmp_path, scenario, inline_records_max=4)
