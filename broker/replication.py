"""A cluster broker's replication shell: its follower fetchers (``broker.replica_fetcher``), the
ISR changes it proposes as leader (AlterPartition to the active controller, KIP-497: Kafka's
``AlterPartitionManager``), and the periodic ISR shrink check (Kafka's ``isr-expiration`` task,
every ``replica.lag.time.max.ms`` / 2).

ISR changes: ``Partition.maybe_expand_isr`` (after a follower's Fetch) and
``maybe_shrink_isr`` (the periodic check) return the change to propose, now pending on the
partition; ``submit`` queues it and one sender task sends what is queued as one AlterPartition
(v3: each ISR member with its broker epoch from the metadata image) to the controller through
the quorum's controller channel. The answer goes back to each partition (``isr_committed``,
then the delayed produces on it are checked; ``isr_change_failed`` only when the controller
says it did not make the change). No controller or no answer: the changes stay pending and
are sent again (the controller may have committed one whose answer was lost: forgetting it
would let the high watermark move without a replica the controller counts in the ISR — the
replication simulator's seed 3 with ``--variant forget-pending-isr``). A change is
proposed only by the leader of the epoch it names; the controller refuses a stale one
(FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION) and the image then brings the truth.

Started by the daemon after the quorum (KRaft brokers only); owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from broker.node_client import NodeClientError
from broker.replica_fetcher import ReplicaFetcherManager
from protocol.codec import DecodeError
from protocol.errors import ErrorCode, UnsupportedVersionError
from protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from protocol.messages.alter_partition_response import AlterPartitionResponse
from replication.isr import IsrChange
from replication.partition import Partition

if TYPE_CHECKING:
    from broker.broker import Broker

__all__ = ["ReplicationService"]

logger = logging.getLogger("samsa.broker.replication")

RETRY_BACKOFF_S = 0.05  # after a failed AlterPartition, before sending the next
REFUSED_BACKOFF_S = 1.0  # a partition whose change was refused proposes again after this


class ReplicationService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.settings = broker.config.kraft.replica
        self.fetchers = ReplicaFetcherManager(broker, self.settings, self.broker_epoch)
        self._queued: dict[tuple[str, int], tuple[Partition, IsrChange]] = {}
        self._refused_until: dict[tuple[str, int], float] = {}  # monotonic seconds
        # The change each partition is sending again, told at INFO once: without a controller it
        # is resent every RETRY_BACKOFF_S (a leader shut down beside a dead node wrote 9,000
        # such lines in 30 s); the later resends go to DEBUG.
        self._resending: dict[tuple[str, int], IsrChange] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def broker_epoch(self) -> int:
        lifecycle = self.broker.lifecycle
        return -1 if lifecycle is None else lifecycle.broker_epoch

    # -- running ------------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.fetchers.start()
        self._tasks = [loop.create_task(self._send_loop(), name="alter-partition"),
                       loop.create_task(self._shrink_loop(), name="isr-expiration")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.fetchers.stop()

    # -- partitions ---------------------------------------------------------------------------

    def role_changed(self, partition: Partition) -> None:
        self.fetchers.role_changed(partition)
        self.broker.high_watermarks_moved([(partition.topic, partition.partition)])

    def submit(self, partition: Partition, change: IsrChange) -> None:
        key = (partition.topic, partition.partition)
        refused_until = self._refused_until.get(key)
        if refused_until is not None:
            if time.monotonic() < refused_until:  # refused a moment ago: not again yet
                partition.isr_change_failed(change)
                return
            del self._refused_until[key]
        self._resending.pop(key, None)
        logger.info("%s-%d: proposing ISR %s (was %s, leader epoch %d, partition epoch %d)",
                    partition.topic, partition.partition, list(change.new_isr),
                    list(partition.isr), change.leader_epoch, change.partition_epoch)
        self._queued[key] = (partition, change)
        self._wake.set()

    async def _shrink_loop(self) -> None:
        lag_max_ms = self.settings.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(max(lag_max_ms / 2, 10) / 1000)
            now_ms = self.broker.clock.milliseconds()
            for partition in list(self.broker.replica_manager.partitions.values()):
                if partition.is_leader and partition.followers:
                    change = partition.maybe_shrink_isr(now_ms, lag_max_ms)
                    if change is not None:
                        self.submit(partition, change)

    # -- AlterPartition -----------------------------------------------------------------------

    async def _send_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._queued = self._queued, {}
            if batch and not await self._send(batch):
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def _send(self, batch: dict[tuple[str, int], tuple[Partition, IsrChange]]) -> bool:
        """Send ``batch``; False (and the changes queued again) when no answer came."""
        quorum = self.broker.quorum
        controller_id = None if quorum is None else quorum.leader_id
        if quorum is None or controller_id is None:
            self._resend(batch, "no active controller")
            return False
        try:
            response = await quorum.controller_channel.send(controller_id, self._request(batch))
        except (NodeClientError, UnsupportedVersionError, DecodeError) as error:
            self._resend(batch, str(error))
            return False
        assert isinstance(response, AlterPartitionResponse)
        if response.error_code != ErrorCode.NONE:
            self._resend(batch, ErrorCode(response.error_code).name)
            return False
        self._answered(batch, response)
        return True

    def _request(self, batch: dict[tuple[str, int], tuple[Partition, IsrChange]]) -> AlterPartitionRequest:
        brokers = self.broker.replica_manager.image.brokers
        topics: dict[str, TopicData] = {}
        for (name, index), (partition, change) in batch.items():
            topic = topics.setdefault(name, TopicData(topic_id=partition.topic_id))
            members = []
            for broker_id in change.new_isr:
                registration = brokers.get(broker_id)
                members.append(BrokerState(broker_id=broker_id, broker_epoch=(
                    -1 if registration is None else registration.epoch)))
            topic.partitions.append(PartitionData(
                partition_index=index, leader_epoch=change.leader_epoch,
                new_isr_with_epochs=members, partition_epoch=change.partition_epoch))
        return AlterPartitionRequest(broker_id=self.broker.node_id,
                                     broker_epoch=self.broker_epoch(), topics=list(topics.values()))

    def _answered(self, batch: dict[tuple[str, int], tuple[Partition, IsrChange]],
                  response: AlterPartitionResponse) -> None:
        """Each partition's answer (Kafka's ``handleAlterPartitionError``): committed -> adopt
        the ISR; INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED -> the change was not made:
        forget it (and do not propose again for a moment); NOT_CONTROLLER (the controller is
        behind) -> send again; any other refusal (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
        ...) -> keep it pending until the metadata image brings the partition's new state
        (the controller may have committed something this leader has not seen)."""
        names = {partition.topic_id: key[0] for key, (partition, _) in batch.items()}
        moved = []
        for topic in response.topics:
            name = topic.topic_name or names.get(topic.topic_id, "")
            for data in topic.partitions:
                key = (name, data.partition_index)
                entry = batch.pop(key, None)
                if entry is None:
                    continue
                self._resending.pop(key, None)
                partition, change = entry
                error = data.error_code
                if error == ErrorCode.NONE:
                    if partition.isr_committed(leader_epoch=data.leader_epoch,
                                               partition_epoch=data.partition_epoch,
                                               isr=tuple(data.isr)):
                        moved.append(key)
                    continue
                logger.info("%s-%d: ISR change to %s refused: %s", name, data.partition_index,
                            list(change.new_isr), ErrorCode(error).name)
                if error in (ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED):
                    partition.isr_change_failed(change)
                    self._refused_until[key] = time.monotonic() + REFUSED_BACKOFF_S
                elif error == ErrorCode.NOT_CONTROLLER:
                    self._resend({key: entry}, "the controller is behind")
        self._resend(batch, "no answer for the partition")
        if moved:
            self.broker.high_watermarks_moved(moved)

    def _resend(self, batch: dict[tuple[str, int], tuple[Partition, IsrChange]],
                reason: str) -> None:
        """No answer: the controller may or may not have committed the change, so it stays
        pending (the high watermark keeps counting the maximal ISR) and is sent again — unless
        the partition moved on meanwhile (a new image, another change)."""
        for key, (partition, change) in batch.items():
            if partition.isr_state.pending != change or not partition.is_leader:
                self._resending.pop(key, None)
                continue
            told = self._resending.get(key) == change
            self._resending[key] = change
            logger.log(logging.DEBUG if told else logging.INFO,
                       "%s-%d: ISR change to %s not answered (%s): sending it again%s", *key,
                       list(change.new_isr), reason, "" if told else " (until answered)")
            self._queued.setdefault(key, (partition, change))
        if self._queued:
            self._wake.set()
