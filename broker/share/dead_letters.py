"""Appending share-group dead letters (Samsa's ``samsa.share.dead.letter.topic``) to the
dead-letter topic, for ``SharePartitionManager``: one batch, returning only once it is
acknowledged with acks=all (replicated to the in-sync replicas), raising otherwise.

Which partition: the source partition's index modulo the dead-letter topic's partition count
(source partition 5 goes to DLQ partition 5 when the DLQ has as many partitions as the source,
and the letters of one source partition stay in one DLQ partition, in their source order).
Keys are kept as they were, so a DLQ with as many partitions as its source keeps Kafka's
key-to-partition mapping too.

Where: the leader of that partition in this node's metadata image.

- This node: through the broker's one append entry point (``appender.append_one``), waiting
  for the high watermark to pass the batch.
- Another node: a Produce (v9, acks=-1) over the inter-broker listener
  (``broker.node_client.NodeClients``), answered by that leader once replicated.

Retriable outcomes (Kafka's retriable codes: NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...; no leader yet; no answer: the node unreachable,
disconnected, timed out) are retried after a backoff (100 ms doubling to 1 s), the leader
looked up afresh each time, for up to ``timeout_ms``; then the last error is raised, as any
other error is at once. The manager then keeps the letters DEAD_LETTERING (never delivered)
and tries again later: at least once — a Produce that timed out may still have been
appended, and is then appended again.

Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.node_client import NodeClientError, NodeClients
from broker.replicated_answers import answer_when_replicated
from protocol.errors import (
    ErrorCode,
    KafkaError,
    LeaderNotAvailableError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.messages.produce_response import ProduceResponse
from storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from broker.broker import Broker

__all__ = ["DeadLetterAppender", "dead_letter_partition"]

logger = logging.getLogger("samsa.broker.share.dead_letters")

PRODUCE_VERSION = 9  # topics by name, the highest version before topic ids (v13)
APPEND_TIMEOUT_MS = 30000
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1000


def dead_letter_partition(source_index: int, partition_count: int) -> int:
    """The dead-letter partition of source partition ``source_index``."""
    return source_index % partition_count


class DeadLetterAppender:
    def __init__(self, broker: Broker, *, timeout_ms: int = APPEND_TIMEOUT_MS,
                 retry_backoff_ms: int = RETRY_BACKOFF_MS,
                 retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS) -> None:
        self.broker = broker
        self.timeout_ms = timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._clients: NodeClients | None = None

    async def __call__(self, topic: str, source_index: int, batch: bytes) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        backoff_ms = self.retry_backoff_ms
        while True:
            try:
                await self._append_once(topic, source_index, batch)
                return
            except KafkaError as error:
                if not error.retriable:
                    raise
                last: KafkaError = error
            except NodeClientError as error:
                last = RequestTimedOutError(f"the leader of the dead-letter partition did not answer: {error}")
            remaining_ms = (deadline - loop.time()) * 1000
            if remaining_ms <= 0:
                raise last
            logger.debug("dead letter to %s: %s; retrying in %d ms", topic, last, min(backoff_ms, remaining_ms))
            await asyncio.sleep(min(backoff_ms, remaining_ms) / 1000)
            backoff_ms = min(backoff_ms * 2, self.retry_backoff_max_ms)

    async def _append_once(self, topic: str, source_index: int, batch: bytes) -> None:
        image = self.broker.replica_manager.image.topics_by_name.get(topic)
        if image is None or not image.partitions:
            raise UnknownTopicOrPartitionError(f"the dead-letter topic {topic} does not exist")
        index = dead_letter_partition(source_index, len(image.partitions))
        partition = image.partitions.get(index)
        leader = -1 if partition is None else partition.leader
        if leader < 0:
            raise LeaderNotAvailableError(f"{topic}-{index} has no leader")
        if leader == self.broker.node_id:
            await self._append_here((topic, index), batch)
        else:
            await self._produce_to(leader, topic, index, batch)

    async def _append_here(self, key: tuple[str, int], batch: bytes) -> None:
        self.broker.appender.append_one(key, batch, origin=AppendOrigin.COORDINATOR)
        outcome = answer_when_replicated(self.broker, key, ErrorCode.NONE, failed=lambda code: code)
        code = outcome if isinstance(outcome, ErrorCode) else await outcome
        if code != ErrorCode.NONE:
            raise _error(code)

    async def _produce_to(self, leader: int, topic: str, index: int, batch: bytes) -> None:
        request = ProduceRequest(acks=-1, timeout_ms=self.timeout_ms, topic_data=[TopicProduceData(
            name=topic, partition_data=[PartitionProduceData(index=index, records=batch)])])
        response = await self._node_clients().send(leader, request, version=PRODUCE_VERSION)
        assert isinstance(response, ProduceResponse)
        answer = response.responses[0].partition_responses[0]
        if answer.error_code != ErrorCode.NONE:
            raise _error(ErrorCode(answer.error_code), answer.error_message)

    def _node_clients(self) -> NodeClients:
        if self._clients is None:
            config = self.broker.config
            self._clients = NodeClients(
                self.broker.inter_broker_endpoint, client_id=f"broker-{self.broker.node_id}-dead-letters",
                request_timeout_ms=self.timeout_ms,
                ssl_context=config.node_ssl_contexts.get(config.kraft.inter_broker_listener_name))
        return self._clients

    async def close(self) -> None:
        if self._clients is not None:
            await self._clients.close()


def _error(code: ErrorCode, message: str | None = None) -> KafkaError:
    return error_for_code(code)(message or f"the dead-letter append was not acknowledged ({code.name})")
