"""What the five share-state handlers (``broker.apis.*_share_group_state``, KIP-932's
broker-to-broker APIs 83-87) have in common: each request names one group and share
partitions by (topic id, partition); each share partition is asked of the share coordinator
(``broker.share.coordinator_service``) on its own, concurrently, and answered with its own
error code (Kafka's ``ShareCoordinatorService`` does the same, one coordinator call per share
partition).

- Authorization (with an authorizer): CLUSTER_ACTION on the cluster, else
  CLUSTER_AUTHORIZATION_FAILED for every share partition (these are inter-broker APIs).
- An empty group id: INVALID_REQUEST for every share partition, as Kafka's.
- A negative partition: INVALID_REQUEST (``broker.share.state_store``).
- NOT_COORDINATOR (this node does not lead the share partition's ``__share_group_state``
  partition), COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (the write was not
  replicated in time), FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH: as the coordinator raises them.
- Any other exception: UNKNOWN_SERVER_ERROR, logged.

``UNINITIALIZED_READ_MESSAGE`` is the message of the INVALID_REQUEST a ReadShareGroupState of
a share partition with no state gets (Kafka's answer); Samsa's network persister reads it
back as "no state" (``broker.share.network_persister``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from broker.share.state_records import SharePartitionKey
from protocol.errors import (
    ClusterAuthorizationFailedError,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    KafkaError,
    UnknownServerError,
)

if TYPE_CHECKING:
    from broker.apis import RequestContext
    from broker.share.coordinator_service import ShareCoordinatorService

__all__ = ["UNINITIALIZED_READ_MESSAGE", "each_share_partition", "error_fields", "error_results"]

logger = logging.getLogger("samsa.broker.share.state_requests")

UNINITIALIZED_READ_MESSAGE = "Read on uninitialized share partition."

T = TypeVar("T")


async def each_share_partition(
    context: RequestContext,
    group_id: str,
    partitions: Sequence[tuple[UUID, int]],
    call: Callable[[ShareCoordinatorService, SharePartitionKey, int], Awaitable[T]],
) -> list[T | KafkaError]:
    """``call(coordinator, key, position)`` for each (topic id, partition), in order; the
    result, or the KafkaError to answer for it."""
    if not authorize_cluster(context, AclOperation.CLUSTER_ACTION):
        return [ClusterAuthorizationFailedError() for _ in partitions]
    if not group_id:
        return [InvalidRequestError("group id must be specified and non-empty") for _ in partitions]
    coordinator = getattr(context.broker, "share_coordinator", None)
    if coordinator is None:
        return [CoordinatorNotAvailableError("no share coordinator on this node") for _ in partitions]

    async def one(position: int, topic_id: UUID, partition: int) -> T | KafkaError:
        try:
            return await call(coordinator, SharePartitionKey(group_id, topic_id, partition), position)
        except KafkaError as error:
            return error
        except Exception as error:  # a bug: answered, logged, never a dropped connection
            logger.exception("share state request for %s:%s:%d failed", group_id, topic_id, partition)
            return UnknownServerError(str(error))

    return list(await asyncio.gather(*(one(position, topic_id, partition)
                                       for position, (topic_id, partition) in enumerate(partitions))))


def error_fields(outcome: object) -> tuple[int, str | None]:
    """(error code, error message) of an outcome: NONE for a result."""
    if isinstance(outcome, KafkaError):
        return outcome.code, outcome.message or None
    return 0, None


def error_results(topics: Iterable[Any], outcomes: Iterable[object], result: Callable[..., Any],
                  partition_result: Callable[..., Any]) -> list[Any]:
    """The answer of Initialize/Write/DeleteShareGroupState (and their whole-request error):
    one ``result(topic_id, partitions)`` per request topic, each partition's error code and
    message from ``outcomes``, taken in the request's order."""
    remaining = iter(outcomes)
    answers = []
    for topic in topics:
        partitions = []
        for data in topic.partitions:
            code, message = error_fields(next(remaining))
            partitions.append(partition_result(partition=data.partition, error_code=code,
                                               error_message=message))
        answers.append(result(topic_id=topic.topic_id, partitions=partitions))
    return answers
