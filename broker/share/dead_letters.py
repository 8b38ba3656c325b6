"""Appending share-group dead letters (Samsa's ``samsa.share.dead.letter.topic``) to the
dead-letter topic, for ``SharePartitionManager``: one batch to partition (source partition
index mod the dead-letter topic's partition count), through the broker's one append entry
point with acks=all, returning once the batch is replicated (the high watermark passed it).

Only a dead-letter partition this node leads is appended to: otherwise NOT_LEADER_OR_FOLLOWER
(or UNKNOWN_TOPIC_OR_PARTITION when the topic does not exist), and the manager keeps the
letters DEAD_LETTERING and tries again at the share partition's next change. Sending them to
another node's leader is not implemented.

Owned by the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.replicated_answers import answer_when_replicated
from protocol.errors import ErrorCode, KafkaError, UnknownTopicOrPartitionError, error_for_code
from storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from broker.broker import Broker

__all__ = ["DeadLetterAppender"]


class DeadLetterAppender:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def __call__(self, topic: str, source_index: int, batch: bytes) -> None:
        image = self.broker.replica_manager.image.topics_by_name.get(topic)
        if image is None or not image.partitions:
            raise UnknownTopicOrPartitionError(f"the dead-letter topic {topic} does not exist")
        key = (topic, source_index % len(image.partitions))
        self.broker.appender.append_one(key, batch, origin=AppendOrigin.COORDINATOR)
        outcome = answer_when_replicated(self.broker, key, ErrorCode.NONE, failed=lambda code: code)
        code = outcome if isinstance(outcome, ErrorCode) else await outcome
        if code != ErrorCode.NONE:
            raise _error(code)


def _error(code: ErrorCode) -> KafkaError:
    return error_for_code(code)(f"the dead-letter append was not replicated ({code.name})")
