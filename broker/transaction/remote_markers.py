"""Markers for partitions led by other brokers: WriteTxnMarkers requests (Kafka's
``TransactionMarkerChannelManager``, minimal), used in a cluster only.

``PartitionMarkerWriter`` writes the markers of the partitions this node leads itself; for a
partition led by another live broker it calls ``send``, which groups the partitions by leader
and sends one WriteTxnMarkers (v1) per leader over the inter-broker listener, in the background.
Those partitions stay in the transaction (the writer reports them as still to write) until the
answer comes; then ``on_written(producer_id, producer_epoch, commit, partitions)`` is called
with the partitions that are done: NONE, and the errors Kafka gives up on (the same split as
local markers: ``RETRIABLE_MARKER_ERRORS`` stay, to be sent again by the coordinator's
``complete_pending``). No answer (the leader unreachable or timed out): nothing is done, they
are sent again later.

A (producer id, partition) already in flight is not sent twice: ``complete_pending`` runs on a
timer and may ask again before the first answer.

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from itertools import groupby

from broker.node_client import NodeClients
from broker.transaction.markers import RETRIABLE_MARKER_ERRORS
from broker.transaction.metadata import TopicPartition
from protocol.errors import ErrorCode
from protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse

__all__ = ["MarkersWritten", "RemoteMarkerSender", "done_partitions"]

logger = logging.getLogger("samsa.broker.transaction.remote_markers")

WRITE_TXN_MARKERS_VERSION = 1
# (producer id, producer epoch, commit, the partitions whose marker is done)
MarkersWritten = Callable[[int, int, bool, set[TopicPartition]], None]


class RemoteMarkerSender:
    def __init__(self, clients: NodeClients, *, on_written: MarkersWritten | None = None) -> None:
        self.clients = clients
        self.on_written = on_written
        self._in_flight: set[tuple[int, TopicPartition]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def send(
        self, leader_id: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
        commit: bool, partitions: Iterable[TopicPartition],
    ) -> None:
        """Send the markers of ``partitions`` (all led by ``leader_id``) unless in flight."""
        wanted = sorted(p for p in partitions if (producer_id, p) not in self._in_flight)
        if not wanted:
            return
        self._in_flight.update((producer_id, p) for p in wanted)
        request = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch,
            topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[i for _, i in group])
                    for topic, group in groupby(wanted, key=lambda tp: tp[0])],
        )])
        task = asyncio.get_running_loop().create_task(
            self._exchange(leader_id, request, producer_id, producer_epoch, commit, wanted))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _exchange(
        self, leader_id: int, request: WriteTxnMarkersRequest, producer_id: int,
        producer_epoch: int, commit: bool, partitions: list[TopicPartition],
    ) -> None:
        try:
            response = await self.clients.send_or_none(leader_id, request,
                                                       version=WRITE_TXN_MARKERS_VERSION)
        finally:
            self._in_flight.difference_update((producer_id, p) for p in partitions)
        if not isinstance(response, WriteTxnMarkersResponse):
            logger.info("no answer from broker %d to the markers of producer %d: sent again later",
                        leader_id, producer_id)
            return
        done = done_partitions(response)
        if done and self.on_written is not None:
            self.on_written(producer_id, producer_epoch, commit, done)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.clients.close()


def done_partitions(response: WriteTxnMarkersResponse) -> set[TopicPartition]:
    """The partitions of a WriteTxnMarkers answer whose marker needs no retry."""
    done: set[TopicPartition] = set()
    for marker in response.markers:
        for topic in marker.topics:
            for partition in topic.partitions:
                error = ErrorCode(partition.error_code)
                if error is not ErrorCode.NONE and error not in RETRIABLE_MARKER_ERRORS:
                    logger.warning("marker of producer %d for %s-%d given up: %s",
                                   marker.producer_id, topic.name, partition.partition_index,
                                   error.name)
                if error not in RETRIABLE_MARKER_ERRORS:
                    done.add((topic.name, partition.partition_index))
    return done
