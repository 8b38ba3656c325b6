"""A share partition's coordinator key and its ``__share_group_state`` partition, as Kafka 4.3.1
computes them (``SharePartitionKey.asCoordinatorKey`` and ``ShareCoordinatorService.partitionFor``),
so a Kafka client's FindCoordinator (key type SHARE) and Samsa agree.

- The key string is ``"<group id>:<topic id>:<partition>"``, the topic id in Kafka's ``Uuid``
  text form: URL-safe base64 of its 16 bytes without padding (22 characters), not the
  hyphenated form. Parsed from the right (a group id may hold colons).
- Its partition: ``Utils.abs(key.hashCode()) % partitions`` — Java's ``String.hashCode`` over
  UTF-16 code units, ``abs`` of ``Integer.MIN_VALUE`` taken as 0
  (``broker.group.offsets.partition_for``).

Pure functions.
"""

from __future__ import annotations

import base64
import binascii
import re
from uuid import UUID

from broker.group.offsets import partition_for
from broker.share.state_records import SharePartitionKey
from protocol.errors import InvalidRequestError

__all__ = ["coordinator_key", "kafka_uuid_string", "parse_coordinator_key", "share_partition_for"]

_KAFKA_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")  # 16 bytes, URL-safe base64, no padding


def kafka_uuid_string(value: UUID) -> str:
    """Kafka's ``Uuid.toString``."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def coordinator_key(key: SharePartitionKey) -> str:
    return f"{key.group_id}:{kafka_uuid_string(key.topic_id)}:{key.partition}"


def parse_coordinator_key(text: str) -> SharePartitionKey:
    """Kafka's ``SharePartitionKey.getInstance(String)``; INVALID_REQUEST when malformed."""
    group_id, _, rest = text.rpartition(":")
    group_id, _, topic_text = group_id.rpartition(":")
    partition_text = rest
    if not group_id.strip() or not topic_text or not partition_text:
        raise InvalidRequestError(f"invalid share coordinator key {text!r}: expected groupId:topicId:partition")
    if _KAFKA_UUID_TEXT.fullmatch(topic_text) is None:
        raise InvalidRequestError(f"invalid share coordinator key {text!r}: bad topic id")
    try:
        raw = base64.urlsafe_b64decode(topic_text + "==")
        partition = int(partition_text)
    except (binascii.Error, ValueError):
        raise InvalidRequestError(f"invalid share coordinator key {text!r}") from None
    if len(raw) != 16 or not -(1 << 31) <= partition < (1 << 31):
        raise InvalidRequestError(f"invalid share coordinator key {text!r}")
    return SharePartitionKey(group_id, UUID(bytes=raw), partition)


def share_partition_for(key: SharePartitionKey, num_partitions: int) -> int:
    """The ``__share_group_state`` partition that holds ``key``'s state."""
    return partition_for(coordinator_key(key), num_partitions)
