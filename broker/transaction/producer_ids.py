"""Producer ids for InitProducerId: Kafka's broker-side ``RPCProducerIdManager``.

Ids come in blocks allocated by the controller (``Controller.allocate_producer_ids``, recorded
as ProducerIdsRecords, so no id is handed out twice across restarts); this class hands out the
ids of the current block one by one and asks for the next block when it runs out. While that
block is not committed yet there is no id to give: COORDINATOR_LOAD_IN_PROGRESS (retriable), as
Kafka answers. A refused allocation is raised and asked for again on the next call.

Owned by the broker's event loop.
"""

from __future__ import annotations

from protocol.errors import CoordinatorLoadInProgressError
from replication.controller.interface import Controller, ProducerIdsBlock
from replication.controller.proposal import Proposal

__all__ = ["ProducerIdManager"]

NO_BROKER_EPOCH = -1  # no broker registrations yet: Kafka's value for "unknown"


class ProducerIdManager:
    def __init__(self, controller: Controller, *, broker_id: int) -> None:
        self.controller = controller
        self.broker_id = broker_id
        self._next_producer_id = 0
        self._block_end = 0  # one past the last id of the current block
        self._pending: Proposal[ProducerIdsBlock] | None = None

    def generate_producer_id(self) -> int:
        if self._next_producer_id >= self._block_end:
            self._take_next_block()
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id

    def _take_next_block(self) -> None:
        if self._pending is None:
            self._pending = self.controller.allocate_producer_ids(self.broker_id, NO_BROKER_EPOCH)
        pending = self._pending
        if not pending.done():
            raise CoordinatorLoadInProgressError("waiting for the next block of producer ids")
        self._pending = None
        block = pending.result()
        self._next_producer_id, self._block_end = block.first_producer_id, block.next_block_first_id
