"""Answering after a commit: at once when the proposals are resolved, else once they are; and
producer ids handed out from controller-allocated blocks."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

from broker.commits import refusal, when_committed
from broker.transaction.producer_ids import ProducerIdManager
from protocol.errors import InvalidRequestError, UnknownServerError
from replication.controller.local import PRODUCER_ID_BLOCK_SIZE
from replication.controller.proposal import Proposal
from storage.clock import ManualClock
from tests.unit.replication.controller.node import NODE_ID, Node


def test_resolved_proposals_are_answered_at_once() -> None:
    proposals = [Proposal.committed(1), Proposal[int].refused(InvalidRequestError("bad"))]
    answer = when_committed(proposals, lambda: [refusal(p, "x") for p in proposals])
    assert isinstance(answer, list)
    assert answer[0] is None and isinstance(answer[1], InvalidRequestError)


def test_pending_proposals_are_answered_once_resolved() -> None:
    async def scenario() -> list[object]:
        pending: Proposal[int] = Proposal()
        failing: Proposal[int] = Proposal()
        answer = when_committed([pending, failing], lambda: [refusal(failing, "x"), pending.result()])
        assert inspect.isawaitable(answer)
        task = asyncio.ensure_future(answer)
        failing.fail(OSError("disk gone"))
        pending.resolve(5)
        return await task

    error, value = asyncio.run(scenario())
    assert isinstance(error, UnknownServerError) and value == 5


def test_producer_ids_come_from_consecutive_blocks(tmp_path: Path) -> None:
    node = Node.start(tmp_path, ManualClock(1000))
    node.controller.allocate_producer_ids(NODE_ID, -1).result()  # another broker's block
    manager = ProducerIdManager(node.controller, broker_id=NODE_ID)
    ids = [manager.generate_producer_id() for _ in range(PRODUCER_ID_BLOCK_SIZE + 2)]
    assert ids == list(range(PRODUCER_ID_BLOCK_SIZE, 2 * PRODUCER_ID_BLOCK_SIZE + 2))
    assert node.controller.image.next_producer_id == 3 * PRODUCER_ID_BLOCK_SIZE
    node.shutdown()
