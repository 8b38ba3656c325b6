"""The network persister's retries: a coordinator not known yet, or a node that cannot be
reached, is retried with backoff until the deadline, then COORDINATOR_NOT_AVAILABLE is raised
(no sockets: the node has no known endpoint)."""

from __future__ import annotations

import asyncio
import time
from uuid import UUID

import pytest

from broker.node_client import NodeClients
from broker.share.network_persister import NetworkSharePersister
from broker.share.state_records import SharePartitionKey
from protocol.errors import CoordinatorNotAvailableError

KEY = SharePartitionKey("group", UUID(int=7), 0)


def persister(answer: int | None, asked: list[float], timeout_ms: int = 300) -> NetworkSharePersister:
    async def coordinator_id(key: SharePartitionKey) -> int | None:
        asked.append(time.monotonic())
        return answer

    return NetworkSharePersister(
        local=None, coordinator_id=coordinator_id,
        clients=lambda: NodeClients(lambda node_id: None, client_id="test"),
        timeout_ms=timeout_ms, retry_backoff_ms=20, retry_backoff_max_ms=80)


@pytest.mark.parametrize("answer", [None, 5])  # no coordinator known; one with no endpoint
def test_retriable_failures_are_retried_with_backoff_until_the_deadline(answer: int | None) -> None:
    asked: list[float] = []
    start = time.monotonic()
    with pytest.raises(CoordinatorNotAvailableError):
        asyncio.run(persister(answer, asked).read_state(KEY, leader_epoch=0))
    assert 0.3 <= time.monotonic() - start < 5
    # asked again after 20, 40, 80, 80 ... ms within 300 ms: a few times, not in a tight loop
    assert 2 <= len(asked) <= 15
